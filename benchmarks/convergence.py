"""Convergence of the bundled trainer: the tiny configs learn a learnable generated set.

For each of RetinaNet, Faster R-CNN and Mask R-CNN (harness/trainer/configs/*_tiny.py, with
the training settings of SETTINGS below) the trainer runs on the train split of
`detbench dataset make-coco --learnable` and writes a checkpoint every --eval-every
iterations; each checkpoint is then scored on the held-out val split by
`python -m harness.trainer.evaluate` (pycocotools' COCOeval). It prints, per model, the
curve (iteration, training wall seconds so far, bbox AP50, segm AP50 for Mask R-CNN) and a
PASS/FAIL line against the targets: final bbox AP50 >= 0.5 (and segm AP50 >= 0.5) with the
training done within --budget seconds of wall time.

    python -m benchmarks.convergence                    # all three, full schedules
    python -m benchmarks.convergence --models faster --quick

--quick trains a few hundred iterations (200 to 400) on a smaller set and asks only for an AP50 clearly
above chance (QUICK_TARGET): what the test suite runs. Training uses --threads intra-op
threads (OMP_NUM_THREADS, default 1) and one data-loader worker process, so two cores; on a
shared two-core machine two threads oversubscribe it and run slower. Exit code 1 when a
target is missed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.plan import learnable  # noqa: E402

CONFIGS = {"retina": "retina_tiny.py", "faster": "faster_tiny.py", "mask": "mask_tiny.py"}
TARGET = 0.5
QUICK_TARGET = 0.3
SIZE = (128, 128)
# every model: trainable stem (random weights, nothing to keep frozen), group norm (a small
# from-scratch backbone trains steadily with it), 4 images a batch, 1x step decay
COMMON = ["model.frozen_stages=0", "model.norm=gn", "data.images_per_device=4", "data.workers=1",
          "train.lr_reference_batch=16", "train.warmup_iters=100"]
SETTINGS = {
    "retina": {"iterations": 800, "quick": 400, "sets": ["train.lr=0.02"]},
    "faster": {"iterations": 800, "quick": 200, "sets": ["train.lr=0.08"]},
    "mask": {"iterations": 800, "quick": 200, "sets": ["train.lr=0.08"]},
}
FULL_DATA = {"images": 600, "val_images": 100}
QUICK_DATA = {"images": 200, "val_images": 50}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.convergence", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="retina,faster,mask")
    p.add_argument("--quick", action="store_true", help="a few hundred iterations, target: above chance")
    p.add_argument("--iterations", type=int, help="override every model's iteration count")
    p.add_argument("--eval-every", type=int,
                   help="checkpoint and score every N iterations (default: 4 points; --quick: the end)")
    p.add_argument("--budget", type=float, default=600.0, help="training wall seconds allowed per model")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (OMP_NUM_THREADS) of training")
    p.add_argument("--seed", type=int, default=0, help="of the data set and of training")
    p.add_argument("--work", help="folder for the data set and checkpoints (default: a temporary one)")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = p.parse_args(argv)
    args.models = model_list(p, args.models, CONFIGS)
    return args


def model_list(parser, text, known):
    """The models of a comma-separated --models value; a parser error names an unknown one."""
    models = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in models if m not in known]
    if unknown:
        parser.error("unknown model %s (known: %s)" % (unknown[0], ", ".join(known)))
    return models


def environment(threads):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def model_sets(model):
    """The model.* settings training used: evaluation builds the same network."""
    return [s for s in COMMON + SETTINGS[model]["sets"] if s.startswith("model.")]


def train(model, data, iterations, every, folder, seed, env):
    """Run the trainer; returns {iteration: wall seconds since start when its checkpoint was written}."""
    (ann, images), _ = data
    config = os.path.join(ROOT, "harness", "trainer", "configs", CONFIGS[model])
    sets = COMMON + SETTINGS[model]["sets"] + [
        "data.source=coco", "data.coco_json=%s" % ann, "data.coco_images=%s" % images,
        "train.max_iter=%d" % iterations, "train.checkpoint_every=%d" % every,
        "train.checkpoint_dir=%s" % folder, "train.seed=%d" % seed]
    argv = [sys.executable, "-m", "harness.trainer.train", config]
    for s in sets:
        argv += ["--set", s]
    start = time.perf_counter()
    written, tail = {}, []
    with subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc, open(folder + ".log", "w", encoding="utf-8", buffering=1) as log:
        for line in proc.stdout:
            log.write(line)
            tail = (tail + [line.rstrip()])[-20:]
            m = re.match(r"checkpoint (.*iter_(\d+)\.pth)$", line.strip())
            if m:
                written[int(m.group(2))] = (time.perf_counter() - start, m.group(1))
    if proc.returncode:
        raise SystemExit("%s: training failed (exit %d):\n%s" % (model, proc.returncode, "\n".join(tail)))
    return written


def evaluate(model, data, weights, env):
    _, (ann, images) = data
    config = os.path.join(ROOT, "harness", "trainer", "configs", CONFIGS[model])
    argv = [sys.executable, "-m", "harness.trainer.evaluate", config, "--weights", weights, "--data", ann, images]
    for s in model_sets(model):
        argv += ["--set", s]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("%s: evaluation of %s failed (exit %d): %s" % (model, weights, out.returncode,
                                                                        out.stderr.strip()))
    return json.loads(next(line for line in out.stdout.splitlines() if line.startswith("{")))


def run_model(model, data, args, work, env):
    iterations = args.iterations or SETTINGS[model]["quick" if args.quick else "iterations"]
    every = args.eval_every or (iterations if args.quick else max(1, iterations // 4))
    folder = os.path.join(work, "checkpoints-" + model)
    written = train(model, data, iterations, every, folder, args.seed, env)
    curve = []
    for iteration in sorted(written):
        seconds, path = written[iteration]
        figures = evaluate(model, data, path, env)
        point = {"iteration": iteration, "train_seconds": round(seconds, 1),
                 "bbox_AP50": figures["bbox"]["AP50"], "bbox_AP": figures["bbox"]["AP"]}
        if "segm" in figures:
            point.update(segm_AP50=figures["segm"]["AP50"], segm_AP=figures["segm"]["AP"])
        curve.append(point)
        print("  %-6s iter %5d  train %7.1f s  bbox AP50 %.3f  AP %.3f%s" % (
            model, iteration, seconds, point["bbox_AP50"], point["bbox_AP"],
            "  segm AP50 %.3f  AP %.3f" % (point["segm_AP50"], point["segm_AP"]) if "segm" in figures else ""),
            flush=True)
    return curve


def verdict(model, curve, target, budget):
    last = curve[-1]
    reached = [last["bbox_AP50"]] + ([last["segm_AP50"]] if "segm_AP50" in last else [])
    ok = min(reached) >= target and last["train_seconds"] <= budget
    return ok, "%s: %s (AP50 %s, target %.2f; %.0f s of training, budget %.0f s)" % (
        model, "PASS" if ok else "FAIL", "/".join("%.3f" % v for v in reached), target,
        last["train_seconds"], budget)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = environment(args.threads)
    target = QUICK_TARGET if args.quick else TARGET
    with tempfile.TemporaryDirectory(prefix="detbench-convergence-") as tmp:
        work = args.work or tmp
        sizes = QUICK_DATA if args.quick else FULL_DATA
        data = learnable.make_learnable(os.path.join(work, "data"), size=SIZE, seed=args.seed, **sizes)
        print("data: %d train and %d val images of %dx%d, %d classes; %d threads" % (
            sizes["images"], sizes["val_images"], SIZE[0], SIZE[1], len(learnable.CLASSES), args.threads),
            flush=True)
        results, status = {}, 0
        for model in args.models:
            curve = run_model(model, data, args, work, env)
            ok, line = verdict(model, curve, target, args.budget)
            print(line, flush=True)
            results[model] = {"curve": curve, "pass": ok}
            status |= not ok
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"quick": args.quick, "target": target, "threads": args.threads, "models": results}, fh,
                      indent=1)
    print("convergence: %s" % ("PASS" if not status else "FAIL"), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
