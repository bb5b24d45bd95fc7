"""Checking the calibration workload's logged batch times against the times it was designed to take.

The workload ends every batch on an absolute deadline, so a late wake-up lengthens one batch and
shortens the next by as much: the batches' ends stay on their deadlines. On a virtual machine a
wake-up can be several milliseconds late (seen: 8 ms in a container, with 2 or 3 such batches in
20), which moves an order statistic of 20 batches by as much. What holds whatever the scheduler
does is the deadlines: every batch ends within a fraction of the shortest batch of its own
deadline, and the typical batch takes its designed time. A batch missing, added or put in the
wrong place (a tail batch where a plain one belongs) moves every later end by a whole batch.
"""
import statistics


def designed_ms(warmup, measure, iteration_ms, tail_every, tail_ms):
    """The measured batches' designed times (ms): every `tail_every`-th batch, counted from the
    first warmup batch, takes `tail_ms`, the others `iteration_ms`."""
    return [tail_ms if k % tail_every == 0 else iteration_ms for k in range(warmup + 1, warmup + measure + 1)]


def lateness_ms(times_s, designed_ms):
    """Each batch's end against its deadline, counted from the first batch's start (ms)."""
    assert len(times_s) == len(designed_ms), (len(times_s), len(designed_ms))
    late, end, deadline = [], 0.0, 0.0
    for took, designed in zip(times_s, designed_ms):
        end += took * 1000.0
        deadline += designed
        late.append(end - deadline)
    return late


def assert_on_deadlines(times_s, designed_ms, typical_ms=1.0):
    """Every batch ends within half the shortest designed batch of its deadline, and half of the
    batches or more take their designed time to within `typical_ms`."""
    late = lateness_ms(times_s, designed_ms)
    bound = min(designed_ms) / 2.0
    worst = max(range(len(late)), key=lambda i: abs(late[i]))
    assert abs(late[worst]) < bound, "batch %d ended %.2f ms off its deadline (bound %.1f ms): %s" % (
        worst, late[worst], bound, [round(t * 1000, 2) for t in times_s])
    off = [abs(t * 1000.0 - d) for t, d in zip(times_s, designed_ms)]
    assert statistics.median(off) <= typical_ms, "the typical batch is %.2f ms off its design: %s" % (
        statistics.median(off), [round(t * 1000, 2) for t in times_s])
