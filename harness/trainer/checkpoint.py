"""Training checkpoints: what a run needs to continue exactly where it stopped.

A checkpoint after N iterations is `<train.checkpoint_dir>/iter_<N, 7 digits>.pth`, a torch
file holding the model's state, the optimizer's, the grad scaler's (fp16), the iteration
count (which fixes the schedule position and, with the seed, the data order), the RNG states
of every rank (torch, CUDA, Python's random, numpy's) and the config it was written with.

Files are written atomically: into a temporary file in the same folder, flushed and fsynced,
then renamed over the final name (os.replace) and the folder fsynced. A process killed while
writing leaves at most a hidden `.iter_*.tmp` file; every `iter_*.pth` is complete, and one
being replaced keeps its old content until the rename.

Resuming (`--resume FILE`) refuses, before training starts and in one line naming the file
and the first key that differs, a checkpoint whose model settings or data-order settings
(KEYS_THAT_MUST_MATCH) differ from the run's, or whose tensors do not fit the model.
"""
import dataclasses
import os
import random

import torch
import torch.distributed as torch_dist

from .. import atomic
from . import dist
from .config import ConfigError

FORMAT = "detbench-trainer-checkpoint"
VERSION = 1
# the data order of a resumed run equals the uninterrupted one only if these are unchanged
DATA_ORDER_KEYS = ("world_size", "data.source", "data.images_per_device", "data.shuffle",
                   "data.aspect_grouping", "train.seed")
# keys added after checkpoints were first written, with the value older checkpoints ran with
LATER_KEYS = {"data.aspect_grouping": False}


def keys_that_must_match(cfg):
    """Every model.* key (the architecture), then the keys the data order depends on."""
    return [f"model.{f.name}" for f in dataclasses.fields(cfg.model)] + list(DATA_ORDER_KEYS)


def flat_config(cfg, world):
    out = {f"{sec}.{k}": v for sec, values in dataclasses.asdict(cfg).items() for k, v in values.items()}
    out["world_size"] = world
    return out


def path_for(folder, iteration):
    return os.path.join(folder, f"iter_{iteration:07d}.pth")


def next_save(done, every, max_iter):
    """The iteration count at which the next checkpoint is written after `done` iterations:
    every `every` iterations and at max_iter; 0 when checkpointing is off or nothing is left."""
    if not every or done >= max_iter:
        return 0
    return min((done // every + 1) * every, max_iter)


def prepare_dir(folder):
    """Create the checkpoint folder, or a ConfigError if it cannot be written."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"train.checkpoint_dir={folder}: cannot create it ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"train.checkpoint_dir={folder}: not writable")


def write_atomic(path, obj):
    """torch.save `obj` to `path` so that `path` holds either its old content or all of `obj`."""
    with atomic.replacing(path, "wb") as fh:
        torch.save(obj, fh)


def rng_state(device):
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": None, "cuda": None}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    try:
        import numpy as np
    except ImportError:
        return state
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    state["numpy"] = (name, torch.from_numpy(keys.astype("int64")), int(pos), int(has_gauss), float(gauss))
    return state


def set_rng_state(state, device):
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if state.get("cuda") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)
    if state.get("numpy") is not None:
        import numpy as np
        name, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((name, keys.numpy().astype("uint32"), pos, has_gauss, gauss))


def plain_state_dict(model):
    """The model's state without DistributedDataParallel's or torch.compile's name prefixes."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    return {k.replace("_orig_mod.", ""): v for k, v in model.state_dict().items()}


def save(folder, iteration, model, optimizer, scaler, cfg, world, device, steps):
    """Write the checkpoint after `iteration` iterations; returns its path on rank 0, else None.

    With several ranks every rank must call it (their RNG states are gathered)."""
    rng = rng_state(device)
    if world > 1:
        gathered = [None] * world
        torch_dist.all_gather_object(gathered, rng)
        rng = gathered
    else:
        rng = [rng]
    if dist.rank() != 0:
        return None
    t = cfg.train
    state = {
        "format": FORMAT, "version": VERSION, "iteration": iteration,
        "config": flat_config(cfg, world),
        "schedule": {"name": t.schedule, "steps": list(steps), "gamma": t.gamma, "max_iter": t.max_iter,
                     "warmup_iters": t.warmup_iters, "warmup_factor": t.warmup_factor},
        "data": {"source": cfg.data.source, "batches": iteration},
        "model": plain_state_dict(model),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else None,
        "rng": rng,
    }
    path = path_for(folder, iteration)
    write_atomic(path, state)
    return path


def load(path, cfg, world):
    """Read a checkpoint and check it against the run's config; ConfigError otherwise."""
    if not os.path.isfile(path):
        raise ConfigError(f"checkpoint file not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, not a torch file, unexpected content
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"checkpoint {path} cannot be read: {first}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ConfigError(f"checkpoint {path} is not a detbench trainer checkpoint")
    if state.get("version") != VERSION:
        raise ConfigError(f"checkpoint {path} has version {state.get('version')!r}, this trainer reads {VERSION}")
    theirs, ours = state["config"], flat_config(cfg, world)
    for key in keys_that_must_match(cfg):
        if key not in theirs and key in LATER_KEYS:
            theirs[key] = LATER_KEYS[key]
        if key not in theirs:
            raise ConfigError(f"checkpoint {path} is from another config: it has no {key}")
        if _norm(theirs[key]) != _norm(ours[key]):
            raise ConfigError(f"checkpoint {path} is from another config: {key}={_show(theirs[key])} there, "
                              f"{_show(ours[key])} here")
    if len(state["rng"]) != world:
        raise ConfigError(f"checkpoint {path} holds {len(state['rng'])} ranks' RNG states, this run has {world}")
    return state


def _norm(value):
    return list(value) if isinstance(value, (tuple, list)) else value


def _show(value):
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def load_model(model, state, path):
    """Copy the checkpoint's tensors into the (unwrapped) model; the first misfit is a ConfigError."""
    saved = state.pop("model")
    mine = model.state_dict()
    for key, tensor in mine.items():
        if key not in saved:
            raise ConfigError(f"checkpoint {path} does not fit this model: it has no {key}")
        if tuple(saved[key].shape) != tuple(tensor.shape):
            raise ConfigError(f"checkpoint {path} does not fit this model: {key} has shape "
                              f"{list(saved[key].shape)} there, {list(tensor.shape)} here")
    extra = [key for key in saved if key not in mine]
    if extra:
        raise ConfigError(f"checkpoint {path} does not fit this model: this model has no {extra[0]}")
    model.load_state_dict(saved)


def restore(state, optimizer, scaler, device, path):
    """Load the optimizer's and scaler's state and this rank's RNG states; returns the iteration."""
    try:
        optimizer.load_state_dict(state.pop("optimizer"))
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"checkpoint {path} does not fit this optimizer: {exc}") from None
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][dist.rank()], device)
    return state["iteration"]
