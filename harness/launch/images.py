"""Container images of the frameworks: their recipes, builds and how fresh each build is.

A framework declares its recipes (`Framework.images`, harness/frameworks/base.py: ImageRecipe);
each is a folder under dockerfiles/ with a Dockerfile that pins what it builds from (a test
checks it). Its trials run in its first recipe's image unless the scenario's `docker.images`
names another. A build hashes the recipe's files, its build arguments (the base image's ID among
them) and the host-compiled wheels it installs into its tag (image_lock.py), gets the wheels of
a ``requirements.txt`` from the host (image_wheels.py, served by wheel_server.py) and builds
from the local base (image_base.py) or another recipe's image where the recipe says so. The
image each build gave is recorded on this machine (image_lock.record); the committed
dockerfiles/images.lock holds only each recipe's inputs (lock_entries).
"""
import contextlib
import datetime
import hashlib
import sys
import tempfile
from pathlib import Path

from harness import frameworks
from harness.errors import UserError
from harness.launch import engine
from harness.launch.engine import local_image
from harness.launch.image_base import BASE_PYTHON, base_recipe, base_tag
from harness.launch.image_lock import (RECIPES_DIR, REPOSITORY, built_path, digest, file_digests, read_built,
                                       read_lock, recipe_files, record)
from harness.launch.image_wheels import fetch_wheels, host_built_wheels, with_host_wheels
from harness.launch.wheel_server import WheelServer, bridge_gateway

# recipe name -> (ImageRecipe, the framework that declares it), read off the framework records
_DECLARED = {r.name: (r, fw) for fw in frameworks.FRAMEWORKS.values() for r in fw.images}
RECIPES = {name: spec for name, (spec, _) in _DECLARED.items()}


def recipe(name):
    if name not in RECIPES:
        raise UserError("unknown image recipe %r (known: %s)" % (name, ", ".join(sorted(RECIPES))))
    return RECIPES[name]


def default_recipe(framework):
    """The recipe a framework's trials run in unless the scenario's docker.images names another,
    or None when it has none."""
    fw = frameworks.FRAMEWORKS.get(framework)
    return fw.images[0].name if fw is not None and fw.images else None


def _host_wheels(name):
    spec, fw = _DECLARED[name]
    return host_built_wheels(spec, fw)


# ------------------------------------------------------------------ builds
def build(name, base_image=None, build_args=None, recipes_dir=RECIPES_DIR, out=sys.stdout, built=None,
          force=False):
    """Build recipe `name`; record and return its entry in this machine's record of built images.
    UserError names a failing step."""
    spec = recipe(name)
    folder = Path(recipes_dir) / name
    if not (folder / "Dockerfile").exists():
        raise UserError("%s: no Dockerfile for image %r" % (folder, name))
    client = engine.connect(timeout=3600)
    args = dict(build_args or {})
    if base_image:
        args["BASE_IMAGE"] = base_image
    if "BASE_IMAGE" not in args and spec.base_recipe:
        args["BASE_IMAGE"] = resolve(client, spec.base_recipe, built)[1]
    if "BASE_IMAGE" not in args and spec.local_base:
        base = local_image(client, base_tag())
        if base is None:
            raise UserError("image %s builds from the local base image, which is not here: make it with "
                            "`detbench image base` or pass --base-image" % name)
        args["BASE_IMAGE"] = base.id
    files = recipe_files(folder)
    host_wheels = _host_wheels(name)
    tag = _tag(name, args, files, host_wheels)
    image = None if force else local_image(client, tag)
    if image is None:
        with tempfile.TemporaryDirectory(prefix="detbench-build-") as context:
            for rel, data in files:
                Path(context, rel).parent.mkdir(parents=True, exist_ok=True)
                Path(context, rel).write_bytes(data)
            served = dict(args)
            with contextlib.ExitStack() as stack:
                if spec.wheels and (folder / "requirements.txt").exists():
                    wheels = fetch_wheels(folder / "requirements.txt", BASE_PYTHON, out, spec.build_here,
                                          skip=[w.name.split("-")[0] for w in host_wheels])
                    if host_wheels:
                        wheels = stack.enter_context(with_host_wheels(wheels, host_wheels))
                    host = bridge_gateway(client)
                    server = stack.enter_context(WheelServer(wheels, host))
                    served.update(WHEELS_URL=server.url, WHEELS_HOST=host)
                image_id = _stream_build(client, context, tag, served, folder / "Dockerfile", out)
        image = client.images.get(image_id)
    entry = {"image": tag, "id": image.id, "build_args": args,
             "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    previous = read_built(built).get(name, {})
    if previous.get("id") == image.id:
        entry["built"] = previous.get("built", entry["built"])
    record(name, entry, built)
    out.write("image %s %s\n" % (tag, image.id))
    return entry


def _tag(name, args, files, host_wheels):
    """detbench/<recipe>:<key>, the key hashing the recipe's files, its build arguments (the base
    image's ID among them) and the host-compiled wheels it installs."""
    key = digest([name] + ["%s=%s" % kv for kv in sorted(args.items())] +
                 ["%s:%s" % (rel, hashlib.sha256(data).hexdigest()) for rel, data in files] +
                 ["host wheel %s" % w.parent.name for w in host_wheels])[:12]
    return "%s%s:%s" % (REPOSITORY, name, key)


def _stream_build(client, context, tag, args, dockerfile, out):
    step, last, image_id = "", [], None
    for chunk in client.api.build(path=context, tag=tag, buildargs=args, rm=True, forcerm=True,
                                  pull=False, decode=True, labels={engine.LABEL + ".recipe": tag}):
        text = chunk.get("stream", "")
        if text.startswith("Step "):
            step = text.strip()
        if text.strip():
            last = (last + [text.rstrip()])[-5:]
            out.write(text if text.endswith("\n") else text + "\n")
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            said = chunk["error"].strip().splitlines()
            number, _, instruction = step[len("Step "):].partition(" : ")
            where = "step %s `%s`" % (number, instruction) if step else "before the first step"
            raise UserError("%s: %s failed: %s" % (dockerfile, where, said[-1][:300] if said else "error"))
    if image_id is None:
        raise UserError("%s: the engine reported no image (last output: %s)"
                        % (dockerfile, " | ".join(last) or "none"))
    return image_id


# ------------------------------------------------------------------ the committed lock
def lock_entries(recipes_dir=RECIPES_DIR):
    """What dockerfiles/images.lock says, from the recipes as they are now: for every folder with
    a Dockerfile, what it builds on and the digest of each of its files (plus, where the framework
    record says so, the packages built into wheels on the host), and the local base's recipe.
    Nothing of this machine enters: the same recipes give the same entries everywhere."""
    entries = {"base": {"image": base_tag(), "recipe": base_recipe()}}
    for dockerfile in sorted(Path(recipes_dir).glob("*/Dockerfile")):
        name = dockerfile.parent.name
        entry = {"builds_on": "its Dockerfile's FROM", "files": file_digests(dockerfile.parent)}
        if name in _DECLARED:
            spec, fw = _DECLARED[name]
            if spec.base_recipe:
                entry["builds_on"] = "image %s" % spec.base_recipe
            elif spec.local_base:
                entry["builds_on"] = "image base"
            if spec.build_here:
                entry["wheels_built_from_sdist"] = sorted(spec.build_here)
            if spec.host_wheels:
                entry["wheels_compiled_on_host"] = [
                    "%s %s%s" % (b.name, b.version, " (git archive of %s)" % b.commit if b.commit else "")
                    for b in fw.env.source_builds
                ]
        entries[name] = entry
    return entries


def stale_lock_entries(recipes_dir=RECIPES_DIR):
    """The names whose committed lock entry differs from what the recipes give now (a recipe
    changed, added or removed without `detbench image lock`)."""
    committed, now = read_lock(recipes_dir), lock_entries(recipes_dir)
    return sorted(name for name in set(committed) | set(now) if committed.get(name) != now.get(name))


# ------------------------------------------------------------------ what is built here
def resolve(client, name, built=None):
    """(tag, image id) of recipe `name` as built here; UserError when it is missing or stale."""
    state, why, image = freshness(client, name, built)
    if state != BUILT:
        raise UserError("image %s is %s (%s); build it with `detbench image build %s`" % (name, state, why, name))
    entry = read_built(built)[name]
    if image.id != entry["id"]:
        sys.stderr.write("detbench: note: image %s is %s here, the record of built images says %s\n"
                         % (entry["image"], image.id, entry["id"]))
    return entry["image"], image.id


BUILT, STALE, MISSING = "built", "stale", "missing"


def freshness(client, name, built=None, recipes_dir=RECIPES_DIR):
    """(state, why, image): BUILT when the recorded image is on this engine and a build now would give
    the same tag, STALE when the recipe's files or its base changed since, MISSING when it was never
    built here (or the engine lost it). `why` says what, in a few words; image is the engine's or None."""
    built_entries = read_built(built)
    entry = built_entries.get(name)
    if not entry:
        return MISSING, "no entry in %s" % (built or built_path()), None
    image = local_image(client, entry["image"])
    if image is None:
        return MISSING, "%s is not on this Docker engine" % entry["image"], None
    spec = recipe(name)
    args = dict(entry.get("build_args") or {})
    given = args.get("BASE_IMAGE")
    if spec.base_recipe and given:
        base_state, _, base_image = freshness(client, spec.base_recipe, built, recipes_dir)
        if base_state != BUILT or base_image.id != given:
            return STALE, "its base image %s changed since" % spec.base_recipe, image
    elif spec.local_base and given:
        base = local_image(client, base_tag())
        if base is not None and base.id != given and built_entries.get("base", {}).get("id") == base.id:
            return STALE, "the local base image changed since", image
    try:
        wheels = _host_wheels(name)
    except UserError:
        return BUILT, "", image          # its host wheels are gone: nothing to compare with
    if _tag(name, args, recipe_files(Path(recipes_dir) / name), wheels) != entry["image"]:
        return STALE, "the recipe changed since", image
    return BUILT, "", image


def status(built=None):
    """Rows (recipe, image, id recorded here, state) for `detbench image list`: built, stale (what
    changed), missing, or "?" when no engine answers."""
    built_entries = read_built(built)
    client = None
    try:
        client = engine.connect(timeout=10)
    except UserError:
        pass
    rows = []
    for name in ["base"] + sorted(RECIPES):
        entry = built_entries.get(name, {})
        if client is None:
            state = "?"
        elif name == "base":
            image = local_image(client, entry["image"]) if entry else None
            state = BUILT if image is not None and image.id == entry["id"] else MISSING
        else:
            state, why, _ = freshness(client, name, built)
            state = "%s (%s)" % (state, why) if state == STALE else state
        rows.append((name, entry.get("image", "-"), entry.get("id", "-"), state))
    return rows
