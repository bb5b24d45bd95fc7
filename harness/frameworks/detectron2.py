"""detectron2 at its current main commit, built from source for this CPU, trained by its own
tools/train_net.py of that commit.

The pinned commit is the newest on facebookresearch/detectron2's main branch when it was pinned:
02b5c4e295e990042a714712c21dc79b731e8833, committed 2026-06-06T21:28:58-07:00, "Fix CQS signal
cppcoreguidelines-pro-type-member-init in fbcode/vision/fair" (its detectron2/__init__.py reads
__version__ = "0.6"). detectron2 publishes no sdist or wheel of it on PyPI, so `detbench env build
detectron2` compiles the wheel (its C++ ops for the CPU: FORCE_CUDA taken out of the build's
environment) from a ``git archive`` of that commit against the torch of the torchvision and
mmdetection envs, and caches it by its pins as mmcv's is. The archive comes from the cache, else
from the tarball or git clone that DETBENCH_DETECTRON2_SOURCE names (harness/launch/envs.py checks
the commit ID git writes into it); .ci/provision-rivals.sh fetches GitHub's archive of the commit.

A trial runs the archive's tools/train_net.py unchanged: the adapter reads it from the cached
archive (checked to be of the pinned commit) into the trial folder, and
harness/drivers/detectron2_launch.py starts it with its own command line (the model-zoo config
bundled in the installed package, the scenario as config options: the work the other frameworks
here do, docs/methodology.md). DefaultTrainer builds the model, optimizer, schedule, loader
(ResizeShortestEdge, RandomFlip, TrainingSampler, aspect-ratio grouping) and hooks; what detbench
adds enters through detectron2's extension points, named in the launcher's INJECTIONS and in the
SETTINGS line's implementation (`training_code`). Its CommonMetricPrinter's lines give the figures
(the detectron2 scraper: the mean step time since its timer's 3rd iteration, printed every 20th
iteration and at the last; two such lines give the exact mean between them).
"""
import os

from harness.drivers import detectron2_launch
from harness.vocab.pins import TELEMETRY, EnvSpec, SourceBuild
from harness.vocab.sources import cached_archive
from harness.errors import UserError
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, TRIAL_DIR, Framework, ImageRecipe, infer_args
from harness.frameworks import initial
from harness.frameworks import settings as normalized

LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "drivers", "detectron2_launch.py")
INFER_DRIVER = os.path.join(os.path.dirname(LAUNCHER), "detectron2_infer.py")
SCRIPT = detectron2_launch.SCRIPT   # the commit's training script, run as it is
SCRIPT_FILE = "train_net.py"    # its name in the trial folder
COMMIT = "02b5c4e295e990042a714712c21dc79b731e8833"
COMMIT_DATE = "2026-06-06T21:28:58-07:00"
VERSION = "0.6"                 # detectron2/__init__.py at the commit
TORCH = {"torch": "2.14.1", "torchvision": "0.29.1"}     # the torchvision and mmdetection envs' torch
PINS = dict(TORCH, **{
    "numpy": "2.4.6", "pillow": "13.0.0", "pycocotools": "2.0.11", "matplotlib": "3.10.8",
    "fvcore": "0.1.5.post20221221", "iopath": "0.1.9", "yacs": "0.1.8", "omegaconf": "2.3.0",
    "hydra-core": "1.3.2", "termcolor": "3.1.0", "tabulate": "0.9.0", "cloudpickle": "3.1.3",
    "tqdm": "4.67.1", "tensorboard": "2.21.0", "black": "26.10.1", "packaging": "25.0",
    "pyyaml": "6.0.3"})
SOURCE_ENV = "DETBENCH_DETECTRON2_SOURCE"
DETECTRON2 = SourceBuild(name="detectron2", version=VERSION,
                         build_pins=tuple("%s==%s" % kv for kv in sorted(TORCH.items())),
                         cxx_std="", commit=COMMIT, source_env=SOURCE_ENV, unset_env=("FORCE_CUDA",))
TOOLS = {"setuptools": "80.9.0", "wheel": "0.45.1", "ninja": "1.11.1.4"}
ENV = EnvSpec(framework="detectron2", pins=dict(PINS, **TELEMETRY), source_builds=(DETECTRON2,), tools=TOOLS)

# the model-zoo configs of the commit (configs/ in its tree, installed as detectron2.model_zoo's
# configs) that build each model: the 1x and 3x recipes differ only in the schedule the driver sets
ZOO = {"retinanet": ("COCO-Detection/retinanet_R_50_FPN_1x.yaml", "COCO-Detection/retinanet_R_50_FPN_3x.yaml"),
       "faster_rcnn": ("COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml",
                       "COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml"),
       "mask_rcnn": ("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml",
                     "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml")}
MODELS = frozenset(ZOO)
PRECISIONS = frozenset({"fp32", "bf16"})
OPTIONS = ("config", "workers", "flip", "shuffle", "lr", "warmup_iters", "warmup_factor", "rpn_pre_nms_train",
           "rpn_post_nms_train")


def _options(ctx):
    opts = initial.options(ctx, OPTIONS)
    for key, value in sorted(opts.items()):
        if isinstance(value, str) and initial.DOWNLOAD.match(value):
            raise UserError("detectron2 would download %s at start (options.%s), and trials run without a network: "
                            "name a config bundled in the installed package, and give initial weights as the "
                            "scenario's weights: file" % (value, key))
    config = str(opts.get("config", ZOO[ctx.model][0]))
    if config not in ZOO[ctx.model]:
        raise UserError("detectron2: options.config %r is not a model-zoo config of %s at commit %s (known: %s)"
                        % (config, ctx.model, COMMIT[:12], ", ".join(ZOO[ctx.model])))
    return {"config": config, "workers": int(opts.get("workers", 0)), "flip": bool(opts.get("flip", True)),
            "shuffle": _shuffle(opts), "lr": float(opts.get("lr", 0.0025)),
            "warmup_iters": int(opts.get("warmup_iters", 0)),
            "warmup_factor": float(opts.get("warmup_factor", 1.0 / 3)),
            "rpn_pre_nms_train": int(opts.get("rpn_pre_nms_train", normalized.RPN_PRE_NMS_TRAIN)),
            "rpn_post_nms_train": int(opts.get("rpn_post_nms_train", normalized.RPN_POST_NMS_TRAIN))}


def _shuffle(opts):
    if not bool(opts.get("shuffle", True)):
        raise UserError("detectron2: options.shuffle false is not a setting of its train_net.py: its TrainingSampler "
                        "(DATALOADER.SAMPLER_TRAIN) shuffles every pass through the data")
    return True


def _one_device(ctx, what):
    if ctx.gpus * ctx.nodes != 1:
        raise UserError("detectron2 %s runs on one device only (got %d GPUs x %d nodes)" % (what, ctx.gpus, ctx.nodes))


def command(ctx):
    _one_device(ctx, "training")
    initial.coco_only(ctx)
    o = _options(ctx)
    argv = [ctx.python, LAUNCHER, "--script", TRIAL_DIR + "/" + SCRIPT_FILE, "--model", ctx.model,
            "--config", o["config"], "--iterations", str(ctx.iterations),
            "--batch-size", str(ctx.batch_per_gpu), "--input-size", "%dx%d" % tuple(ctx.input_size),
            "--precision", ctx.precision, "--workers", str(o["workers"]), "--lr", repr(o["lr"]),
            "--warmup-iters", str(o["warmup_iters"]), "--warmup-factor", repr(o["warmup_factor"]),
            "--rpn-pre-nms-train", str(o["rpn_pre_nms_train"]),
            "--rpn-post-nms-train", str(o["rpn_post_nms_train"]), "--seed", str(ctx.seed),
            "--data", ctx.data["annotations"], "--images", ctx.data["images"]]
    if not o["flip"]:
        argv.append("--no-flip")
    if ctx.weights:
        argv += ["--weights", ctx.weights]
    return argv + list(ctx.extra_args)


def script_text(archive=None):
    """The text of tools/train_net.py in the pinned commit's archive (the cache's, once `detbench env
    build detectron2` has checked and kept it); UserError naming detectron2 when the archive is
    missing, of another commit or without the script."""
    archive = archive or cached_archive(DETECTRON2)
    if not os.path.isfile(archive):
        raise UserError("detectron2: its training script comes from the source archive of commit %s, which is "
                        "not at %s: run `detbench env build detectron2` with %s naming that archive"
                        % (COMMIT, archive, SOURCE_ENV))
    try:
        return detectron2_launch.read_script(archive, COMMIT).decode("utf-8")
    except (detectron2_launch.ScriptError, UnicodeDecodeError) as exc:
        raise UserError("detectron2: %s" % exc) from None


def files(ctx):
    """The trial folder's copy of the commit's tools/train_net.py, which the launcher runs."""
    return {SCRIPT_FILE: script_text()}


def settings(ctx):
    o = _options(ctx)
    # the launcher's config options: FREEZE_AT 2 (stem and res2) with FrozenBN, the samplers of the
    # zoo's configs (256 at 0.5, 512 at 0.25), pooler ROIAlign (not V2) at sampling ratio 2, smooth
    # L1 (beta 1/9) in both stages; RetinaNet: L1 (beta 0) and P6/P7 from P5, as the others build them
    return normalized.driven(ctx, o)


def infer(ctx):
    """harness/drivers/detectron2_infer.py: detectron2's preprocess_image, model and detector_postprocess."""
    _one_device(ctx, "inference")
    _options(ctx)
    return [ctx.python, INFER_DRIVER] + infer_args(ctx) + list(ctx.extra_args)


def infer_settings(ctx):
    return normalized.inference(
        ctx, rpn_pre_nms_test=normalized.RPN_PRE_NMS_TEST, rpn_post_nms_test=normalized.RPN_POST_NMS_TEST,
        candidates_per_level=normalized.RETINANET_CANDIDATES, mask_threshold=normalized.MASK_THRESHOLD)


FRAMEWORK = Framework(
    name="detectron2", title="detectron2", scraper="detectron2",
    models=MODELS, precisions=PRECISIONS, status=RUNS_HERE,
    why="pinned venv (torch 2.14.1) with detectron2 %s built from a git archive of commit %s (CPU ops), "
        "trained by that commit's tools/train_net.py; one device; fp16 and tf32: detectron2-cuda"
        % (VERSION, COMMIT[:12]),
    figures="CommonMetricPrinter's lines (every 20th iteration and the last): the mean step time since its "
            "IterationTimer's 3rd iteration, data time the mean of the last 20 waits for the batch",
    command=command, settings=settings, pins=dict(PINS, detectron2=COMMIT), env=ENV, files=files,
    infer=infer, infer_models=MODELS, infer_precisions=PRECISIONS, infer_settings=infer_settings,
    infer_why="detectron2_infer.py: its preprocess_image, backbone, proposal generator and heads in eval mode, "
              "then detector_postprocess; fp16 and tf32: detectron2-cuda",
    # the torchvision image (the trainer's closure) with the detectron2 wheel compiled on the host
    images=(ImageRecipe("detectron2", IMAGE_VENV, wheels=True, base_recipe="torchvision", host_wheels=True,
                        build_here=("antlr4-python3-runtime", "fvcore")),)
)
