"""Asking detbench for a window figure of a log: through the library (harness/measure/logfigure.py,
as `detbench scrape` does), or through the command line in a process of its own.

Both give an Answer: the figure's JSON object, or the refusal's message. The library path reads
a log once and answers many windows of it. Options the library does not take yet come back
as a refusal that says so, so a test shows which part of the interface is missing.
"""
import inspect
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MISSING = "interface: "       # the start of an Answer.message for an option the library lacks


@dataclass
class Answer:
    figure: Optional[dict]                 # the last JSON line / the library's figure, or None
    message: Optional[str] = None          # the refusal (one line), or None
    stderr: List[str] = field(default_factory=list)   # the command's stderr lines (command line only)
    exit_code: Optional[int] = None        # the command's exit status (command line only)

    @property
    def refused(self):
        return self.figure is None


def _takes(fn, name):
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _place(options, functions):
    """{function: {option: value}}: each option given (not None) goes to the first of `functions`
    that takes it; an option none of them takes raises TypeError naming it."""
    out = {fn: {} for fn in functions}
    for name, value in options.items():
        if value is None:
            continue
        fn = next((fn for fn in functions if _takes(fn, name)), None)
        if fn is None:
            raise TypeError("%s do not take %s" % ("/".join(f.__name__ for f in functions), name))
        out[fn][name] = value
    return out


class LibraryReader:
    """One log read by the library once per way of reading it; figures for any window."""

    def __init__(self, path, fmt):
        self.path = str(path)
        self.fmt = fmt
        self._read = {}

    def _records(self, req):
        from harness.measure import logfigure
        key = (req.framework, req.iters_per_epoch)
        if key not in self._read:
            opts = _place({"iters_per_epoch": req.iters_per_epoch},
                          (logfigure.reading, logfigure.read, logfigure.figure))
            how = logfigure.reading(self.path, req.framework, None if req.framework else self.fmt,
                                    **opts[logfigure.reading])
            records, errors = logfigure.read(self.path, how, **opts[logfigure.read])
            logfigure.require_records(self.path, how, records)
            self._read[key] = (how, records, opts[logfigure.figure])
        return self._read[key]

    def ask(self, req):
        from harness.errors import UserError
        from harness.measure import logfigure
        try:
            how, records, late = self._records(req)
            opts = _place({"run": req.run, "max_error": req.max_error, "approximate": req.approximate},
                          (logfigure.figure,))[logfigure.figure]
            fig = logfigure.figure(self.path, records, req.warmup, req.measure, req.images_per_iteration,
                                   **dict(late, **opts))
        except UserError as exc:
            return Answer(None, str(exc))
        except TypeError as exc:
            if "do not take" in str(exc):
                return Answer(None, MISSING + str(exc))
            raise
        return Answer(fig.as_dict())


def cli_args(path, fmt, req):
    args = ["scrape", str(path)]
    args += ["--framework", req.framework] if req.framework else ["--format", fmt]
    args += ["--warmup", str(req.warmup), "--measure", str(req.measure)]
    for flag, value in (("--run", req.run), ("--max-error", req.max_error), ("--iters-per-epoch", req.iters_per_epoch),
                        ("--images-per-iteration", req.images_per_iteration)):
        if value is not None:
            args += [flag, str(value)]
    if req.approximate:
        args.append("--approximate")
    return args


def ask_cli(path, fmt, req, timeout=300):
    """`detbench scrape` as its own process: the last stdout line, or the exit status and stderr."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli"] + cli_args(path, fmt, req), cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    return _answer(proc.returncode, proc.stdout, proc.stderr)


def _answer(code, stdout, stderr):
    err = [line for line in stderr.splitlines() if line.strip()]
    if code == 0:
        lines = stdout.splitlines()
        try:
            fig = json.loads(lines[-1]) if lines else None
        except ValueError:
            fig = None
        if isinstance(fig, dict) and "window" in fig:
            return Answer(fig, None, err, code)
        return Answer(None, "exit 0 without a window figure on the last line", err, code)
    return Answer(None, err[-1] if err else "exit %d with no message" % code, err, code)
