"""`detbench bisect` over real commits of a throwaway repository of this project, each commit run
by its own detbench (`python -m harness.cli run` in its checkout): a slowdown made by an adapter
alone named with its effect against its parent, no culprit when there is none, a commit that
does not import or cannot read the scenario skipped (the culprit still named, or the smallest
range where it cannot be),
two steps named each with its share, bad input refused in one line with nothing left behind,
and an interrupted bisect resumed. The calibration workload keeps these trials to about a second."""
import io
import json
import os
import signal
import subprocess
import time

import pytest

from harness.bisect import decide, search
from harness.results import compare
from harness.results.store import Store
from tests.support import bisectrepo
from tests.support.cliproc import detbench, error_lines, finish

pytestmark = pytest.mark.timing   # a calibration slowdown is named only while its trials keep their pace

FAST = bisectrepo.scenario_text(iteration_ms=10.0, warmup=1, measure=10)
BROKEN_IMPORT = "import detbench_no_such_module  # a commit that does not import\n"


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """A temporary folder of the test's own, where the bisect's worktrees go (to see they go away)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


@pytest.fixture
def scenario(tmp_path):
    """The user's scenario, outside the repository: every revision runs this one."""
    path = tmp_path / "hunt.yaml"
    path.write_text(FAST, encoding="utf-8")
    return path


def worktrees(repo):
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def bisect(tmp_path, repo, good, bad, scenario=bisectrepo.SCENARIO, **kw):
    out = io.StringIO()
    opts = search.Options(scenario=str(scenario), good=good, bad=bad, repo=str(repo),
                          results_dir=str(tmp_path / "results"), seed=7, **kw)
    return search.bisect(opts, out), out.getvalue()


def broken(repo, message="a commit whose adapters do not import"):
    path = repo / bisectrepo.CALIBRATE_ADAPTER
    text = path.read_text(encoding="utf-8")
    path.write_text(BROKEN_IMPORT + text, encoding="utf-8")
    return bisectrepo.commit(repo, message)


def mended(repo):
    path = repo / bisectrepo.CALIBRATE_ADAPTER
    path.write_text(path.read_text(encoding="utf-8").replace(BROKEN_IMPORT, ""), encoding="utf-8")
    return bisectrepo.commit(repo, "the adapters import again")


def test_a_slowdown_made_by_the_adapter_alone_is_named_with_its_effect_against_its_parent(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = [bisectrepo.start_repo(repo), bisectrepo.notes(repo, 1)]
    shas.append(bisectrepo.slower_adapter(repo, 1.5))          # the scenario file never changes
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], scenario=scenario)
    assert outcome.culprit.label == shas[2], text
    assert text.rstrip().splitlines()[-1] == ("first bad commit: %s the calibration adapter asks for longer "
                                              "iterations" % shas[2])
    assert outcome.exit_status == 0 and outcome.undecided is None
    # the effect is the culprit against its parent, 1/1.5 = 0.667, with an interval that excludes 1
    assert outcome.found[0].parent.label == shas[1]
    assert 0.6 < outcome.effect.ratio < 0.74 and outcome.effect.high < 0.8, text
    assert "vs its parent %s" % shas[1][:10] in text
    assert [(s.arm.label, s.verdict) for s in outcome.steps[:3]] == [
        (shas[2], "regression"), (shas[1], "good"), (shas[2], "regression vs parent %s" % shas[1][:10])]
    # each revision's trials were planned by its own detbench, into a store of its own
    state = json.loads(next((tmp_path / "results" / search.STATE_DIR).glob("*.json")).read_text())
    for sha in shas:
        store = Store(state["runs"][sha], create=False)
        argv = [t.argv for r in store.read_runs() for t in store.read_trials(r.id)]
        assert argv and all(("--iteration-ms" in a) for a in argv)
        pace = {a[a.index("--iteration-ms") + 1] for a in argv}
        assert pace == ({"15.0"} if sha == shas[2] else {"10.0"}), (sha, pace)
        store.close()
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


def test_says_no_regression_when_the_endpoints_run_alike(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, scenario=FAST)
    # "alike" within 10%: a loaded CPU shifts single calibration trials by a few percent
    judge = decide.Judge(rule=compare.Rule(threshold=0.10, alpha=decide.ALPHA))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], scenario=scenario, judge=judge)
    assert outcome.culprit is None and outcome.found == [] and len(outcome.steps) == 1
    assert text.rstrip().splitlines()[-1].startswith("no regression between these revisions")
    assert outcome.effect.low > 0.9
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


HOLD_MB = "    hold_mb: int = Field(default=0, ge=0)  # resident memory held through the trial\n"


def test_a_commit_that_cannot_read_the_scenario_is_skipped_and_the_answer_is_the_smallest_range(tmp_path, tmp):
    repo = tmp_path / "repo"
    scenario = tmp_path / "hunt.yaml"
    scenario.write_text(FAST + "  hold_mb: 0\n", encoding="utf-8")     # a key commit 1 does not know
    shas = [bisectrepo.start_repo(repo),
            bisectrepo.edit(repo, "harness/plan/scenario.py", HOLD_MB, "", "calibrate options without hold_mb")]
    (repo / "harness/plan/scenario.py").write_text(
        (bisectrepo.ROOT / "harness/plan/scenario.py").read_text(encoding="utf-8"), encoding="utf-8")
    shas.append(bisectrepo.slower_adapter(repo, 1.5, "hold_mb back, with longer iterations"))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], scenario=scenario)
    assert [a.label for a in outcome.skipped] == [shas[1]], text
    reason = outcome.skipped[0].skipped
    assert reason.startswith("its detbench could not run today's scenario: ") and "hold_mb" in reason, reason
    assert "skipped %s" % shas[1][:10] in text
    # commit 1 cannot run: the slowdown is in commit 1 or 2, and neither is named alone
    assert outcome.culprit.label == shas[2] and not outcome.found[0].isolated
    assert text.rstrip().splitlines()[-1] == ("first bad commit: one of %s..%s (2 commits; 1 could not be "
                                              "measured)" % (shas[1][:10], shas[2][:10]))
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


@pytest.mark.nightly
def test_a_middle_commit_that_does_not_import_is_skipped_and_the_culprit_still_named(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = [bisectrepo.start_repo(repo), bisectrepo.notes(repo, 1), broken(repo), mended(repo)]
    shas.append(bisectrepo.slower_adapter(repo, 1.5))
    shas.append(bisectrepo.notes(repo, 5))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], scenario=scenario)
    assert [a.label for a in outcome.skipped] == [shas[2]], text     # the middle revision, tried first
    assert "No module named 'detbench_no_such_module'" in outcome.skipped[0].skipped
    assert outcome.culprit.label == shas[4] and outcome.found[0].isolated, text
    assert outcome.found[0].parent.label == shas[3]
    assert text.rstrip().splitlines()[-1].startswith("first bad commit: %s" % shas[4])


@pytest.mark.nightly
def test_a_slowdown_in_two_equal_steps_names_both_with_their_shares(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = [bisectrepo.start_repo(repo), bisectrepo.notes(repo, 1)]
    shas.append(bisectrepo.slower_adapter(repo, 1.4, "longer iterations, first half"))
    shas.append(bisectrepo.notes(repo, 3))
    shas.append(bisectrepo.slower_adapter(repo, 1.4, "longer iterations, second half"))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], scenario=scenario)
    assert [f.arm.label for f in outcome.found] == [shas[2], shas[4]], text
    for f in outcome.found:
        assert 0.64 < f.effect.ratio < 0.78 and 0.3 < f.share < 0.7, text      # 1/1.4 = 0.714, half each
    assert text.rstrip().splitlines()[-1].startswith("first bad commits (a slowdown in 2 steps): %s (" % shas[2][:10])


def test_a_bisect_still_undecided_at_the_cap_says_so_on_its_last_line_and_exits_3(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=2, slow_at=1, slowdown=1.5, scenario=FAST)
    # five trials a side reach p = 1/252 at best: an alpha of 0.0001 cannot be spent on them
    code, out = finish(detbench("bisect", "--scenario", scenario, "--repo", repo, "--results", tmp_path / "results",
                                "--good", shas[0], "--bad", shas[1], "--max-trials", 5, "--alpha", 0.0001,
                                env=_env(tmp)), timeout=240)
    assert code == 3, out
    assert out.rstrip().splitlines()[-1] == ("undecided at 5 trials; the endpoints neither differ by 5% nor are "
                                             "shown alike"), out
    assert "first bad commit" not in out
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


def _bad_input_repo(tmp_path, case):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, scenario=FAST)
    args = ["--good", shas[0], "--bad", shas[-1]]
    if case == "no such revision":
        args = ["--good", "v9.9-nowhere", "--bad", shas[-1]]
    elif case == "not ordered":
        args = ["--good", shas[-1], "--bad", shas[0]]
    elif case == "no such cell":
        args += ["--cell", "calibrate/faster_rcnn/fp32/local/1/1"]
    elif case == "dirty tree":
        (repo / "CHANGES").write_text("not committed\n")
    return repo, args


BAD_INPUT = {
    "no such revision": "--good v9.9-nowhere: no such revision",
    "not ordered": "is not an ancestor of --bad",
    "no such cell": "cell calibrate/faster_rcnn/fp32/local/1/1 is not a measurable cell of this scenario (its "
                    "cells: calibrate/retinanet/fp32/local/1/1)",
    "dirty tree": "the working tree has uncommitted changes (CHANGES",
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_exit_2_and_leaves_nothing_behind(tmp_path, tmp, case):
    repo, args = _bad_input_repo(tmp_path, case)
    results = tmp_path / "results"
    code, out = finish(detbench("bisect", "--scenario", bisectrepo.SCENARIO, "--repo", repo,
                                "--results", results, *args, env=_env(tmp)), timeout=60)
    assert code == 2, out
    assert len(error_lines(out)) == 1 and out.strip() == error_lines(out)[0], out
    assert BAD_INPUT[case] in out
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []
    assert not results.exists()


def _env(tmp):
    return dict(os.environ, TMPDIR=str(tmp))


def test_a_good_end_that_cannot_run_is_one_line_before_anything_is_measured(tmp_path, tmp, scenario):
    repo = tmp_path / "repo"
    shas = [bisectrepo.start_repo(repo)]
    (repo / "harness" / "cli.py").unlink()
    shas.append(bisectrepo.commit(repo, "no command line"))
    bisectrepo.git(repo, "checkout", "-q", "HEAD~1", "--", "harness/cli.py")
    shas.append(bisectrepo.commit(repo, "the command line back"))
    results = tmp_path / "results"
    code, out = finish(detbench("bisect", "--scenario", scenario, "--repo", repo, "--results", results,
                                "--good", shas[1], "--bad", shas[2], env=_env(tmp)), timeout=60)
    assert code == 2, out
    assert error_lines(out) == ["detbench: error: --good %s: it has no detbench command line (harness/cli.py) to "
                                "run the scenario with; bisect from a revision where the cell runs" % shas[1][:10]]
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == [] and not results.exists()


@pytest.mark.slow
def test_an_interrupted_bisect_removes_its_worktrees_and_resumes_from_the_store(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, slow_at=1, slowdown=1.5, scenario=FAST)
    results = tmp_path / "results"
    args = ["bisect", "--scenario", bisectrepo.SCENARIO, "--repo", repo, "--results", results,
            "--good", shas[0], "--bad", shas[-1]]
    proc = detbench(*args, env=_env(tmp))
    deadline = time.time() + 90
    while time.time() < deadline and bisectrepo.done_trials(results) < 4:   # into the endpoints' rounds
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    code, out = finish(proc, timeout=60)
    assert code == 130, out
    assert "--resume" in out
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []
    kept = bisectrepo.done_trials(results)
    assert kept >= 4
    code, out = finish(detbench(*args, "--resume", env=_env(tmp)), timeout=300)
    assert code == 0, out
    assert "first bad commit: %s" % shas[1] in out
    assert len(list((results / search.STATE_DIR).glob("*.json"))) == 1
    assert bisectrepo.done_trials(results) >= kept + 2            # the kept trials counted, more added
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


INFERENCE = """\
name: bisect-latency
mode: inference
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [local]
batch_sizes: [2]
input_size: [64, 64]
warmup: 1
measure: 10
percentiles: [50, 90]
repeats: 1
timeout_s: 60
calibrate:
  iteration_ms: 10.0
  data_ms: 0.5
"""


@pytest.mark.slow
def test_a_latency_metric_finds_the_commit_whose_batches_got_slower(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = [bisectrepo.start_repo(repo, INFERENCE)]
    shas.append(bisectrepo.slower_adapter(repo, 1.3, "longer inference batches", inference=True))
    shas.append(bisectrepo.notes(repo, 2))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], metric="mean")
    assert outcome.culprit is not None and outcome.culprit.label == shas[1], text
    assert 1.2 < outcome.effect.ratio < 1.4 and outcome.effect.low > 1.0     # a rise: 13 ms over 10 ms
    assert "mean latency" in text
