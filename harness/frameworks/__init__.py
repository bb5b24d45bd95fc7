"""Framework adapters, one module each, listed explicitly."""
from harness.vocab import names
from harness.errors import UserError
from harness.frameworks import calibrate, detbench_trainer
from harness.frameworks import (detectron2, detectron2_cuda, effdet, maskrcnn_benchmark, mmdetection, mmdetection_v1,
                                nvidia_efficientdet_tf2, simpledet_mxnet)
from harness.frameworks import torchvision as torchvision_fw
from harness.frameworks import detectron, tensorpack

FRAMEWORKS = {
    "calibrate": calibrate.FRAMEWORK,
    "detbench-trainer": detbench_trainer.FRAMEWORK,
    "torchvision": torchvision_fw.FRAMEWORK,
    "mmdetection": mmdetection.FRAMEWORK,
    "detectron2": detectron2.FRAMEWORK,
    "detectron2-cuda": detectron2_cuda.FRAMEWORK,
    "effdet": effdet.FRAMEWORK,
    "nvidia-efficientdet-tf2": nvidia_efficientdet_tf2.FRAMEWORK,
    "mmdetection-v1": mmdetection_v1.FRAMEWORK,
    "maskrcnn-benchmark": maskrcnn_benchmark.FRAMEWORK,
    "simpledet-mxnet": simpledet_mxnet.FRAMEWORK,
    "detectron": detectron.FRAMEWORK,
    "tensorpack": tensorpack.FRAMEWORK,
}


def get(name):
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError("unknown framework %r (known: %s)%s" % (
            name, ", ".join(sorted(FRAMEWORKS)), names.hint(name))) from None
