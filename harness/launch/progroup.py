"""A program in a process group of its own, stopped together with everything it started.

A training or dump program forks helpers: DataLoader workers, compile workers. Stopping the
program alone can leave such a child behind, blocked on a pipe its parent no longer reads and
holding its memory, or computing beside the next trial. Each program started here leads a new
session, so it and all it starts share one process group:

- once the program has exited, a watcher thread SIGKILLs what it left behind in its group:
  such a straggler would otherwise also hold the program's output pipe open, and a reader
  waiting for its end would wait for ever;
- `stop` sends SIGTERM to the group, gives the program `grace_s` to exit, then SIGKILLs
  whatever of the group is left;
- `run` is `subprocess.run` with captured output over such a group: on a timeout or an
  interrupt the whole group is stopped before the exception goes on.

A group leader's id is not given to a new process while any member of its group lives, so
signalling the group after the leader has been waited for reaches only its own stragglers.
"""
import os
import signal
import subprocess
import threading


def start(argv, **popen_kwargs) -> subprocess.Popen:
    """subprocess.Popen(argv, ...) as the leader of a new process group, whose stragglers are
    killed as soon as it exits."""
    proc = subprocess.Popen(argv, start_new_session=True, **popen_kwargs)
    threading.Thread(target=_reap, args=(proc,), daemon=True, name="reap-%d" % proc.pid).start()
    return proc


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:   # nothing of the group is left
        pass


def _reap(proc: subprocess.Popen) -> None:
    """Wait for the program, then kill whatever its group still holds."""
    proc.wait()
    _signal_group(proc.pid, signal.SIGKILL)


def stop(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the program's group; after `grace_s`, SIGKILL to what is left of it."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def run(argv, timeout_s: float, grace_s: float, **popen_kwargs) -> subprocess.CompletedProcess:
    """Run argv to its end with stdout and stderr captured as text.
    subprocess.TimeoutExpired after `timeout_s`, and any interrupt, stop the group first."""
    with start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
               **popen_kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except BaseException:
            stop(proc, grace_s)
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
