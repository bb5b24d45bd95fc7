"""What else used the machine while a training program ran (harness.plan.machine_load): CPU
time outside the program's process tree counts as other, the tree's own (a worker that ended
included) does not. Other tests may run beside these on the same machine, so the checks are
one-sided where they could only add to "other"."""
import subprocess
import sys
import time

import pytest

from harness.plan import machine_load
from harness.plan.machine_load import Load, LoadMeter

pytestmark = pytest.mark.skipif(machine_load.host_cpu() is None, reason="no /proc/stat on this machine")

BURN = "import time\nend = time.process_time() + %f\nwhile time.process_time() < end: pass\n"


def burn(seconds):
    return [sys.executable, "-c", BURN % seconds]


def test_a_busy_process_outside_the_tree_is_other_and_makes_the_interval_shared():
    tree = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        meter = LoadMeter(tree.pid)
        subprocess.run(burn(1.0), check=True)          # not in the tree: another user of the machine
        load = meter.mark()
    finally:
        tree.kill()
        tree.wait()
    assert load.other_cpu_seconds >= 0.8 and load.shared
    assert "other processes used" in load.describe()


def test_the_tree_s_own_work_and_its_ended_workers_count_as_the_tree_s():
    # a training program that works itself and starts a worker that works and ends (a data loader)
    code = (BURN % 0.6) + "import subprocess, sys\nsubprocess.run([sys.executable, '-c', %r])\n" % (BURN % 0.6) + \
        "print('done', flush=True)\nimport time\ntime.sleep(30)\n"
    tree = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        before = machine_load.tree_cpu(tree.pid)
        assert tree.stdout.readline().strip() == "done"
        after = machine_load.tree_cpu(tree.pid)
    finally:
        tree.kill()
        tree.wait()
    assert after - before >= 1.0        # its own 0.6 s and the ended worker's 0.6 s


def test_the_shared_rule_and_its_words():
    assert not Load(100.0, 5.0, 0.0).shared and Load(100.0, 5.1, 0.0).shared
    assert Load(100.0, 0.0, 6.0).shared and not Load(0.0, 0.0, 0.0).shared
    assert Load(10.0, 2.0, 0.0).describe() == "other processes used 2.0 s of CPU in 10.0 s (20% of a core)"
    assert Load(10.0, 0.0, 1.0).describe().endswith(", the hypervisor took 1.0 s (steal)")


def test_a_meter_whose_program_has_ended_still_marks():
    tree = subprocess.Popen([sys.executable, "-c", "pass"])
    meter = LoadMeter(tree.pid)
    tree.wait()
    time.sleep(0.05)
    load = meter.mark()
    assert load is not None and load.wall_seconds > 0
