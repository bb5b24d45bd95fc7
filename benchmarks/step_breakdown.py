"""What the step breakdown costs, and whether it adds up: each framework's speed with the hooks of
harness/drivers/breakdown.py on and off, measured by detbench itself.

It writes one scenario per setting (the same frameworks, model, size, data and window; only
`breakdown:` differs), and runs them in alternating rounds, one repeat of every cell per run, the
two settings' order within a round drawn from --seed, so drift on the machine falls on both alike.
Per framework it prints both settings' median images/s, the overhead (1 - on/off) with a 95%
bootstrap interval over the rounds, and from the runs with the hooks on the largest gap between the
hooks' own step and the measured one, and each cell whose breakdown could not attach, misses the
step by more than 3%, or has a phase with no time (the report's lines).

    python benchmarks/step_breakdown.py                      # the trainer (and torchvision where built), tiny
    python benchmarks/step_breakdown.py --frameworks detbench-trainer,torchvision,detectron2 \\
        --model mask_rcnn --size 512x512 --rounds 5 --measure 8

Exit status 2 for a refusal (an unknown framework, a rival without its env, bad arguments).
"""
import argparse
import os
import random
import statistics
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.trainer_vs_rivals import (  # noqa: E402
    OURS, RIVALS, Refusal, built_envs, detbench, parse_size, ratio_ci)

SETTINGS = ("off", "on")


def scenario(frameworks, model, size, warmup, measure, data, breakdown):
    """One setting's scenario: every framework on the same generated COCO set, one repeat."""
    return {
        "name": "step-breakdown-%s" % ("on" if breakdown else "off"),
        "description": "the step breakdown's hooks %s" % ("on" if breakdown else "off"),
        "matrix": {"framework": list(frameworks), "model": [model], "precision": ["fp32"]},
        "batch_per_gpu": 2,
        "input_size": parse_size(size),
        "data": {"annotations": os.path.join(data, "annotations", "instances_train.json"),
                 "images": os.path.join(data, "images")},
        "warmup": warmup,
        "measure": measure,
        "repeats": 1,
        "timeout_s": 3600,
        "breakdown": breakdown,
        "env": {"OMP_NUM_THREADS": "2"},
        "options": {fw: ({"data.workers": 0} if fw == OURS else {"workers": 0}) for fw in frameworks},
    }


def rounds_order(rounds, seed):
    """[(round, setting)] in the order they run: each round both settings, in a seeded order."""
    rng = random.Random(seed)
    out = []
    for r in range(1, rounds + 1):
        pair = list(SETTINGS)
        rng.shuffle(pair)
        out += [(r, s) for s in pair]
    return out


def summary(trials, parts):
    """Per framework: {off: [images/s], on: [images/s], overhead: (point, low, high) or None,
    gap: the largest |hooked step - measured step| / measured step of the on-runs, or None}, from
    the trials frame rows and the breakdown frame rows of both settings ({setting: rows})."""
    out = {}
    for setting in SETTINGS:
        for row in trials[setting]:
            if row["status"] == "done" and row["throughput"]:
                out.setdefault(row["framework"], {"off": [], "on": []})[setting].append(float(row["throughput"]))
    for fw, figures in out.items():
        figures["overhead"] = None
        if figures["off"] and figures["on"]:
            point, low, high = ratio_ci(figures["on"], figures["off"])
            figures["overhead"] = (1 - point, 1 - high, 1 - low)
        gaps = [abs(r["hooked_step_ms"] - r["step_ms"]) / r["step_ms"] for r in parts if r["framework"] == fw
                and r.get("hooked_step_ms") is not None and r.get("step_ms")]
        figures["gap"] = max(gaps) if gaps else None
    return out


def render(table, notes, scope):
    lines = ["step_breakdown: %s" % scope,
             "%-18s %16s %16s %26s %12s" % ("framework", "off images/s (n)", "on images/s (n)",
                                           "overhead [95% interval]", "step gap")]
    for fw, f in sorted(table.items()):
        off = "%8.3f (%d)" % (statistics.median(f["off"]), len(f["off"])) if f["off"] else "-"
        on = "%8.3f (%d)" % (statistics.median(f["on"]), len(f["on"])) if f["on"] else "-"
        over = "%+.1f%% [%+.1f%%, %+.1f%%]" % tuple(100 * v for v in f["overhead"]) if f["overhead"] else "-"
        gap = "%.1f%%" % (100 * f["gap"]) if f["gap"] is not None else "-"
        lines.append("%-18s %16s %16s %26s %12s" % (fw, off, on, over, gap))
    lines += list(notes)
    return "\n".join(lines)


def main(argv=None):
    try:
        return _main(argv)
    except Refusal as exc:
        print("step_breakdown: %s" % exc, file=sys.stderr)
        return 2


def _main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frameworks", default=None,
                   help="comma-separated (default: %s, and torchvision where its env is built)" % OURS)
    p.add_argument("--model", default="faster_rcnn", choices=("retinanet", "faster_rcnn", "mask_rcnn"))
    p.add_argument("--size", default="128x128")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--measure", type=int, default=3)
    p.add_argument("--images", type=int, default=8, help="images in the generated COCO set")
    p.add_argument("--seed", type=int, default=0, help="of the settings' order within each round")
    p.add_argument("--work", help="folder for the data, scenarios and results (default: a temporary one)")
    args = p.parse_args(argv)
    parse_size(args.size)
    if min(args.rounds, args.measure) < 1 or args.warmup < 0:
        raise Refusal("--rounds and --measure are at least 1, --warmup at least 0")
    built = built_envs()
    if args.frameworks is None:
        frameworks = [OURS] + (["torchvision"] if "torchvision" in built else [])
    else:
        frameworks = [f for f in args.frameworks.split(",") if f]
    for fw in frameworks:
        if fw != OURS and fw not in RIVALS:
            raise Refusal("--frameworks: %r has no breakdown here (%s)" % (fw, ", ".join((OURS,) + RIVALS)))
        if fw in RIVALS and fw not in built:
            raise Refusal("%s: env not built (detbench env build %s)" % (fw, fw))
    work = args.work or tempfile.mkdtemp(prefix="step-breakdown-")
    data = os.path.join(work, "coco-%s" % args.size)
    if not os.path.exists(os.path.join(data, "annotations", "instances_train.json")):
        detbench("dataset", "make-coco", data, "--images", args.images, "--size", args.size)
    for r, setting in rounds_order(args.rounds, args.seed):
        doc = scenario(frameworks, args.model, args.size, args.warmup, args.measure, data, setting == "on")
        path = os.path.join(work, "step-breakdown-%s.yaml" % setting)
        with open(path, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        print("round %d: hooks %s" % (r, setting), flush=True)
        detbench("run", "--scenario", path, "--results", os.path.join(work, "results-%s" % setting))
    from harness import api
    from harness.report import build
    trials, parts = {}, []
    for setting in SETTINGS:
        with api.open(os.path.join(work, "results-%s" % setting)) as stored:
            trials[setting] = stored.trials().to_dict("records")
            if setting == "on":
                parts = stored.breakdowns().to_dict("records")
    notes = []
    for run in sorted({row["run_id"] for row in trials["on"]}):
        notes += build.report(os.path.join(work, "results-on"), "local", run_id=run, ci=False,
                              traces=False).breakdown_notes
    scope = "%s, %s fp32, 2 images per iteration, %d measured iterations after %d, %d rounds, 2 threads, " \
            "hooks of harness/drivers/breakdown.py on and off; folder %s" % (
                args.model, args.size, args.measure, args.warmup, args.rounds, work)
    print(render(summary(trials, parts), sorted(set(notes)), scope))
    return 0


if __name__ == "__main__":
    sys.exit(main())
