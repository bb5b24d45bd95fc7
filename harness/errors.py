"""The one error type users see: a clear line, exit code 2, no traceback."""
import os
from typing import Optional, Union


class UserError(Exception):
    """Bad input or an environment problem the user can fix."""

    exit_code = 2


class BackendLost(UserError):
    """The engine trials run on went away mid-run (Docker engine, Slurm daemons).

    The launcher has already recorded the trial in flight as failed with the reason; the
    run stops there and leaves the rest pending for `--resume`."""


class BackendDown(UserError):
    """The engine cannot start the trial at all (e.g. every Slurm node of its partition is down).

    Nothing of the trial ran and the launcher left nothing queued: the trial stays pending
    with the rest of the run, and the run stops for `--resume`."""


class ResultsWriteError(UserError):
    """The results folder or store cannot take a write (disk full, read-only, locked too long).

    Nothing is half-written: the transaction that failed was rolled back."""


def located(path: Union[str, "os.PathLike[str]"], line: Optional[int], field: Optional[str], message: str) -> str:
    """Format `file:line: field: message` (line and field optional)."""
    where = str(path)
    if line:
        where += ":%d" % line
    if field:
        return "%s: %s: %s" % (where, field, message)
    return "%s: %s" % (where, message)
