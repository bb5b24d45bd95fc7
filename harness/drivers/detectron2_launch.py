"""Run detectron2's own tools/train_net.py, as its pinned commit publishes it, on the scenario.

    python detectron2_launch.py --script train_net.py --model M --iterations N --data ANN --images DIR ...

Runs in the detectron2 framework's pinned env. The script is the file of the pinned commit's
source archive (the adapter writes it into the trial folder, or ``--source-archive TAR`` names the
archive it is read from); it runs unchanged, as ``__main__`` with its own command line:
``--config-file`` the model-zoo config bundled in the installed package, ``--num-gpus 1``, ``--resume``
when going on from a checkpoint, and the scenario as config options (``KEY VALUE`` pairs, `opts`).
So detectron2's DefaultTrainer builds the model, its optimizer and step schedule (SOLVER.*), its
loader (DatasetMapper with ResizeShortestEdge and RandomFlip, TrainingSampler, batches grouped by
aspect ratio), its hooks and its CommonMetricPrinter, whose lines the detectron2 scraper reads.

What detbench adds goes in only through detectron2's extension points, each named in INJECTIONS:
the data set registered as COCO instances (register_coco_instances) under TRAIN_SET; RetinaNet's
P6/P7 from P5 as a backbone registered in BACKBONE_REGISTRY; the shared weights file mapped to
detectron2's names (weights_map.py) and loaded by its own checkpointer as MODEL.WEIGHTS;
DefaultTrainer.build_hooks wrapped to append one hook (its list otherwise as built) that prints the
DETBENCH_SETTINGS line before the first iteration, one DETBENCH_WORK and one DETBENCH_DATA line
after each, and one ``checkpoint PATH`` line after each checkpoint its PeriodicCheckpointer wrote
(the file linked as ``iter_N.pth``); DatasetMapper.__call__ wrapped to observe which images its own
RandomFlip mirrored (the transforms its AugmentationList returned), carried to a forward pre-hook
of the model under one key that hook takes off again, so the model gets the mapper's dicts as they
were. Two shims where train_net.py cannot do what the comparison needs: bf16 on a CPU (its
AMPTrainer asserts CUDA), the model's forward runs inside torch.autocast("cpu", bfloat16), entered
and left by forward hooks of the model; a clip of the gradients' total norm (SOLVER.CLIP_GRADIENTS
clips each parameter on its own), its optimizer class made by detectron2's own clipping factory
with a global clipper.

Config options after detbench's flags (the scenario's extra_args) go to train_net.py after
detbench's own. Exit codes: the script's own; 2 for bad input (a weights file that does not fit, a
script that is not train_net.py of the pinned commit, a config option its config does not take).
"""
import argparse
import hashlib
import json
import os
import runpy
import shutil
import sys
import tarfile
import tempfile

try:
    from harness.drivers import asrun, common, weights_map   # imported from the harness
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common
    import weights_map

MODELS = {"retinanet": "COCO-Detection/retinanet_R_50_FPN_1x.yaml",
          "faster_rcnn": "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml",
          "mask_rcnn": "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"}
SCRIPT = "tools/train_net.py"     # the script of the commit's tree that trains
TRAIN_SET = "detbench_train"
NUM_CLASSES = 80                  # detectron2 counts foreground classes only
# torchvision's input normalisation (RGB in 0..255), so one weights file sees the same input
PIXEL_MEAN = [123.675, 116.28, 103.53]
PIXEL_STD = [58.395, 57.12, 57.375]
TWO_STAGE_BETA = 1.0 / 9
RETINANET_BACKBONE = "build_detbench_retinanet_fpn_p5_backbone"
NEVER = 10 ** 9                   # a checkpoint period no trial reaches
VIEW_KEY = "detbench_view"        # the key the mapper's observer adds and the model's pre-hook takes off
INJECTIONS = {
    "dataset": "register_coco_instances(%r, ...) of the scenario's COCO files" % TRAIN_SET,
    "weights": "the shared weights file mapped to detectron2's names, loaded by DetectionCheckpointer as "
               "MODEL.WEIGHTS",
    "hooks": "DefaultTrainer.build_hooks wrapped: one hook appended (SETTINGS, WORK, DATA and checkpoint lines)",
    "views": "DatasetMapper.__call__ wrapped to observe its RandomFlip; a forward pre-hook reads and removes "
             "the one key it adds",
    "work": "forward hooks on the proposal generator and mask pooler, wrappers of label_and_sample_proposals "
            "and label_anchors returning their results unchanged",
}
RETINANET_INJECTION = "BACKBONE_REGISTRY: FPN with LastLevelP6P7 fed from p5"
BF16_SHIM = "the model's forward inside torch.autocast('cpu', bfloat16) by its forward hooks (AMPTrainer asserts CUDA)"
CLIP_SHIM = "detectron2's optimizer class with a global clipper (SOLVER.CLIP_GRADIENTS clips each parameter alone)"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--script", help="train_net.py of the pinned commit (byte for byte)")
    where.add_argument("--source-archive", help="the pinned commit's `git archive`: its %s is run" % SCRIPT)
    p.add_argument("--commit", default="", help="the pinned commit --source-archive must hold")
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--config", help="model-zoo config key (default: the model's R50-FPN 1x)")
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--input-size", default="800x1333", help="HxW: the shortest edge is made min(H, W), the "
                   "longest at most max(H, W) (ResizeShortestEdge)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--data", help="COCO instances JSON")
    p.add_argument("--images", help="image folder of --data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--rpn-pre-nms-train", type=int, default=2000, help="per level and image")
    p.add_argument("--rpn-post-nms-train", type=int, default=2000, help="per image")
    p.add_argument("--roi-batch-per-image", type=int, default=512, help="the box head's sampled RoIs per image")
    p.add_argument("--lr", type=float, default=0.0025)
    p.add_argument("--warmup-iters", type=int, default=0)
    p.add_argument("--warmup-factor", type=float, default=1.0 / 3)
    p.add_argument("--no-flip", dest="flip", action="store_false")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", metavar="FILE",
                   help="initial weights made by `detbench weights make` (torchvision's layout, mapped)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--depth", type=int, choices=[18, 50], default=50, help="ResNet depth")
    p.add_argument("--freeze-at", type=int, choices=[0, 1, 2, 3, 4, 5], default=2,
                   help="BACKBONE.FREEZE_AT: 0 freezes nothing, 2 the stem and res2")
    p.add_argument("--output-dir", help="OUTPUT_DIR (default: a folder removed at the end; with "
                   "--checkpoint-every the checkpoint folder)")
    common.add_accuracy_flags(p)       # the weight decay: SOLVER.WEIGHT_DECAY and its _NORM
    p.add_argument("opts", nargs=argparse.REMAINDER, metavar="KEY VALUE",
                   help="more detectron2 config options, after detbench's (the scenario's extra_args)")
    args = common.checked_accuracy_flags(p, p.parse_args(argv))
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint-dir (train_net.py --resume goes on from its OUTPUT_DIR)")
    return args


def size_of(args):
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    return height, width


def opts(args):
    """The scenario as detectron2 config options (KEY VALUE ...), merged over the model-zoo config."""
    height, width = size_of(args)
    out = {
        "MODEL.WEIGHTS": "", "MODEL.DEVICE": args.device,
        "MODEL.PIXEL_MEAN": PIXEL_MEAN, "MODEL.PIXEL_STD": PIXEL_STD, "INPUT.FORMAT": "RGB",
        "INPUT.MIN_SIZE_TRAIN": (min(height, width),), "INPUT.MAX_SIZE_TRAIN": max(height, width),
        "INPUT.RANDOM_FLIP": "horizontal" if args.flip else "none",
        "MODEL.BACKBONE.FREEZE_AT": args.freeze_at, "MODEL.RESNETS.NORM": "FrozenBN",
        "MODEL.RESNETS.STRIDE_IN_1X1": False, "MODEL.RESNETS.DEPTH": args.depth,
    }
    if args.depth < 50:
        out["MODEL.RESNETS.RES2_OUT_CHANNELS"] = 64     # basic blocks: res2 is as wide as the stem
    if args.model == "retinanet":
        out.update({"MODEL.BACKBONE.NAME": RETINANET_BACKBONE, "MODEL.RETINANET.NUM_CLASSES": NUM_CLASSES,
                    "MODEL.RETINANET.BBOX_REG_LOSS_TYPE": "smooth_l1",
                    "MODEL.RETINANET.SMOOTH_L1_LOSS_BETA": 0.0})       # L1, as torchvision's and mmdet's
    else:
        out.update({
            "MODEL.ROI_HEADS.NUM_CLASSES": NUM_CLASSES,
            "MODEL.RPN.PRE_NMS_TOPK_TRAIN": args.rpn_pre_nms_train,
            "MODEL.RPN.POST_NMS_TOPK_TRAIN": args.rpn_post_nms_train,
            "MODEL.RPN.BATCH_SIZE_PER_IMAGE": 256, "MODEL.RPN.POSITIVE_FRACTION": 0.5,
            "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE": args.roi_batch_per_image,
            "MODEL.ROI_HEADS.POSITIVE_FRACTION": 0.25,
            "MODEL.RPN.BBOX_REG_LOSS_TYPE": "smooth_l1", "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE": "smooth_l1",
            "MODEL.RPN.SMOOTH_L1_BETA": TWO_STAGE_BETA, "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA": TWO_STAGE_BETA,
            "MODEL.ROI_BOX_HEAD.POOLER_TYPE": "ROIAlign", "MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO": 2})
        if args.model == "mask_rcnn":
            out.update({"MODEL.ROI_MASK_HEAD.POOLER_TYPE": "ROIAlign",
                        "MODEL.ROI_MASK_HEAD.POOLER_SAMPLING_RATIO": 2})
    out.update({
        "SOLVER.IMS_PER_BATCH": args.batch_size, "SOLVER.BASE_LR": args.lr,
        "SOLVER.MAX_ITER": max(args.iterations, 1), "SOLVER.STEPS": tuple(args.lr_steps),
        "SOLVER.GAMMA": args.gamma, "SOLVER.WEIGHT_DECAY": args.weight_decay,
        "SOLVER.WEIGHT_DECAY_NORM": args.weight_decay,
        "SOLVER.WEIGHT_DECAY_BIAS": None,          # biases decay as the weights do
        "SOLVER.WARMUP_ITERS": args.warmup_iters,
        "SOLVER.WARMUP_FACTOR": args.warmup_factor if args.warmup_iters > 0 else 1.0,
        "SOLVER.WARMUP_METHOD": "linear", "SOLVER.AMP.ENABLED": False,
        "SOLVER.CHECKPOINT_PERIOD": args.checkpoint_every or NEVER,
        "DATALOADER.NUM_WORKERS": args.workers,
        "DATASETS.TRAIN": (TRAIN_SET,), "DATASETS.TEST": (), "TEST.EVAL_PERIOD": 0, "SEED": args.seed,
    })
    flat = []
    for key, value in out.items():
        flat += [key, value if isinstance(value, str) and value else repr(value)]
    return flat


def register_backbone():
    """RetinaNet's backbone with P6 from P5 (detectron2's own builder takes it from res5)."""
    from detectron2.modeling import BACKBONE_REGISTRY
    from detectron2.modeling.backbone import FPN
    from detectron2.modeling.backbone.fpn import LastLevelP6P7
    from detectron2.modeling.backbone.resnet import build_resnet_backbone

    if RETINANET_BACKBONE in BACKBONE_REGISTRY:
        return

    def build(cfg, input_shape):
        out = cfg.MODEL.FPN.OUT_CHANNELS
        return FPN(bottom_up=build_resnet_backbone(cfg, input_shape), in_features=cfg.MODEL.FPN.IN_FEATURES,
                   out_channels=out, norm=cfg.MODEL.FPN.NORM, top_block=LastLevelP6P7(out, out, in_feature="p5"),
                   fuse_type=cfg.MODEL.FPN.FUSE_TYPE)
    build.__name__ = RETINANET_BACKBONE
    BACKBONE_REGISTRY.register(build)


def config_file(args):
    from detectron2 import model_zoo
    return model_zoo.get_config_file(args.config or MODELS[args.model])


class OptionError(Exception):
    """A config option detectron2's config does not take (the message is yacs's)."""


def build_cfg(args):
    """The cfg train_net.py's setup() makes of this command line (get_cfg, the config file, the options);
    OptionError for an option its config does not take."""
    from detectron2.config import get_cfg
    register_backbone()
    cfg = get_cfg()
    cfg.merge_from_file(config_file(args))
    extra = list(getattr(args, "opts", None) or [])
    try:
        cfg.merge_from_list(opts(args) + extra)
    except (KeyError, ValueError, AssertionError) as exc:
        said = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc).strip().splitlines()
        raise OptionError("config options %s: %s" % (" ".join(extra), said[0] if said else type(exc).__name__)) \
            from None
    cfg.freeze()
    return cfg


def build_model(cfg):
    from detectron2.modeling import build_model as build
    return build(cfg)


# --- the script ----------------------------------------------------------------------------------

class ScriptError(Exception):
    """The script to run is not the pinned commit's (the message says which file and why)."""


def read_script(archive, commit):
    """The bytes of SCRIPT in the `git archive` `archive`, checked to be of `commit` by the commit ID
    git writes into its pax header; ScriptError saying why not."""
    try:
        with tarfile.open(archive) as tar:
            tar.next()
            found = tar.pax_headers.get("comment", "").strip()
            if found != commit:
                raise ScriptError("%s: the archive is of commit %s, not the pinned %s"
                                  % (archive, found or "(none recorded)", commit))
            for member in tar:
                # `git archive` writes the tree as it is or under one folder (GitHub's: <name>-<commit>/)
                if member.isfile() and SCRIPT in (member.name, member.name.split("/", 1)[-1]):
                    data = tar.extractfile(member)
                    if data is not None:
                        return data.read()
    except (tarfile.TarError, OSError) as exc:
        raise ScriptError("%s: not a readable tar archive (%s)" % (archive, exc)) from None
    raise ScriptError("%s: the archive holds no %s" % (archive, SCRIPT))


def script_from_archive(archive, commit, into):
    """Write SCRIPT of `archive` (read_script) to the folder `into`; its path."""
    path = os.path.join(into, os.path.basename(SCRIPT))
    with open(path, "wb") as fh:
        fh.write(read_script(archive, commit))
    return path


def sha256(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


# --- what the appended hook reads and prints -----------------------------------------------------

class WorkCounter(common.WorkCounts):
    """The work of each iteration, from what detectron2's modules are given and return: a hook on
    the proposal generator and on the mask pooler, wrappers of the RoI heads' sampler and of
    RetinaNet's anchor labelling that return their results unchanged."""

    def __init__(self, model):
        super().__init__()
        if hasattr(model, "label_anchors"):
            label = model.label_anchors
            classes = model.num_classes

            def counted_label(anchors, gt_instances):
                gt_labels, gt_boxes = label(anchors, gt_instances)
                self.add("positive_anchors", sum(((g >= 0) & (g != classes)).sum() for g in gt_labels))
                return gt_labels, gt_boxes
            model.label_anchors = counted_label
            return
        model.proposal_generator.register_forward_hook(
            lambda module, args, output: self.add("proposals", sum(len(p) for p in output[0])))
        heads = model.roi_heads
        sample = heads.label_and_sample_proposals
        classes = heads.num_classes

        def counted_sample(proposals, targets):
            out = sample(proposals, targets)
            self.add("sampled_rois", sum(len(p) for p in out))
            self.add("positive_rois", sum(((p.gt_classes >= 0) & (p.gt_classes != classes)).sum() for p in out))
            return out
        heads.label_and_sample_proposals = counted_sample
        if getattr(heads, "mask_on", False):
            heads.mask_pooler.register_forward_hook(
                lambda module, args, output: self.add("mask_rois", output.shape[0]))


def observe_views(dataset_size, batch_size):
    """Wrap DatasetMapper.__call__: each dict it returns gets VIEW_KEY, [image id, mirrored, epoch],
    where mirrored is whether the transforms its own augmentations returned hold a horizontal flip,
    and the epoch is the draw's place in TrainingSampler's stream (its shards: batch_size draws per
    loader worker in turn) over the data set's size."""
    import torch
    from detectron2.data import DatasetMapper
    from detectron2.data import transforms as T

    call = DatasetMapper.__call__
    drawn = [0]

    def observed(self, dataset_dict):
        seen = []
        augment = self.augmentations

        class Observed:       # the mapper's AugmentationList, its result kept on the way out
            def __call__(self, aug_input):
                transforms = augment(aug_input)
                seen.append(transforms)
                return transforms

            def __getattr__(self, name):
                return getattr(augment, name)
        self.augmentations = Observed()
        try:
            out = call(self, dataset_dict)
        finally:
            self.augmentations = augment
        worker = torch.utils.data.get_worker_info()
        k = drawn[0]
        drawn[0] += 1
        if worker is not None:
            k = (k // batch_size) * worker.num_workers * batch_size + worker.id * batch_size + k % batch_size
        flipped = any(isinstance(t, T.HFlipTransform) for s in seen for t in s.transforms)
        if isinstance(out, dict):
            out[VIEW_KEY] = [int(out.get("image_id", -1)), flipped, k // max(dataset_size, 1)]
        return out
    DatasetMapper.__call__ = observed


class Views:
    """A forward pre-hook of the model: takes each input dict's VIEW_KEY off (the model gets the
    mapper's dicts as they were) and keeps the batch's views for the iteration's DATA line."""

    def __init__(self, model):
        self.views, self.epoch = [], None
        model.register_forward_pre_hook(self.take)

    def take(self, module, args):
        if args and isinstance(args[0], list):
            for d in args[0]:
                view = d.pop(VIEW_KEY, None) if isinstance(d, dict) else None
                if view is not None:
                    self.views.append((view[0], view[1]))
                    self.epoch = view[2] if self.epoch is None else min(self.epoch, view[2])
        return None

    def line(self, iteration):
        views, epoch, self.views, self.epoch = self.views, self.epoch, [], None
        return common.jsonlog.data_line(iteration, epoch, views)


def as_run(args, cfg, trainer):
    """(settings, implementation) of the SETTINGS line, read from the trainer's cfg, model and optimizer."""
    import torch
    model, optimizer = trainer.model, trainer.optimizer
    bottom_up = model.backbone.bottom_up
    stages = [bottom_up.stem] + [getattr(bottom_up, name) for name in ("res2", "res3", "res4", "res5")]
    norm, norm_impl = asrun.norm(bottom_up.modules())
    autocast = torch.bfloat16 if args.precision == "bf16" else None
    settings = {
        "images_per_device": cfg.SOLVER.IMS_PER_BATCH, "devices": 1,
        "input_size": [min(cfg.INPUT.MIN_SIZE_TRAIN), cfg.INPUT.MAX_SIZE_TRAIN],
        "precision": asrun.precision(autocast), "data": "coco", "frozen_stages": asrun.frozen_stages(stages),
        "norm": norm, "loader_workers": cfg.DATALOADER.NUM_WORKERS, "flip": cfg.INPUT.RANDOM_FLIP != "none",
        "threads": torch.get_num_threads(),
        "init": "file:" + os.path.basename(args.weights) if args.weights else "random",
        "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
    }
    # TrainingSampler (the config's DATALOADER.SAMPLER_TRAIN) shuffles each pass through the data
    settings.update(asrun.normalized.schedule(
        cfg.SOLVER.BASE_LR, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.WARMUP_FACTOR,
        cfg.DATALOADER.SAMPLER_TRAIN == "TrainingSampler", (cfg.SOLVER.STEPS, cfg.SOLVER.GAMMA)))
    if getattr(type(optimizer), "clip_grad_norm", 0):
        settings["clip_grad_norm"] = float(type(optimizer).clip_grad_norm)
    implementation = {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(model.modules()),
                      "training_code": "detectron2's own %s; added: %s" % (SCRIPT, "; ".join(
                          "%s: %s" % kv for kv in sorted(injections(args).items())))}
    anchors = model.anchor_generator if hasattr(model, "anchor_generator") else \
        model.proposal_generator.anchor_generator
    sizes = [list(s) for s in cfg.MODEL.ANCHOR_GENERATOR.SIZES]
    ratios = [list(r) for r in cfg.MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS]
    anchor_text = asrun.anchors(sizes * (len(anchors.strides) if len(sizes) == 1 else 1),
                                ratios[0] if len(ratios) == 1 else ratios, list(anchors.cell_anchors))
    if hasattr(model, "label_anchors"):
        top = model.backbone.top_block
        beta = model.smooth_l1_beta if model.box_reg_loss_type == "smooth_l1" else None
        settings.update(box_loss=asrun.smooth_l1(beta) if beta is not None else model.box_reg_loss_type,
                        cls_loss=asrun.focal(model.focal_loss_alpha, model.focal_loss_gamma),
                        extra_levels_from="p5" if top.in_feature == "p5" else "c5", anchors=anchor_text)
        return settings, implementation
    rpn, heads = model.proposal_generator, model.roi_heads
    pooler = heads.box_pooler.level_poolers[0]
    settings.update(
        rpn_pre_nms_train=int(rpn.pre_nms_topk[True]), rpn_post_nms_train=int(rpn.post_nms_topk[True]),
        rpn_batch_per_image=int(rpn.batch_size_per_image), rpn_positive_fraction=float(rpn.positive_fraction),
        roi_batch_per_image=int(heads.batch_size_per_image), roi_positive_fraction=float(heads.positive_fraction),
        roi_align_sampling_ratio=int(pooler.sampling_ratio), roi_align_aligned=bool(pooler.aligned),
        box_loss=asrun.two_stage_box_loss(asrun.smooth_l1(rpn.smooth_l1_beta),
                                          asrun.smooth_l1(heads.box_predictor.smooth_l1_beta)),
        cls_loss=asrun.TWO_STAGE_CLS_LOSS, anchors=anchor_text)
    implementation["roi_align"] = asrun.ROI_ALIGN_TORCHVISION
    if getattr(heads, "mask_on", False):
        head = heads.mask_head
        convs = [c for c in head.conv_norm_relus]
        roi_size = heads.mask_pooler.output_size[0]
        settings["mask_rois_per_image_max"] = asrun.normalized.mask_rois_cap(
            settings["roi_batch_per_image"], settings["roi_positive_fraction"])   # no cap of its own
        settings["mask_head"] = asrun.mask_head(len(convs), convs[-1].out_channels, roi_size,
                                                roi_size * head.deconv.stride[0])
        implementation["mask_logits"] = "all %d classes" % head.predictor.out_channels
        from detectron2.layers import mask_ops   # detector_postprocess's ROIMasks.to_bitmasks pastes with this
        implementation["mask_paste"] = asrun.mask_paste(mask_ops.paste_masks_in_image, exact=True)
        from detectron2.structures import PolygonMasks   # INPUT.MASK_FORMAT "polygon", its loader's default
        implementation["mask_targets"] = asrun.mask_targets(PolygonMasks.crop_and_resize,
                                                            asrun.MASK_TARGETS_POLYGONS)
    return settings, implementation


def injections(args):
    """What detbench adds to this run, by where it enters detectron2 (INJECTIONS and the shims in use)."""
    out = dict(INJECTIONS)
    if not args.weights or args.resume:
        out.pop("weights")
    if args.model == "retinanet":
        out["backbone"] = RETINANET_INJECTION
    if args.precision == "bf16":
        out["bf16_shim"] = BF16_SHIM
    if args.clip_grad_norm:
        out["clip_shim"] = CLIP_SHIM
    return out


def install(args, output_dir):
    """Register the data set and the backbone, and wrap DefaultTrainer.build_hooks (and, for a clip,
    build_optimizer) and DatasetMapper.__call__ as INJECTIONS says."""
    import torch
    from detectron2.data import DatasetCatalog
    from detectron2.data.datasets import register_coco_instances
    from detectron2.engine import DefaultTrainer, HookBase
    register_backbone()
    if TRAIN_SET not in DatasetCatalog.list():
        register_coco_instances(TRAIN_SET, {}, os.path.abspath(args.data), os.path.abspath(args.images))
    with open(os.path.abspath(args.data), "rb") as fh:
        doc = json.load(fh)
    with_objects = {a["image_id"] for a in doc.get("annotations", []) if not a.get("iscrowd", 0)}
    # DATALOADER.FILTER_EMPTY_ANNOTATIONS (on in its defaults) leaves the images with objects
    observe_views(len(with_objects), args.batch_size)

    class DetbenchHook(HookBase):
        def before_train(self):
            trainer = self.trainer
            self.work = WorkCounter(trainer.model)
            self.views = Views(trainer.model)
            print(common.jsonlog.settings_line(*as_run(args, trainer.cfg, trainer)), flush=True)
            if args.precision == "bf16":
                bf16_forward(trainer.model)
            common.breakdown_hooks(trainer.model, trainer.optimizer)   # where the environment asks for it

        def after_step(self):
            done = self.trainer.iter + 1
            print(self.work.line(done), flush=True)
            print(self.views.line(done), flush=True)
            if args.checkpoint_every and (done % args.checkpoint_every == 0 or done == self.trainer.max_iter):
                saved = os.path.join(output_dir, "model_%07d.pth" % (done - 1) if done < self.trainer.max_iter
                                     else "model_final.pth")
                if os.path.isfile(saved):
                    path = os.path.join(output_dir, "iter_%d.pth" % done)
                    if os.path.exists(path):
                        os.unlink(path)
                    os.link(saved, path)         # the same file, under the name the accuracy run reads
                    print("checkpoint %s" % path, flush=True)

    build_hooks = DefaultTrainer.build_hooks

    def with_detbench_hook(self):
        return build_hooks(self) + [DetbenchHook()]
    DefaultTrainer.build_hooks = with_detbench_hook
    if args.clip_grad_norm:
        build_optimizer = DefaultTrainer.build_optimizer.__func__

        def clipped(cls, cfg, model):
            from detectron2.solver.build import _generate_optimizer_class_with_gradient_clipping
            optimizer = build_optimizer(cls, cfg, model)
            klass = _generate_optimizer_class_with_gradient_clipping(
                type(optimizer), global_clipper=lambda params: torch.nn.utils.clip_grad_norm_(
                    list(params), args.clip_grad_norm))
            klass.clip_grad_norm = args.clip_grad_norm
            optimizer.__class__ = klass
            return optimizer
        DefaultTrainer.build_optimizer = classmethod(clipped)


def bf16_forward(model):
    """The shim of BF16_SHIM: the model's forward (its losses included) runs inside
    torch.autocast("cpu", bfloat16), entered by a forward pre-hook and left by a forward hook."""
    import torch
    entered = []

    def enter(module, args):
        entered.append(torch.autocast("cpu", dtype=torch.bfloat16))
        entered[-1].__enter__()

    def leave(module, args, output):
        entered.pop().__exit__(None, None, None)
    model.register_forward_pre_hook(enter)
    model.register_forward_hook(leave)


def mapped_weights(args, cfg, folder):
    """The shared weights file in detectron2's names, written for its checkpointer; its path."""
    import torch
    model = build_model(cfg)
    state = weights_map.to_framework(weights_map.read(args.weights, args.model), "detectron2", args.model,
                                     model.state_dict(), source=args.weights)
    path = os.path.join(folder, "detbench_initial_weights.pth")
    torch.save({"model": state}, path)
    return path


def main(argv=None):
    args = parse_args(argv)
    if not args.data or not args.images:
        print("error: detectron2's train_net.py reads a registered data set: give --data and --images",
              file=sys.stderr, flush=True)
        return 2
    output_dir = os.path.abspath(args.output_dir or args.checkpoint_dir or tempfile.mkdtemp(prefix="detbench-d2-"))
    keep = bool(args.output_dir or args.checkpoint_dir)
    os.makedirs(output_dir, exist_ok=True)
    try:
        try:
            script = args.script or script_from_archive(args.source_archive, args.commit, output_dir)
        except ScriptError as exc:
            print("error: detectron2: %s" % exc, file=sys.stderr, flush=True)
            return 2
        if not script or not os.path.isfile(script):
            print("error: detectron2: no %s to run (give --script or --source-archive)" % SCRIPT,
                  file=sys.stderr, flush=True)
            return 2
        try:
            cfg = build_cfg(args)
        except OptionError as exc:
            print("error: detectron2: %s" % exc, file=sys.stderr, flush=True)
            return 2
        command = ["--config-file", config_file(args), "--num-gpus", "1"]
        if args.resume:
            # train_net.py --resume goes on from the checkpoint its OUTPUT_DIR's last_checkpoint names
            # (its checkpointer joins the name to OUTPUT_DIR: an absolute path stays as it is)
            with open(os.path.join(output_dir, "last_checkpoint"), "w") as fh:
                fh.write(os.path.abspath(args.resume))
            command.append("--resume")
        options = opts(args) + list(args.opts) + ["OUTPUT_DIR", output_dir]
        if args.weights and not args.resume:
            try:
                options[options.index("MODEL.WEIGHTS") + 1] = mapped_weights(args, cfg, output_dir)
            except weights_map.WeightsError as exc:
                print("error: %s" % exc, file=sys.stderr, flush=True)
                return 2
        install(args, output_dir)
        sys.argv = [script] + command + options
        print("detbench: running %s (sha256 %s) %s" % (script, sha256(script), " ".join(sys.argv[1:])), flush=True)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
    finally:
        if not keep:
            shutil.rmtree(output_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
