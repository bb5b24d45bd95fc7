"""Cases a user met with logs written from known times in each framework's own format
(benchmarks/loggen, every choice that makes the case fixed): the figure `detbench scrape` and
`detbench import` give is true of the iterations it names, or refused saying why.
"""
import pytest

from benchmarks import loggen
from harness.measure import logfigure
from harness.measure.scrapers import common

ONE_RUN = {"runs": 1, "fault": None}


def write(tmp_path, log, name="train.log"):
    return log.write(str(tmp_path / name))


def read(path, fmt=None):
    how = logfigure.reading(path, None, fmt)
    records, _ = logfigure.read(path, how)
    return records


def within_bound(log, fig, run=1):
    truth, _ = log.mean(run, *fig.window)
    return abs(fig.iteration_time_s - truth) <= fig.error_bound_s * (1 + 1e-9) + 1e-15


# ---------------------------------------------------------------- NUL bytes

@pytest.mark.parametrize("fmt", ["maskrcnn-benchmark", "detectron2"])
@pytest.mark.parametrize("damage", ["block", "tail"])
def test_lines_of_nul_bytes_are_skipped_counted_and_the_rest_read(tmp_path, fmt, damage):
    log = loggen.generate(fmt, loggen.FixedChooser(dict(ONE_RUN, iters=4000, ckpt=5000), seed=3), max_iters=4000)
    intact = write(tmp_path, log, "intact.log")
    data = open(intact, "rb").read()
    cut = data.index(b"\n", len(data) * 3 // 4) + 1  # a line's start, past the window
    if damage == "block":  # a 4 KiB page never written inside an intact log
        damaged = data[:cut] + b"\0" * 4096 + data[cut + 4096:]
    else:  # a crash: the file's end never written, longer than a line may be
        damaged = data[:cut] + b"\0" * (2 * common.LINE_MAX)
    path = tmp_path / "damaged.log"
    path.write_bytes(damaged)
    skipped = len([line for line in damaged.split(b"\n") if b"\0" in line])
    first = data[:cut].count(b"\n") + 1
    records = read(str(path), fmt)
    fig = logfigure.figure(str(path), records, 100, 1000, 8, approximate=True)
    want = logfigure.figure(intact, read(intact, fmt), 100, 1000, 8, approximate=True)
    assert (fig.window, fig.iteration_time_s) == (want.window, want.iteration_time_s)
    more = " and %d more like it" % (skipped - 1) if skipped > 1 else ""
    assert ("%s: %d line%s did not parse (line %d%s: %s)" % (
        path, skipped, "" if skipped == 1 else "s", first, more, common.NUL_SKIPPED)) in fig.notes
