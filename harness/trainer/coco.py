"""COCO-format annotations: validation, image decoding and fitting into a fixed input size."""
import json
import os

import numpy as np
import torch
from PIL import Image, ImageDraw

from .augment import Augment, fit_scale


class DataError(ValueError):
    """Bad or missing dataset input; the message names the path and the cause."""


def load_annotations(json_path, images_dir):
    """Parse and check a COCO JSON file -> (records, number of categories)."""
    if not os.path.isfile(json_path):
        raise DataError(f"COCO annotation file not found: {json_path}")
    if not os.path.isdir(images_dir):
        raise DataError(f"COCO image directory not found: {images_dir}")
    try:
        with open(json_path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{json_path} is not a COCO annotation file: invalid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise DataError(f"{json_path} is not a COCO annotation file: top level is not an object")
    for key in ("images", "annotations", "categories"):
        if not isinstance(doc.get(key), list):
            raise DataError(f"{json_path} is not a COCO annotation file: no '{key}' list")
    try:
        cat_ids = sorted(int(c["id"]) for c in doc["categories"])
        contiguous = {cid: i + 1 for i, cid in enumerate(cat_ids)}
        by_image, crowd_by_image = {}, {}
        for ann in doc["annotations"]:
            check_segmentation(ann, json_path)
            into = crowd_by_image if ann.get("iscrowd", 0) else by_image
            into.setdefault(ann["image_id"], []).append(ann)
        records = []
        for img in doc["images"]:
            path = os.path.join(images_dir, img["file_name"])
            anns = [a for a in by_image.get(img["id"], []) if a["category_id"] in contiguous]
            labels = [contiguous[a["category_id"]] for a in anns]
            records.append({"path": path, "anns": anns, "labels": labels, "id": img["id"],
                            "crowd": crowd_by_image.get(img["id"], [])})
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{json_path} is not a COCO annotation file: bad entry "
                        f"({type(exc).__name__}: {exc})") from None
    if not records:
        raise DataError(f"{json_path} lists no images")
    missing = [r["path"] for r in records if not os.path.isfile(r["path"])]
    if missing:
        raise DataError(f"image file not found: {missing[0]} ({len(missing)} missing in all)")
    if not any(r["anns"] for r in records):
        crowd = sum(len(r["crowd"]) for r in records)
        raise DataError(f"{json_path} has no object to learn or score: {len(records)} images, "
                        f"{crowd} crowd annotations and no other annotation of a listed category")
    return records, len(cat_ids)


def check_segmentation(ann, json_path):
    """A polygon segmentation needs at least three (x, y) points; DataError naming the annotation."""
    seg = ann.get("segmentation")
    if not isinstance(seg, list):
        return
    for poly in seg:
        if not isinstance(poly, list) or len(poly) < 6 or len(poly) % 2:
            count = len(poly) if isinstance(poly, list) else "no list of"
            raise DataError(f"{json_path}: annotation id {ann.get('id')}: polygon with {count} coordinates "
                            "(a polygon needs at least 3 x, y pairs)")


def load_image(path, size, flip=False, short=None):
    """An image file fitted into size (H, W) keeping its aspect ratio (its shorter side at most
    `short` pixels, where given), mirrored left-right with `flip`, padded bottom-right:
    (uint8 [3, H, W], scale, (height, width) after scaling, (height, width) of the file)."""
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if flip:
                im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            w, h = im.size
            scale = fit_scale(h, w, size, short)
            nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
            pixels = np.asarray(im.resize((nw, nh), Image.BILINEAR))
    except OSError as exc:
        raise DataError(f"cannot decode image {path}: {exc}") from None
    image = torch.zeros((3,) + tuple(size), dtype=torch.uint8)
    image[:, :nh, :nw] = torch.from_numpy(pixels.copy()).permute(2, 0, 1)
    return image, scale, (nh, nw), (h, w)


class CocoDataset(torch.utils.data.Dataset):
    """Each image is scaled to fit (H, W) keeping its aspect ratio and padded bottom-right."""

    def __init__(self, records, input_size, max_gt, with_masks, augment=None):
        self.records = records
        self.size = tuple(input_size)
        self.max_gt = max_gt
        self.with_masks = with_masks
        self.augment = augment or Augment()
        # crowd regions travel with the batch only where the data set has some
        self.with_crowd = any(r.get("crowd") for r in records)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, key):
        """`key`: an index, or (index, position) when augmenting (augment.py)."""
        i, position = key if isinstance(key, tuple) else (key, None)
        rec = self.records[i]
        flip, short = self.augment.draw(position) if position is not None else (False, None)
        image, scale, (_, content), (_, width) = load_image(rec["path"], self.size, flip, short)
        anns = rec["anns"][: self.max_gt]
        boxes, labels, masks = [], [], []
        for ann, label in zip(anns, rec["labels"]):
            x, y, bw, bh = (float(v) * scale for v in ann["bbox"])
            if bw < 1 or bh < 1:
                continue
            box = [x, y, x + bw, y + bh]
            boxes.append([width * scale - box[2], y, width * scale - box[0], y + bh] if flip else box)
            labels.append(label)
            if self.with_masks:
                masks.append(self._mask(ann, scale, box, content if flip else None))
        out = {"image": image,
               "boxes": torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
               "labels": torch.tensor(labels, dtype=torch.int64)}
        if self.with_crowd:
            out["crowd"] = torch.tensor([_crowd_box(a, scale, width if flip else None) for a in rec["crowd"]],
                                        dtype=torch.float32).reshape(-1, 4)
        if self.with_masks:
            out["masks"] = (torch.stack(masks) if masks
                            else torch.zeros((0,) + self.size, dtype=torch.uint8))
        return out

    def _mask(self, ann, scale, box, mirror_columns=None):
        """The object's mask on the canvas, drawn in the unmirrored image; with `mirror_columns`
        the first that many columns (the image's own, not the padding) are then mirrored, as
        the image was."""
        canvas = Image.new("L", (self.size[1], self.size[0]), 0)
        draw = ImageDraw.Draw(canvas)
        seg = ann.get("segmentation")
        if isinstance(seg, list) and seg:
            for poly in seg:
                if len(poly) >= 6:
                    draw.polygon([float(v) * scale for v in poly], fill=1)
        else:  # no polygon (e.g. RLE): fall back to the box
            draw.rectangle(box, fill=1)
        mask = np.asarray(canvas, dtype=np.uint8).copy()
        if mirror_columns:
            mask[:, :mirror_columns] = mask[:, :mirror_columns][:, ::-1]
        return torch.from_numpy(mask)


def _crowd_box(ann, scale, mirror_width=None):
    x, y, w, h = (float(v) for v in ann["bbox"])
    if mirror_width is not None:
        x = mirror_width - x - w
    return [x * scale, y * scale, (x + w) * scale, (y + h) * scale]


def collate(items):
    """Stack images and pad boxes/labels/masks to the largest box count in the batch."""
    g = max(1, max(len(it["labels"]) for it in items))
    b = len(items)
    size = items[0]["image"].shape[1:]
    boxes = torch.zeros((b, g, 4))
    labels = torch.zeros((b, g), dtype=torch.int64)
    masks = torch.zeros((b, g) + tuple(size), dtype=torch.uint8) if "masks" in items[0] else None
    for i, it in enumerate(items):
        n = len(it["labels"])
        boxes[i, :n] = it["boxes"]
        labels[i, :n] = it["labels"]
        if masks is not None:
            masks[i, :n] = it["masks"]
    batch = {"images": torch.stack([it["image"] for it in items]), "boxes": boxes, "labels": labels}
    if masks is not None:
        batch["masks"] = masks
    if "crowd" in items[0]:     # regions to ignore, padded with empty boxes
        crowd = torch.zeros((b, max(1, max(len(it["crowd"]) for it in items)), 4))
        for i, it in enumerate(items):
            crowd[i, :len(it["crowd"])] = it["crowd"]
        batch["crowd"] = crowd
    return batch
