"""Slurm end states become failed trials with Slurm's reason (no cluster needed)."""
import json

import pytest

from harness.measure import ingest
from harness.launch import slurm


@pytest.mark.parametrize("state, says", [
    ("TIMEOUT", "hit its Slurm time limit"),
    ("OUT_OF_MEMORY", "ran out of memory"),
    ("NODE_FAIL", "lost a node"),
    ("CANCELLED", "was cancelled"),
    ("PREEMPTED", "was preempted"),
    ("NOT_SUBMITTED", "was refused by sbatch"),
])
def test_bad_end_states_fail_the_trial_even_when_runner_saw_success(tmp_path, state, says):
    (tmp_path / "trial.json").write_text(json.dumps({"schema": 1, "exit_code": 0, "start_mono": 1.0,
                                                     "end_mono": 2.0}))
    assert slurm.record_end(tmp_path, "42", state, "0:15", "") is False
    reason = ingest.failure_reason(ingest.read_trial_json(str(tmp_path)), str(tmp_path))
    assert reason.startswith("slurm job " + says) and "exit 0:15" in reason
    assert json.loads((tmp_path / "slurm.json").read_text())["state"] == state


def test_timeout_keeps_what_the_runner_said_after_slurms_reason(tmp_path):
    (tmp_path / "trial.json").write_text(json.dumps({"schema": 1, "error": "cannot start: x"}))
    slurm.record_end(tmp_path, "7", "TIMEOUT", "0:0", "TimeLimit")
    record = ingest.read_trial_json(str(tmp_path))
    assert record["error"] == "slurm job hit its Slurm time limit (TimeLimit); runner: cannot start: x"
    assert record["slurm"] == {"job_id": "7", "state": "TIMEOUT", "exit_code": "0:0"}


def test_a_job_that_never_started_the_runner_gets_a_trial_json(tmp_path):
    assert slurm.record_end(tmp_path, "9", "NODE_FAIL", "", "") is False
    assert ingest.failure_reason(ingest.read_trial_json(str(tmp_path)), str(tmp_path)) == \
        "slurm job lost a node"


def test_failed_job_keeps_the_runners_more_precise_reason(tmp_path):
    (tmp_path / "trial.json").write_text(json.dumps({"schema": 1, "exit_code": 2}))
    (tmp_path / "log.txt").write_text("error: unknown --set key\n")
    assert slurm.record_end(tmp_path, "5", "FAILED", "1:0", "NonZeroExitCode") is False
    assert ingest.failure_reason(ingest.read_trial_json(str(tmp_path)), str(tmp_path)) == \
        "exit code 2: error: unknown --set key"


def test_failed_job_without_a_runner_record_says_so(tmp_path):
    assert slurm.record_end(tmp_path, "5", "FAILED", "127:0", "NonZeroExitCode") is False
    assert ingest.read_trial_json(str(tmp_path))["error"] == \
        "slurm job ended FAILED (exit 127:0, NonZeroExitCode)"


def test_completed_job_leaves_the_runner_record_alone(tmp_path):
    original = {"schema": 1, "exit_code": 0}
    (tmp_path / "trial.json").write_text(json.dumps(original))
    assert slurm.record_end(tmp_path, "3", "COMPLETED", "0:0", "None") is True
    assert json.loads((tmp_path / "trial.json").read_text()) == original


def test_completed_job_without_trial_json_is_still_a_failure(tmp_path):
    assert slurm.record_end(tmp_path, "3", "COMPLETED", "0:0", "None") is False
    assert "runner.py wrote no trial.json" in ingest.read_trial_json(str(tmp_path))["error"]


def test_sacct_lines_are_read_for_the_job_itself_not_its_steps():
    text = "41|COMPLETED|0:0\n42|CANCELLED by 0|0:15\n42.batch|CANCELLED|0:15\n"
    assert slurm.parse_sacct(text, "42") == ("CANCELLED", "0:15")
    assert slurm.parse_sacct(text, "43") is None


def test_scontrol_one_line_records_are_read():
    line = ("JobId=12 JobName=detbench-x UserId=root(0) JobState=OUT_OF_MEMORY Reason=OutOfMemory "
            "Dependency=(null) ExitCode=0:125 Command=/r/job.sbatch")
    assert slurm.parse_scontrol(line) == ("OUT_OF_MEMORY", "0:125", "OutOfMemory")
    assert slurm.parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None


def test_an_interrupt_while_sbatch_runs_still_cancels_the_job_it_queued(tmp_path, monkeypatch):
    # sbatch queued the job, but the run was interrupted before its id came back
    queued = []

    def submit(script):
        queued.append(("77", slurm.sbatch.job_name(tmp_path.name + "-t1")))
        raise KeyboardInterrupt

    class Scenario:
        def model_copy(self, update):
            return self

    cancelled = []
    monkeypatch.setattr(slurm, "submit", submit)
    monkeypatch.setattr(slurm, "script_for", lambda *a, **k: "#!/bin/bash\n")
    monkeypatch.setattr(slurm, "jobs_named", lambda name, user=None: [(j, n, "PENDING") for j, n in queued
                                                                      if n.startswith(name)])
    monkeypatch.setattr(slurm, "cancel", lambda ids, **kw: cancelled.extend(ids) or [])
    launcher = slurm.SlurmLauncher()
    launcher.scenario = Scenario()
    with pytest.raises(KeyboardInterrupt):
        launcher.run(tmp_path / (tmp_path.name + "-t1"), ["true"], {}, 60, cell=None)
    assert cancelled == []          # nothing known yet: run() never saw a job id
    launcher.cleanup()              # what run.py does on the way out
    assert cancelled == ["77"] and launcher.active == set()
