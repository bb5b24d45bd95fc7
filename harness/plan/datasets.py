"""Small, deterministic COCO-format datasets that every framework can read.

``make_coco(DIR, images=N, size=(H, W))`` writes DIR/images/000001.png ... (real PNG
files, standard library only) and DIR/annotations/instances_train.json with the 80 COCO
category names (mmdetection keeps only categories whose names it knows). Each object is a
polygon of 8 to 12 corners around the centre of a random box, painted in its own colour;
its annotation gives that polygon as the segmentation, its tight box and its area, so the
mask heads train on real polygon masks. The same arguments always give byte-identical files.
"""

import json
import math
import random
import struct
import zlib
from pathlib import Path
from typing import Any, Dict, Iterable, List, Sequence, Tuple, Union

from harness import atomic
from harness.errors import UserError

Points = List[float]  # a polygon's corners [x0, y0, x1, y1, ...]
Shape = Tuple[Points, Tuple[int, ...]]  # (polygon, RGB colour)

COCO_CLASSES = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)
ANNOTATIONS = "annotations/instances_train.json"
IMAGES = "images"


def png_bytes(width: int, height: int, rows: Iterable[bytes]) -> bytes:
    """Encode 8-bit RGB rows (each a bytes of width*3) as a PNG file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + row for row in rows)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def polygon(rng: random.Random, x: float, y: float, w: float, h: float) -> Points:
    """Corners [x0, y0, x1, y1, ...] of a star-shaped polygon inside the box (x, y, w, h):
    8 to 12 corners at increasing angles around the box's centre, each 55-100% of the way
    to the ellipse the box encloses."""
    corners = rng.randint(8, 12)
    cx, cy = x + w / 2.0, y + h / 2.0
    points: Points = []
    for k in range(corners):
        angle = 2 * math.pi * (k + 0.8 * rng.random()) / corners
        reach = rng.uniform(0.55, 1.0)
        points += [round(cx + reach * w / 2.0 * math.cos(angle), 2), round(cy + reach * h / 2.0 * math.sin(angle), 2)]
    return points


def polygon_box(points: Sequence[float]) -> Tuple[List[float], float]:
    """The tight box [x, y, w, h] and the area of a polygon [x0, y0, x1, y1, ...]."""
    xs, ys = points[0::2], points[1::2]
    twice = sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(len(xs)))
    box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
    return [round(v, 2) for v in box], round(abs(twice) / 2.0, 2)


def polygon_spans(points: Sequence[float], row: int) -> List[Tuple[int, int]]:
    """Column ranges [start, stop) of the pixels of `row` whose centres the polygon covers."""
    yc = row + 0.5
    xs, ys = points[0::2], points[1::2]
    cuts: List[float] = []
    for i in range(len(xs)):
        x0, y0, x1, y1 = xs[i - 1], ys[i - 1], xs[i], ys[i]
        if (y0 <= yc < y1) or (y1 <= yc < y0):
            cuts.append(x0 + (yc - y0) * (x1 - x0) / (y1 - y0))
    cuts.sort()
    return [(math.ceil(a - 0.5), math.ceil(b - 0.5)) for a, b in zip(cuts[0::2], cuts[1::2])]


def _image(rng: random.Random, width: int, height: int, shapes: Sequence[Shape]) -> List[bytes]:
    """A textured background with each polygon filled in its own colour."""
    base = [rng.randrange(40, 216) for _ in range(3)]
    pixels = bytearray()
    for y in range(height):
        shade = (y * 64) // max(height, 1)
        pixels += bytes(((base[0] + shade) % 256, base[1], (base[2] + 255 - shade) % 256)) * width
    return fill_polygons(pixels, width, height, shapes)


def fill_polygons(pixels: bytearray, width: int, height: int, shapes: Sequence[Shape]) -> List[bytes]:
    """Paint each (polygon, colour) of shapes, in order, into an RGB bytearray; return its rows."""
    for points, colour in shapes:
        ys = points[1::2]
        for row in range(max(0, math.floor(min(ys))), min(height, math.ceil(max(ys)))):
            for start, stop in polygon_spans(points, row):
                start, stop = max(0, start), min(width, stop)
                if stop > start:
                    pixels[(row * width + start) * 3 : (row * width + stop) * 3] = bytes(colour) * (stop - start)
    return [bytes(pixels[r * width * 3 : (r + 1) * width * 3]) for r in range(height)]


def make_coco(
    root: Union[str, Path], images: int = 16, size: Tuple[int, int] = (320, 320), seed: int = 0, max_objects: int = 6
) -> Tuple[Path, Path]:
    """Write the dataset; return (annotations file, images folder)."""
    height, width = size
    if images < 1:
        raise UserError("--images must be at least 1")
    if min(height, width) < 32:
        raise UserError("--size sides must be at least 32 pixels")
    root = Path(root)
    (root / IMAGES).mkdir(parents=True, exist_ok=True)
    (root / ANNOTATIONS).parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    annotations: List[Dict[str, Any]] = []
    image_list: List[Dict[str, Any]] = []
    doc = {
        "info": {"description": "detbench synthetic COCO-format set", "version": "1"},
        "licenses": [],
        "images": image_list,
        "annotations": annotations,
        "categories": [{"id": i + 1, "name": n, "supercategory": "object"} for i, n in enumerate(COCO_CLASSES)],
    }
    ann_id = 0
    for index in range(1, images + 1):
        shapes: List[Shape] = []
        for _ in range(rng.randint(1, max_objects)):
            w = rng.randint(max(8, width // 16), max(9, width // 2))
            h = rng.randint(max(8, height // 16), max(9, height // 2))
            x = rng.randint(0, width - w)
            y = rng.randint(0, height - h)
            colour = tuple(rng.randrange(256) for _ in range(3))
            points = polygon(rng, x, y, w, h)
            shapes.append((points, colour))
            box, area = polygon_box(points)
            ann_id += 1
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": index,
                    "category_id": rng.randint(1, len(COCO_CLASSES)),
                    "bbox": box,
                    "area": area,
                    "iscrowd": 0,
                    "segmentation": [points],
                }
            )
        name = "%06d.png" % index
        data = png_bytes(width, height, _image(rng, width, height, shapes))
        _write(root / IMAGES / name, data)
        image_list.append({"id": index, "file_name": name, "width": width, "height": height})
    _write(root / ANNOTATIONS, json.dumps(doc, sort_keys=True).encode())
    return root / ANNOTATIONS, root / IMAGES


def _write(path: Path, data: bytes) -> None:
    atomic.write_bytes(path, data)


def parse_size(text: str) -> Tuple[int, int]:
    """(height, width) of a --size like '320x320'."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError("--size must look like 320x320 (height x width), got %r" % text) from None
    return h, w
