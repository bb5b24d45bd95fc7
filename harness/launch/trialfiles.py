"""What every launcher does to a fresh trial folder before the start: write the files the
framework's adapter derived for the trial (Framework.files) and fill the trial folder into
the argv items that name it (Framework's TRIAL_DIR placeholder).

Every launcher runs the trial with its folder at the same absolute path (a bind mount of the
same path in Docker, shared storage under Slurm), so the path filled in here is valid there.
"""
import json
import os
from pathlib import Path

from harness.frameworks.base import TRIAL_DIR
from harness.errors import ResultsWriteError


def prepare(trial_dir, argv, files=None):
    """Write `files` ({name: text}) into trial_dir; return argv with TRIAL_DIR filled in."""
    trial_dir = Path(trial_dir).absolute()
    for name, text in sorted((files or {}).items()):
        if not name or "/" in name or name in (".", "..") or name.startswith("."):
            raise ValueError("a trial file is a plain name, not %r" % name)
        try:
            (trial_dir / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ResultsWriteError("%s: cannot write the trial file %s: %s"
                                    % (trial_dir, name, exc.strerror)) from None
    return fill(argv, trial_dir)


def fill(argv, trial_dir):
    """argv with the trial folder's absolute path in place of TRIAL_DIR."""
    where = str(Path(trial_dir).absolute())
    return [arg.replace(TRIAL_DIR, where) for arg in argv]


def read_trial_json(trial_dir):
    """The trial.json runner.py (or a launcher's verdict) left in trial_dir, or None when it is
    missing, unreadable or not a JSON object."""
    path = os.path.join(str(trial_dir), "trial.json")
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None
