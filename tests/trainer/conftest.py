"""Helpers for the trainer tests: run the entry point in-process or as a subprocess, and
write a tiny COCO-format dataset."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(ROOT, "harness", "trainer", "configs")
ITER_KEYS = {"iteration", "time_s", "data_time_s", "images", "loss", "losses", "lr", "peak_mem_mb"}


def config_path(name):
    return os.path.join(CONFIGS, name + ".py")


def parse_lines(text):
    from harness import jsonlog
    iters, metas = [], []
    for line in text.splitlines():
        if line.startswith(jsonlog.ITER_PREFIX):
            iters.append(json.loads(line[len(jsonlog.ITER_PREFIX):]))
        elif line.startswith(jsonlog.META_PREFIX):
            metas.append(json.loads(line[len(jsonlog.META_PREFIX):]))
    return iters, metas


@pytest.fixture
def train_inprocess(capsys):
    """Run the trainer in this process; returns (exit code, ITER records, META records, stderr)."""
    from harness.trainer import train

    def run(config, *sets):
        args = [config_path(config)]
        for s in sets:
            args += ["--set", s]
        capsys.readouterr()
        rc = train.main(args)
        out, err = capsys.readouterr()
        iters, metas = parse_lines(out)
        return rc, iters, metas, err
    return run


def record_losses(model):
    """Wrap `model.forward` so that each call's losses are appended, as floats, to the list returned."""
    recorded = []
    real_forward = model.forward

    def forward(images, targets):
        losses = real_forward(images, targets)
        recorded.append({k: float(v.detach()) for k, v in losses.items()})
        return losses
    model.forward = forward
    return recorded


def env_for_subprocess():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_module(args, timeout=300):
    """Run `python -m harness.trainer.train ARGS` and return the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "harness.trainer.train"] + list(args),
                          cwd=ROOT, env=env_for_subprocess(), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def tiny_coco(tmp_path):
    """Four small images (PNG and JPEG), polygons, one image without boxes, sparse category ids."""
    import numpy as np
    from PIL import Image, ImageDraw

    img_dir = tmp_path / "images"
    img_dir.mkdir()
    rng = np.random.default_rng(0)
    images, anns = [], []
    shapes = [(96, 128), (128, 96), (100, 100), (80, 120)]
    for i, (h, w) in enumerate(shapes):
        arr = (rng.random((h, w, 3)) * 60).astype("uint8")
        im = Image.fromarray(arr)
        draw = ImageDraw.Draw(im)
        name = f"img{i}.png" if i % 2 == 0 else f"img{i}.jpg"
        if i != 3:  # the last image has no annotations
            for k in range(2):
                x, y = 10 + 30 * k, 12 + 20 * k
                bw, bh = 30, 26
                cat = 3 if k == 0 else 7
                draw.ellipse([x, y, x + bw, y + bh], fill=(200, 40 + 100 * k, 90))
                poly = [x, y + bh / 2, x + bw / 2, y, x + bw, y + bh / 2, x + bw / 2, y + bh]
                anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cat,
                             "bbox": [x, y, bw, bh], "area": bw * bh, "iscrowd": 0,
                             "segmentation": [poly]})
        im.save(img_dir / name)
        images.append({"id": i + 1, "file_name": name, "height": h, "width": w})
    return save_coco(tmp_path, img_dir, images, anns, (3, 7))


def save_coco(root, img_dir, images, anns, category_ids):
    """Write root/instances.json; returns (its path, the image folder) as strings."""
    doc = {"images": images, "annotations": anns,
           "categories": [{"id": c, "name": "abcdefgh"[k]} for k, c in enumerate(category_ids)]}
    ann_path = root / "instances.json"
    ann_path.write_text(json.dumps(doc))
    return str(ann_path), str(img_dir)


def write_coco(root, shapes, seed=0):
    """A COCO set of PNG images of the given (height, width) shapes under `root`, two polygon
    objects each (categories 1 and 2): a random octagon, and a quadrilateral that reaches the
    image's bottom-right corner. Returns (annotation file, image folder)."""
    import numpy as np
    from PIL import Image, ImageDraw

    img_dir = root / "images"
    img_dir.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    images, anns = [], []
    for i, (h, w) in enumerate(shapes):
        im = Image.fromarray((rng.random((h, w, 3)) * 60).astype("uint8"))
        draw = ImageDraw.Draw(im)
        cx, cy = rng.uniform(0.25, 0.5) * w, rng.uniform(0.25, 0.5) * h
        rx, ry = rng.uniform(0.1, 0.2) * w, rng.uniform(0.1, 0.2) * h
        angles = np.linspace(0, 2 * np.pi, 9)[:-1]
        octagon = [float(v) for a in angles for v in (cx + rx * np.cos(a), cy + ry * np.sin(a))]
        corner = [0.6 * w, 0.7 * h, float(w), 0.55 * h, float(w), float(h), 0.75 * w, float(h)]
        for cat, poly in ((1, octagon), (2, corner)):
            xs, ys = poly[0::2], poly[1::2]
            draw.polygon(poly, fill=(200, 60 + 80 * cat, 90))
            box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cat, "bbox": box,
                         "area": box[2] * box[3], "iscrowd": 0, "segmentation": [poly]})
        name = f"img{i}.png"
        im.save(img_dir / name)
        images.append({"id": i + 1, "file_name": name, "height": h, "width": w})
    return save_coco(root, img_dir, images, anns, (1, 2))


# landscape and portrait images, alternating: batches of two in the file's order mix them
MIXED_SHAPES = [(64, 128), (128, 64), (96, 128), (128, 96), (80, 128), (128, 80), (64, 96), (96, 64)]


@pytest.fixture
def mixed_coco(tmp_path):
    return write_coco(tmp_path / "mixed", MIXED_SHAPES)
