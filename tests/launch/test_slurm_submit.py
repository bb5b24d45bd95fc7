"""An interrupt during sbatch never loses the job it queues (no cluster needed: a stand-in sbatch)."""
import os
import signal
import sys
import threading

import pytest

from harness.launch import slurm

SBATCH = """#!%(python)s
import os, sys, time
time.sleep(1.0)        # slower than Python's 0.25 s grace for a child after Ctrl-C
with open(%(record)r, "w") as f:
    f.write("%%d %%d" %% (os.getsid(0), os.getppid()))
print("4242;cluster")
"""


@pytest.fixture
def sbatch(tmp_path, monkeypatch):
    record = tmp_path / "sbatch.ran"
    exe = tmp_path / "bin" / "sbatch"
    exe.parent.mkdir()
    exe.write_text(SBATCH % {"python": sys.executable, "record": str(record)})
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", "%s%s%s" % (exe.parent, os.pathsep, os.environ["PATH"]))
    return record


def _interrupting(signum, _frame):   # what `detbench run` installs for SIGINT and SIGTERM
    raise KeyboardInterrupt("signal %d" % signum)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_during_sbatch_acts_once_its_job_id_is_known(sbatch, tmp_path, signum):
    previous = {s: signal.signal(s, _interrupting) for s in (signal.SIGINT, signal.SIGTERM)}
    known = []
    try:
        with pytest.raises(KeyboardInterrupt, match="signal %d" % signum):
            with slurm.interrupts_held():
                threading.Timer(0.2, os.kill, (os.getpid(), signum)).start()
                known.append(slurm.submit(tmp_path / "job.sbatch"))
                after = True
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert known == ["4242"] and after
    # sbatch ran to its end, in a session of its own (a Ctrl-C at the terminal does not reach it)
    sid, parent = map(int, sbatch.read_text().split())
    assert parent == os.getpid() and sid != os.getsid(0)
    # the handlers are the run's again
    assert signal.getsignal(signal.SIGINT) is previous[signal.SIGINT]


def test_without_an_interrupt_nothing_is_raised_and_the_handlers_are_restored(sbatch, tmp_path):
    before = signal.getsignal(signal.SIGINT)
    with slurm.interrupts_held():
        assert signal.getsignal(signal.SIGINT) is not before
        job = slurm.submit(tmp_path / "job.sbatch")
    assert job == "4242" and signal.getsignal(signal.SIGINT) is before
