"""The normalized settings every rival adapter reports, under the same keys.

A report compares these per table and names each key whose value differs, so the
keys and their vocabularies must mean the same thing for every framework:

  images_per_device  images in one device's batch
  devices            devices (GPUs, or 1 for a CPU run) working on one iteration
  input_size         [height, width] of the training images after resizing
  precision          fp32, tf32, fp16 (mixed) or bf16 (mixed)
  data               "synthetic" or "coco" (a COCO-format file on disk)
  frozen_stages      backbone stages not trained: -1 none, 0 stem, 1 stem + stage 1, ...
  norm               "frozen_bn" (fixed statistics and affine), "bn", "syncbn", "gn"
  loader_workers     data-loader worker processes per device (0: in the training process)
  flip               random horizontal flip in training (true/false)
  rpn_post_nms_train proposals kept per image after NMS in training (two-stage models only)
"""

TWO_STAGE = ("faster_rcnn", "mask_rcnn")


def common(ctx, frozen_stages, norm, loader_workers, flip, rpn_post_nms_train=None):
    out = {"images_per_device": ctx.batch_per_gpu, "devices": ctx.gpus * ctx.nodes,
           "input_size": list(ctx.input_size), "precision": ctx.precision,
           "data": "coco" if ctx.data else "synthetic", "frozen_stages": frozen_stages,
           "norm": norm, "loader_workers": loader_workers, "flip": bool(flip)}
    if ctx.model in TWO_STAGE and rpn_post_nms_train is not None:
        out["rpn_post_nms_train"] = rpn_post_nms_train
    return out
