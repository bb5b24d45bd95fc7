"""Instance masks as per-object crops, from the annotation to the mask head's 28x28 targets.

A mask never travels as a full-canvas bitmap. The loader rasterises each object's polygons
(or decodes its RLE with pycocotools) only inside the object's extent on the canvas, and
keeps that crop: the object's pixels plus a one-pixel border of zeros. With
`data.mask_crop` > 0, a crop longer than that on a side is area-averaged down to it (smaller
batches, fewer sampling points for large RoIs, targets that differ at the object's boundary);
by default every crop keeps the canvas's resolution. A batch carries them as two tensors:

    mask_crops   [B, G, Sh, Sw] uint8, 255 inside the object (in-between values where a
                 crop was averaged down), zero-padded to the batch's largest crop
    mask_affine  [B, G, 4] float32 (sx, sy, tx, ty): canvas (x, y) -> crop (x*sx + tx, y*sy + ty)

Pixel i spans [i, i + 1) of the canvas throughout, as in COCO: a polygon is rasterised as
pycocotools rasterises the ground truth COCOeval scores against (a pixel is inside where its
centre is), and the R-CNN head (rcnn.py) builds the targets of its sampled positive RoIs only,
by aligned RoIAlign (half-pixel offset, as mmdetection's and detectron2's targets) on the crops
with each RoI moved into its object's crop (`roi_targets`), adaptive sampling. Cell j of a
target is then the mask over the RoI's j-th part, the frame in which postprocess.paste_masks
lays a predicted map back over its box. (Unaligned targets with that paste put every
predicted mask half a pixel up and left of its object; a rasteriser that counts the pixels a
polygon's edge touches makes it a pixel wider and taller.)

For a crop at full resolution this is exactly RoIAlign on the full-canvas mask, with these
conventions:
- The shift to the crop is by whole pixels, and subtracting a whole number from a float32
  coordinate is exact, so each RoI has the same width, height and sampling grid in the crop.
- Beside an object, the crop's zero border gives what the canvas has there: zeros.
- Where an object reaches the canvas's first row (column), aligned sampling reads up to half
  a pixel above (left of) it, which RoIAlign clamps to that row; the crop starts at that row,
  with no border, and clamps the same.
- Where an object reaches the canvas's last row (column), RoIAlign on the canvas clamps a
  sample past that row to it; the crop repeats that row once (RoIs are clipped to the
  canvas, so no sample lies further out). Whether an image's content fills the canvas is
  known once the batch's canvas is, so `pack` adds that row.
The remaining differences are float32 rounding of the sample positions (about 1e-5 of a
target value); tests/trainer/test_masks.py measures them against the full-canvas path.
"""
from collections import namedtuple

import numpy as np
import torch
from PIL import Image

# pixels: uint8 [h, w] (0..255); affine: (sx, sy, tx, ty); edge: (reaches the content's last
# row, reaches its last column), each in the crop's last row / column
Crop = namedtuple("Crop", "pixels affine edge")
_EMPTY = Crop(np.zeros((1, 1), np.uint8), (1.0, 1.0, 0.0, 0.0), (False, False))
INSIDE = 255


class RLEError(ValueError):
    """A run-length encoded segmentation that does not fit its image."""


def rle_problem(seg, height, width):
    """Why an RLE segmentation (a dict) does not describe a height x width mask; None if it does."""
    size, counts = seg.get("size"), seg.get("counts")
    if not (isinstance(size, (list, tuple)) and len(size) == 2):
        return "RLE without a [height, width] size"
    if [int(size[0]), int(size[1])] != [int(height), int(width)]:
        return f"RLE of size {int(size[0])}x{int(size[1])} on an image of {int(height)}x{int(width)}"
    if isinstance(counts, list):
        if any(not isinstance(c, int) or c < 0 for c in counts):
            return "uncompressed RLE counts that are not non-negative integers"
        if sum(counts) != height * width:
            return f"uncompressed RLE counts summing to {sum(counts)}, not {height}x{width}={height * width}"
    elif not isinstance(counts, (str, bytes)):
        return "RLE counts that are neither a list nor a string"
    return None


def decode_rle(seg):
    """pycocotools' decoding of a compressed (string counts) or uncompressed (list) RLE: uint8 [h, w]."""
    from pycocotools import mask as mask_utils
    height, width = (int(v) for v in seg["size"])
    if isinstance(seg["counts"], list):
        seg = mask_utils.frPyObjects(seg, height, width)
    return mask_utils.decode(seg)


def object_crop(ann, scale, image_hw, content_hw, flip, box, limit):
    """The crop of one annotation's mask on the canvas: its polygons drawn (or its RLE decoded)
    where the image, `image_hw` pixels in its file, lies scaled to `content_hw` at the canvas's
    top left; mirrored left-right with `flip`; with neither, the box (x1, y1, x2, y2) on the
    unmirrored canvas is the mask. At most `limit` pixels a side (0: no limit)."""
    seg = ann.get("segmentation")
    if isinstance(seg, dict):
        region, top, left = _rle_region(seg, image_hw, content_hw)
    elif isinstance(seg, list) and seg:
        polys = [[float(v) * scale for v in poly] for poly in seg if len(poly) >= 6]
        region, top, left = _drawn_region(content_hw, polys)
    else:   # no segmentation: the box is the mask
        x1, y1, x2, y2 = (float(v) for v in box)
        region, top, left = _drawn_region(content_hw, [[x1, y1, x2, y1, x2, y2, x1, y2]])
    if flip and region is not None:
        region, left = region[:, ::-1], content_hw[1] - left - region.shape[1]
    return place(region, top, left, content_hw, limit)


def _drawn_region(content_hw, polygons):
    """Rasterise flat [x0, y0, x1, y1, ...] polygons (their union) inside their extent (plus two
    pixels) on the content area, as pycocotools rasterises COCO's ground truth for COCOeval: a
    pixel is inside where its centre (column + 0.5, row + 0.5) is. (uint8 region, its top row,
    its left column), or (None, 0, 0)."""
    from pycocotools import mask as mask_utils
    if not polygons:
        return None, 0, 0
    xs = [v for s in polygons for v in s[0::2]]
    ys = [v for s in polygons for v in s[1::2]]
    top, left = max(int(np.floor(min(ys))) - 2, 0), max(int(np.floor(min(xs))) - 2, 0)
    bottom = min(int(np.ceil(max(ys))) + 3, content_hw[0])
    right = min(int(np.ceil(max(xs))) + 3, content_hw[1])
    if bottom <= top or right <= left:
        return None, 0, 0
    shifted = [[v - (left if k % 2 == 0 else top) for k, v in enumerate(s)] for s in polygons]
    rle = mask_utils.merge(mask_utils.frPyObjects(shifted, bottom - top, right - left))
    return np.ascontiguousarray(mask_utils.decode(rle), dtype=np.uint8), top, left


def _rle_region(seg, image_hw, content_hw):
    """A decoded RLE resized to the content's size by nearest neighbour (pixel centres), only
    around the object: (uint8 region, top row, left column), or (None, 0, 0) if empty."""
    full = decode_rle(seg)
    height, width = full.shape[:2]
    if (height, width) != tuple(image_hw):
        raise RLEError(f"RLE of size {height}x{width} on an image of {image_hw[0]}x{image_hw[1]}")
    rows, cols = np.flatnonzero(full.any(1)), np.flatnonzero(full.any(0))
    if not len(rows):
        return None, 0, 0
    (nh, nw), (h, w) = content_hw, image_hw
    # content pixel i takes source pixel floor((i + 0.5) * h / nh)
    src_r = np.minimum(((np.arange(nh) + 0.5) * h / nh).astype(np.int64), h - 1)
    src_c = np.minimum(((np.arange(nw) + 0.5) * w / nw).astype(np.int64), w - 1)
    keep_r = np.flatnonzero((src_r >= rows[0]) & (src_r <= rows[-1]))
    keep_c = np.flatnonzero((src_c >= cols[0]) & (src_c <= cols[-1]))
    if not len(keep_r) or not len(keep_c):
        return None, 0, 0
    region = full[src_r[keep_r]][:, src_c[keep_c]]
    return np.ascontiguousarray(region, dtype=np.uint8), int(keep_r[0]), int(keep_c[0])


def place(region, top, left, content_hw, limit):
    """A 0/1 region at (top, left) on the content area -> its Crop: trimmed to the object, one
    row and column of zeros around it where the content goes on, area-averaged down to at most
    `limit` pixels a side (0: no limit)."""
    if region is None or not region.any():
        return _EMPTY
    rows, cols = np.flatnonzero(region.any(1)), np.flatnonzero(region.any(0))
    y0, y1 = max(top + rows[0] - 1, 0), min(top + rows[-1] + 2, content_hw[0])
    x0, x1 = max(left + cols[0] - 1, 0), min(left + cols[-1] + 2, content_hw[1])
    pixels = np.zeros((y1 - y0, x1 - x0), np.uint8)
    src = region[max(y0 - top, 0):y1 - top, max(x0 - left, 0):x1 - left]
    oy, ox = max(top - y0, 0), max(left - x0, 0)
    pixels[oy:oy + src.shape[0], ox:ox + src.shape[1]] = src * INSIDE
    edge = (y1 == content_hw[0], x1 == content_hw[1])
    h, w = pixels.shape
    if not limit or (h <= limit and w <= limit):
        return Crop(pixels, (1.0, 1.0, float(-x0), float(-y0)), edge)
    nh, nw = min(h, limit), min(w, limit)
    small = np.array(Image.fromarray(pixels).resize((nw, nh), Image.BOX), dtype=np.uint8)
    sx, sy = nw / w, nh / h
    # crop pixel j covers canvas pixels [x0 + j / sx, x0 + (j + 1) / sx) (pixel i spans [i, i + 1))
    return Crop(small, (sx, sy, -x0 * sx, -y0 * sy), edge)


def pack(crops_per_image, contents, canvas):
    """Crops of each image of a batch -> (mask_crops [B, G, Sh, Sw] uint8, mask_affine [B, G, 4]).
    Where an image's content fills the canvas's height (width), a crop reaching its last row
    (column) gets that row (column) once more."""
    grown = []
    for crops, (nh, nw) in zip(crops_per_image, contents):
        out = []
        for c in crops:
            p = c.pixels
            if c.edge[0] and nh == canvas[0]:
                p = np.concatenate([p, p[-1:]], axis=0)
            if c.edge[1] and nw == canvas[1]:
                p = np.concatenate([p, p[:, -1:]], axis=1)
            out.append((p, c.affine))
        grown.append(out)
    b, g = len(grown), max([1] + [len(c) for c in grown])
    sh = max([1] + [p.shape[0] for c in grown for p, _ in c])
    sw = max([1] + [p.shape[1] for c in grown for p, _ in c])
    pixels = torch.zeros((b, g, sh, sw), dtype=torch.uint8)
    affine = torch.tensor([1.0, 1.0, 0.0, 0.0]).repeat(b, g, 1)
    for i, crops in enumerate(grown):
        for j, (p, a) in enumerate(crops):
            pixels[i, j, :p.shape[0], :p.shape[1]] = torch.from_numpy(p)
            affine[i, j] = torch.tensor(a)
    return pixels, affine


def roi_targets(crops, affine, objects, boxes, size, share=True):
    """Mask targets [K, size, size] in [0, 1] of K RoIs: `boxes` [K, 4] on the canvas, each of
    the object with flat index `objects` [K] (image * G + slot) of crops [B, G, Sh, Sw].

    With `share` only the crops some RoI uses are converted to floats, at the cost of a
    torch.unique (a host sync); without, every crop of the batch is (fixed shapes)."""
    from torchvision.ops import roi_align
    flat = crops.view(-1, 1, *crops.shape[-2:])
    a = affine.view(-1, 4)[objects].float()
    local = boxes.float() * a[:, :2].repeat(1, 2) + a[:, 2:].repeat(1, 2)
    if share:
        used, which = torch.unique(objects, return_inverse=True)
        src, index = flat[used], which
    else:
        src, index = flat, objects
    rois = torch.cat([index[:, None].to(local.dtype), local], dim=1)
    # adaptive sampling (ceil(roi side / size) points per bin side); aligned: cell j of a RoI
    # averages the mask over the RoI's j-th size-th, pixel i spanning [i, i + 1), the frame the
    # paste (postprocess.paste_masks) lays a predicted map back in
    return roi_align(src.float() / INSIDE, rois, (size, size), 1.0, 0, aligned=True)[:, 0]


def full_masks(crops, affine, height, width):
    """The crops pasted back onto a height x width canvas: [B, G, H, W] uint8 of 0 and 1
    (nearest crop pixel, at least half inside). For tests and for frameworks that want them."""
    b, g = crops.shape[:2]
    out = torch.zeros((b, g, height, width), dtype=torch.uint8)
    ys, xs = torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64)
    for i in range(b):
        for j in range(g):
            sx, sy, tx, ty = affine[i, j].double().tolist()
            # canvas pixel centre i + 0.5 -> crop pixel whose span holds it
            rows = torch.floor((ys + 0.5) * sy + ty).long()
            cols = torch.floor((xs + 0.5) * sx + tx).long()
            r_ok = (rows >= 0) & (rows < crops.shape[2])
            c_ok = (cols >= 0) & (cols < crops.shape[3])
            if r_ok.any() and c_ok.any():
                patch = crops[i, j].cpu()[rows[r_ok]][:, cols[c_ok]]
                out[i, j][r_ok.nonzero()[:, 0, None], c_ok.nonzero()[:, 0]] = (patch >= INSIDE / 2).to(torch.uint8)
    return out


def per_image_targets(images, targets):
    """A batch's padded targets as torchvision's detection models take them: one dict per image
    with its real boxes, labels and, for mask batches, full-canvas masks."""
    keep_counts = (targets["labels"] > 0).sum(1).tolist()
    height, width = images.shape[-2:]
    full = (full_masks(targets["mask_crops"], targets["mask_affine"], height, width)
            if "mask_crops" in targets else None)
    out = []
    for i, n in enumerate(keep_counts):
        t = {"boxes": targets["boxes"][i, :n], "labels": targets["labels"][i, :n]}
        if full is not None:
            t["masks"] = full[i, :n]
        out.append(t)
    return out
