"""The closed vocabularies scenarios draw from: models and precisions."""

# scenario name -> row title used in the tables (the seed's wording)
MODELS = {
    "retinanet": "RetinaNet",
    "faster_rcnn": "Faster R-CNN w/ FPN",
    "mask_rcnn": "Mask R-CNN w/ FPN",
    "efficientdet_d0": "EfficientDet-D0",
}

# the models with a second stage: an RPN's proposals, sampled RoIs and a box head (and a mask head)
TWO_STAGE = ("faster_rcnn", "mask_rcnn")

# scenario name -> table title part
PRECISIONS = {
    "fp32": "FP32",
    "tf32": "TF32",
    "fp16": "FP16",
    "bf16": "BF16",
}


def model_title(name: str) -> str:
    return MODELS.get(name, name)


def precision_title(name: str) -> str:
    return PRECISIONS.get(name, name.upper())
