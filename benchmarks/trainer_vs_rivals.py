"""The bundled trainer against torchvision, mmdetection and detectron2, measured by detbench itself.

Nothing here times anything: for each input size it writes a scenario from
scenarios/rivals-cpu.yaml (the four frameworks, the chosen models and precisions, one shared
weights file per model, one generated COCO set per size, the same thread count and
learning-rate setting for all), runs it with `detbench run` (a fresh process per trial, every
round of repeats in its own shuffled order), and reads that one run back through the report.
Per size, model and precision it prints each framework's median images/s, its share of the
machine's measured peak (MFU), its peak resident and device memory (runner.py's, the highest
over the repeats) and its flags, and the bundled trainer's ratio to each rival with a
95% bootstrap interval over the repeats, a verdict, and the report's "Not like for like" lines
for that model. Every comparison pairs cells of one run; a pair from two runs is refused.

    python benchmarks/trainer_vs_rivals.py                     # 3 models x fp32/bf16, 320x320, 512x512, 800x1344
    python benchmarks/trainer_vs_rivals.py --breakdown         # and where each framework's step time goes
    python benchmarks/trainer_vs_rivals.py --models retinanet --precisions fp32 --sizes 320x320 --repeats 3
    python benchmarks/trainer_vs_rivals.py --exclude mmdetection="not installed here"
    python benchmarks/trainer_vs_rivals.py --quick             # one cheap cell per framework: does it run
    python benchmarks/trainer_vs_rivals.py --env GLIBC_TUNABLES=glibc.malloc.mmap_max=0:...
                                                               # one more process setting, for every framework
    python benchmarks/trainer_vs_rivals.py --table-from DIR/results-320x320 [--run RUN_ID]

It needs the torchvision, mmdetection and detectron2 envs (`detbench env build torchvision`,
`detbench env build mmdetection` and `detbench env build detectron2`). A rival without its env
stops the benchmark before anything runs, in one line, unless it is left out by name
(`--exclude NAME` or `--exclude NAME=REASON`), which is then printed with its reason.

Verdicts: "faster" only where the interval's low end reaches the target, "parity" where the
interval holds 1, "slower" where it lies below 1, and "below target" where it lies above 1 but
its low end short of the target. The targets: Faster and Mask R-CNN fp32 at least 1.3x every rival
at every size; RetinaNet fp32 stated as parity unless 1.2x; the trainer's bf16 at least 1.2x
torchvision's bf16 on every model, and at least 1.5x its own fp32 on RetinaNet (checked only where
the CPU has bf16 kernels or there is a GPU). The exit status is 2 for a refusal (a missing rival,
cells of two runs), 1 when a checked target is missed, else 0.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.plan import hostcpu  # noqa: E402
from harness.vocab import catalog  # noqa: E402

OURS = "detbench-trainer"
RIVALS = ("torchvision", "mmdetection", "detectron2")
# the configs' own size, 800x1344, as SimpleDet's tables and every seed's use it, besides two smaller ones
SIZES = ("320x320", "512x512", "800x1344")
# (warmup, measured iterations) where a size's step takes tens of seconds on a few cores, unless
# --warmup or --measure is given
WINDOWS = {"800x1344": (1, 3)}
TWO_STAGE = catalog.TWO_STAGE
MODELS = ("retinanet",) + TWO_STAGE
FP32_TWO_STAGE = 1.3     # Faster and Mask R-CNN fp32, against every rival, at every size
RETINANET_FP32 = 1.2     # RetinaNet fp32: parity unless this
BF16_VS_RIVAL = 1.2      # the trainer's bf16 against torchvision's bf16, every model
BF16_VS_OWN_FP32 = 1.5   # the trainer's bf16 against its own fp32, RetinaNet
FASTER, PARITY, SLOWER, BELOW = "faster", "parity", "slower", "below target"
NO_BF16_KERNELS = "this CPU has no bf16 kernels"


class Refusal(Exception):
    """A comparison this benchmark will not make: one line, exit status 2."""


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


def parse_size(text):
    """[height, width] of "HxW"; Refusal for anything else."""
    parts = text.split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise Refusal("--sizes: %r is not HEIGHTxWIDTH (e.g. 320x320)" % text)
    return [int(p) for p in parts]


def parse_excluded(items):
    """{rival: reason given or None} from --exclude NAME[=REASON] items (each may list several, comma-separated)."""
    out = {}
    for item in items or ():
        for part in [p for p in item.split(",") if p.strip()]:
            name, _, reason = part.partition("=")
            name = name.strip()
            if name not in RIVALS:
                raise Refusal("--exclude: %r is not a rival (%s)" % (name, ", ".join(RIVALS)))
            out[name] = reason.strip() or None
    return out


def scenario(args, work, frameworks, size):
    """rivals-cpu.yaml with this benchmark's models, precisions, window and repeats at one size."""
    with open(os.path.join(ROOT, "scenarios", "rivals-cpu.yaml")) as f:
        doc = yaml.safe_load(f)
    doc["name"] = "trainer-vs-rivals-%s" % size
    doc["matrix"].update(framework=list(frameworks), model=list(args.models), precision=list(args.precisions))
    axes = {"framework": frameworks, "model": args.models, "precision": args.precisions}
    # only the exclusions that still match a cell (a scenario refuses one that matches none)
    doc["exclude"] = [e for e in doc.get("exclude", [])
                      if all(e[k] in axes[k] for k in axes if k in e)]
    warmup, measured = WINDOWS.get(size, (2, 8))
    warmup = warmup if getattr(args, "warmup", None) is None else args.warmup
    measured = measured if getattr(args, "measure", None) is None else args.measure
    doc.update(input_size=parse_size(size), warmup=warmup, measure=measured, repeats=args.repeats)
    if getattr(args, "breakdown", False):
        doc["breakdown"] = True     # every trial also prints where its step goes (harness/drivers/breakdown.py)
    data = os.path.join(work, "coco-%s" % size)
    doc["data"] = {"annotations": os.path.join(data, "annotations", "instances_train.json"),
                   "images": os.path.join(data, "images")}
    doc["weights"] = {m: os.path.join(work, "weights", m + ".pt") for m in args.models}
    doc["options"] = {k: v for k, v in doc["options"].items() if k in frameworks}
    doc["env"] = dict(doc.get("env") or {}, **getattr(args, "env", {}))
    return doc, data


def parse_env(items):
    """{name: value} of --env NAME=VALUE items: process settings the scenario gives every
    framework alike (its `env`), so a setting one framework could take is measured for all."""
    out = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise Refusal("--env %r: expected NAME=VALUE, NAME a shell variable name" % item)
        out[name] = value
    return out


# ------------------------------------------------------------------ the figures

def ratio_ci(ours, theirs, resamples=4000, seed=0):
    """Median of ours / median of theirs, and a 95% percentile-bootstrap interval that resamples
    each side's repeats on its own."""
    if not ours or not theirs:
        raise ValueError("a ratio needs at least one figure on each side")
    rng = random.Random(seed)
    point = statistics.median(ours) / statistics.median(theirs)
    draws = sorted(statistics.median(rng.choices(ours, k=len(ours))) /
                   statistics.median(rng.choices(theirs, k=len(theirs))) for _ in range(resamples))
    return point, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def verdict(low, high, target):
    """What an interval [low, high] of ours/theirs says against `target` (1 or more)."""
    if low <= 1.0 <= high:
        return PARITY
    if low >= target:
        return FASTER
    if high < 1.0:
        return SLOWER
    return BELOW


def target_for(model, precision, theirs):
    """The ratio the trainer's cell is held to against `theirs` (a rival, or OURS: its own fp32)."""
    if theirs == OURS:
        return BF16_VS_OWN_FP32 if model == "retinanet" else 1.0
    if precision == "fp32":
        return FP32_TWO_STAGE if model in TWO_STAGE else RETINANET_FP32
    if precision == "bf16" and theirs == "torchvision":
        return BF16_VS_RIVAL
    return 1.0


@dataclass(frozen=True)
class Cell:
    model: str
    precision: str
    framework: str
    throughput: Optional[float]
    n: int
    mfu: Optional[float]
    flags: Tuple[str, ...]
    na: Optional[str]
    run_id: Optional[str]
    notes: Tuple[str, ...] = ()      # the table's "Not like for like" lines for this model
    rss_mb: Optional[float] = None   # peak resident memory of the trial's process tree, highest repeat
    device_mb: Optional[float] = None  # peak device memory of its processes, highest repeat


@dataclass(frozen=True)
class Comparison:
    model: str
    precision: str
    ours: Cell
    theirs: Cell
    target: float
    ratio: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    verdict: Optional[str] = None    # None: a side has no figure (theirs.na or ours.na says why)
    notes: Tuple[str, ...] = ()

    @property
    def against(self):
        return "%s %s" % (OURS, self.theirs.precision) if self.theirs.framework == OURS else self.theirs.framework


@dataclass
class Reading:
    """One run read back: its cells and comparisons, and what it was run at."""
    run_id: str
    size: str
    scope: str
    cells: List[Cell] = field(default_factory=list)
    comparisons: List[Comparison] = field(default_factory=list)
    left_out: List[Tuple[str, str]] = field(default_factory=list)   # (rival, why) left out by name
    breakdown: str = ""     # the report's step breakdown of the run, where its trials printed one


def cells_of(report):
    """{(model, precision, framework): Cell} of a report's measured throughput tables."""
    out = {}
    for table in report.measured:
        if table.form != "throughput":
            continue
        for (model, fw), e in table.entries.items():
            prefix = "Not like for like, %s:" % catalog.model_title(model)
            d = e.detail
            out[(model, table.precision, fw)] = Cell(
                model=model, precision=table.precision, framework=fw, throughput=e.throughput,
                n=d.n if d else 0, mfu=d.mfu if d else None, flags=tuple(e.flags), na=e.na,
                run_id=d.run_id if d else None, notes=tuple(n for n in table.notes if n.startswith(prefix)),
                rss_mb=d.peak_rss_mb if d else None, device_mb=d.peak_device_mb if d else None)
    return out


def repeats_of(report, cell):
    """The images/s of a cell's finished repeats, from its own run only."""
    return [t["throughput"] for t in report.trials
            if t["run_id"] == cell.run_id and t["framework"] == cell.framework and t["model"] == cell.model
            and t["precision"] == cell.precision and t["status"] == "done" and t["throughput"]]


def compare(report, ours, theirs):
    """The Comparison of two cells; Refusal where they come from different runs."""
    target = target_for(ours.model, ours.precision, theirs.framework)
    notes = tuple(n for n in ours.notes if theirs.framework != OURS and theirs.framework in n)
    if ours.na or theirs.na:
        return Comparison(ours.model, ours.precision, ours, theirs, target, notes=notes)
    if ours.run_id != theirs.run_id:
        raise Refusal("%s %s: %s comes from run %s and %s from run %s; a comparison pairs cells of one run "
                      "(name one with --run)" % (catalog.model_title(ours.model), ours.precision, OURS, ours.run_id,
                                                 theirs.framework, theirs.run_id))
    a, b = repeats_of(report, ours), repeats_of(report, theirs)
    r, lo, hi = ratio_ci(a, b)
    return Comparison(ours.model, ours.precision, ours, theirs, target, r, lo, hi, verdict(lo, hi, target), notes)


def comparisons(report, excluded=()):
    """(cells by (model, precision, framework), comparisons) of a report of one run: per model and
    precision the trainer against each rival not excluded by name, and its bf16 against its own
    fp32. A rival with no cell at all for a model and precision the trainer ran is a Refusal."""
    cells = cells_of(report)
    out = []
    for model, precision in sorted({(m, p) for m, p, fw in cells if fw == OURS},
                                   key=lambda mp: (list(catalog.MODELS).index(mp[0]) if mp[0] in catalog.MODELS
                                                   else 99, mp[1] != "fp32", mp)):
        ours = cells[(model, precision, OURS)]
        for rival in RIVALS:
            if rival in excluded:
                continue
            theirs = cells.get((model, precision, rival))
            if theirs is None:
                raise Refusal("%s %s: the run has no %s cell; run it, or leave it out by name with --exclude %s"
                              % (catalog.model_title(model), precision, rival, rival))
            out.append(compare(report, ours, theirs))
        if precision != "fp32" and (model, "fp32", OURS) in cells:
            out.append(compare(report, ours, cells[(model, "fp32", OURS)]))
    return cells, out


# ------------------------------------------------------------------ the table

HEADER = "%-12s %-9s %-17s %14s %7s %9s %9s  %s" % ("model", "precision", "framework", "images/s (n)", "MFU",
                                                   "RSS MiB", "dev MiB", "flags")


def _mib(value):
    return "%.0f" % value if value else "-"


def cell_line(cell):
    if cell.na:
        figure, mfu = "NA", "-"
    else:
        figure = "%8.3f (%d)" % (cell.throughput, cell.n)
        mfu = "%5.1f%%" % (100 * cell.mfu) if cell.mfu is not None else "-"
    text = "%-12s %-9s %-17s %14s %7s %9s %9s  %s" % (cell.model, cell.precision, cell.framework, figure, mfu,
                                                      _mib(cell.rss_mb), _mib(cell.device_mb),
                                                      ", ".join(cell.flags) or "-")
    return text + ("  (NA: %s)" % cell.na if cell.na else "")


def comparison_lines(c):
    """The ratio line of a comparison, the flags of both its cells beside it, and its notes under it."""
    if c.verdict is None:
        why = "; ".join("%s: %s" % (x.framework, x.na) for x in (c.ours, c.theirs) if x.na)
        lines = ["  %s / %-24s no ratio: %s" % (OURS, c.against, why)]
    else:
        lines = ["  %s / %-24s %.3fx [%.3f, %.3f]  target %.2fx  %-12s flags: %s %s; %s %s" % (
            OURS, c.against, c.ratio, c.low, c.high, c.target, c.verdict,
            OURS, ", ".join(c.ours.flags) or "-", c.against, ", ".join(c.theirs.flags) or "-")]
    lines += ["    %s" % n for n in c.notes]
    return lines


def render(reading):
    """The printed table of one run: its scope, each cell and each comparison."""
    lines = ["trainer_vs_rivals at %s: %s" % (reading.size, reading.scope)]
    lines += ["%s: left out, %s" % (name, why) for name, why in reading.left_out]
    lines += [HEADER, "-" * len(HEADER)]
    shown = set()
    for c in reading.comparisons:
        for cell in (c.ours, c.theirs):
            if (cell.model, cell.precision, cell.framework) not in shown:
                shown.add((cell.model, cell.precision, cell.framework))
                lines.append(cell_line(cell))
        lines += comparison_lines(c)
    for cell in reading.cells:      # cells of no comparison (a rival left out by name)
        if (cell.model, cell.precision, cell.framework) not in shown and cell.framework == OURS:
            lines.append(cell_line(cell))
    return "\n".join(lines)


# ------------------------------------------------------------------ the targets

def target_lines(readings, bf16_why=None):
    """(lines, missed, met) for the targets over these runs (one per size). bf16_why: why bf16 was not
    measured (None where it was asked for and could run)."""
    lines, missed, met = [], 0, 0
    by_size = {r.size: r for r in readings}

    def found(reading, model, precision, against):
        return [c for c in reading.comparisons if (c.model, c.precision, c.against) == (model, precision, against)]

    for model in TWO_STAGE:
        for size in SIZES + tuple(s for s in by_size if s not in SIZES):
            reading = by_size.get(size)
            title = "%s fp32 >= %.1fx %s at %s" % (catalog.model_title(model), FP32_TWO_STAGE,
                                                   ", ".join(RIVALS), size)
            if reading is None:
                lines.append("%s: not checked: not run at this size (--sizes)" % title)
                continue
            found_ = [c for rival in RIVALS for c in found(reading, model, "fp32", rival)]
            if not found_:
                lines.append("%s: not checked: no %s fp32 comparison in this run" % (title, model))
                continue
            ok = all(c.verdict == FASTER for c in found_)
            left = [r for r in RIVALS if r not in {c.against for c in found_}]
            said = "; ".join("%s %s" % (c.against, _said(c)) for c in found_)
            if left and ok:     # the claim is against every rival: one left out leaves it unchecked
                lines.append("%s: not checked: %s left out (%s)" % (title, ", ".join(left), said))
                continue
            lines.append("%s: %s (%s)" % (title, "met" if ok else "not met", said))
            missed += not ok
            met += ok
    for size in sorted(by_size):
        said = [c for rival in RIVALS for c in found(by_size[size], "retinanet", "fp32", rival)]
        if said:
            lines.append("RetinaNet fp32 at %s (faster only at >= %.1fx): %s" % (
                size, RETINANET_FP32, "; ".join("%s %s" % (c.against, _said(c)) for c in said)))
    has_bf16 = any(cell.precision == "bf16" for r in readings for cell in r.cells)
    for title, against, models in (
            ("bf16 >= %.1fx torchvision bf16 on every model" % BF16_VS_RIVAL, "torchvision", MODELS),
            ("bf16 >= %.1fx its own fp32 on RetinaNet" % BF16_VS_OWN_FP32, "%s fp32" % OURS, ("retinanet",))):
        title = "%s %s" % (OURS, title)
        found_ = [(r.size, c) for r in readings for m in models for c in found(r, m, "bf16", against)]
        if bf16_why or not found_:
            why = bf16_why or ("no bf16 cells in these runs" if not has_bf16 else "no %s cells in these runs" % against)
            lines.append("%s: not checked: %s" % (title, why))
            continue
        ok = all(c.verdict == FASTER for _, c in found_)
        said = "; ".join("%s at %s %s" % (c.model, size, _said(c)) for size, c in found_)
        unmeasured = [m for m in models if not any(c.model == m for _, c in found_)]
        if unmeasured and ok:
            lines.append("%s: not checked: no bf16 figure of %s (%s)" % (title, ", ".join(unmeasured), said))
            continue
        lines.append("%s: %s (%s)" % (title, "met" if ok else "not met", said))
        missed += not ok
        met += ok
    return lines, missed, met


def _said(c):
    if c.verdict is None:
        return "no ratio (%s)" % "; ".join(x.na for x in (c.ours, c.theirs) if x.na)
    return "%.3fx [%.3f, %.3f] %s" % (c.ratio, c.low, c.high, c.verdict)


# ------------------------------------------------------------------ reading a run back

def read_run(results, run_id="latest", excluded=None):
    """The Reading of one run of a results folder ("latest": its newest run)."""
    from harness import api
    from harness.report import build
    with api.open(results) as stored:
        [run] = stored.run_records(run_id)
    run_id, sc, host = run.id, run.scenario, run.host or {}
    report = build.report(results, "local", run_id=run_id, ci=False, traces=False)
    excluded = excluded or {}
    cells, comps = comparisons(report, excluded)
    size = "x".join(str(v) for v in sc.input_size or ())
    cpu = (host.get("cpu") or {}).get("model") or hostcpu.cpu()[0] or "unknown CPU"
    isa = ((host.get("facts") or {}).get("cpu") or {}).get("isa")
    scope = "run %s of %s; %s%s, %s threads, %d images per iteration, %d repeats of %d measured iterations " \
            "(after %d)" % (run_id, results, cpu, " (%s)" % " ".join(isa) if isa else "",
                            sc.env.get("OMP_NUM_THREADS", "default"), sc.batch_per_gpu or 0,
                            sc.repeats or 0, sc.measure or 0, sc.warmup or 0)
    others = sorted((k, v) for k, v in sc.env.items() if k != "OMP_NUM_THREADS")
    if others:
        scope += "; every framework with %s" % " ".join("%s=%s" % kv for kv in others)
    left_out = [(name, why) for name, why in sorted(excluded.items())]
    parts = ""
    if report.breakdowns or report.breakdown_notes:
        from harness.report import markdown
        parts = markdown.breakdown_text(report)
    return Reading(run_id, size, scope, list(cells.values()), comps, left_out, parts)


def bf16_reason(precisions):
    """Why bf16 is not measured here, or None where it is asked for and this host can run it."""
    if "bf16" not in precisions:
        return "bf16 not asked for (--precisions)"
    name, flags = hostcpu.cpu()
    if not hostcpu.host_has_gpus() and flags and not hostcpu.has_bf16_kernels(flags):
        return NO_BF16_KERNELS + " (%s; torch would only emulate it)" % (name or "this CPU")
    return None


def measured_bf16(readings):
    """Why the runs read hold no bf16 figure of the trainer, or None where they hold one."""
    bf16 = [c for r in readings for c in r.cells if c.precision == "bf16" and c.framework == OURS]
    if any(not c.na for c in bf16):
        return None
    if any(c.na.startswith(hostcpu.THIS_HOST) for c in bf16):
        return NO_BF16_KERNELS + " (%s)" % next(c.na for c in bf16 if c.na.startswith(hostcpu.THIS_HOST))
    return bf16_reason(["bf16"]) or "no bf16 cells in these runs"


def report_all(readings, bf16_why):
    for reading in readings:
        print(render(reading))
        print()
        if reading.breakdown:
            print(reading.breakdown)
    lines, missed, met = target_lines(readings, bf16_why)
    print("targets:")
    for line in lines:
        print("  " + line)
    print("trainer_vs_rivals: %d targets met, %d missed" % (met, missed))
    if any(c.mfu is not None and c.mfu > 1 for r in readings for c in r.cells):
        print("note: a share of peak above 100% means the peak was measured low (a busy machine): "
              "detbench platform peak --refresh on a quiet one")
    return 1 if missed else 0


# ------------------------------------------------------------------ the command

def main(argv=None):
    try:
        return _main(argv)
    except Refusal as exc:
        print("trainer_vs_rivals: %s" % exc, file=sys.stderr)
        return 2


def _main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--sizes", "--size", dest="sizes", default=",".join(SIZES),
                   help="input sizes, one run each (default %(default)s)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=None, help="iterations before the window (default 2; 1 at 800x1344)")
    p.add_argument("--measure", type=int, default=None,
                   help="measured iterations (default 8; 3 at 800x1344, whose step takes tens of seconds)")
    p.add_argument("--breakdown", action="store_true",
                   help="every trial also breaks its step down into phases (the report's step breakdown)")
    p.add_argument("--images", type=int, default=64, help="images in each generated COCO set")
    p.add_argument("--exclude", action="append", metavar="NAME[=REASON]",
                   help="leave a rival out by name, with the reason printed (repeat or comma-separate)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE",
                   help="a process setting for every framework's trials (the scenario's env; repeat for more)")
    p.add_argument("--work", help="folder for the data, weights, scenarios and results (default: a temporary one)")
    p.add_argument("--quick", action="store_true", help="RetinaNet fp32 at 128x128, 2 repeats of 2 iterations")
    p.add_argument("--table-from", nargs="+", metavar="RESULTS", help="print the table of finished runs instead")
    p.add_argument("--run", default="latest",
                   help="with one --table-from folder: the run to read (default: the newest)")
    args = p.parse_args(argv)
    excluded = parse_excluded(args.exclude)
    args.env = parse_env(args.env)
    args.models = [m for m in args.models.split(",") if m]
    args.precisions = [x for x in args.precisions.split(",") if x]
    if args.table_from:
        if args.run != "latest" and len(args.table_from) > 1:
            raise Refusal("--run names one run: give one --table-from folder with it")
        readings = [read_run(r, args.run, _reasons(excluded, set(RIVALS))) for r in args.table_from]
        return report_all(readings, measured_bf16(readings))
    if args.quick:
        args.models, args.precisions, args.sizes = ["retinanet"], ["fp32"], "128x128"
        args.repeats, args.warmup, args.measure, args.images = 2, 1, 2, 8
    sizes = [s for s in args.sizes.split(",") if s]
    for size in sizes:
        parse_size(size)
    bf16_why = bf16_reason(args.precisions)
    if bf16_why and "bf16" in args.precisions:
        print("note: bf16 is left out: %s" % bf16_why)
        args.precisions = [x for x in args.precisions if x != "bf16"]
    if not args.precisions:
        raise Refusal("no precision left to measure (--precisions)")
    built = built_envs()
    missing = [name for name in RIVALS if name not in built and name not in excluded]
    if missing:
        raise Refusal("%s: env not built (detbench env build %s); build it, or leave it out by name with --exclude %s"
                      % (missing[0], missing[0], missing[0]))
    reasons = _reasons(excluded, built)
    for name, why in sorted(reasons.items()):
        print("%s: left out, %s" % (name, why))
    work = args.work or tempfile.mkdtemp(prefix="trainer-vs-rivals-")
    frameworks = (OURS,) + tuple(n for n in RIVALS if n not in excluded)
    readings = []
    for size in sizes:
        readings.append(read_run(measure(args, work, frameworks, size), "latest", reasons))
    return report_all(readings, bf16_why)


def _reasons(excluded, built):
    """{rival: why it is left out} for the rivals excluded by name."""
    return {name: "as asked (--exclude): %s" % (why or ("its env is not built" if name not in built
                                                        else "no reason given"))
            for name, why in excluded.items()}


def measure(args, work, frameworks, size):
    """Run the scenario of one size into its own results folder; returns the folder (its newest run
    is the one just made)."""
    doc, data = scenario(args, work, frameworks, size)
    if not os.path.exists(doc["data"]["annotations"]):
        detbench("dataset", "make-coco", data, "--images", args.images, "--size", size)
    for model, path in doc["weights"].items():
        if not os.path.exists(path):
            detbench("weights", "make", model, "--out", path)
    path = os.path.join(work, "trainer-vs-rivals-%s.yaml" % size)
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    results = os.path.join(work, "results-%s" % size)
    detbench("run", "--scenario", path, "--results", results)
    return results


if __name__ == "__main__":
    sys.exit(main())
