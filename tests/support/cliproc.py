"""`detbench` as a process of its own, for tests that interrupt, kill or outwait a run."""
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def detbench(*args, **kw):
    """`detbench ARGS` started in its own session, so a test can always end it and its children."""
    return subprocess.Popen([sys.executable, "-m", "harness.cli"] + [str(a) for a in args], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            start_new_session=True, **kw)


def finish(proc, timeout=180):
    """(exit code, output) of a started run; its whole session is killed if it outlives timeout."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


def error_lines(out):
    return [line for line in out.splitlines() if line.startswith("detbench: error:")]
