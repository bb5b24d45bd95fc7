"""A COCO-format dataset a detector can learn: `detbench dataset make-coco --learnable`.

Each class has its own shape and its own colour (a square in red, a disc in green, a
triangle in blue, a diamond in yellow; each colour varies a little from object to object),
drawn on a grey background at several sizes (a sixth to a half of the image's shorter
side), with some overlaps (a new object may cover up to OVERLAP of the box of one drawn
before it, by box IoU; later objects are painted over earlier ones). The annotations give
each object's whole polygon as its segmentation, its tight box and its area.

Two splits are written, each with its own images and annotation file:
DIR/images + DIR/annotations/instances_train.json, and DIR/images_val +
DIR/annotations/instances_val.json (held out: drawn from a random stream of its own). The
categories are the first four COCO names (so COCO-aware readers accept them); `info.shapes`
names the shape each one is drawn as. The same arguments always give byte-identical files.
"""

import json
import math
import random
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from harness.errors import UserError

from .datasets import COCO_CLASSES, Points, _write, fill_polygons, png_bytes, polygon_box

Box = Tuple[float, float, float, float]  # x, y, w, h
Object = Tuple[int, Points, Tuple[int, ...]]  # (class index, polygon, colour)

VAL_ANNOTATIONS = "annotations/instances_val.json"
VAL_IMAGES = "images_val"
TRAIN_ANNOTATIONS = "annotations/instances_train.json"
TRAIN_IMAGES = "images"
OVERLAP = 0.25  # the largest box IoU of a new object with any object already drawn
TRIES = 30  # placements tried per object before it is left out
# (shape, colour) of classes 1, 2, 3, 4
CLASSES = (("square", (220, 40, 40)), ("disc", (40, 200, 60)), ("triangle", (40, 70, 230)), ("diamond", (235, 215, 40)))


def outline(shape: str, x: float, y: float, w: float, h: float) -> Points:
    """Corners [x0, y0, x1, y1, ...] of `shape` filling the box (x, y, w, h)."""
    if shape == "square":
        return [x, y, x + w, y, x + w, y + h, x, y + h]
    if shape == "triangle":
        return [x + w / 2.0, y, x + w, y + h, x, y + h]
    if shape == "diamond":
        return [x + w / 2.0, y, x + w, y + h / 2.0, x + w / 2.0, y + h, x, y + h / 2.0]
    points: Points = []  # disc: a 24-gon on the ellipse the box encloses
    for k in range(24):
        angle = 2 * math.pi * k / 24
        points += [x + w / 2.0 * (1 + math.cos(angle)), y + h / 2.0 * (1 + math.sin(angle))]
    return points


def box_iou(a: Box, b: Box) -> float:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    iw = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
    ih = max(0.0, min(ay + ah, by + bh) - max(ay, by))
    inter = iw * ih
    return inter / (aw * ah + bw * bh - inter)


def _objects(rng: random.Random, width: int, height: int, max_objects: int) -> List[Object]:
    """[(class index 0-3, points, colour)] of one image."""
    short = min(width, height)
    lo, hi = max(8, short // 6), max(9, short // 2)
    placed: List[Tuple[Box, int, Points, Tuple[int, ...]]] = []
    for _ in range(rng.randint(1, max_objects)):
        cls = rng.randrange(len(CLASSES))
        shape, colour = CLASSES[cls]
        for _ in range(TRIES):
            side = rng.randint(lo, hi)
            aspect = rng.uniform(0.75, 1.33)
            w = max(8, min(width, round(side * math.sqrt(aspect))))
            h = max(8, min(height, round(side / math.sqrt(aspect))))
            x, y = rng.randint(0, width - w), rng.randint(0, height - h)
            if all(box_iou((x, y, w, h), other) <= OVERLAP for other, _, _, _ in placed):
                break
        else:
            continue
        jitter = tuple(min(255, max(0, c + rng.randint(-20, 20))) for c in colour)
        points = [round(v, 2) for v in outline(shape, x, y, w, h)]
        placed.append(((x, y, w, h), cls, points, jitter))
    return [(cls, points, colour) for _, cls, points, colour in placed]


def _paint(rng: random.Random, width: int, height: int, objects: List[Object]) -> List[bytes]:
    """Grey background, brighter towards the bottom, with every object filled in its colour."""
    base = rng.randrange(90, 150)
    pixels = bytearray()
    for y in range(height):
        grey = base + (y * 40) // max(height, 1)
        pixels += bytes((grey, grey, grey)) * width
    return fill_polygons(pixels, width, height, [(points, colour) for _, points, colour in objects])


def _split(
    root: Path,
    ann_rel: str,
    images_rel: str,
    count: int,
    rng: random.Random,
    size: Tuple[int, int],
    max_objects: int,
    name: str,
) -> Tuple[Path, Path]:
    height, width = size
    annotations: List[Dict[str, Any]] = []
    image_list: List[Dict[str, Any]] = []
    (root / images_rel).mkdir(parents=True, exist_ok=True)
    (root / ann_rel).parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "info": {
            "description": "detbench learnable synthetic COCO-format set, %s split" % name,
            "version": "1",
            "shapes": {COCO_CLASSES[i]: shape for i, (shape, _) in enumerate(CLASSES)},
        },
        "licenses": [],
        "images": image_list,
        "annotations": annotations,
        "categories": [{"id": i + 1, "name": COCO_CLASSES[i], "supercategory": "object"} for i in range(len(CLASSES))],
    }
    ann_id = 0
    for index in range(1, count + 1):
        objects = _objects(rng, width, height, max_objects)
        for cls, points, _ in objects:
            box, area = polygon_box(points)
            ann_id += 1
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": index,
                    "category_id": cls + 1,
                    "bbox": box,
                    "area": area,
                    "iscrowd": 0,
                    "segmentation": [points],
                }
            )
        file_name = "%06d.png" % index
        _write(root / images_rel / file_name, png_bytes(width, height, _paint(rng, width, height, objects)))
        image_list.append({"id": index, "file_name": file_name, "width": width, "height": height})
    _write(root / ann_rel, json.dumps(doc, sort_keys=True).encode())
    return root / ann_rel, root / images_rel


def make_learnable(
    root: Union[str, Path],
    images: int = 16,
    val_images: int = 8,
    size: Tuple[int, int] = (128, 128),
    seed: int = 0,
    max_objects: int = 4,
) -> Tuple[Tuple[Path, Path], Tuple[Path, Path]]:
    """Write both splits; return ((train annotations, train images), (val annotations, val images))."""
    if images < 1:
        raise UserError("--images must be at least 1")
    if val_images < 1:
        raise UserError("--val-images must be at least 1")
    if min(size) < 32:
        raise UserError("--size sides must be at least 32 pixels")
    root = Path(root)
    train = _split(
        root, TRAIN_ANNOTATIONS, TRAIN_IMAGES, images, random.Random("train-%d" % seed), size, max_objects, "train"
    )
    val = _split(
        root, VAL_ANNOTATIONS, VAL_IMAGES, val_images, random.Random("val-%d" % seed), size, max_objects, "val"
    )
    return train, val
