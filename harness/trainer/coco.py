"""COCO-format annotations: validation, image decoding and fitting into a fixed input size."""
import json
import os

import numpy as np
import torch
from PIL import Image

from . import masks
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
        images = {img["id"]: img for img in doc["images"]}
        by_image, crowd_by_image = {}, {}
        for ann in doc["annotations"]:
            check_segmentation(ann, json_path, images.get(ann["image_id"]), images_dir)
            into = crowd_by_image if ann.get("iscrowd", 0) else by_image
            into.setdefault(ann["image_id"], []).append(ann)
        records = []
        for img in doc["images"]:
            path = os.path.join(images_dir, img["file_name"])
            anns = [a for a in by_image.get(img["id"], []) if a["category_id"] in contiguous]
            labels = [contiguous[a["category_id"]] for a in anns]
            records.append({"path": path, "anns": anns, "labels": labels, "id": img["id"],
                            "crowd": crowd_by_image.get(img["id"], []), "size": _listed_size(img)})
    except DataError:
        raise
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


def _listed_size(img):
    """(height, width) as the images entry gives it, or None."""
    h, w = img.get("height"), img.get("width")
    return (int(h), int(w)) if isinstance(h, int) and isinstance(w, int) else None


def image_size(path):
    """(height, width) of an image file, from its header."""
    try:
        with Image.open(path) as im:
            return im.size[1], im.size[0]
    except OSError as exc:
        raise DataError(f"cannot decode image {path}: {exc}") from None


def record_sizes(records):
    """Every record's (height, width): the images entry's, else the file's header."""
    return [r["size"] or image_size(r["path"]) for r in records]


def check_segmentation(ann, json_path, img=None, images_dir=""):
    """A polygon needs at least three (x, y) points, an RLE the size of its image (`img`, the
    images entry: its height and width, else its file's header); DataError naming the annotation."""
    seg = ann.get("segmentation")
    if isinstance(seg, dict):
        if img is None:
            return
        size = _listed_size(img) or image_size(os.path.join(images_dir, img["file_name"]))
        problem = masks.rle_problem(seg, *size)
        if problem:
            raise DataError(f"{json_path}: annotation id {ann.get('id')}: {problem}")
        return
    if not isinstance(seg, list):
        return
    for poly in seg:
        if not isinstance(poly, list) or len(poly) < 6 or len(poly) % 2:
            count = len(poly) if isinstance(poly, list) else "no list of"
            raise DataError(f"{json_path}: annotation id {ann.get('id')}: polygon with {count} coordinates "
                            "(a polygon needs at least 3 x, y pairs)")


def load_image(path, size, flip=False, short=None, pad=True):
    """An image file fitted into size (H, W) keeping its aspect ratio (its shorter side at most
    `short` pixels, where given), mirrored left-right with `flip`, padded bottom-right to (H, W)
    unless `pad` is false: (uint8 [3, H, W], scale, (height, width) after scaling, (height,
    width) of the file)."""
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if flip:
                im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            w, h = im.size
            scale = fit_scale(h, w, size, short)
            nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
            pixels = torch.from_numpy(np.array(im.resize((nw, nh), Image.BILINEAR))).permute(2, 0, 1)
    except OSError as exc:
        raise DataError(f"cannot decode image {path}: {exc}") from None
    if not pad:
        return pixels.contiguous(), scale, (nh, nw), (h, w)
    image = torch.zeros((3,) + tuple(size), dtype=torch.uint8)
    image[:, :nh, :nw] = pixels
    return image, scale, (nh, nw), (h, w)


class CocoDataset(torch.utils.data.Dataset):
    """Each image is scaled to fit (H, W) keeping its aspect ratio; `collate` pads it.

    An item: "image" uint8 [3, h, w] (the scaled image, not padded), "boxes", "labels",
    "crowd" where the data set has crowd regions and, for mask models, "crops": each object's
    mask as a masks.Crop (at most `mask_crop` pixels a side where it is > 0)."""

    def __init__(self, records, input_size, max_gt, with_masks, augment=None, mask_crop=0):
        self.records = records
        self.size = tuple(input_size)
        self.max_gt = max_gt
        self.with_masks = with_masks
        self.mask_crop = mask_crop
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
        image, scale, content, original = load_image(rec["path"], self.size, flip, short, pad=False)
        width = original[1]
        anns = rec["anns"][: self.max_gt]
        boxes, labels, crops = [], [], []
        for ann, label in zip(anns, rec["labels"]):
            x, y, bw, bh = (float(v) * scale for v in ann["bbox"])
            if bw < 1 or bh < 1:
                continue
            box = [x, y, x + bw, y + bh]
            boxes.append([width * scale - box[2], y, width * scale - box[0], y + bh] if flip else box)
            labels.append(label)
            if self.with_masks:
                try:
                    crops.append(masks.object_crop(ann, scale, original, content, flip, box, self.mask_crop))
                except masks.RLEError as exc:
                    raise DataError(f"{rec['path']}: annotation id {ann.get('id')}: {exc}") from None
        out = {"image": image,
               "boxes": torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
               "labels": torch.tensor(labels, dtype=torch.int64),
               "view": torch.tensor([int(rec["id"]), int(flip)])}    # what was drawn, for the DATA line
        if self.with_crowd:
            out["crowd"] = torch.tensor([_crowd_box(a, scale, width if flip else None) for a in rec["crowd"]],
                                        dtype=torch.float32).reshape(-1, 4)
        if self.with_masks:
            out["crops"] = crops
        return out


def _crowd_box(ann, scale, mirror_width=None):
    x, y, w, h = (float(v) for v in ann["bbox"])
    if mirror_width is not None:
        x = mirror_width - x - w
    return [x * scale, y * scale, (x + w) * scale, (y + h) * scale]


def canvas_of(items, size=None, divisor=1):
    """The (H, W) a batch is padded to: `size`, else its largest image rounded up to a
    multiple of `divisor`."""
    if size is not None:
        return tuple(size)
    h = max(it["image"].shape[1] for it in items)
    w = max(it["image"].shape[2] for it in items)
    return -(-h // divisor) * divisor, -(-w // divisor) * divisor


def collate(items, canvas=None, divisor=1, limit=None):
    """Pad images to one canvas (`canvas`, else the largest image rounded up to a multiple of
    `divisor`, at most `limit`) and boxes/labels/masks to the largest box count in the batch.

    The batch also holds "pixels": int64 [2], the pixels of image content and of the canvas, and
    for items that say what was drawn, "views": int64 [B, 2], each image's id and 1 if mirrored."""
    g = max(1, max(len(it["labels"]) for it in items))
    b = len(items)
    height, width = canvas_of(items, canvas, divisor)
    if limit is not None:
        height, width = min(height, limit[0]), min(width, limit[1])
    dev = items[0]["image"].device     # synthetic batches are made on the training device
    contents = [tuple(it["image"].shape[1:]) for it in items]
    if all(c == (height, width) for c in contents):
        images = torch.stack([it["image"] for it in items])
    else:
        images = torch.zeros((b, 3, height, width), dtype=items[0]["image"].dtype, device=dev)
        for i, (it, (h, w)) in enumerate(zip(items, contents)):
            images[i, :, :h, :w] = it["image"]
    boxes = torch.zeros((b, g, 4), device=dev)
    labels = torch.zeros((b, g), dtype=torch.int64, device=dev)
    for i, it in enumerate(items):
        n = len(it["labels"])
        boxes[i, :n] = it["boxes"]
        labels[i, :n] = it["labels"]
    batch = {"images": images, "boxes": boxes, "labels": labels}
    if "crops" in items[0]:
        batch["mask_crops"], batch["mask_affine"] = masks.pack([it["crops"] for it in items], contents,
                                                                (height, width))
    elif "mask_crops" in items[0]:      # already in slots of one size (synthetic data)
        shape = items[0]["mask_crops"].shape[1:]
        batch["mask_crops"] = items[0]["mask_crops"].new_zeros((b, g) + tuple(shape))
        batch["mask_affine"] = torch.tensor([1.0, 1.0, 0.0, 0.0], device=dev).repeat(b, g, 1)
        for i, it in enumerate(items):
            n = len(it["labels"])
            batch["mask_crops"][i, :n] = it["mask_crops"]
            batch["mask_affine"][i, :n] = it["mask_affine"]
    if "crowd" in items[0]:     # regions to ignore, padded with empty boxes
        crowd = torch.zeros((b, max(1, max(len(it["crowd"]) for it in items)), 4), device=dev)
        for i, it in enumerate(items):
            crowd[i, :len(it["crowd"])] = it["crowd"]
        batch["crowd"] = crowd
    batch["pixels"] = torch.tensor([sum(h * w for h, w in contents), b * height * width])
    if "view" in items[0]:      # [B, 2]: each image's id and whether it was mirrored
        batch["views"] = torch.stack([it["view"] for it in items])
    return batch
