"""Where each framework's step time goes: the report's breakdown section, from the trials'
stored breakdowns (harness.measure.breakdown).

Per cell, each phase's seconds per iteration are the median over its finished repeats of the
trials' window means; the step is the median measured iteration time, and `rest` closes the gap to
it. Where the cell's run counted its work (harness.measure.compute), the phases whose work the
work model counts show their share of the host's measured peak: the fixed part of the step
(backbone, FPN, RPN or RetinaNet head, forward and backward together), the box head per sampled
RoI and the mask head per mask RoI, and the whole step. A cell whose program could not attach its
hooks, whose window has no breakdown, whose phases miss the step by more than the tolerance, or
one of whose named phases ran nothing, gets one line naming it; the other cells keep theirs.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from harness.vocab import catalog
from harness.measure import breakdown as measured_breakdown
from harness.measure import work
from harness.report import measured
from harness.report.rows import Rows
from harness.results.records import StoredCell, StoredTrial

INTRO = (
    "Each phase's milliseconds per iteration, timed by hooks on the framework's own modules and optimizer "
    "(harness/drivers/breakdown.py; data: the framework's own data time; rest: the measured step less the "
    "phases), its share of the measured step and, where the work model counts its work, its share of the "
    "host's measured peak."
)

# counted groups: (row label, phase names whose forward and backward it adds up, work count or None: fixed)
COUNTED = (
    ("backbone, fpn, rpn / head (counted together)", ("backbone", "fpn", "rpn", "head"), None),
    ("box head (counted)", ("box head",), "sampled_rois"),
    ("mask head (counted)", ("mask head",), "mask_rois"),
)


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    seconds: float
    share_of_step: float
    share_of_peak: Optional[float] = None  # its counted FLOPs / (seconds x the precision's peak)


@dataclass(frozen=True)
class CellBreakdown:
    """One cell's breakdown: its phases in the order they run, then the counted groups and the step."""

    cell_key: str
    framework: str
    model: str
    precision: str
    title: str  # "detbench-trainer Faster R-CNN FP32 1x1"
    step_s: float
    phases: Tuple[PhaseRow, ...]
    counted: Tuple[PhaseRow, ...]  # the counted groups and the step, with their share of the peak
    trials: int


def _median(values: Sequence[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def _order(name: str) -> Tuple[int, str]:
    """Data first, then forward phases, backward phases, optimizer, rest."""
    if name == measured_breakdown.DATA:
        return (0, "")
    if name.endswith(" forward"):
        return (1, "")
    if name.endswith(" backward"):
        return (2, "")
    return (3 if name == "optimizer" else 4, "")


def cell_breakdown(
    cell: StoredCell, done: Sequence[StoredTrial], bounds: Optional[Mapping[str, Any]], label: str
) -> Tuple[Optional[CellBreakdown], List[str]]:
    """(the cell's breakdown or None, the lines naming its problems) from its finished trials."""
    where = "%s (%s)" % (label, cell["cell_key"])
    parts = [t.breakdown for t in done if t.breakdown]
    if not parts:
        return None, []
    errors = [str(b["error"]) for b in parts if b.get("error")]
    good = [b for b in parts if not b.get("error") and b.get("phases")]
    if not good:
        return None, ["Breakdown, %s: %s." % (where, errors[0])]
    lines = []
    if errors:
        lines.append(
            "Breakdown, %s: %d repeat%s without one: %s." % (where, len(errors), "s"[: len(errors) > 1], errors[0])
        )
    names: List[str] = []
    for b in good:
        names += [k for k in b["phases"] if k not in names and k != measured_breakdown.REST]
    names.sort(key=_order)  # stable: the order the hooks ran within each kind
    step = _median([float(b["step_s"]) for b in good])
    seconds = {k: _median([float(b["phases"].get(k, 0.0)) for b in good]) for k in names}
    seconds[measured_breakdown.REST] = max(step - sum(seconds.values()), 0.0)
    for b in good:
        if b.get("mismatch"):
            lines.append("Breakdown, %s: the phases do not add up to the step: %s." % (where, b["mismatch"]))
            break
    idle = sorted({p for b in good for p in (b.get("idle") or [])})
    if idle:
        lines.append("Breakdown, %s: no time in %s (its hooks never ran in the window)." % (where, ", ".join(idle)))
    rows = tuple(PhaseRow(k, v, v / step if step else 0.0) for k, v in seconds.items())
    return (
        CellBreakdown(
            cell_key=cell["cell_key"],
            framework=cell["framework"],
            model=cell["model"],
            precision=cell["precision"],
            title=label,
            step_s=step,
            phases=rows,
            counted=counted_rows(cell, done, bounds, seconds, step),
            trials=len(good),
        ),
        lines,
    )


def counted_rows(
    cell: StoredCell,
    done: Sequence[StoredTrial],
    bounds: Optional[Mapping[str, Any]],
    seconds: Mapping[str, float],
    step: float,
) -> Tuple[PhaseRow, ...]:
    """The counted groups' and the step's rows with their share of the peak (None where the run
    has no peak or work model for the cell)."""
    limits = measured.cell_limits(cell, bounds, measured.cell_work(done)) if bounds else {}
    peak = limits.get("peak_gflops")
    model = ((bounds or {}).get("work") or {}).get(cell["cell_key"])
    counts = measured.cell_work(done) or {}
    rows: List[PhaseRow] = []
    for label, bases, count in COUNTED:
        spent = sum(v for k, v in seconds.items() if k.rsplit(" ", 1)[0] in bases)
        if not spent:
            continue
        flops: Optional[float] = None
        if isinstance(model, dict) and "fixed_flops" in model:
            if count is None:
                flops = float(model["fixed_flops"])
            elif count in (model.get("unit_flops") or {}) and counts.get(count) is not None:
                flops = float(model["unit_flops"][count]) * float(counts[count])
        rows.append(PhaseRow(label, spent, spent / step, _share(flops, spent, peak)))
    per_iteration = limits.get("flops_per_iteration")
    rows.append(PhaseRow("step", step, 1.0, _share(per_iteration, step, peak)))
    return tuple(rows)


def _share(flops: Optional[float], seconds: float, peak_gflops: Optional[float]) -> Optional[float]:
    if flops is None or not peak_gflops or seconds <= 0:
        return None
    return flops / seconds / (peak_gflops * 1e9)


def breakdowns(data: Rows, cells: Sequence[StoredCell]) -> Tuple[Tuple[CellBreakdown, ...], Tuple[str, ...]]:
    """Every cell's breakdown that has one, and the lines naming the cells' problems; a cell of a
    run that asked for breakdowns (`breakdown: true`) but logged none is named too."""
    out: List[CellBreakdown] = []
    lines: List[str] = []
    limits: Dict[str, Dict[str, Any]] = {}
    for cell in cells:
        rid = cell["run_id"]
        if rid not in limits:
            limits[rid] = measured.run_limits(data.runs[rid])
        done = [t for t in data.cell_trials(cell) if t["status"] == "done"]
        label = "%s %s %s" % (
            cell["framework"],
            catalog.model_title(cell["model"]),
            catalog.precision_title(cell["precision"]),
        )
        got, problems = cell_breakdown(cell, done, limits[rid], label)
        if got is not None:
            out.append(got)
        elif done and not problems and _asked(data, cell):
            problems = ["Breakdown, %s (%s): its log has no %sline." % (label, cell["cell_key"], "DETBENCH_BREAKDOWN ")]
        lines += problems
    return tuple(out), tuple(lines)


def _asked(data: Rows, cell: StoredCell) -> bool:
    return data.runs[cell["run_id"]].scenario.document.get("breakdown") is True


def table_lines(b: CellBreakdown) -> List[str]:
    """The Markdown table of one cell's breakdown."""
    lines = [
        "| phase | ms per iteration | share of step | share of peak |",
        "|---|---:|---:|---:|",
    ]
    for row in b.phases + b.counted:
        lines.append(
            "| %s | %s | %.1f%% | %s |"
            % (
                row.phase if row.phase != "step" else "**step**",
                work.number(row.seconds * 1000.0),
                100.0 * row.share_of_step,
                "-" if row.share_of_peak is None else "%.0f%%" % (100.0 * row.share_of_peak),
            )
        )
    return lines
