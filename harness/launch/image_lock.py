"""How a built image is named and where it is recorded.

Every build is tagged ``detbench/<recipe>:<key>``, the key a hash of what went into it, and
recorded in ``dockerfiles/images.lock`` (or ``$DETBENCH_IMAGES_LOCK``) with the image ID the
engine gave it, which is what trials record as the image they ran.
"""
import hashlib
import json
import os
from pathlib import Path

from harness.errors import UserError
from runner import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = ROOT / "dockerfiles"
LOCK_NAME = "images.lock"
REPOSITORY = "detbench/"


def digest(parts):
    """The hex SHA-256 of a list of strings, one a line: the keys of tags and caches."""
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def lock_path(recipes_dir=RECIPES_DIR):
    return Path(os.environ.get("DETBENCH_IMAGES_LOCK") or Path(recipes_dir) / LOCK_NAME)


def read_lock(path=None):
    """{name: entry} of the lock file ({} when there is none); UserError when it is damaged."""
    path = Path(path or lock_path())
    if not path.exists():
        return {}
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError("%s: not a valid lock file (%s)" % (path, exc)) from None
    if not isinstance(lock, dict):
        raise UserError("%s: not a valid lock file (expected an object of images)" % path)
    return lock


def record(name, entry, path=None):
    """Set `name`'s entry in the lock file, written atomically."""
    path = Path(path or lock_path())
    lock = read_lock(path)
    lock[name] = entry
    write_json_atomic(str(path), lock)
