"""`detbench dataset make-coco`: real image files and a COCO instances file, deterministic."""
import hashlib
import json
import struct
import zlib

import pytest
from click.testing import CliRunner

from harness.plan import datasets
from harness.cli import main


def digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def decode_png(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    return header, zlib.decompress(idat)


def test_make_coco_writes_real_images_and_matching_annotations(tmp_path):
    ann, images = datasets.make_coco(tmp_path / "c", images=3, size=(48, 64), seed=1)
    doc = json.loads(ann.read_text())
    assert [im["file_name"] for im in doc["images"]] == ["000001.png", "000002.png", "000003.png"]
    assert len(doc["categories"]) == 80 and doc["categories"][0]["name"] == "person"
    for a in doc["annotations"]:
        x, y, w, h = a["bbox"]
        assert 0 <= x and x + w <= 64 and 0 <= y and y + h <= 48
        (points,) = a["segmentation"]
        xs, ys = points[0::2], points[1::2]
        assert 8 <= len(xs) <= 12 and len(xs) == len(ys)
        # the box is the polygon's tight box, and the polygon is no box: its area is smaller
        assert [min(xs), min(ys)] == pytest.approx([x, y], abs=0.01)
        assert [max(xs), max(ys)] == pytest.approx([x + w, y + h], abs=0.02)
        assert 0.2 * w * h < a["area"] < 0.8 * w * h
    header, raw = decode_png((images / "000001.png").read_bytes())
    assert header[:2] == (64, 48) and len(raw) == 48 * (1 + 64 * 3)


def test_each_object_is_painted_inside_its_polygon(tmp_path):
    ann, images = datasets.make_coco(tmp_path / "c", images=1, size=(96, 96), seed=2, max_objects=1)
    doc = json.loads(ann.read_text())
    (a,) = doc["annotations"]
    _, raw = decode_png((images / "000001.png").read_bytes())
    rows = [raw[r * (1 + 96 * 3) + 1:(r + 1) * (1 + 96 * 3)] for r in range(96)]
    def colour(x, y):
        return rows[y][x * 3:x * 3 + 3]
    inside = {(x, y) for y in range(96) for x in range(96)
              if any(lo <= x < hi for lo, hi in datasets.polygon_spans(a["segmentation"][0], y))}
    painted = {colour(x, y) for x, y in inside}
    assert len(painted) == 1                       # one colour fills the polygon
    assert abs(len(inside) - a["area"]) < 0.1 * a["area"]
    x, y, w, h = (int(v) for v in a["bbox"])
    corners = [(x, y), (x + w - 1, y), (x, y + h - 1), (x + w - 1, y + h - 1)]
    assert any(colour(*c) not in painted for c in corners)   # the box's corners lie outside it


def test_same_arguments_give_identical_files_and_another_seed_does_not(tmp_path):
    datasets.make_coco(tmp_path / "a", images=2, size=(40, 40), seed=3)
    datasets.make_coco(tmp_path / "b", images=2, size=(40, 40), seed=3)
    datasets.make_coco(tmp_path / "c", images=2, size=(40, 40), seed=4)
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")


def test_cli_make_coco_and_its_errors(tmp_path):
    r = CliRunner().invoke(main, ["dataset", "make-coco", str(tmp_path / "d"), "--images", "2", "--size", "64x32"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "d" / datasets.ANNOTATIONS).is_file()
    bad = CliRunner().invoke(main, ["dataset", "make-coco", str(tmp_path / "e"), "--size", "big"])
    assert bad.exit_code == 2 and "--size must look like 320x320" in bad.output
