"""The original MXNet SimpleDet (simpledet@2d8144 + mxnext@896aa1 + mxnet@24cce9e).

The seed's launch: ``python detection_train.py --config config/<model>.py``; the GPU
list, batch size, fp16 and nnvm_rpn_target live inside the config files (the seed ran
faster_r50v1_fpn_accel_1x for Faster R-CNN). The Speedometer prints images/s of the
last `frequent` batches (configs: 10), so records are THROUGHPUT over 10 iterations;
the trial ends at the scenario's timeout or the config's epoch count.
"""
from harness.frameworks.base import CONTAINER_ONLY, Framework
from harness.rivals import settings as rival_settings

CONFIGS = {"retinanet": "config/retina_r50v1_fpn_1x.py",
           "faster_rcnn": "config/faster_r50v1_fpn_accel_1x.py",
           "mask_rcnn": "config/mask_r50v1_fpn_1x.py"}
PINS = {"simpledet": "2d8144 (seed short hash)", "mxnext": "896aa1 (seed short hash)",
        "mxnet": "24cce9e (seed short hash; built from source with SimpleDet's operators)",
        "python": "3.6"}
WORKDIR = "/opt/simpledet"
FREQUENT = 10


def command(ctx):
    return [ctx.python, WORKDIR + "/detection_train.py", "--config", WORKDIR + "/" + CONFIGS[ctx.model]] + \
        list(ctx.extra_args)


def settings(ctx):
    # configs: 2 images per GPU, 800x1333, frozen stem + stage 1 and fixed BN (r50v1 "fixbn"),
    # 8 loader threads; proposals 2000 per image after NMS in training
    return dict(rival_settings.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=8,
                                      flip=True, rpn_post_nms_train=2000),
                input_size=[800, 1333], data="coco")


FRAMEWORK = Framework(
    name="simpledet-mxnet", title="simpledet (MXNet, seed)", scraper="simpledet-mxnet",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=CONTAINER_ONLY,
    why="MXNet 1.x built from source with CUDA + SimpleDet operators: dockerfiles/simpledet-mxnet on a GPU host",
    figures="images/s over the last 10 batches (Speedometer); no iteration or data time",
    command=command, settings=settings, pins=PINS, scrape_options={"frequent": FREQUENT})
