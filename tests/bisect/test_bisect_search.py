"""`detbench bisect` over real commits of a small repository holding the calibration workload:
the culprit named, no regression said when there is none, bad input refused in one line with
nothing left behind, worktrees removed on errors and interrupts, and an interrupted bisect resumed."""
import io
import json
import signal
import subprocess
import time

import pytest

from harness.bisect import search
from harness.errors import UserError
from harness.results.store import Store
from tests.support import bisectrepo
from tests.support.cliproc import detbench, error_lines, finish

pytestmark = pytest.mark.timing   # a 10% slowdown is named only on an otherwise idle CPU

FAST = bisectrepo.scenario_text(iteration_ms=10.0, warmup=1, measure=10)


@pytest.fixture
def tmp(tmp_path, monkeypatch):
    """A temporary folder of the test's own, where the bisect's worktrees go (to see they go away)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


def worktrees(repo):
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def bisect(tmp_path, repo, good, bad, **kw):
    out = io.StringIO()
    opts = search.Options(scenario=bisectrepo.SCENARIO, good=good, bad=bad, repo=str(repo),
                          results_dir=str(tmp_path / "results"), seed=7, **kw)
    return search.bisect(opts, out), out.getvalue()


@pytest.mark.slow
def test_names_the_commit_that_made_the_workload_ten_percent_slower(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=4, slow_at=2, scenario=FAST)
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1])
    assert outcome.culprit.label == shas[2]
    assert "first bad commit: %s tune the iteration pace" % shas[2] in text
    assert 0.86 < outcome.effect.ratio < 0.96 and outcome.effect.high < 1.0   # 1/1.1 = 0.909
    # the evidence: the endpoints, then commit 1 (good) and commit 2 (bad)
    assert [(s.arm.label, s.verdict) for s in outcome.steps] == [
        (shas[3], "regression"), (shas[1], "good"), (shas[2], "bad")]
    assert "step  revision" in text and "ratio vs good [lo, hi]" in text
    for s in outcome.steps:
        assert s.arm.short in text and s.ratio.text() in text
    # every trial is in the store, one run per revision measured
    store = Store(tmp_path / "results", create=False)
    runs = {r.scenario_name: r for r in store.read_runs()}
    assert sorted(runs) == sorted("bisect-calibrate@%s" % s[:10] for s in (shas[0], shas[1], shas[2], shas[3]))
    for step in outcome.steps[1:]:
        trials = store.read_trials(runs["bisect-calibrate@%s" % step.arm.short].id)
        assert len(trials) == int(step.trials) and all(t.done for t in trials)
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


def test_says_no_regression_when_the_endpoints_run_alike(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, scenario=FAST)
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1])
    assert outcome.culprit is None and len(outcome.steps) == 1
    assert "no regression between these revisions" in text
    assert outcome.effect.low > 0.95
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


def _bad_input_repo(tmp_path, case):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, scenario=FAST)
    args = ["--good", shas[0], "--bad", shas[-1]]
    if case == "no such revision":
        args = ["--good", "v9.9-nowhere", "--bad", shas[-1]]
    elif case == "not ordered":
        args = ["--good", shas[-1], "--bad", shas[0]]
    elif case == "cell gone at bad":
        (repo / bisectrepo.SCENARIO).write_text(FAST.replace("model: [retinanet]", "model: [faster_rcnn]"))
        shas.append(bisectrepo.commit(repo, "measure another model"))
        args = ["--good", shas[0], "--bad", shas[-1], "--cell", "calibrate/retinanet/fp32/local/1/1"]
    elif case == "dirty tree":
        (repo / "CHANGES").write_text("not committed\n")
    return repo, args


BAD_INPUT = {
    "no such revision": "--good v9.9-nowhere: no such revision",
    "not ordered": "is not an ancestor of --bad",
    "cell gone at bad": "cell calibrate/retinanet/fp32/local/1/1 is not a measurable cell of the scenario at --bad",
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
    import os
    return dict(os.environ, TMPDIR=str(tmp))


def test_a_failing_candidate_stops_the_bisect_and_its_worktrees_go(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=1, scenario=FAST)
    workload = repo / "harness/workloads/calibrate.py"
    text = workload.read_text()
    workload.write_text(text.replace(bisectrepo.PACE_LINE, "raise SystemExit('broken here')\n"))
    shas.append(bisectrepo.commit(repo, "break the workload"))
    workload.write_text(text.replace(bisectrepo.PACE_LINE, "PACE = 1.1\n"))
    shas.append(bisectrepo.commit(repo, "mend it, slower"))
    with pytest.raises(UserError, match="revision %s: trial .* failed" % shas[1][:10]):
        bisect(tmp_path, repo, shas[0], shas[-1])
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


@pytest.mark.slow
def test_an_interrupted_bisect_removes_its_worktrees_and_resumes_from_the_store(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=3, slow_at=1, scenario=FAST)
    results = tmp_path / "results"
    args = ["bisect", "--scenario", bisectrepo.SCENARIO, "--repo", repo, "--results", results,
            "--good", shas[0], "--bad", shas[-1]]
    proc = detbench(*args, env=_env(tmp))
    deadline = time.time() + 60
    while time.time() < deadline and _done_trials(results) < 4:   # into the endpoints' rounds
        time.sleep(0.2)
    import os
    os.killpg(proc.pid, signal.SIGINT)
    code, out = finish(proc, timeout=60)
    assert code == 130, out
    assert "--resume" in out
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []
    kept = _done_trials(results)
    assert kept >= 4
    code, out = finish(detbench(*args, "--resume", env=_env(tmp)), timeout=120)
    assert code == 0, out
    assert "first bad commit: %s" % shas[1] in out
    assert len(list((results / search.STATE_DIR).glob("*.json"))) == 1
    state = json.loads(next((results / search.STATE_DIR).glob("*.json")).read_text())
    store = Store(results, create=False)
    assert sorted(r.id for r in store.read_runs()) == sorted(state["runs"].values())   # no run made twice
    assert len(worktrees(repo)) == 1 and list(tmp.iterdir()) == []


def _done_trials(results):
    if not (results / "detbench.sqlite").exists():
        return 0
    store = Store(results, create=False)
    try:
        return sum(1 for r in store.read_runs() for t in store.read_trials(r.id) if t.done)
    finally:
        store.close()


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
  iteration_ms: %s
  data_ms: 0.5
"""


@pytest.mark.slow
def test_a_latency_metric_finds_the_commit_whose_batches_got_slower(tmp_path, tmp):
    repo = tmp_path / "repo"
    shas = bisectrepo.make_repo(repo, commits=1, scenario=INFERENCE % "10.0")
    (repo / bisectrepo.SCENARIO).write_text(INFERENCE % "11.0")
    shas.append(bisectrepo.commit(repo, "slower batches"))
    (repo / "CHANGES").write_text("later\n")
    shas.append(bisectrepo.commit(repo, "a later change"))
    outcome, text = bisect(tmp_path, repo, shas[0], shas[-1], metric="mean")
    assert outcome.culprit.label == shas[1], text
    assert 1.05 < outcome.effect.ratio < 1.15 and outcome.effect.low > 1.0     # a rise: 11 ms over 10 ms
    assert "mean latency" in text
