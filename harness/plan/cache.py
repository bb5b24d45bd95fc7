"""Where detbench keeps what it builds and measures on this machine: ``$DETBENCH_CACHE``, else
``${XDG_CACHE_HOME:-~/.cache}/detbench``. The rivals' pinned envs, their wheels and sources, the
images' base and records, and the measured compute limits all sit under it."""

import os
from pathlib import Path


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detbench"
    return Path(os.environ.get("DETBENCH_CACHE") or default)
