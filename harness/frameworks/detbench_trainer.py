"""The bundled SimpleDet-style PyTorch trainer (harness/trainer), launched like any rival."""
import functools
import os
import subprocess
import sys

from harness.errors import UserError
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, Framework, ImageRecipe, infer_args
from harness.frameworks import settings as normalized

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK_TIMEOUT_S = 120
# python -m harness.trainer.train's options (tests/frameworks/test_extra_options.py holds them to its parser)
FLAGS = frozenset(("-h", "--help", "--set", "--weights", "--resume"))
CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "trainer", "configs")
CONFIGS = {
    "retinanet": "retina_r50v1_fpn_1x.py",
    "faster_rcnn": "faster_r50v1_fpn_1x.py",
    "mask_rcnn": "mask_r50v1_fpn_1x.py",
}


def _value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_threads(ctx):
    """train.threads may only repeat the scenario's OMP_NUM_THREADS (one thread count for all)."""
    threads = ctx.options.get("train.threads")
    omp = ctx.env.get("OMP_NUM_THREADS")
    if threads in (None, 0, "0") or omp is None:
        return
    if str(threads).strip() != str(omp).strip():
        raise UserError("detbench-trainer: train.threads=%s differs from the scenario's OMP_NUM_THREADS=%s: "
                        "set the thread count once, in env, so every framework gets it" % (threads, omp))


TEST_ONLY = ("train.allow_emulated_bf16",)    # the trainer's own tests run emulated paths with it; a trial never


def _extra_sets(args):
    """(index, KEY=VALUE) of each --set pair among extra_args."""
    args = list(args)
    return [(i + 1, args[i + 1]) for i in range(len(args) - 1) if args[i] == "--set"] + \
        [(i, a.partition("=")[2]) for i, a in enumerate(args) if a.startswith("--set=")]


def _check_test_only(ctx):
    """A timed trial never measures an emulation: the trainer's test-only switches are refused."""
    given = set(ctx.options)
    given.update(pair.partition("=")[0] for _, pair in _extra_sets(ctx.extra_args))
    for key in TEST_ONLY:
        if key in given:
            raise UserError("detbench-trainer: %s is for the trainer's own tests: a trial would time torch's "
                            "bf16 emulation, not the trainer" % key)


def _check_options(ctx):
    """The scenario's options for the trainer, each a config override, checked before anything runs
    by the trainer's own config: UserError with the trainer's one line."""
    for key, value in sorted(ctx.options.items()):
        problem = _override_problem("%s=%s" % (key, _value(value)))
        if problem:
            raise UserError("detbench-trainer: options.%s: %s" % (key, problem))


def check_extra(args):
    """(index, why) of the first --set pair among extra_args the trainer's config refuses (an
    unknown key, a value of the wrong type), or None."""
    for index, pair in _extra_sets(args):
        problem = _override_problem(pair)
        if problem:
            return index, problem
    return None


@functools.lru_cache(maxsize=256)
def _override_problem(pair):
    """What `python -m harness.trainer.config --set PAIR` says of one override (every key and its
    value's type on the default config, without torch), or None where it takes it."""
    argv = [sys.executable, "-m", "harness.trainer.config", "--set", pair]
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None   # not checked here: the trainer refuses them as it starts
    said = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode == 2 and said:
        return said[-1][len("error: "):] if said[-1].startswith("error: ") else said[-1]
    return None


def command(ctx):
    _check_threads(ctx)
    _check_test_only(ctx)
    _check_options(ctx)
    world = ctx.gpus * ctx.nodes
    sets = {
        "train.max_iter": ctx.iterations,
        "train.precision": "fp32" if ctx.precision == "tf32" else ctx.precision,
        "train.seed": ctx.seed,
        "data.images_per_device": ctx.batch_per_gpu,
        "data.input_size": "%dx%d" % tuple(ctx.input_size),
    }
    if ctx.precision == "tf32":
        sets["train.tf32"] = True
    if ctx.data:
        sets["data.source"] = "coco"
        sets["data.coco_json"] = ctx.data["annotations"]
        sets["data.coco_images"] = ctx.data["images"]
    else:
        sets["data.source"] = "synthetic"
    # the rivals keep a constant learning rate after warmup in a benchmark trial: so does the trainer
    sets["train.schedule"] = "constant"
    # and, as torchvision's reference scripts and mmdetection do by default, decays every parameter
    sets["train.decay_norm_bias"] = True
    sets.update(ctx.options)
    train = ["-m", "harness.trainer.train", os.path.join(CONFIG_DIR, CONFIGS[ctx.model])]
    for key, value in sets.items():
        train += ["--set", "%s=%s" % (key, _value(value))]
    if ctx.weights:
        train += ["--weights", ctx.weights]
    if world == 1:
        launch = [ctx.python]
    else:
        launch = [ctx.python, "-m", "torch.distributed.run", "--nproc_per_node", str(ctx.gpus)]
        if ctx.nodes > 1:
            launch += ["--nnodes", str(ctx.nodes)]
            if ctx.rendezvous:
                launch += ["--rdzv-backend", ctx.rendezvous]
        else:
            launch += ["--standalone"]
    return launch + train + list(ctx.extra_args)


# the model settings of configs/*_r50v1_fpn_1x.py that settings() reports (the harness does not
# import the trainer; tests/trainer pins these to the configs)
MODEL_DEFAULTS = {
    "frozen_stages": 1, "norm": "frozen_bn",
    "rpn_pre_nms_top_n_train": 2000, "rpn_post_nms_top_n_train": 2000,
    "rpn_batch_per_image": 256, "rpn_positive_fraction": 0.5,
    "roi_batch_per_image": 512, "roi_positive_fraction": 0.25,
    "roi_align_sampling_ratio": 2, "roi_align_aligned": False, "mask_max_rois_per_image": 128,
}


# the training settings of those configs (learning rate per lr_reference_batch images)
TRAIN_DEFAULTS = {"lr_reference_batch": 16, "warmup_iters": 500, "warmup_factor": 1.0 / 3}
CONFIG_LR = {"retinanet": 0.01, "faster_rcnn": 0.02, "mask_rcnn": 0.02}


def _typed(default, value):
    if isinstance(default, bool) and isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return type(default)(value)


def _model(opts, name):
    """A model setting as the trial runs it: the scenario's option, else the config's value."""
    return _typed(MODEL_DEFAULTS[name], opts.get("model." + name, MODEL_DEFAULTS[name]))


def _train(opts, name):
    return _typed(TRAIN_DEFAULTS[name], opts.get("train." + name, TRAIN_DEFAULTS[name]))


def settings(ctx):
    opts = ctx.options
    workers = int(opts.get("data.workers", 2)) if ctx.data else 0   # synthetic data needs no loader
    out = normalized.common(ctx, frozen_stages=_model(opts, "frozen_stages"), norm=_model(opts, "norm"),
                            loader_workers=workers, flip=False)
    out.update(normalized.detection(
        ctx, rpn_pre_nms_train=_model(opts, "rpn_pre_nms_top_n_train"),
        rpn_post_nms_train=_model(opts, "rpn_post_nms_top_n_train"),
        rpn_batch_per_image=_model(opts, "rpn_batch_per_image"),
        rpn_positive_fraction=_model(opts, "rpn_positive_fraction"),
        roi_batch_per_image=_model(opts, "roi_batch_per_image"),
        roi_positive_fraction=_model(opts, "roi_positive_fraction"),
        roi_align_sampling_ratio=_model(opts, "roi_align_sampling_ratio"),
        roi_align_aligned=_model(opts, "roi_align_aligned"),
        mask_rois_per_image_max=_model(opts, "mask_max_rois_per_image"),
        box_loss="l1" if ctx.model == "retinanet" else normalized.SMOOTH_L1_BOTH,
        extra_levels_from="p5"))
    images = ctx.batch_per_gpu * ctx.gpus * ctx.nodes
    lr = float(opts.get("train.lr", CONFIG_LR[ctx.model])) * images / _train(opts, "lr_reference_batch")
    out.update(normalized.schedule(lr, _train(opts, "warmup_iters"), _train(opts, "warmup_factor"),
                                   _typed(True, opts.get("data.shuffle", True)) if ctx.data else False))
    out["init"] = _init(ctx)
    return out


def _init(ctx):
    """The shared weights file; else a whole-detector or ImageNet backbone file from the options."""
    init = normalized.shared_init(ctx)
    if init != "random":
        return init
    if ctx.options.get("model.weights"):
        return "file:" + os.path.basename(str(ctx.options["model.weights"]))
    if ctx.options.get("model.backbone_weights"):
        return "backbone:" + os.path.basename(str(ctx.options["model.backbone_weights"]))
    return init


# scenario options an inference trial passes on: the model's shape (its weights come from `weights:`)
INFER_OPTION_PREFIXES = ("model.",)
INFER_IGNORED = ("train.", "data.")     # training-only options, shared with the scenario's training cells


def infer(ctx):
    """`python -m harness.trainer.infer`: the bundled detector in eval mode, one batch at a time."""
    _check_threads(ctx)
    argv = [ctx.python, "-m", "harness.trainer.infer", os.path.join(CONFIG_DIR, CONFIGS[ctx.model])]
    for key, value in ctx.options.items():
        if key.startswith(INFER_OPTION_PREFIXES):
            argv += ["--set", "%s=%s" % (key, _value(value))]
        elif key == "train.device":
            argv += ["--set", "train.device=%s" % _value(value)]
        elif not key.startswith(INFER_IGNORED):
            raise UserError("detbench-trainer: option %r means nothing to an inference trial "
                            "(it takes model.* options)" % key)
    return argv + infer_args(ctx) + list(ctx.extra_args)


def infer_settings(ctx):
    return normalized.inference(
        ctx, rpn_pre_nms_test=normalized.RPN_PRE_NMS_TEST, rpn_post_nms_test=normalized.RPN_POST_NMS_TEST,
        candidates_per_level=normalized.RETINANET_CANDIDATES, mask_threshold=normalized.MASK_THRESHOLD,
        init=_init(ctx))


FRAMEWORK = Framework(
    name="detbench-trainer", title="detbench-trainer (PyTorch)", scraper="detbench-jsonl",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    status=RUNS_HERE, why="bundled PyTorch trainer (pip extra `trainer`); fp16 needs CUDA",
    figures="exact per iteration: time from the end of the previous iteration to the end of this one "
            "(CUDA synchronized), data time the wait for the batch", command=command, settings=settings,
    infer=infer, infer_models=frozenset(CONFIGS), infer_precisions=frozenset({"fp32", "tf32", "fp16", "bf16"}),
    infer_settings=infer_settings,
    infer_why="python -m harness.trainer.infer: eval mode, post-processing as torchvision's; fp16 and tf32 need CUDA",
    images=(ImageRecipe("detbench-trainer", IMAGE_VENV, wheels=True, local_base=True),),
    flags=FLAGS, check_extra=check_extra,
)
