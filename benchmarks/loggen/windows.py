"""Windows to ask of a generated log, as a user would: inside a run (on its records or not),
over a whole run, across a resume, past the log's end, with or without --run, --max-error
and --iters-per-epoch, and now and then with images per iteration the log's own figures
contradict (where they tell them: `implies_images` in its params)."""
from dataclasses import dataclass, asdict
from typing import Optional


@dataclass(frozen=True)
class Request:
    warmup: int
    measure: int
    run: Optional[int] = None
    max_error: Optional[float] = None
    iters_per_epoch: Optional[int] = None
    images_per_iteration: Optional[int] = None
    framework: Optional[str] = None        # read with --framework F instead of --format
    approximate: Optional[bool] = None     # --approximate: a figure with no bound is given, not refused

    @property
    def window(self):
        return self.warmup + 1, self.warmup + self.measure

    def as_dict(self):
        return {k: v for k, v in asdict(self).items() if v is not None}


def request(choose, log, k=0):
    """One window to ask of `log` (choices named with suffix k)."""
    pick = lambda name: "%s%d" % (name, k)  # noqa: E731
    runs = log.runs
    run = runs[-1]
    if len(runs) > 1 and choose.chance(pick("earlier_run"), 40):
        run = runs[choose.integer(pick("run_index"), 0, len(runs) - 1)]
    recs = run.records or [run.last]
    how = choose.weighted(pick("how"), [("records", 35), ("inside", 30), ("whole", 8), ("past_end", 7),
                                        ("across", 8), ("tiny", 7), ("start", 5)])
    lo_it, hi_it = run.first, run.last
    if how == "records" and len(recs) >= 2:
        a = choose.integer(pick("ra"), 0, len(recs) - 2)
        b = choose.integer(pick("rb"), a + 1, len(recs) - 1)
        lo, hi = recs[a] + 1, recs[b]
    elif how == "whole":
        lo, hi = run.first, recs[-1]
    elif how == "past_end":
        lo = choose.integer(pick("pa"), run.first, hi_it)
        hi = log_last(log) + choose.integer(pick("pb"), 1, 5000)
    elif how == "across" and len(runs) > 1:
        other = runs[choose.integer(pick("other"), 0, len(runs) - 1)]
        lo = choose.integer(pick("xa"), min(run.first, other.first), max(run.first, other.first))
        hi = choose.integer(pick("xb"), lo, max(run.last, other.last))
    elif how == "tiny":
        lo = choose.integer(pick("ta"), lo_it, hi_it)
        hi = lo + choose.integer(pick("tb"), 0, 3)
    elif how == "start":
        lo = 1
        hi = choose.integer(pick("sa"), 1, max(1, hi_it))
    else:
        lo = choose.integer(pick("ia"), lo_it, hi_it)
        hi = choose.integer(pick("ib"), lo, hi_it)
    lo = max(1, lo)
    hi = max(lo, hi)
    run_opt = None
    if len(runs) > 1 and choose.chance(pick("run_opt"), 25):
        run_opt = choose.integer(pick("run_n"), 1, len(runs) + 1)     # sometimes one the log lacks
    max_error = None
    if choose.chance(pick("max_error_opt"), 15):
        max_error = choose.choice(pick("max_error"), [1e-4, 1e-3, 5e-3, 1e-2, 5e-2])
    ipe = None
    if log.epoch_length and log.needs_epoch_length and choose.chance(pick("ipe"), 70):
        ipe = log.epoch_length
    framework = None
    if log.framework and choose.chance(pick("framework"), 10):
        framework = log.framework
    approximate = True if choose.chance(pick("approximate"), 50) else None
    images = log.images_per_iteration
    if images and log.params.get("implies_images") and choose.chance(pick("wrong_batch"), 10):
        # a batch the log's own figures contradict (the flag of another cell, a GPU count forgotten)
        images *= choose.choice(pick("batch_factor"), [2, 15])
    return Request(lo - 1, hi - lo + 1, run_opt, max_error, ipe, images, framework, approximate)


def log_last(log):
    return max(r.last for r in log.runs)
