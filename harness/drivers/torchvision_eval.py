"""Write one torchvision checkpoint's detections on a val split in COCO's result format.

    python torchvision_eval.py --model M --depth D --checkpoint FILE --data ANN --images DIR \
        --input-size HxW --out FILE

Runs in the torchvision framework's pinned env (torch, torchvision, pillow, pycocotools).
The model is built as torchvision_driver.py trains it, loaded from a checkpoint that driver's
``--checkpoint-every`` wrote, and run in eval mode with torchvision's own post-processing
(score threshold 0.05, per-class NMS 0.5, 100 detections per image). Every image of the
annotation file is read as training reads it (resized to the input size); boxes (and masks,
thresholded at 0.5 and written as uncompressed RLE, which the shared scoring compresses) are
mapped back to the image's own size. Scoring is not done here: every framework's file goes
through the one COCOeval (harness/trainer/cocometrics.py). Exit codes: 0 done, 2 bad input.
"""
import os
import sys

import torch

try:
    from harness.drivers import common, torchvision_driver
except ImportError:                     # run as a script in the framework's pinned env
    import common
    import torchvision_driver


def parse_args(argv=None):
    return common.dump_parser(__doc__.splitlines()[0], torchvision_driver.MODELS, (50, 18)).parse_args(argv)


def rle(mask):
    """Uncompressed COCO RLE of a 2-D bool tensor: run lengths in column-major order, zeros first."""
    flat = mask.t().reshape(-1).to(torch.int8)
    if flat.numel() == 0:
        return {"size": list(mask.shape), "counts": []}
    change = torch.nonzero(flat[1:] != flat[:-1]).flatten() + 1
    edges = torch.cat([torch.tensor([0]), change, torch.tensor([flat.numel()])])
    counts = (edges[1:] - edges[:-1]).tolist()
    if int(flat[0]) == 1:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": counts}


def load_image(path, height, width):
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        original = (im.height, im.width)
        im = im.resize((width, height))
        img = torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8)
    return img.view(height, width, 3).permute(2, 0, 1).float().div_(255), original


def main(argv=None):
    args = parse_args(argv)
    height, width = (int(v) for v in args.input_size.lower().split("x"))
    read = common.read_dump_inputs(
        args, lambda state: isinstance(state, dict) and state.get("format") == "detbench-torchvision-checkpoint")
    if read is None:
        return 2
    state, doc = read
    train_args = torchvision_driver.parse_args(["--model", args.model, "--iterations", "1", "--device", "cpu",
                                                "--depth", str(args.depth), "--trainable-layers", "5"])
    model = torchvision_driver.build_model(train_args, height, width)
    model.load_state_dict(state["model"])
    model.eval()
    heads = model if args.model == "retinanet" else model.roi_heads
    heads.score_thresh = args.score_threshold     # torchvision's default is the shared 0.05
    cat_ids = sorted(int(c["id"]) for c in doc["categories"])
    images = sorted(doc["images"], key=lambda im: im["id"])
    out = []
    for start in range(0, len(images), args.batch_size):
        chunk = images[start:start + args.batch_size]
        loaded = [load_image(os.path.join(args.images, im["file_name"]), height, width) for im in chunk]
        with torch.inference_mode():
            results = model([img for img, _ in loaded])
        for info, (_, (h0, w0)), res in zip(chunk, loaded, results):
            sx, sy = w0 / width, h0 / height
            boxes = res["boxes"].clone()
            boxes[:, 0::2] = (boxes[:, 0::2] * sx).clamp(0, w0)
            boxes[:, 1::2] = (boxes[:, 1::2] * sy).clamp(0, h0)
            masks = None
            if "masks" in res and len(boxes):
                masks = torch.nn.functional.interpolate(res["masks"], size=(h0, w0), mode="bilinear",
                                                        align_corners=False)[:, 0] >= 0.5
            for k, (box, score, label) in enumerate(zip(boxes.tolist(), res["scores"].tolist(),
                                                        res["labels"].tolist())):
                if not 1 <= label <= len(cat_ids):
                    continue        # a class the val split has no category for: it cannot be right
                out.append(common.coco_detection(info["id"], cat_ids[label - 1], box, score,
                                                 None if masks is None else rle(masks[k])))
    common.write_detections(args.out, out, len(images))
    return 0


if __name__ == "__main__":
    sys.exit(main())
