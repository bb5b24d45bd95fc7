"""Write one detectron2 checkpoint's detections on a val split in COCO's result format.

    python detectron2_eval.py --model M --depth D --checkpoint FILE --data ANN --images DIR \
        --input-size HxW --out FILE

Runs in the detectron2 framework's pinned env. The model is built from the config train_net.py
trained it with (detectron2_launch.py: the same depth and heads), loaded from a checkpoint its
DetectionCheckpointer wrote (the model, optimizer, scheduler and iteration), and run in eval mode
through detectron2's own inference (the model's forward with each image's own height and width, so
detector_postprocess rescales boxes and pastes masks at 0.5) with the test-time settings every
framework's dump shares: score threshold 0.05, per-class NMS at 0.5, 100 detections per image, RPN
1000 proposals per level before NMS at 0.7 and 1000 kept, RetinaNet's best 1000 per level. Every
image is read as its DefaultPredictor reads one: RGB, ResizeShortestEdge to the input size's
shorter side, the longer at most its longer side (as training resized it). Class c is the val
split's c-th category by id, as its COCO loader numbers them. Scoring is not done here: every
framework's file goes through the one COCOeval (harness/trainer/cocometrics.py). Exit codes: 0
done, 2 bad input.
"""
import os
import sys

import torch

try:
    from harness.drivers import common, detectron2_infer, detectron2_launch, torchvision_eval
except ImportError:                     # run as a script in the framework's pinned env
    import common
    import detectron2_infer
    import detectron2_launch
    import torchvision_eval


def parse_args(argv=None):
    return common.dump_parser(__doc__.splitlines()[0], detectron2_launch.MODELS, (50, 18)).parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    # the checkpoint is DetectionCheckpointer's (the model's tensors, the optimizer's, the scheduler's
    # state and the iteration), of the trial's own run
    read = common.read_dump_inputs(
        args, lambda state: isinstance(state, dict) and isinstance(state.get("model"), dict) and "iteration" in state,
        weights_only=False)
    if read is None:
        return 2
    state, doc = read
    train = detectron2_launch.parse_args(["--model", args.model, "--iterations", "1", "--depth", str(args.depth),
                                          "--freeze-at", "0", "--input-size", args.input_size])
    cfg = detectron2_infer.test_time(detectron2_launch.build_cfg(train), args.model,
                                     args.score_threshold, common.DUMP_NMS_THRESHOLD, common.DUMP_DETECTIONS)
    model = detectron2_launch.build_model(cfg)
    model.load_state_dict(state["model"])
    model.eval()
    from detectron2.data import transforms as T
    from detectron2.data.detection_utils import read_image
    resize = T.ResizeShortestEdge(min(height, width), max(height, width))
    cat_ids = sorted(int(c["id"]) for c in doc["categories"])
    images = sorted(doc["images"], key=lambda im: im["id"])
    out = []
    for start in range(0, len(images), args.batch_size):
        chunk = images[start:start + args.batch_size]
        inputs = []
        for im in chunk:
            img = read_image(os.path.join(args.images, im["file_name"]), format="RGB")
            resized = resize.get_transform(img).apply_image(img)
            inputs.append({"image": torch.as_tensor(resized.transpose(2, 0, 1).astype("float32")),
                           "height": img.shape[0], "width": img.shape[1]})
        with torch.inference_mode():
            results = model(inputs)
        for info, res in zip(chunk, results):
            inst = res["instances"].to("cpu")
            masks = inst.pred_masks if inst.has("pred_masks") else None
            for k, (box, score, c) in enumerate(zip(inst.pred_boxes.tensor.tolist(), inst.scores.tolist(),
                                                    inst.pred_classes.tolist())):
                if not 0 <= c < len(cat_ids):
                    continue        # a class the val split has no category for: it cannot be right
                out.append(common.coco_detection(info["id"], cat_ids[c], box, score,
                                                 None if masks is None else torchvision_eval.rle(masks[k])))
    common.write_detections(args.out, out, len(images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
