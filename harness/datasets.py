"""Small, deterministic COCO-format datasets that every framework can read.

``make_coco(DIR, images=N, size=(H, W))`` writes DIR/images/000001.png ... (real PNG
files, standard library only) and DIR/annotations/instances_train.json with boxes,
box-shaped polygons and the 80 COCO category names (mmdetection keeps only categories
whose names it knows). The same arguments always give byte-identical files.
"""
import json
import os
import random
import struct
import zlib
from pathlib import Path

from harness.errors import UserError

COCO_CLASSES = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush")
ANNOTATIONS = "annotations/instances_train.json"
IMAGES = "images"


def png_bytes(width, height, rows):
    """Encode 8-bit RGB rows (each a bytes of width*3) as a PNG file."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + row for row in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _image(rng, width, height, boxes):
    """A textured background with each box filled in its own colour."""
    base = [rng.randrange(40, 216) for _ in range(3)]
    pixels = bytearray()
    for y in range(height):
        shade = (y * 64) // max(height, 1)
        pixels += bytes(((base[0] + shade) % 256, base[1], (base[2] + 255 - shade) % 256)) * width
    for (x, y, w, h), colour in boxes:
        fill = bytes(colour) * int(w)
        for row in range(int(y), int(y + h)):
            start = (row * width + int(x)) * 3
            pixels[start:start + len(fill)] = fill
    return [bytes(pixels[r * width * 3:(r + 1) * width * 3]) for r in range(height)]


def make_coco(root, images=16, size=(320, 320), seed=0, max_objects=6):
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
    doc = {"info": {"description": "detbench synthetic COCO-format set", "version": "1"},
           "licenses": [], "images": [], "annotations": [],
           "categories": [{"id": i + 1, "name": n, "supercategory": "object"}
                          for i, n in enumerate(COCO_CLASSES)]}
    ann_id = 0
    for index in range(1, images + 1):
        boxes = []
        for _ in range(rng.randint(1, max_objects)):
            w = rng.randint(max(8, width // 16), max(9, width // 2))
            h = rng.randint(max(8, height // 16), max(9, height // 2))
            x = rng.randint(0, width - w)
            y = rng.randint(0, height - h)
            colour = tuple(rng.randrange(256) for _ in range(3))
            boxes.append(((x, y, w, h), colour))
            ann_id += 1
            doc["annotations"].append({
                "id": ann_id, "image_id": index, "category_id": rng.randint(1, len(COCO_CLASSES)),
                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
        name = "%06d.png" % index
        data = png_bytes(width, height, _image(rng, width, height, boxes))
        _write(root / IMAGES / name, data)
        doc["images"].append({"id": index, "file_name": name, "width": width, "height": height})
    _write(root / ANNOTATIONS, json.dumps(doc, sort_keys=True).encode())
    return root / ANNOTATIONS, root / IMAGES


def _write(path, data):
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def parse_size(text):
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError("--size must look like 320x320 (height x width), got %r" % text) from None
    return h, w
