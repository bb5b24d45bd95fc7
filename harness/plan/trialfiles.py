"""What every launcher does to a fresh trial folder before the start: write the files the
framework's adapter derived for the trial (Framework.files), make the links its data map
asks for in the trial's working directory (Framework.links: where the framework's own config
looks for a dataset, pointing at the scenario's files, which every launcher makes readable at
their own path), and fill the trial folder into the argv items that name it (Framework's
TRIAL_DIR placeholder).

Every launcher runs the trial with its folder at the same absolute path (a bind mount of the
same path in Docker, shared storage under Slurm), so the path filled in here is valid there.

The names of the files in a trial's folder: runner.py, which writes them, owns them (it is
one standard-library file and imports nothing of the harness), and the harness takes them
from here; RUNNER_ERR is the launchers' own.
"""

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from harness.frameworks.base import TRIAL_DIR, Link
from harness.errors import ResultsWriteError
from runner import LOG, LOG_TIMES, PIDFILE, RECORD, TELEMETRY, WORKDIR

__all__ = [
    "LOG",
    "LOG_TIMES",
    "PIDFILE",
    "RECORD",
    "RUNNER_ERR",
    "TELEMETRY",
    "WORKDIR",
    "prepare",
    "fill",
    "read_trial_json",
]

# what a launcher caught of runner.py's own stdout and stderr (the container's output, Slurm's
# job output): shown when runner.py wrote no record
RUNNER_ERR = "runner.err"


def prepare(
    trial_dir: Union[str, Path], argv: Sequence[str], files: Optional[Mapping[str, Union[str, Link]]] = None
) -> List[str]:
    """Write `files` into trial_dir ({name: text}, and {path under WORKDIR: Link} for the links);
    return argv with TRIAL_DIR filled in."""
    trial_dir = Path(trial_dir).absolute()
    for name, item in sorted((files or {}).items()):
        try:
            if isinstance(item, Link):
                _link(trial_dir, name, item)
                continue
            if not name or "/" in name or name in (".", "..") or name.startswith("."):
                raise ValueError("a trial file is a plain name, not %r" % name)
            (trial_dir / name).write_text(item, encoding="utf-8")
        except OSError as exc:
            raise ResultsWriteError(
                "%s: cannot write the trial file %s: %s" % (trial_dir, name, exc.strerror)
            ) from None
    return fill(argv, trial_dir)


def _link(trial_dir: Path, name: str, link: Link) -> None:
    parts = Path(name).parts
    if Path(name).is_absolute() or len(parts) < 2 or parts[0] != WORKDIR or ".." in parts:
        raise ValueError("a trial link is a relative path under %s/, not %r" % (WORKDIR, name))
    if not os.path.isabs(link.target):
        raise ValueError("a trial link points at an absolute path, not %r" % link.target)
    where = trial_dir.joinpath(*parts)
    where.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(link.target, str(where))


def fill(argv: Sequence[str], trial_dir: Union[str, Path]) -> List[str]:
    """argv with the trial folder's absolute path in place of TRIAL_DIR."""
    where = str(Path(trial_dir).absolute())
    return [arg.replace(TRIAL_DIR, where) for arg in argv]


def read_trial_json(trial_dir: Union[str, Path]) -> Optional[Dict[str, Any]]:
    """The trial.json runner.py (or a launcher's verdict) left in trial_dir, or None when it is
    missing, unreadable or not a JSON object."""
    path = os.path.join(str(trial_dir), RECORD)
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None
