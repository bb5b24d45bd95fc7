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
  threads            intra-op CPU threads: the scenario's OMP_NUM_THREADS, "default" without one
  init               initial weights: "random", or "file:<name>" of a mounted weights file
                     (nothing is downloaded at start); reported by the adapters that state it.
                     The bundled trainer, torchvision and mmdetection load the scenario's shared
                     `weights:` file of the model (shared_init), the same file for all three

Reported by the adapters that know them (a key is compared only where every framework
of a table reports it; the report names each key that some of its frameworks logged and others
did not, as not compared):

  rpn_pre_nms_train        proposals per pyramid level and image before the RPN's NMS (two-stage)
  rpn_post_nms_train       proposals kept per image after NMS in training (two-stage)
  rpn_batch_per_image      anchors sampled per image for the RPN loss, and their positive fraction
  rpn_positive_fraction    (two-stage)
  roi_batch_per_image      RoIs sampled per image for the box head, and their positive fraction
  roi_positive_fraction    (two-stage)
  roi_align_sampling_ratio RoIAlign sampling points per bin side (0: adaptive) (two-stage)
  roi_align_aligned        RoIAlign's half-pixel offset (true/false) (two-stage)
  mask_rois_per_image_max  most RoIs per image the mask head trains on (Mask R-CNN)
  box_loss                 box regression loss of each stage, e.g. "rpn smooth_l1(1/9), rcnn smooth_l1(1/9)"
  extra_levels_from        RetinaNet's P6/P7: "p5" (FPN output) or "c5" (backbone output)
  lr                       SGD learning rate of the whole batch after warmup
  warmup                   "linear from F over N iterations", or "none"
  shuffle                  images reshuffled each pass (true) or taken in the file's order (false),
                           so that frameworks see the same images at the same iteration

Reported only in the DETBENCH_SETTINGS line a framework prints (harness/drivers/asrun.py), read from
its objects:

  momentum                 SGD momentum
  weight_decay             a number where every trained parameter has it, else
                           "<decay>, none on biases and norms"
  cls_loss                 classification losses, e.g. "rpn bce, rcnn ce", "focal(alpha 0.25, gamma 2)"
  anchors                  "sizes 32, 64, ...; ratios 0.5, 1, 2": sizes per pyramid level ('/' between
                           the sizes of one level) and aspect ratios (height / width)
  mask_head                "4 conv 256, 14x14 RoIs to 28x28 masks" (Mask R-CNN)
  clip_grad_norm           the bound of the gradients' total norm, where the program clips them
  lr_decay                 "x0.1 at 800, 900" (the rate multiplied by 0.1 once 800, then 900
                           iterations are done), "none" (constant after warmup), or the
                           scheduler's name where it does not decay in steps

A trial's settings come from that line where its log has one, else from its adapter's
settings() (what the adapter asked for); the store marks which (harness/measure/ingest.py).
"""
import os

from harness.vocab.catalog import TWO_STAGE

# computed the same way inside a rival's environment, where its driver prints them (asrun.py);
# schedule is part of this module's settings too
from harness.drivers.settings import mask_rois_cap, schedule  # noqa: F401


# the detection settings of the R50-FPN recipes that the three frameworks running here
# (bundled trainer, torchvision, mmdetection) are set to alike; each adapter still states
# its own values through detection(), so a framework that cannot match shows the difference
RPN_PRE_NMS_TRAIN = 2000
RPN_POST_NMS_TRAIN = 2000
RPN_BATCH_PER_IMAGE = 256
RPN_POSITIVE_FRACTION = 0.5
ROI_BATCH_PER_IMAGE = 512
ROI_POSITIVE_FRACTION = 0.25
ROI_ALIGN_SAMPLING_RATIO = 2
ROI_ALIGN_ALIGNED = False
SMOOTH_L1_BOTH = "rpn smooth_l1(1/9), rcnn smooth_l1(1/9)"


def threads(ctx):
    """The scenario's thread count (every framework's process gets the same env)."""
    value = (ctx.env or {}).get("OMP_NUM_THREADS")
    if value is None:
        return "default"
    try:
        return int(value)
    except ValueError:
        return value


def shared_init(ctx):
    """The `init` setting of an adapter that loads the scenario's shared weights file (ctx.weights)."""
    return "file:" + os.path.basename(ctx.weights) if ctx.weights else "random"


def common(ctx, frozen_stages, norm, loader_workers, flip, rpn_post_nms_train=None, init=None):
    out = {"images_per_device": ctx.batch_per_gpu, "devices": ctx.gpus * ctx.nodes,
           "input_size": list(ctx.input_size), "precision": ctx.precision,
           "data": "coco" if ctx.data else "synthetic", "frozen_stages": frozen_stages,
           "norm": norm, "loader_workers": loader_workers, "flip": bool(flip),
           "threads": threads(ctx)}
    if ctx.model in TWO_STAGE and rpn_post_nms_train is not None:
        out["rpn_post_nms_train"] = rpn_post_nms_train
    if init is not None:
        out["init"] = init
    return out


def detection(ctx, *, rpn_pre_nms_train, rpn_post_nms_train, rpn_batch_per_image, rpn_positive_fraction,
              roi_batch_per_image, roi_positive_fraction, roi_align_sampling_ratio, roi_align_aligned,
              mask_rois_per_image_max, box_loss, extra_levels_from):
    """The model's detection settings, for the keys that apply to ctx.model."""
    if ctx.model == "retinanet":
        return {"box_loss": box_loss, "extra_levels_from": extra_levels_from}
    if ctx.model not in TWO_STAGE:
        return {}
    out = {"rpn_pre_nms_train": int(rpn_pre_nms_train), "rpn_post_nms_train": int(rpn_post_nms_train),
           "rpn_batch_per_image": int(rpn_batch_per_image), "rpn_positive_fraction": float(rpn_positive_fraction),
           "roi_batch_per_image": int(roi_batch_per_image), "roi_positive_fraction": float(roi_positive_fraction),
           "roi_align_sampling_ratio": int(roi_align_sampling_ratio),
           "roi_align_aligned": bool(roi_align_aligned), "box_loss": box_loss}
    if ctx.model == "mask_rcnn":
        out["mask_rois_per_image_max"] = mask_rois_cap(roi_batch_per_image, roi_positive_fraction,
                                                       mask_rois_per_image_max)
    return out


# the test-time settings of the R50-FPN recipes that every inference driver is set to alike
RPN_PRE_NMS_TEST = 1000       # proposals per pyramid level and image before the RPN's NMS
RPN_POST_NMS_TEST = 1000      # proposals kept per image after it
RPN_NMS_THRESHOLD = 0.7
RETINANET_CANDIDATES = 1000   # RetinaNet: top-scoring anchors per level decoded before NMS
MASK_THRESHOLD = 0.5          # pasted mask probabilities binarised at this value


def driven(ctx, o, frozen_stages=1, norm="frozen_bn"):
    """What a rival run by the shared driver options (`o`: the adapter's options as the driver gets
    them) trains with: frozen stem and stage 1 with frozen BN unless said otherwise, its loader and flips, the samplers
    256 at 0.5 and 512 at 0.25, RoIAlign at sampling ratio 2 not aligned, no mask RoI cap of its
    own, smooth L1 (beta 1/9) in both stages (RetinaNet: L1, P6/P7 from P5), the driver's learning
    rate schedule and the shared initial weights. Each adapter says why its framework's objects
    hold these values where it calls this."""
    out = common(ctx, frozen_stages=frozen_stages, norm=norm, loader_workers=o["workers"], flip=o["flip"])
    out.update(detection(
        ctx, rpn_pre_nms_train=o["rpn_pre_nms_train"], rpn_post_nms_train=o["rpn_post_nms_train"],
        rpn_batch_per_image=256, rpn_positive_fraction=0.5, roi_batch_per_image=512,
        roi_positive_fraction=0.25, roi_align_sampling_ratio=2, roi_align_aligned=False,
        mask_rois_per_image_max=None,
        box_loss="l1" if ctx.model == "retinanet" else SMOOTH_L1_BOTH,
        extra_levels_from="p5"))
    out.update(schedule(o["lr"], o["warmup_iters"], o["warmup_factor"], o["shuffle"]))
    out["init"] = shared_init(ctx)
    return out


def inference(ctx, *, rpn_pre_nms_test=None, rpn_post_nms_test=None, candidates_per_level=None,
              mask_threshold=None, init=None, **own):
    """The normalized settings of an inference trial: what every framework shares (batch, input,
    precision, the post-processing the scenario asks for) and the test-time settings the adapter
    states for ctx.model (None: not stated). Keys of training (samplers, schedule) do not apply."""
    post = ctx.inference or {}
    out = {"mode": "inference", "images_per_device": ctx.batch_per_gpu, "devices": ctx.gpus * ctx.nodes,
           "input_size": list(ctx.input_size), "precision": ctx.precision,
           "data": "coco" if ctx.data else "synthetic", "threads": threads(ctx),
           "score_threshold": float(post.get("score_threshold", 0.05)),
           "nms_threshold": float(post.get("nms_threshold", 0.5)),
           "detections_per_image": int(post.get("detections_per_image", 100)),
           "init": init if init is not None else shared_init(ctx)}
    if ctx.model in TWO_STAGE:
        for key, value in (("rpn_pre_nms_test", rpn_pre_nms_test), ("rpn_post_nms_test", rpn_post_nms_test)):
            if value is not None:
                out[key] = int(value)
    if ctx.model == "retinanet" and candidates_per_level is not None:
        out["candidates_per_level"] = int(candidates_per_level)
    if ctx.model == "mask_rcnn" and mask_threshold is not None:
        out["mask_threshold"] = float(mask_threshold)
    out.update(own)
    return out
