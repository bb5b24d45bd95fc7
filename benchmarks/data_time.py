"""The bundled trainer's data path: data time on the CPU quickstart, bytes per mask batch, padding.

1. Data time. The quickstart's cells (scenarios/quickstart.yaml: RetinaNet and Faster R-CNN
   R50-FPN, 2 images of 256x256 an iteration, OMP_NUM_THREADS=2, a constant learning rate)
   run on COCO files instead of synthetic images, read by --workers loader processes, as
   the detbench-trainer adapter launches them. Per model: the median iteration and data
   time after --warmup iterations, and the share of iteration time spent waiting for data
   (target: below 5%).
2. Bytes per batch of a Mask R-CNN: what the loader hands the model for each batch of the
   same files, at the quickstart's size and at the R50 configs' 800x1344: images, boxes and
   labels, and the masks as the per-object crops it ships now against the full-canvas
   B x G x H x W masks it shipped before (computed from the batch's shape).
3. Padding: the share of canvas pixels that are padding over two epochs of a set of
   landscape and portrait images, on the fixed canvas, on a per-batch canvas, and on a
   per-batch canvas with aspect-ratio grouping.

    python benchmarks/data_time.py                                  # everything, a few minutes
    python benchmarks/data_time.py --models faster_rcnn --iterations 6 --warmup 2

Exit code 1 when a model's data time is 5% of its iteration time or more.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.convergence import model_list  # noqa: E402
from harness import jsonlog  # noqa: E402
from harness.frameworks.detbench_trainer import CONFIG_DIR, CONFIGS  # noqa: E402
from harness.plan import datasets  # noqa: E402

QUICKSTART = {"size": (256, 256), "batch": 2, "threads": 2, "iterations": 11, "warmup": 3}
TARGET = 0.05


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python benchmarks/data_time.py", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="retinanet,faster_rcnn", help="of %s" % ", ".join(CONFIGS))
    p.add_argument("--workers", type=int, default=2, help="loader processes (the adapter's default: 2)")
    p.add_argument("--iterations", type=int, default=QUICKSTART["iterations"])
    p.add_argument("--warmup", type=int, default=QUICKSTART["warmup"], help="iterations left out of the figures")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    p.add_argument("--images", type=int, default=32, help="images in the generated COCO set")
    p.add_argument("--skip-training", action="store_true", help="only the bytes and padding figures")
    args = p.parse_args(argv)
    args.models = model_list(p, args.models, CONFIGS)
    if args.workers < 1:
        p.error("--workers must be at least 1: the point is the loader processes")
    if args.iterations <= args.warmup:
        p.error("--iterations must exceed --warmup")
    return args


def train_cell(model, ann, images, args):
    """One quickstart cell on COCO files: (ITER records, data summary)."""
    h, w = QUICKSTART["size"]
    sets = {"train.max_iter": args.iterations, "train.precision": args.precision, "train.seed": 0,
            "data.images_per_device": QUICKSTART["batch"], "data.input_size": "%dx%d" % (h, w),
            "data.source": "coco", "data.coco_json": ann, "data.coco_images": images,
            "data.workers": args.workers, "train.schedule": "constant"}
    argv = [sys.executable, "-m", "harness.trainer.train", os.path.join(CONFIG_DIR, CONFIGS[model])]
    for key, value in sets.items():
        argv += ["--set", "%s=%s" % (key, value)]
    env = dict(os.environ, OMP_NUM_THREADS=str(QUICKSTART["threads"]), PYTHONUNBUFFERED="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit("%s: training failed (exit %d): %s" % (model, done.returncode, done.stderr[-2000:]))
    from harness.trainer.engine import SUMMARY_PREFIX
    iters, summary = [], None
    for line in done.stdout.splitlines():
        if line.startswith(jsonlog.ITER_PREFIX):
            iters.append(json.loads(line[len(jsonlog.ITER_PREFIX):]))
        elif line.startswith(SUMMARY_PREFIX):
            summary = json.loads(line[len(SUMMARY_PREFIX):])
    return iters, summary


def data_time(args, ann, images):
    print("data time: quickstart cells (%dx%d, %d images an iteration, %d threads, %s) on COCO files, "
          "%d loader workers, iterations %d-%d" % (*QUICKSTART["size"], QUICKSTART["batch"], QUICKSTART["threads"],
                                                   args.precision, args.workers, args.warmup + 1, args.iterations))
    print("%-12s %12s %12s %10s" % ("model", "iter ms", "data ms", "data/iter"))
    ok = True
    for model in args.models:
        iters, _ = train_cell(model, ann, images, args)
        kept = iters[args.warmup:]
        share = sum(r["data_time_s"] for r in kept) / sum(r["time_s"] for r in kept)
        ok &= share < TARGET
        print("%-12s %12.0f %12.1f %9.2f%%" % (model, 1000 * statistics.median(r["time_s"] for r in kept),
                                              1000 * statistics.median(r["data_time_s"] for r in kept), 100 * share),
              flush=True)
    return ok


def batches(ann, images, size, mask_crop=0, count=8, **data):
    import torch

    from harness.trainer import data as trainer_data
    from harness.trainer.config import DataConfig
    cfg = DataConfig(source="coco", coco_json=str(ann), coco_images=str(images), input_size=size,
                     images_per_device=2, workers=0, mask_crop=mask_crop, **data)
    source = trainer_data.CocoBatches(cfg, 80, True, torch.device("cpu"), 0, 1, seed=0)
    it = iter(source)
    return [next(it) for _ in range(count)], source


def batch_bytes(ann, images):
    print("\nbytes per Mask R-CNN batch (2 images, mean of 8 batches of the same files), KiB")
    print("%-10s %-18s %9s %13s %13s %13s %8s" % ("canvas", "crops", "images", "boxes+labels", "masks before",
                                                  "masks now", "ratio"))
    for size in (QUICKSTART["size"], (800, 1344)):
        for label, limit in (("full resolution", 0), ("mask_crop=128", 128)):
            got, _ = batches(ann, images, size, mask_crop=limit)
            mean = {}
            for imgs, t in got:
                b, g = t["labels"].shape
                parts = {"images": imgs.numel(),      # uint8 in the loader; normalised on the device
                         "boxes": t["boxes"].nbytes + t["labels"].nbytes,
                         "before": b * g * imgs.shape[-2] * imgs.shape[-1],
                         "now": t["mask_crops"].nbytes + t["mask_affine"].nbytes}
                for k, v in parts.items():
                    mean[k] = mean.get(k, 0) + v / len(got) / 1024
            print("%-10s %-18s %9.0f %13.1f %13.0f %13.1f %7.0fx" % (
                "%dx%d" % size, label, mean["images"], mean["boxes"], mean["before"], mean["now"],
                mean["before"] / mean["now"]))


def mixed_set(root, count):
    """A COCO set of landscape (240x320) and portrait (320x240) images, in random order."""
    parts = [datasets.make_coco(root / name, images=count // 2, size=shape, seed=seed)
             for name, shape, seed in (("land", (240, 320), 1), ("port", (320, 240), 2))]
    doc = {"images": [], "annotations": [], "categories": None}
    for k, (ann, images) in enumerate(parts):
        part = json.loads(Path(ann).read_text())
        doc["categories"] = part["categories"]
        for img in part["images"]:
            img["file_name"] = os.path.relpath(Path(images) / img["file_name"], root)
            img["id"] += 100000 * k
            doc["images"].append(img)
        for a in part["annotations"]:
            a["image_id"] += 100000 * k
            a["id"] += 100000 * k
            doc["annotations"].append(a)
    path = root / "mixed.json"
    path.write_text(json.dumps(doc))
    return path, root


def padding(root, count):
    ann, images = mixed_set(root / "mixed", count)
    print("\npadding: %d landscape and portrait images (240x320, 320x240) fitted into 320x320, "
          "2 a batch, two epochs" % count)
    for label, data in (("fixed canvas", {}), ("per-batch canvas", {"canvas": "batch"}),
                        ("per-batch canvas, grouped", {"canvas": "batch", "aspect_grouping": True})):
        _, source = batches(ann, images, (320, 320), count=count, **data)
        content, canvas = source.pixels
        print("  %-26s %6.1f%% of canvas pixels are padding" % (label, 100 * (1 - content / canvas)))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print("(a shared machine: timings move with the load of other jobs)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ann, images = datasets.make_coco(root / "quick", images=args.images, size=QUICKSTART["size"])
        ok = True if args.skip_training else data_time(args, ann, images)
        batch_bytes(ann, images)
        padding(root, args.images)
    if not args.skip_training:
        print("data_time: %s (data time under %d%% of iteration time)" % ("PASS" if ok else "FAIL", 100 * TARGET))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
