"""Which detbench code ran a run: its version and, where it runs from a git checkout of its own,
the commit and whether tracked files had changes not committed.

Stored with each run's host record (`code`) and with each training program an accuracy run
starts, so a report can say which code a figure came from and a comparison can say that its
two runs ran different code. Files git does not track do not count as changes: results, data
and virtual environments live in a checkout too.
"""

import os
import subprocess
from typing import Any, Dict, Hashable, Mapping, Optional, TypeVar

from harness import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GIT_TIMEOUT_S = 10
K = TypeVar("K", bound=Hashable)


def _git(root: str, *args: str) -> Optional[str]:
    try:
        proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def revision(root: str = ROOT) -> Dict[str, Any]:
    """{"version", "commit", "dirty"} of the code at `root`: commit and dirty are None where
    `root` is not the top of a git work tree (an installed package inside some other repository
    does not take that repository's commit) or git cannot say."""
    rev: Dict[str, Any] = {"version": __version__, "commit": None, "dirty": None}
    if not os.path.exists(os.path.join(root, ".git")):
        return rev
    head = _git(root, "rev-parse", "--verify", "HEAD")
    if head is None:
        return rev
    rev["commit"] = head.strip()
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    rev["dirty"] = None if status is None else bool(status.strip())
    return rev


def describe(rev: Optional[Mapping[str, Any]]) -> str:
    """One phrase for a revision: `detbench 0.1.0 at 60a1653c3b2e`, `... with uncommitted
    changes`, or the version alone where no commit is known."""
    if not rev:
        return "unrecorded detbench code"
    said = "detbench %s" % (rev.get("version") or "?")
    if rev.get("commit"):
        said += " at %s" % str(rev["commit"])[:12]
        if rev.get("dirty"):
            said += " with uncommitted changes"
    return said


def named_where_differing(codes: Mapping[K, Any]) -> Dict[K, str]:
    """Each recorded revision of `codes` (key -> what a run or training program stored, None or
    not a dict where it stored none) as describe() says it, where at least two of them say
    different things; empty where all ran the same code or fewer than two recorded theirs."""
    said = {key: describe(code) for key, code in codes.items() if isinstance(code, Mapping)}
    return said if len(set(said.values())) > 1 else {}
