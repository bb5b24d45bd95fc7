"""The bundled trainer against torchvision and mmdetection, measured by detbench itself.

Nothing here times anything: it writes a scenario from scenarios/rivals-cpu.yaml (the three
frameworks, the chosen models and precisions, one shared weights file per model, the same
generated COCO set, thread count and learning-rate setting for all), runs it with
`detbench run` (a fresh process per trial, the repeats of all cells interleaved), and reads
the cells back from `detbench report --format json`. It prints, per model and precision, each
framework's median images/s and its share of the machine's measured peak (MFU), and the
bundled trainer's ratio to each rival with a 95% bootstrap interval over the repeats.

    python benchmarks/trainer_vs_rivals.py                     # 3 models x fp32/bf16, 5 repeats
    python benchmarks/trainer_vs_rivals.py --models retinanet --precisions fp32 --repeats 3
    python benchmarks/trainer_vs_rivals.py --quick             # one cheap cell: does it run
    python benchmarks/trainer_vs_rivals.py --table-from DIR/results   # the table of a finished run

It needs the torchvision and mmdetection envs (`detbench env build torchvision` and
`detbench env build mmdetection`); a rival whose env is not built is left out with a note.
The target (issue-level, not a test): the trainer at 1.2x each rival, or at 75% of peak (a share
above 100% says the peak was measured low, and meets nothing).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

import yaml

from harness.launch import hostcpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = "detbench-trainer"
RIVALS = ("torchvision", "mmdetection")
TARGET_RATIO = 1.2
TARGET_MFU = 0.75


def detbench(*args, capture=False):
    argv = [sys.executable, "-m", "harness.cli"] + [str(a) for a in args]
    if capture:
        return subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
    subprocess.run(argv, cwd=ROOT, check=True)
    return None


def built_envs():
    """The rival frameworks whose pinned env `detbench env list` shows as built."""
    listing = detbench("env", "list", capture=True)
    return {name for name in RIVALS for line in listing.splitlines()
            if line.split()[:1] == [name] and "not built" not in line}


def scenario(args, work, frameworks):
    """rivals-cpu.yaml with this benchmark's models, precisions, size, window and repeats."""
    with open(os.path.join(ROOT, "scenarios", "rivals-cpu.yaml")) as f:
        doc = yaml.safe_load(f)
    size = [int(v) for v in args.size.split("x")]
    doc["name"] = "trainer-vs-rivals"
    doc["matrix"].update(framework=list(frameworks), model=list(args.models), precision=list(args.precisions))
    axes = {"framework": frameworks, "model": args.models, "precision": args.precisions}
    # only the exclusions that still match a cell (a scenario refuses one that matches none)
    doc["exclude"] = [e for e in doc.get("exclude", [])
                      if all(e[k] in axes[k] for k in axes if k in e)]
    doc.update(input_size=size, warmup=args.warmup, measure=args.measure, repeats=args.repeats)
    data = os.path.join(work, "coco")
    doc["data"] = {"annotations": os.path.join(data, "annotations", "instances_train.json"),
                   "images": os.path.join(data, "images")}
    doc["weights"] = {m: os.path.join(work, "weights", m + ".pt") for m in args.models}
    doc["options"] = {k: v for k, v in doc["options"].items() if k in frameworks}
    return doc, data


def ratio_ci(ours, theirs, resamples=4000, seed=0):
    """Median of ours / median of theirs, and a 95% percentile-bootstrap interval that resamples
    each side's repeats on its own."""
    rng = random.Random(seed)
    point = statistics.median(ours) / statistics.median(theirs)
    draws = sorted(statistics.median(rng.choices(ours, k=len(ours))) /
                   statistics.median(rng.choices(theirs, k=len(theirs))) for _ in range(resamples))
    return point, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def table(doc):
    """The printed table: per model and precision, each framework's figure and our ratios."""
    cells = {(c["model"], c["precision"], c["framework"]): c for c in doc["cells"]
             if c["source"] == "measured" and not c["na"]}
    repeats = {}
    for t in doc["trials"]:
        if t["status"] == "done" and t["throughput"]:
            repeats.setdefault((t["model"], t["precision"], t["framework"]), []).append(t["throughput"])
    lines = ["model         precision framework         images/s (n)  MFU    ours/theirs [95% CI]        target",
             "-" * 104]
    verdicts = []
    for model, precision in sorted({(m, p) for m, p, _ in cells}):
        ours = cells.get((model, precision, OURS))
        for framework in (OURS,) + RIVALS:
            cell = cells.get((model, precision, framework))
            if cell is None:
                continue
            mfu = "%5.1f%%" % (100 * cell["mfu"]) if cell.get("mfu") is not None else "   -  "
            text = "%-13s %-9s %-17s %8.2f (%d)  %s" % (model, precision, framework, cell["throughput"],
                                                       cell["n"], mfu)
            if framework != OURS and ours is not None:
                a = repeats.get((model, precision, OURS), [])
                b = repeats.get((model, precision, framework), [])
                if a and b:
                    r, lo, hi = ratio_ci(a, b)
                    mfu = ours.get("mfu") or 0
                    # a share above 1 is a peak measured low (a busy machine), not a full one
                    met = r >= TARGET_RATIO or TARGET_MFU <= mfu <= 1.0
                    verdicts.append(met)
                    text += "  %.3fx [%.3f, %.3f]   %s" % (r, lo, hi, "met" if met else "not met")
            lines.append(text)
    return "\n".join(lines), verdicts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="retinanet,faster_rcnn,mask_rcnn")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--size", default="320x320")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--measure", type=int, default=8)
    p.add_argument("--images", type=int, default=64, help="images in the generated COCO set")
    p.add_argument("--work", help="folder for the data, weights, scenario and results (default: a temporary one)")
    p.add_argument("--quick", action="store_true", help="RetinaNet fp32 at 128x128, 2 repeats of 2 iterations")
    p.add_argument("--table-from", metavar="RESULTS", help="print the table of a finished run's results folder")
    args = p.parse_args(argv)
    if args.table_from:
        return print_table(args.table_from)
    if args.quick:
        args.models, args.precisions, args.size = "retinanet", "fp32", "128x128"
        args.repeats, args.warmup, args.measure, args.images = 2, 1, 2, 8
    args.models = [m for m in args.models.split(",") if m]
    args.precisions = [x for x in args.precisions.split(",") if x]
    name, flags = hostcpu.cpu()
    if "bf16" in args.precisions and not hostcpu.host_has_gpus() and flags and not hostcpu.has_bf16_kernels(flags):
        print("note: bf16 is left out: this CPU (%s) has no bf16 kernels, only torch's emulation" % name)
        args.precisions = [x for x in args.precisions if x != "bf16"]
    work = args.work or tempfile.mkdtemp(prefix="trainer-vs-rivals-")
    rivals = built_envs()
    for name in RIVALS:
        if name not in rivals:
            print("note: %s is left out: its env is not built (detbench env build %s)" % (name, name))
    doc, data = scenario(args, work, (OURS,) + tuple(n for n in RIVALS if n in rivals))
    if not os.path.exists(doc["data"]["annotations"]):
        detbench("dataset", "make-coco", data, "--images", args.images, "--size", args.size)
    for model, path in doc["weights"].items():
        if not os.path.exists(path):
            detbench("weights", "make", model, "--out", path)
    path = os.path.join(work, "trainer-vs-rivals.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    results = os.path.join(work, "results")
    detbench("run", "--scenario", path, "--results", results)
    return print_table(results)


def print_table(results):
    report = json.loads(detbench("report", "--platform", "local", "--format", "json", "--results", results,
                                 capture=True))
    text, verdicts = table(report)
    print(text)
    print("results: %s; targets met in %d of %d comparisons" % (results, sum(verdicts), len(verdicts)))
    if any((c.get("mfu") or 0) > 1 for c in report["cells"]):
        print("note: a share of peak above 100% means the peak was measured low (a busy machine): "
              "detbench platform peak --refresh on a quiet one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
