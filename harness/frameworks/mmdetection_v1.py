"""mmdetection at the seed's commit cda5fd (PyTorch 1.1, torchvision 0.3.0, mmcv 0.2.x).

Launched as the seed benchmark did (tools/dist_train.sh = torch.distributed.launch over
tools/train.py with --launcher pytorch); fp16 uses the configs/fp16/ variants with
OMP_NUM_THREADS=1 (set it in the scenario env, as the seed did on P2). This era's train.py
takes no config overrides and trains whole epochs, so detbench writes a DERIVED CONFIG into
the trial folder (detbench_mmdet_v1.py): it runs the pinned config's text, then sets
``data.imgs_per_gpu`` (the cell's batch), the training annotations and images (the
scenario's COCO files, else the image's /opt/mmdetection/data/coco), ``model.pretrained``
(None: random weights, or the mounted file options.weights names: nothing is downloaded),
the log interval (LOG_INTERVAL) and a hook that ends every rank (exit 0) right after the
first logged iteration at or after the window's end. The work folder is the trial's.
Records are window means over LOG_INTERVAL iterations. One node only.
"""
from harness.frameworks.base import CONTAINER_ONLY, TRIAL_DIR, Framework, ImageRecipe
from harness.frameworks import initial
from harness.frameworks import settings as normalized

CONFIGS = {"retinanet": "retinanet_r50_fpn_1x.py", "faster_rcnn": "faster_rcnn_r50_fpn_1x.py",
           "mask_rcnn": "mask_rcnn_r50_fpn_1x.py"}
FP16 = {"retinanet": "fp16/retinanet_r50_fpn_fp16_1x.py", "faster_rcnn": "fp16/faster_rcnn_r50_fpn_fp16_1x.py",
        "mask_rcnn": "fp16/mask_rcnn_r50_fpn_fp16_1x.py"}
PINS = {"mmdetection": "cda5fd (seed short hash; full hash required at image build)",
        "torch": "1.1.0", "torchvision": "0.3.0", "mmcv": "0.2.10", "python": "3.6"}
WORKDIR = "/opt/mmdetection"      # where dockerfiles/mmdetection-v1 puts the checkout
LOG_INTERVAL = 10
DERIVED = "detbench_mmdet_v1.py"
OPTIONS = ("weights",)
COCO = WORKDIR + "/data/coco/"   # the configs' data_root, relative to a checkout in the original


def command(ctx):
    files(ctx)      # refusals (nodes, options) surface when the command is built
    world = ctx.gpus * ctx.nodes
    return [ctx.python, "-m", "torch.distributed.launch", "--nproc_per_node=%d" % ctx.gpus,
            WORKDIR + "/tools/train.py", TRIAL_DIR + "/" + DERIVED, "--launcher", "pytorch",
            "--work_dir", TRIAL_DIR + "/work"] + (["--gpus", str(world)] if world == 1 else []) + \
        list(ctx.extra_args)


def stop_iteration(ctx):
    """The first iteration TextLoggerHook prints at or after the window's end."""
    return -(-ctx.iterations // LOG_INTERVAL) * LOG_INTERVAL


def files(ctx):
    initial.options(ctx, OPTIONS)
    initial.one_node(ctx)
    base = WORKDIR + "/configs/" + (FP16 if ctx.precision == "fp16" else CONFIGS)[ctx.model]
    if ctx.data:
        annotations, images = ctx.data["annotations"], ctx.data["images"].rstrip("/") + "/"
    else:
        annotations, images = COCO + "annotations/instances_train2017.json", COCO + "train2017/"
    text = """\
# detbench: derived from mmdetection's %(rel)s for this trial (%(model)s %(precision)s,
# %(gpus)d GPU(s) x %(batch)d images); training ends once iteration %(stop)d is logged.
_base = %(base)r
with open(_base) as _file:
    exec(compile(_file.read(), _base, 'exec'))
del _file

data['imgs_per_gpu'] = %(batch)d
data['train']['ann_file'] = %(annotations)r
data['train']['img_prefix'] = %(images)r
model['pretrained'] = %(pretrained)r
log_config['interval'] = %(interval)d
total_epochs = 1000000      # the hook below ends training, not the epoch count

from mmcv.runner import Hook as _Hook


class DetbenchStopAtWindowEnd(_Hook):
    def __init__(self, stop_at, interval=None):
        self.stop_at = stop_at

    def after_train_iter(self, runner):
        if runner.iter + 1 >= self.stop_at and self.every_n_inner_iters(runner, %(interval)d):
            runner.logger.info('detbench: iteration %%d logged; the measured window is complete, '
                               'stopping', runner.iter + 1)
            raise SystemExit(0)


log_config['hooks'] = list(log_config['hooks']) + [dict(type=DetbenchStopAtWindowEnd, stop_at=%(stop)d)]
del _base, _Hook
""" % dict(rel="configs/" + (FP16 if ctx.precision == "fp16" else CONFIGS)[ctx.model], model=ctx.model,
           precision=ctx.precision, gpus=ctx.gpus, batch=ctx.batch_per_gpu, stop=stop_iteration(ctx),
           base=base, annotations=annotations, images=images, pretrained=initial.weights(ctx),
           interval=LOG_INTERVAL)
    return {DERIVED: text}


def settings(ctx):
    # the seed configs: workers_per_gpu=2, img_scale=(1333, 800), flip_ratio=0.5, frozen_stages=1
    # with frozen BN, rpn_proposal max_num=2000 (this era's key); the batch is the cell's
    return dict(normalized.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=2,
                                  flip=True, rpn_post_nms_train=2000, init=initial.init(ctx)),
                input_size=[800, 1333], data="coco")


FRAMEWORK = Framework(
    name="mmdetection-v1", title="mmdetection (seed)", scraper="mmdet-v1",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=CONTAINER_ONLY,
    why="PyTorch 1.1 + CUDA 9/10 era: dockerfiles/mmdetection-v1 on a GPU host; COCO 2017 mounted",
    figures="window mean over the 10-iteration log interval detbench sets (time includes data)",
    command=command, settings=settings, pins=PINS, scrape_options={"interval": LOG_INTERVAL},
    files=files,
    images=(ImageRecipe("mmdetection-v1", "python3"),)
)
