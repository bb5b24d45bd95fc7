"""The revisions of a bisect: resolved, checked to be ordered, and each checked out in a git
worktree of its own that is removed again however the bisect ends."""
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

from harness.errors import UserError


@dataclass(frozen=True)
class Revision:
    sha: str
    subject: str

    @property
    def short(self):
        return self.sha[:10]


def _git(repo, *args, check=True):
    proc = subprocess.run(["git", "-C", str(repo)] + list(args), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise UserError("%s: git %s failed: %s" % (repo, args[0], (proc.stderr.strip().splitlines() or ["?"])[-1]))
    return proc


def toplevel(repo) -> Path:
    proc = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise UserError("%s: not a git repository (--repo names the checkout whose commits are searched)" % repo)
    return Path(proc.stdout.strip())


def resolve(repo, rev, flag) -> Revision:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", "%s^{commit}" % rev, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise UserError("%s %s: no such revision in %s" % (flag, rev, repo))
    sha = proc.stdout.strip()
    return Revision(sha, subject(repo, sha))


def subject(repo, sha) -> str:
    return _git(repo, "log", "-1", "--format=%s", sha).stdout.strip()


def check_clean(repo):
    """UserError when tracked files have changes: a bisect measures commits, and a dirty tree
    usually means the change to be found is not committed yet."""
    proc = _git(repo, "status", "--porcelain", "--untracked-files=no")
    changed = [line[3:] for line in proc.stdout.splitlines() if line.strip()]
    if changed:
        first = changed[0]
        raise UserError("%s: the working tree has uncommitted changes (%s, ...); commit or stash them "
                        "before bisecting" % (repo, first))


def between(repo, good: Revision, bad: Revision) -> List[Revision]:
    """[good, ..., bad]: the commits on the ancestry path from good to bad, oldest first."""
    if good.sha == bad.sha:
        raise UserError("--good and --bad are the same commit (%s)" % good.short)
    if _git(repo, "merge-base", "--is-ancestor", good.sha, bad.sha, check=False).returncode != 0:
        raise UserError("--good %s is not an ancestor of --bad %s: the good revision must come first"
                        % (good.short, bad.short))
    lines = _git(repo, "rev-list", "--reverse", "--topo-order", "--ancestry-path",
                 "--format=%H %s", "%s..%s" % (good.sha, bad.sha)).stdout.splitlines()
    revs = [good]
    for line in lines:
        if line.startswith("commit "):
            continue
        sha, _, text = line.partition(" ")
        revs.append(Revision(sha, text))
    if revs[-1].sha != bad.sha:
        raise UserError("--bad %s is not reached from --good %s along its ancestry" % (bad.short, good.short))
    return revs


class Worktrees:
    """Detached worktrees of one repository under one temporary folder. `close()` removes every
    one of them and the folder; it is safe to call twice, and after a failed `add`."""

    def __init__(self, repo):
        self.repo = Path(repo)
        self.root = Path(tempfile.mkdtemp(prefix="detbench-bisect-"))
        self.trees: Dict[str, Path] = {}

    def get(self, sha) -> Path:
        if sha not in self.trees:
            path = self.root / sha[:12]
            self.trees[sha] = path      # registered first: a half-made worktree is removed too
            _git(self.repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
        return self.trees[sha]

    def drop(self, sha):
        path = self.trees.pop(sha, None)
        if path is not None:
            _git(self.repo, "worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)

    def close(self):
        for sha in list(self.trees):
            self.drop(sha)
        shutil.rmtree(self.root, ignore_errors=True)
        _git(self.repo, "worktree", "prune", check=False)
