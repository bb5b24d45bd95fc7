"""Logs that several processes print into: each node's local rank 0 (efficientdet-pytorch logs
where local_rank == 0), every worker (SimpleDet's Speedometer), all ranks behind a launcher.

With rank prefixes (srun --label's "4: ", torchrun --tee's "[rank1]:" or "[default1]:", mpirun
--tag-output's "[1,1]<stdout>:") only rank 0's lines are read. Without them, records of several
processes for the same iterations are no restart: the log is refused in one line naming two
pairs of lines, rather than read as a string of spurious runs.
"""
import pytest

from harness.measure import scrapers, stats
from harness.measure.records import IterationRecord
from harness.measure.scrapers import common
from tests.scrapers.test_scraper_runs import BANNERS, NATIVE, restarted


def other_process(line):
    """The same record as another process prints it: the same iteration, another time."""
    out = line.replace("0.3", "0.2")
    assert out != line
    return out


@pytest.mark.parametrize("name", sorted(BANNERS))
def test_two_processes_without_rank_prefixes_refuse_the_log_naming_both_pairs(name):
    _, (one, two) = BANNERS[name]
    records, errors = scrapers.get(name)([one, other_process(one), two, other_process(two)])
    fatal = [e for e in errors if e.fatal]
    assert fatal, (records, errors)
    reason = fatal[0].reason
    assert reason.startswith("records of several processes: iteration %d on lines 1 and 2 and iteration %d on "
                             "lines 3 and 4 carry different figures" % (records[0].iteration, records[-1].iteration))
    assert "rank prefix" in reason


@pytest.mark.parametrize("name", sorted(BANNERS))
@pytest.mark.parametrize("labels", [("0: ", "4: "), ("[rank0]:", "[rank1]:"), ("[default0]:", "[default1]:"),
                                    ("[1,0]<stdout>:", "[1,1]<stdout>:")])
def test_with_rank_prefixes_rank_0_s_records_are_read_and_nothing_else(name, labels):
    _, (one, two) = BANNERS[name]
    zero, other = labels
    alone, _ = scrapers.get(name)([one, two])
    records, errors = scrapers.get(name)([zero + one, other + other_process(one), other + other_process(two),
                                          zero + two])
    assert not errors and [r._replace(line=0) for r in records] == [r._replace(line=0) for r in alone]
    assert [r.line for r in records] == [0, 3] and {r.run for r in records} == {1}


def test_a_resume_right_after_a_record_is_still_a_run_of_its_own():
    # one record of an iteration just logged, then the counter rises: a restart, not a second process
    _, (one, two) = BANNERS["effdet"]
    records, errors = scrapers.get("effdet")([one, two, other_process(two)])
    assert not errors and [r.run for r in records] == [1, 1, 2]


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_every_reading_of_a_two_process_log_refuses_it_alike(tmp_path, name):
    lines = restarted(name).splitlines()
    k = next(i for i, l in enumerate(lines) if "0.3" in l and i > 5)
    j = next(i for i, l in enumerate(lines) if "0.3" in l and i > k)
    lines[j + 1:j + 1] = [other_process(lines[j])]
    lines[k + 1:k + 1] = [other_process(lines[k])]
    path = tmp_path / "log.txt"
    path.write_text("\n".join(lines) + "\n")
    by_lines = [repr(x) for x in common.run_lines(NATIVE[name](), lines)]
    assert any("records of several processes" in x for x in by_lines)
    for native in (False, True):
        assert [repr(x) for x in common.run_path(NATIVE[name](), path, 64, native=native)] == by_lines


SPEED = "07-02 16:11:03 Epoch[0] Batch [%d]\tIter: %d/87960\tLr: 0.00693\tSpeed: %s samples/sec\tTrain-"


def test_simpledet_records_after_a_second_worker_s_line_carry_no_bound():
    lines = [SPEED % (b, b, "28.71") for b in (10, 20)] + [SPEED % (20, 20, "29.02")]
    lines += [SPEED % (b, b, "28.71") for b in (30, 40)]
    records, errors = scrapers.get("simpledet-mxnet")(lines)
    assert not errors and [r.iteration for r in records] == [11, 21, 31, 41]
    assert [r.rounding for r in records] == [0.005, 0.005, float("inf"), float("inf")]
    assert stats.reported(records, 0, 20, 2).error_bound_s is not None      # iterations 2..21: one worker's
    assert stats.reported(records, 20, 20, 2).error_bound_s is None         # 22..41: whichever printed first


def test_only_other_ranks_records_say_the_log_has_none_of_rank_0():
    _, (one, two) = BANNERS["effdet"]
    records, errors = scrapers.get("effdet")(["4: " + one, "4: " + two])
    assert records == [] and not errors
    assert all(not isinstance(r, IterationRecord) for r in records)


# ---------------------------------------------------------------- throughput-only logs: the bound of their digits

def tensorpack_log(rates, steps=100):
    out = []
    for e, rate in enumerate(rates, 1):
        out.append("[0612 10:11:%02d @base.py:285] Epoch %d (global_step %d) finished, time:20 seconds."
                   % (e, e, e * steps))
        out.append("[0612 10:11:%02d @monitor.py:474] Throughput (samples/sec): %s" % (e, rate))
    return out


def test_tensorpack_epochs_give_a_time_bound_from_their_five_digits():
    records, errors = scrapers.get("tensorpack")(tensorpack_log(["12.345", "12.346", "12.347"]))
    assert not errors
    est = stats.reported(records, 100, 200, 4)            # epochs 2 and 3, four images a step
    seconds = 100 * 4 / 12.346 + 100 * 4 / 12.347
    assert est.iteration_time_s == pytest.approx(seconds / 200)
    # each rate is off by at most 0.0005: its epoch's 100 steps by 400 * 0.0005 / (v * (v - 0.0005))
    worst = sum(400 * 0.0005 / (v * (v - 0.0005)) for v in (12.346, 12.347)) / 200
    assert est.error_bound_s == pytest.approx(worst, rel=1e-6) and est.exact
    assert stats.reported(records, 100, 200, None).error_bound_s is None   # no images per step: no time


def test_a_window_that_is_not_whole_epochs_or_misses_a_record_has_no_bound():
    records, _ = scrapers.get("tensorpack")(tensorpack_log(["12.345", "12.346", "12.347", "12.348"]))
    est = stats.reported(records, 100, 250, 4)           # 101..350: the records give 101..300
    assert est.window == (101, 300) and est.error_bound_s is not None and not est.exact
    lines = [SPEED % (b, b, "28.71") for b in (10, 20, 40, 50)]   # batch 30's line lost
    records, _ = scrapers.get("simpledet-mxnet")(lines)
    est = stats.reported(records, 0, 51, 2)
    assert est.window == (2, 51) and est.error_bound_s is None
