"""Shared initial weights from the harness side: make and check files without importing torch.

The work is done by `python -m harness.trainer.weights` (torch and torchvision, the
`trainer` extra) in a child process, so the harness itself never loads torch. Paths go to
it absolute (it runs from the checkout's root), so its messages name them so.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence, Tuple, Union

from harness.errors import UserError
from harness.drivers.weights_map import DEPTHS, MODELS

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 900


def available() -> bool:
    """Whether torch and torchvision import here (the weights tool needs both)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "torchvision"))


def _run(args: Sequence[object]) -> Tuple[int, str, str]:
    """(exit code, last stderr line without its 'error: ' prefix, stdout) of the torch side."""
    argv = [sys.executable, "-m", "harness.trainer.weights"] + [str(a) for a in args]
    try:
        proc = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 1, "the weights tool did not finish within %d s" % TIMEOUT_S, ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "exit code %d" % proc.returncode
    return proc.returncode, last[len("error: ") :] if last.startswith("error: ") else last, proc.stdout


def make(model: str, out: Union[str, Path], seed: int, depth: int = 50) -> str:
    """Write a seeded weights file (a ResNet-`depth` FPN); UserError (one line) when it cannot."""
    if model not in MODELS:
        raise UserError("unknown model %r for weights (known: %s)" % (model, ", ".join(MODELS)))
    if not available():
        raise UserError("weights make needs torch and torchvision (pip install -e '.[trainer]')")
    if depth not in DEPTHS:
        raise UserError("unknown ResNet depth %r for weights (known: %s)" % (depth, ", ".join(map(str, DEPTHS))))
    code, problem, stdout = _run(["make", model, "--out", os.path.abspath(out), "--seed", seed, "--depth", depth])
    if code != 0:
        raise UserError(problem)
    return stdout.strip()


def problem(model: str, path: Union[str, Path]) -> Optional[str]:
    """None when `path` fits `model`, else one line saying what is wrong (None without torch here:
    each framework's own load still refuses a file that does not fit)."""
    if not available():
        return None
    code, line, _ = _run(["check", model, os.path.abspath(path)])
    return None if code == 0 else line
