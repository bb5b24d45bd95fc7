"""The original MXNet SimpleDet (simpledet@2d8144 + mxnext@896aa1 + mxnet@24cce9e, the seed's short hashes).

simpledet@2d8144 is 2d8144c19c620e3c59b2340f6bff78b5804d3af7 (2019-08-13, "add nnvm rpn target
support for maskrcnn (#197)") and mxnext@896aa1 is 896aa13bd981956f2aceb96e7f3238d0ea59ef9a
(2019-08-06, "efficientnet"); mxnet@24cce9e stays the seed's short hash (the image build needs its
full hash as MXNET_COMMIT).

The seed's launch: ``python detection_train.py --config config/<model>.py``; the GPU list,
batch size and fp16 live inside the config files (the seed ran faster_r50v1_fpn_accel_1x
for Faster R-CNN), and training runs whole epochs. So detbench writes a DERIVED CONFIG into
the trial folder (detbench_simpledet.py): at import it reads the pinned config, sets
``batch_image`` (images per GPU), ``gpus`` (the cell's count), ``fp16`` and
``from_scratch`` (random weights; or ``pretrain.prefix``/``epoch`` of the mounted MXNet
checkpoint options.weights names, PREFIX-EPOCH.params), refusing to start unless each line
it edits appears exactly once, and adds a batch-end callback that ends the process (exit 0)
once the Speedometer has printed the first record at or after the last window iteration.
harness/drivers/simpledet_launch.py starts detection_train.py on it in the trial folder.
The Speedometer prints images/s of the last `frequent` batches (configs: 10), so records
are THROUGHPUT over 10 iterations. One node only (no DMLC launcher here).
"""
import re
from pathlib import Path

from harness.frameworks.base import CONTAINER_ONLY, TRIAL_DIR, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

CONFIGS = {"retinanet": "config/retina_r50v1_fpn_1x.py",
           "faster_rcnn": "config/faster_r50v1_fpn_accel_1x.py",
           "mask_rcnn": "config/mask_r50v1_fpn_1x.py"}
COMMIT = "2d8144c19c620e3c59b2340f6bff78b5804d3af7"   # the seed's 2d8144 (2019-08-13)
MXNEXT_COMMIT = "896aa13bd981956f2aceb96e7f3238d0ea59ef9a"   # the seed's 896aa1 (2019-08-06)
PINS = {"simpledet": COMMIT, "mxnext": MXNEXT_COMMIT,
        "mxnet": "24cce9e (seed short hash; built from source with SimpleDet's operators)",
        "cocoapi": "7838ad5e11d01b0b62fca430835030d9a8175ac3 (RogerChern/cocoapi: maskApi.cc + pycocotools)",
        "python": "3.6.8 (built in the image: runner.py needs 3.6; SimpleDet's INSTALL.md asks for >= 3.5)"}
WORKDIR = "/opt/simpledet"
FREQUENT = 10
DERIVED = "detbench_simpledet.py"
LAUNCH = Path(__file__).resolve().parents[1] / "drivers" / "simpledet_launch.py"
OPTIONS = ("weights",)
CHECKPOINT = re.compile(r"^(.+)-(\d{4})\.params$")


def command(ctx):
    files(ctx)      # refusals (nodes, options) surface when the command is built
    return [ctx.python, str(LAUNCH), "--trial-dir", TRIAL_DIR, "--config", DERIVED,
            "--simpledet", WORKDIR] + list(ctx.extra_args)


def _edits(ctx):
    """(line pattern, replacement) pairs applied to the pinned config, each exactly once."""
    edits = [(r"^(\s+)batch_image = 2 if is_train else 1$", r"\g<1>batch_image = %d if is_train else 1"
              % ctx.batch_per_gpu),
             (r"^(\s+)gpus\s*= \[0, 1, 2, 3, 4, 5, 6, 7\]$", r"\g<1>gpus = %r" % list(range(ctx.gpus))),
             (r"^(\s+)fp16 = False$", r"\g<1>fp16 = %s" % (ctx.precision == "fp16"))]
    weights = initial.weights(ctx)
    if weights is None:
        edits.append((r"^(\s+)from_scratch = False$", r"\g<1>from_scratch = True"))
    else:
        m = CHECKPOINT.match(weights)
        if not m:
            raise ValueError("simpledet-mxnet: options.weights is an MXNet checkpoint PREFIX-EPOCH.params "
                             "(e.g. /weights/resnet-v1-50-0000.params), got %r" % weights)
        edits += [(r'^(\s+)prefix = "pretrain_model/resnet-v1-50"$', r"\g<1>prefix = %r" % m.group(1)),
                  (r"^(\s+)epoch = 0$", r"\g<1>epoch = %d" % int(m.group(2)))]
    return edits


def stop_iteration(ctx):
    """The first iteration the Speedometer logs at or after the window's end (it logs batch B,
    iteration B + 1, when B is a positive multiple of FREQUENT)."""
    batch = max(ctx.iterations - 1, FREQUENT)
    return -(-batch // FREQUENT) * FREQUENT + 1


def files(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)
    base = WORKDIR + "/" + CONFIGS[ctx.model]
    lines = ["# detbench: derived from SimpleDet's %s for this trial (%s %s, %d GPU(s) x %d images)."
             % (CONFIGS[ctx.model], ctx.model, ctx.precision, ctx.gpus, ctx.batch_per_gpu),
             "# It edits the pinned config's lines below, then ends training once iteration %d is logged."
             % stop_iteration(ctx),
             "import logging as _logging", "import os as _os", "import re as _re", "import sys as _sys", "",
             "_BASE = %r" % base, "_EDITS = ["]
    lines += ["    (%r, %r)," % edit for edit in _edits(ctx)]
    lines += ["]", "_STOP_AT = %d" % stop_iteration(ctx), "_FREQUENT = %d" % FREQUENT, "",
              "with open(_BASE) as _file:", "    _source = _file.read()",
              "for _pattern, _new in _EDITS:",
              "    _source, _count = _re.subn(_pattern, _new, _source, flags=_re.M)",
              "    if _count != 1:",
              "        _sys.exit('detbench: %s: expected one line matching %r, found %d' % (_BASE, _pattern, _count))",
              "exec(compile(_source, _BASE, 'exec'))",
              "_pinned_get_config = get_config", "", "",
              "class _StopAtWindowEnd(object):",
              "    def __init__(self):",
              "        self.done = 0", "",
              "    def __call__(self, param):",
              "        self.done += 1",
              "        if self.done >= _STOP_AT and param.nbatch > 0 and param.nbatch % _FREQUENT == 0:",
              "            _logging.info('detbench: iteration %d logged; the measured window is complete, stopping'",
              "                          % self.done)",
              "            _logging.shutdown()",
              "            _sys.stdout.flush()",
              "            _sys.stderr.flush()",
              "            _os._exit(0)", "", "",
              "def get_config(is_train):",
              "    parts = _pinned_get_config(is_train)",
              "    if is_train:",
              "        model = parts[6]",
              "        model.batch_end_callbacks = list(getattr(model, 'batch_end_callbacks', None) or []) + [",
              "            _StopAtWindowEnd()]",
              "    return parts", ""]
    return {DERIVED: "\n".join(lines)}


def settings(ctx):
    # configs: 800x1333, frozen stem + stage 1 and fixed BN (r50v1 "fixbn"), 8 loader threads;
    # proposals 2000 per image after NMS in training
    return dict(normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=8,
                                  flip=True, rpn_post_nms_train=2000, init=initial.init(ctx)),
                input_size=[800, 1333], data="coco")


FRAMEWORK = Framework(
    name="simpledet-mxnet", title="simpledet (MXNet, seed)", scraper="simpledet-mxnet",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=CONTAINER_ONLY,
    why="MXNet 1.x built from source with CUDA + SimpleDet operators: dockerfiles/simpledet-mxnet on a GPU host",
    figures="images/s over the last 10 batches (Speedometer); no iteration or data time",
    command=command, settings=settings, pins=PINS, scrape_options={"frequent": FREQUENT}, files=files,
    images=(ImageRecipe("simpledet-mxnet", "python3"),)
)
