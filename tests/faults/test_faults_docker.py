"""The Docker engine stopped in the middle of a docker run: nothing finished is lost.

This stops and restarts the host's dockerd, which stops every container on it, so it runs
only where that is allowed: DETBENCH_DISRUPTIVE_TESTS=1 (set by .ci/run), as root, with a
dockerd process this test can start again with the same command line.
"""
import os
import signal
import subprocess

import pytest

from harness.launch import engine
from tests.support.services import need_service
from tests.launch.test_docker_backend import (CALIBRATE, detbench, finish, need_image, ours,
                                       running_trial_container, trial_rows)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.faults]
DISRUPTIVE = os.environ.get("DETBENCH_DISRUPTIVE_TESTS") == "1"


def dockerd_process():
    """(pid, argv) of the running dockerd, or None."""
    out = subprocess.run(["pgrep", "-x", "dockerd"], stdout=subprocess.PIPE, text=True).stdout.split()
    if len(out) != 1:
        return None
    with open("/proc/%s/cmdline" % out[0], "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    return int(out[0]), argv


def start_dockerd(argv, old_pid=None):
    if old_pid is not None:   # a second dockerd refuses to start while the first still shuts down
        wait_for(lambda: not os.path.exists("/proc/%d" % old_pid), 120, "the old dockerd to exit")
    with open("/var/log/dockerd.log", "ab") as log:
        subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    wait_for(engine.available, 60, "dockerd to answer again", poll_s=0.5)


@pytest.fixture
def stoppable_engine():
    if not DISRUPTIVE:
        pytest.skip("stops the host's Docker engine; set DETBENCH_DISRUPTIVE_TESTS=1 to allow it")
    need_service(engine.available(), "no Docker engine answers at %s" % engine.where())
    found = dockerd_process()
    need_service(os.geteuid() == 0 and found is not None, "needs root and one dockerd process to restart")
    client = engine.connect()
    yield client, found
    if not engine.available():      # whatever happened, leave the engine as we found it
        start_dockerd(found[1], found[0])


def test_engine_stopped_mid_run_fails_the_trial_in_flight_and_resume_completes(
        stoppable_engine, write_scenario, tmp_path):
    client, (pid, argv) = stoppable_engine
    need_image(client, "calibrate")
    scenario = write_scenario(CALIBRATE.format(warmup=1, measure=30, repeats=3, iteration_ms=100))
    results = tmp_path / "results"
    proc = detbench("run", "--scenario", str(scenario), "--results", str(results))
    wait_for(lambda: [r[1] for r in trial_rows(results)][:1] == ["done"]
             if (results / "detbench.sqlite").exists() else False, 120, "the first trial to finish")
    in_flight = running_trial_container(client, results)
    os.kill(pid, signal.SIGTERM)
    code, out = finish(proc, timeout=120)
    assert code == 2, out
    assert "Docker engine" in out and "--resume" in out, out
    rows = trial_rows(results)
    assert rows[0][1] == "done" and rows[0][3] > 0           # what finished is kept
    assert rows[1][1] == "failed" and rows[1][2], rows      # the trial in flight, with its reason
    assert rows[2][1] == "pending", rows
    start_dockerd(argv, pid)
    client = engine.connect()
    # the run's reaper waited for the engine and removes the container it could not remove
    wait_for(lambda: not [c for c in ours(client) if c.id == in_flight.id], 60, "the reaper to remove the container")
    run_id = results.joinpath("trials").iterdir().__next__().name.rsplit("-", 1)[0]
    code, out = finish(detbench("run", "--resume", run_id, "--results", str(results)))
    assert code == 0, out
    rows = trial_rows(results)
    assert [r[1] for r in rows] == ["done", "failed", "done"], rows
    assert not [c for c in ours(client) if str(results) in str(c.attrs["Mounts"])]
