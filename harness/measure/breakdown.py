"""Where a trial's step time went: its DETBENCH_BREAKDOWN lines (harness/drivers/breakdown.py) over
the measured window, against the step the framework's own log measured.

A trial's breakdown is the mean seconds per iteration of every phase the hooks timed, the data wait
(the framework's own data time, the figure ingest reports) and `rest`: the measured iteration time
less both, which holds what no hook sees (moving the batch, summing losses, logging, clipping). The
hooks' own clock times each step too (from one optimizer step's end to the next); where its mean
differs from the measured iteration time by more than TOLERANCE, or the phases and the data wait
add up to more than the step by more than that, the breakdown says so (`mismatch`): its phases
then do not add up to the step that was measured. A named phase that ran nothing in the window is
listed in `idle`.
"""

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from harness import jsonlog
from harness.measure import work

TOLERANCE = 0.03  # of the measured step: what the phases, the data wait and rest may miss it by
DATA = "data"
REST = "rest"
Breakdown = Dict[str, Any]


def _parse(text: str) -> Optional[Tuple[int, Tuple[Optional[float], Any]]]:
    """(iteration, (step_s, phases)) of one cleaned BREAKDOWN line, (0, (None, error)) for an error
    line, or None."""
    at = text.find(jsonlog.BREAKDOWN_PREFIX)
    if at < 0:
        return None
    try:
        iteration, step, phases = jsonlog.read_breakdown(text[at + len(jsonlog.BREAKDOWN_PREFIX) :])
    except ValueError:
        return None
    return (0, (None, phases)) if iteration is None else (iteration, (step, phases))


def trial_breakdown(
    path: Union[str, Path],
    first: int,
    last: int,
    iteration_time_s: Optional[float],
    data_time_s: Optional[float],
    lines: Optional[Tuple[int, Optional[int]]] = None,
) -> Optional[Breakdown]:
    """The breakdown of iterations first..last of a log (of the lines `lines` only, where given),
    against the measured `iteration_time_s` and `data_time_s`: {"phases": {phase: mean seconds},
    "step_s": the measured step, "hooked_step_s": the hooks' own, "iterations": N, "idle": [phase],
    "mismatch": text or None}, {"error": text} where the program could not attach its hooks or
    the window holds no line, or None where the log has no BREAKDOWN line at all."""
    seen = work.window_lines(path, jsonlog.BREAKDOWN_PREFIX, _parse, 0, last, lines)
    if not seen:
        return None
    if 0 in seen:
        return {"error": str(seen[0][1])}
    window = {i: v for i, v in seen.items() if first <= i <= last}
    if not window:
        return {"error": "no %sline in the measured iterations %d-%d" % (jsonlog.BREAKDOWN_PREFIX, first, last)}
    if not iteration_time_s:
        return {"error": "no measured iteration time to break down"}
    n = len(window)
    names: List[str] = []
    for _step, phases in window.values():
        names += [k for k in phases if k not in names]
    means = {k: sum(p.get(k, 0.0) for _s, p in window.values()) / n for k in names}
    hooked = sum(s for s, _p in window.values() if s is not None) / n
    return summarize(means, iteration_time_s, data_time_s, hooked, n)


def summarize(
    means: Dict[str, float], step_s: float, data_s: Optional[float], hooked_step_s: float, iterations: int
) -> Breakdown:
    """The breakdown of phase means against a measured step (trial_breakdown's value)."""
    phases = {k: v for k, v in means.items() if v > 0}
    if data_s is not None:
        phases[DATA] = data_s
    timed = sum(phases.values())
    phases[REST] = max(step_s - timed, 0.0)
    bases = sorted({k.rsplit(" ", 1)[0] for k in means if k != "optimizer"})
    idle = [b for b in bases if not any(means.get(k, 0.0) > 0 for k in means if k.rsplit(" ", 1)[0] == b)]
    problems = []
    if abs(hooked_step_s - step_s) > TOLERANCE * step_s:
        problems.append(
            "the hooks timed a %.4g s step against the %.4g s measured (%+.1f%%)"
            % (hooked_step_s, step_s, 100.0 * (hooked_step_s - step_s) / step_s)
        )
    if timed > (1 + TOLERANCE) * step_s:
        problems.append("the phases add up to %.4g s, more than the %.4g s step" % (timed, step_s))
    return {
        "phases": phases,
        "step_s": step_s,
        "hooked_step_s": hooked_step_s,
        "iterations": iterations,
        "idle": idle,
        "mismatch": "; ".join(problems) or None,
    }


def phase_sum(b: Breakdown) -> float:
    """The phases' seconds, data wait and rest included: the step they break down."""
    return float(sum((b.get("phases") or {}).values()))
