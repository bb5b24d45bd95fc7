"""Where the detbench cache keeps the source archives of packages built from a git commit, and
which commit an archive holds: read by the env builder (harness/launch/envs.py) and by the
adapters that run a script of that source (detectron2's tools/train_net.py)."""
import os
import tarfile
from pathlib import Path
from typing import Optional

from harness.errors import UserError
from harness.vocab.pins import SourceBuild


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detbench"
    return Path(os.environ.get("DETBENCH_CACHE") or default)


def cached_archive(build: SourceBuild) -> Path:
    """The `git archive` of build.commit as the cache keeps it once an env build has checked it."""
    return cache_root() / "sources" / ("%s-%s.tar" % (build.name, build.commit))


def archive_commit(path: Path) -> Optional[str]:
    """The commit ID `git archive` wrote into a tarball's pax header (None where it has none)."""
    try:
        with tarfile.open(path) as tar:
            tar.next()
            comment = tar.pax_headers.get("comment", "")
    except (tarfile.TarError, OSError) as exc:
        raise UserError("%s: not a readable tar archive (%s)" % (path, exc)) from None
    comment = comment.strip()
    return comment if len(comment) == 40 else None
