"""Greedy non-maximum suppression with fixed shapes, for the sync-free training path.

torchvision's `batched_nms` returns a list of survivors whose length only the host learns,
so on a GPU every call waits for the device. Here each group's candidates stay in a padded
[G, K] layout and the greedy result is reached as a fixed point: sorted by score, box i is
kept when no kept box before it overlaps it by more than the threshold. Starting from
"every valid box kept", one pass settles at least one more box of every suppression chain,
so after as many passes as the longest chain the answer is exactly the greedy one (the
same as torchvision's, ties in score aside). The passes are a fixed number, so nothing
waits for the device; `unconverged` counts the groups whose answer was still moving at the
last pass, to be read where the host reads the iteration's other figures.
"""
import torch

from .boxes import iou_batched


def greedy_keep(boxes, scores, valid, thresh, passes):
    """boxes [G, K, 4], scores [G, K], valid [G, K] -> (keep [G, K], unconverged 0-dim tensor).

    keep is in the input's order; invalid entries are never kept and suppress nothing."""
    g, k = scores.shape
    if k == 0:
        return valid.clone(), valid.new_zeros((), dtype=torch.long)
    order = scores.float().masked_fill(~valid, float("-inf")).argsort(dim=1, descending=True, stable=True)
    sorted_boxes = boxes.float().gather(1, order[..., None].expand(-1, -1, 4))
    sorted_valid = valid.gather(1, order)
    earlier = torch.ones(k, k, dtype=torch.bool, device=boxes.device).triu(1)   # row j before column i
    # suppresses[g, j, i]: box j (earlier, valid) overlaps box i by more than the threshold
    suppresses = (iou_batched(sorted_boxes, sorted_boxes) > thresh) & earlier & sorted_valid[:, :, None]
    weights = suppresses.to(torch.float32)
    keep = sorted_valid

    def settle(kept):
        hits = torch.bmm(kept[:, None, :].to(torch.float32), weights)[:, 0]
        return sorted_valid & (hits == 0)

    # the counts in float32 with autocast off: under autocast each pass would cast the
    # [G, K, K] matrix to half precision again (emulated, on a CPU without bf16 kernels)
    with torch.autocast(device_type=boxes.device.type, enabled=False):
        for _ in range(passes):
            keep = settle(keep)
        unconverged = (settle(keep) != keep).any(dim=1).sum()
    out = torch.zeros_like(valid)
    out.scatter_(1, order, keep)
    return out, unconverged
