"""How a built image is named, what the committed lock says of each recipe, and where this
machine keeps the images it built.

Two records, of two kinds:

- ``dockerfiles/images.lock`` (committed) says what a reviewer can check: for every recipe under
  dockerfiles/, what it builds on and the SHA-256 of each of its files, and for the local base the
  debootstrap command and the tag it gives. It holds nothing a machine adds, so it is the same on
  every machine; ``detbench image lock`` writes it (images.lock_entries) and a test fails when a
  recipe changed without it.
- ``<cache>/images/built.json`` (or ``$DETBENCH_IMAGES_BUILT``) is this machine's: each build here
  is tagged ``detbench/<recipe>:<key>``, the key a hash of what went into it, and recorded there
  with the image ID the engine gave it, which is what trials record as the image they ran.
"""
import hashlib
import json
import os
from pathlib import Path

from harness import atomic
from harness.errors import UserError
from harness.vocab.sources import cache_root

ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = ROOT / "dockerfiles"
LOCK_NAME = "images.lock"
BUILT_NAME = "built.json"
REPOSITORY = "detbench/"


def digest(parts):
    """The hex SHA-256 of a list of strings, one a line: the keys of tags and caches."""
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def recipe_files(folder):
    """[(path relative to the recipe's folder, bytes)] of every file of a recipe, by path."""
    return [(p.relative_to(folder).as_posix(), p.read_bytes())
            for p in sorted(Path(folder).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]


def file_digests(folder):
    """{path: "sha256:<hex>"} of a recipe's files: what its lock entry pins."""
    return {rel: "sha256:" + hashlib.sha256(data).hexdigest() for rel, data in recipe_files(folder)}


def lock_text(entries):
    """The committed lock's text for these entries: sorted keys, one-space indent, final newline."""
    return json.dumps(entries, indent=1, sort_keys=True) + "\n"


def write_lock(entries, recipes_dir=RECIPES_DIR):
    atomic.write_text(Path(recipes_dir) / LOCK_NAME, lock_text(entries))


def read_json_file(path, what):
    """{name: entry} of a JSON object file ({} when there is none); UserError when it is damaged."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError("%s: not a valid %s (%s)" % (path, what, exc)) from None
    if not isinstance(doc, dict):
        raise UserError("%s: not a valid %s (expected an object of images)" % (path, what))
    return doc


def read_lock(recipes_dir=RECIPES_DIR):
    """The committed lock: {recipe: {"builds_on", "files", ...}}."""
    return read_json_file(Path(recipes_dir) / LOCK_NAME, "lock file")


def built_path():
    return Path(os.environ.get("DETBENCH_IMAGES_BUILT") or cache_root() / "images" / BUILT_NAME)


def read_built(path=None):
    """{name: {"image", "id", "build_args", "built"}} of the images built on this machine."""
    return read_json_file(path or built_path(), "record of built images")


def record(name, entry, path=None):
    """Set `name`'s entry in this machine's record of built images, written atomically."""
    path = Path(path or built_path())
    built = read_built(path)
    built[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(path, built, indent=1, sort_keys=True)
