"""mmdetection at the seed's commit cda5fd (PyTorch 1.1, torchvision 0.3.0, mmcv 0.2.x).

Launched exactly as the seed benchmark did (tools/dist_train.sh = torch.distributed.launch
over tools/train.py with --launcher pytorch); fp16 uses the configs/fp16/ variants with
OMP_NUM_THREADS=1 (set it in the scenario env, as the seed did on P2). This era's train.py
takes no config overrides, so the log interval stays the configs' 50 and a trial runs
whole epochs until the scenario's timeout: records are window means over 50 iterations.
"""
from harness.frameworks.base import CONTAINER_ONLY, Framework
from harness.rivals import settings as rival_settings

CONFIGS = {"retinanet": "retinanet_r50_fpn_1x.py", "faster_rcnn": "faster_rcnn_r50_fpn_1x.py",
           "mask_rcnn": "mask_rcnn_r50_fpn_1x.py"}
FP16 = {"retinanet": "fp16/retinanet_r50_fpn_fp16_1x.py", "faster_rcnn": "fp16/faster_rcnn_r50_fpn_fp16_1x.py",
        "mask_rcnn": "fp16/mask_rcnn_r50_fpn_fp16_1x.py"}
PINS = {"mmdetection": "cda5fd (seed short hash; full hash required at image build)",
        "torch": "1.1.0", "torchvision": "0.3.0", "mmcv": "0.2.10", "python": "3.6"}
WORKDIR = "/opt/mmdetection"      # where dockerfiles/mmdetection-v1 puts the checkout
LOG_INTERVAL = 50


def command(ctx):
    config = "configs/" + (FP16 if ctx.precision == "fp16" else CONFIGS)[ctx.model]
    world = ctx.gpus * ctx.nodes
    return [ctx.python, "-m", "torch.distributed.launch", "--nproc_per_node=%d" % ctx.gpus,
            WORKDIR + "/tools/train.py", WORKDIR + "/" + config, "--launcher", "pytorch"] + (
        ["--gpus", str(world)] if world == 1 else []) + list(ctx.extra_args)


def settings(ctx):
    # the seed configs: imgs_per_gpu=2, workers_per_gpu=2, img_scale=(1333, 800), flip_ratio=0.5,
    # frozen_stages=1 with frozen BN, rpn_proposal max_num=2000 (this era's key)
    return dict(rival_settings.common(ctx, frozen_stages=1, norm="frozen_bn", loader_workers=2,
                                      flip=True, rpn_post_nms_train=2000),
                input_size=[800, 1333], data="coco")


FRAMEWORK = Framework(
    name="mmdetection-v1", title="mmdetection (seed)", scraper="mmdet-v1",
    models=frozenset(CONFIGS), precisions=frozenset({"fp32", "fp16"}), status=CONTAINER_ONLY,
    why="PyTorch 1.1 + CUDA 9/10 era: dockerfiles/mmdetection-v1 on a GPU host; COCO 2017 mounted",
    figures="window mean over the config's 50-iteration log interval (time includes data)",
    command=command, settings=settings, pins=PINS, scrape_options={"interval": LOG_INTERVAL})
