#!/usr/bin/env python3
"""Run one benchmark trial and record exactly what it printed and when.

    python runner.py --trial-dir DIR [--timeout SECONDS] [--env-key NAME ...] -- ARGV...

This file is the contract between detbench and whatever environment a trial runs in
(a pinned virtual environment, an old framework container, a Slurm node). It must stay
ONE file, standard library only, and run on Python 3.6 and newer.

It spawns ARGV (never through a shell) with stdout and stderr merged into one pipe, and
for every output line writes the raw bytes to DIR/log.txt and, on the same line number
of DIR/log.times, the monotonic and wall-clock seconds at which the line arrived. It
forwards SIGINT and SIGTERM to the trial's whole process group, kills the group at the
timeout, and finally writes DIR/trial.json atomically (write, fsync, rename).
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

SCHEMA = 1
GRACE_S = 5.0
CHUNK = 1 << 16
# environment variables that decide how a trial performs; recorded in trial.json
RELEVANT_ENV = re.compile(
    r"^(OMP_|MKL_|OPENBLAS_|CUDA_|NCCL_|CUDNN_|TF_(CPP|ENABLE|XLA|GPU|FORCE)|MXNET_|PYTORCH_|TORCH_|NVIDIA_|"
    r"KMP_|GOMP_|SLURM_JOB_ID$|SLURM_NNODES$|SLURM_PROCID$|WORLD_SIZE$|LOCAL_WORLD_SIZE$)")
SECRET = re.compile(r"TOKEN|KEY|PASSWORD|SECRET|CREDENTIAL", re.IGNORECASE)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="runner.py", description=__doc__.splitlines()[0])
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--timeout", type=float, default=0.0, help="seconds; 0 = none")
    parser.add_argument("--env-key", action="append", default=[],
                        help="also record this environment variable in trial.json")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given after --")
    return args


def recorded_env(environ, extra_keys):
    """The environment that matters for performance, secrets left out."""
    keep = {}
    for name, value in environ.items():
        if SECRET.search(name):
            continue
        if name in extra_keys or RELEVANT_ENV.match(name):
            keep[name] = value
    return keep


def write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def die_with_parent():
    """Ask Linux to send us SIGTERM when the process that started us dies."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Trial(object):
    def __init__(self, args):
        self.args = args
        self.dir = args.trial_dir
        self.proc = None
        self.stop_reason = None   # "timeout" | "interrupted"
        self.stop_signal = None
        self.kill_at = None

    # signal handling -------------------------------------------------------
    def on_signal(self, signum, _frame):
        if self.stop_reason is None:
            self.stop_reason = "interrupted"
            self.stop_signal = signum
        self.signal_group(signum)
        if self.kill_at is None:
            self.kill_at = time.monotonic() + GRACE_S

    def signal_group(self, signum):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signum)
        except OSError:
            pass

    # main loop ---------------------------------------------------------------
    def run(self):
        os.makedirs(self.dir, exist_ok=True)
        env_keys = set(self.args.env_key)
        record = {
            "schema": SCHEMA,
            "argv": self.args.command,
            "cwd": os.getcwd(),
            "env": recorded_env(os.environ, env_keys),
            "hostname": socket.gethostname(),
            "runner_python": sys.version.split()[0],
        }
        log = open(os.path.join(self.dir, "log.txt"), "wb")
        times = open(os.path.join(self.dir, "log.times"), "w")
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self.on_signal)
        record["start_wall"] = time.time()
        record["start_mono"] = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.args.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        except OSError as exc:
            record.update(exit_code=None, signal=None, error="cannot start: %s" % exc)
            return self.finish(record, log, times, 0)
        deadline = None
        if self.args.timeout > 0:
            deadline = record["start_mono"] + self.args.timeout
        lines = self.pump(log, times, deadline)
        record.update(self.exit_status())
        return self.finish(record, log, times, lines)

    def pump(self, log, times, deadline):
        """Copy the child's output line by line with arrival times; returns line count."""
        import select
        fd = self.proc.stdout.fileno()
        pending = b""
        count = 0
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline and self.stop_reason is None:
                self.stop_reason = "timeout"
                self.signal_group(signal.SIGTERM)
                self.kill_at = now + GRACE_S
            if self.kill_at is not None and now >= self.kill_at:
                self.signal_group(signal.SIGKILL)
            wait_ms = 1000
            for limit in (deadline, self.kill_at):
                if limit is not None:
                    wait_ms = max(0, min(wait_ms, int((limit - now) * 1000) + 1))
            try:
                ready = poller.poll(wait_ms)
            except InterruptedError:  # pragma: no cover - Python < 3.5 only
                continue
            if not ready:
                continue
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            mono = time.monotonic()
            stamp = "%.6f\t%.6f\n" % (mono, time.time())
            parts = (pending + chunk).split(b"\n")
            pending = parts.pop()
            if parts:
                log.write(b"\n".join(parts) + b"\n")
                times.write(stamp * len(parts))
                count += len(parts)
                log.flush()
                times.flush()
        if pending:
            log.write(pending + b"\n")
            times.write("%.6f\t%.6f\n" % (time.monotonic(), time.time()))
            count += 1
        return count

    def exit_status(self):
        while True:
            try:
                code = self.proc.wait(timeout=GRACE_S)
                break
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
        status = {"exit_code": code if code >= 0 else None,
                  "signal": -code if code < 0 else None}
        if self.stop_reason == "timeout":
            status["timed_out"] = True
        if self.stop_reason == "interrupted":
            status["interrupted_by"] = self.stop_signal
        # leftovers of the trial's process group (e.g. loader workers) go too
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        return status

    def finish(self, record, log, times, lines):
        record["end_wall"] = time.time()
        record["end_mono"] = time.monotonic()
        record["lines"] = lines
        log.close()
        times.close()
        write_json_atomic(os.path.join(self.dir, "trial.json"), record)
        if record.get("exit_code") == 0:
            return 0
        return 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    die_with_parent()
    return Trial(args).run()


if __name__ == "__main__":
    sys.exit(main())
