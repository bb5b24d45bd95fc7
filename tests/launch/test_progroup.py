"""A program started through progroup goes with every process it started: when it is stopped,
when it exits on its own, and when `run` times out. Its child here ignores SIGTERM and holds the
program's output pipe, as a DataLoader worker whose parent is gone does."""
import os
import select
import subprocess
import sys
import time

import pytest

from harness.launch import progroup

# prints its child's pid, then sleeps argv[1] seconds (0: exits at once); the child ignores
# SIGTERM and sleeps for ten minutes with the program's stdout open
PROGRAM = r"""
import os, signal, sys, time
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
    os._exit(0)
print(child, flush=True)
time.sleep(float(sys.argv[1]))
"""


def alive(pid):
    """True while pid runs (a zombie waiting for a parent that never reaps it counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def ends_within(pipe, seconds):
    """True when the pipe reaches its end (all writers gone) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([pipe], [], [], 0.1)
        if ready and not os.read(pipe.fileno(), 4096):
            return True
    return False


@pytest.fixture
def children():
    started = []
    yield started
    for pid in started:             # whatever a failing test left behind
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_stopping_a_program_stops_the_child_that_ignores_sigterm(children):
    proc = progroup.start([sys.executable, "-c", PROGRAM, "600"], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    children.append(child)
    assert alive(child)
    progroup.stop(proc, grace_s=5)
    assert proc.returncode is not None
    assert gone_within(child, 5), "the program's child outlived the stop"
    proc.stdout.close()


def test_a_program_that_exits_on_its_own_leaves_nothing_running_and_its_output_ends(children):
    proc = progroup.start([sys.executable, "-c", PROGRAM, "0"], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    children.append(child)
    # the child holds the pipe: it ends only because the group is killed once the program exits
    assert ends_within(proc.stdout, 10), "the program's output never ended"
    assert proc.wait(5) == 0
    assert gone_within(child, 5)


def test_run_captures_the_output_of_a_program_that_left_a_child_and_kills_the_child(children):
    done = progroup.run([sys.executable, "-c", PROGRAM, "0"], timeout_s=30, grace_s=5)
    child = int(done.stdout.split()[0])
    children.append(child)
    assert done.returncode == 0
    assert gone_within(child, 5)


def test_run_stops_the_whole_group_when_it_times_out(children, tmp_path):
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        progroup.run([sys.executable, "-c", PROGRAM + "\n", "600"], timeout_s=3, grace_s=2)
    assert time.monotonic() - started < 20
    # the child's pid was printed into the pipe the timeout discarded: find it by its parentage
    leftovers = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                 if _cmdline(pid).endswith(PROGRAM + "\n\x00600")]
    children.extend(leftovers)
    # SIGKILL is delivered, not awaited: on a busy machine the child may take a moment to go
    assert not [pid for pid in leftovers if not gone_within(pid, 5)]


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid) as fh:
            return fh.read().rstrip("\x00")
    except OSError:
        return ""
