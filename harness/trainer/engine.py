"""The training loop: precision, optimizer, learning-rate schedule, timing, per-iteration log
lines and checkpoints.

Checkpoints (train.checkpoint_every > 0) are written after an iteration's log lines, and the
time the write takes is left out of every iteration: the clock of the next iteration is moved
forward by it. With checkpointing off the loop does one integer comparison per iteration more
than it would without the feature.
"""
import contextlib
import json
import math
import resource
import sys
import time

import torch
from torch.nn.parallel import DistributedDataParallel

from harness import jsonlog
from harness.drivers import breakdown

from . import checkpoint, dist, graphs, schedule


class NonFiniteLoss(RuntimeError):
    pass


def make_optimizer(model, cfg, world):
    t = cfg.train
    base_lr = t.lr * cfg.data.images_per_device * world / t.lr_reference_batch
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (no_decay if p.ndim <= 1 and not t.decay_norm_bias else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return sgd(groups, base_lr, t.momentum, t.fused_sgd), base_lr


def clip_gradients(optimizer, scaler, max_norm):
    """Scale the gradients of `optimizer`'s parameters so their total L2 norm is at most
    `max_norm` (torch's clip_grad_norm_, no host sync), after the loss scaler, if any, has
    unscaled them; the scaler's step then skips an overflowed step as before."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    torch.nn.utils.clip_grad_norm_(params, max_norm)


def sgd(params, lr, momentum, fused):
    """torch's SGD (`fused`: its fused kernel), momentum buffers made as zeros when fused.

    torch's fused SGD makes its buffers uninitialised (`empty_like`) on the first step and
    fills them in its kernel; when the loss scaler finds an overflow there (fp16 usually
    overflows on its first steps), the kernel skips the step and the buffers keep whatever
    memory they were given, which later steps then treat as momentum. A zero buffer gives
    the first real step the same update, momentum * 0 + gradient, and a skipped step leaves
    it zero."""
    optimizer = torch.optim.SGD(params, lr=lr, momentum=momentum, **({"fused": True} if fused else {}))
    if fused and momentum:
        for group in optimizer.param_groups:
            for p in group["params"]:
                optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    return optimizer


def lr_at(iteration, base_lr, t, steps=None):
    """The learning rate of 0-based `iteration` (schedule.py: warmup times decay)."""
    return base_lr * schedule.lr_factor(iteration, t, steps)


def autocast_for(precision, device, cache=True):
    """The precision's autocast context (nothing for fp32). cache=False turns off autocast's
    cache of cast weights, which a captured CUDA graph must not keep (graphs.py)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def peak_mem_mb(device):
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2 ** 20, 1)
    # on the CPU the device memory is host memory: peak resident set of this process
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def prepare_model(model, cfg, device, world):
    model.to(device)
    if cfg.train.channels_last == "true":
        model.to(memory_format=torch.channels_last)
    if cfg.train.compile_backbone:
        model.backbone = torch.compile(model.backbone)
    if world > 1:
        if cfg.model.norm == "syncbn":
            model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                        broadcast_buffers=False)
    model.train()
    return model


def work_counts(model):
    """The work the model's parts recorded in their last forward: {name: 0-dim integer tensor}.

    RPN, RoI heads and RetinaNet keep their counts as tensors (`last_work`), so counting
    costs no host sync; they are read once per iteration at the logging point."""
    counts = {}
    for module in model.modules():
        counts.update(getattr(module, "last_work", None) or {})
    return counts


def unsettled_checks(model):
    """{name: count} of the sync-free checks (`last_checks`) that found something in the last
    forward, read back in one go at the logging point; {} when the model keeps none."""
    checks = {}
    for module in model.modules():
        checks.update(getattr(module, "last_checks", None) or {})
    if not checks:
        return {}
    values = torch.stack(list(checks.values())).tolist()
    return {name: v for name, v in zip(checks, values) if v}


def train(model, batches, cfg, device, world, out=None, resume=None, resume_path=None):
    """Train up to cfg.train.max_iter iterations and log each one.

    An iteration's time runs from the end of the previous iteration (the first: from the
    start of the loop) to the end of this one, so what happens between two iterations
    (the log lines of the last one, for instance) is charged to the next; a checkpoint
    write is not charged to any. Its data time is the part spent waiting for the batch.
    The last line, `data summary {json}`, gives the run's padding fraction and the share of
    iteration time spent waiting for data (data_summary).

    `resume`: a state from checkpoint.load (model tensors already loaded); training goes on
    after its iteration, and `batches` must start at that iteration's batch."""
    out = out or sys.stdout
    t = cfg.train
    optimizer, base_lr = make_optimizer(model, cfg, world)
    scaler = torch.amp.GradScaler("cuda") if t.precision == "fp16" else None
    steps = schedule.resolved_steps(t)
    start = 0
    if resume is not None:
        start = checkpoint.restore(resume, optimizer, scaler, device, resume_path)
    # 0-based index of the iteration after which the next checkpoint is written; -1: none
    save_after = checkpoint.next_save(start, t.checkpoint_every, t.max_iter) - 1
    is_logger = dist.rank() == 0
    images_per_iter = cfg.data.images_per_device * world
    cuda = device.type == "cuda"
    # the command line refuses train.cuda_graph off a GPU; on the CPU (tests) the same
    # static-input step runs without capture
    graphed = graphs.GraphedStep(model, optimizer, scaler, lambda: autocast_for(t.precision, device, cache=False),
                                 device, graphs.target_slots(cfg, batches), capture=cuda) if t.cuda_graph else None
    if is_logger:
        unable = "train.cuda_graph's replays run no hooks" if graphed is not None else None
        breakdown.attach_from_env(model, optimizer, unable=unable)
    source = iter(batches)
    waited = spent = 0.0            # data and iteration time after the run's first iteration
    prev_end = time.perf_counter()
    for it in range(start, t.max_iter):
        fetch = time.perf_counter()
        images, targets = next(source)
        drawn = (getattr(batches, "views", None), getattr(batches, "epoch", None))   # what this batch holds
        if cuda:
            torch.cuda.synchronize(device)
        data_time = time.perf_counter() - fetch
        if t.channels_last == "true":
            images = images.contiguous(memory_format=torch.channels_last)
        lr = lr_at(it, base_lr, t, steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if graphed is None:
            with autocast_for(t.precision, device):
                losses = model(images, targets)
            total = sum(losses.values())
            optimizer.zero_grad(set_to_none=True)
            (scaler.scale(total) if scaler is not None else total).backward()
        else:
            losses, total = graphed(images, targets)
        if t.clip_grad_norm:
            clip_gradients(optimizer, scaler, t.clip_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        values = torch.stack([total.detach().float()] + [v.detach().float() for v in losses.values()])
        values = dist.global_mean(values).tolist()
        if cuda:
            torch.cuda.synchronize(device)
        end = time.perf_counter()
        elapsed, prev_end = end - prev_end, end
        if it > start:
            waited, spent = waited + data_time, spent + elapsed
        # everything below belongs to the next iteration's time
        if not all(math.isfinite(v) for v in values):
            bad = ", ".join(f"{k} {v}" for k, v in zip(losses.keys(), values[1:]) if not math.isfinite(v))
            raise NonFiniteLoss(f"loss is {values[0]} (not finite) at iteration {it + 1}: {bad or 'their sum'}")
        if is_logger:
            named = {k: round(v, 6) for k, v in zip(losses.keys(), values[1:])}
            line = jsonlog.iter_line(it + 1, elapsed, data_time, images_per_iter, loss=round(values[0], 6),
                                     losses=named, lr=lr, peak_mem_mb=peak_mem_mb(device))
            counts = work_counts(model)
            done = dict(zip(counts, torch.stack(list(counts.values())).tolist())) if counts else {}
            work = jsonlog.work_line(it + 1, **done)
            if drawn[0] is not None:
                work += "\n" + jsonlog.data_line(it + 1, drawn[1], drawn[0])
            human = (f"iter {it + 1}/{t.max_iter}  loss {values[0]:.4f}  "
                     f"time {elapsed * 1000:.0f}ms (data {data_time * 1000:.0f}ms)  "
                     f"{images_per_iter / elapsed:.2f} img/s  lr {lr:.5f}")
            print(line + "\n" + work + "\n" + human, file=out, flush=True)
            for name, count in unsettled_checks(model).items():
                print(f"warning: iteration {it + 1}: {name}={count}: the sync-free NMS had not settled "
                      f"(raise model.sync_free_nms_passes)", file=out, flush=True)
        if it == save_after:
            pause = time.perf_counter()
            path = checkpoint.save(t.checkpoint_dir, it + 1, model, optimizer, scaler, cfg, world, device, steps)
            if path:
                print(f"checkpoint {path}", file=out, flush=True)
            save_after = checkpoint.next_save(it + 1, t.checkpoint_every, t.max_iter) - 1
            prev_end += time.perf_counter() - pause
    summary = data_summary(batches, waited, spent, device)
    if is_logger:
        print(SUMMARY_PREFIX + json.dumps(summary, sort_keys=True), file=out, flush=True)


SUMMARY_PREFIX = "data summary "


def data_summary(batches, waited, spent, device):
    """The run's padding fraction (padded / canvas pixels of every batch on every rank) and,
    on this rank, the share of iteration time spent waiting for batches after the first
    iteration. Every rank calls it (one reduction)."""
    pixels = torch.tensor(list(getattr(batches, "pixels", (0, 0))), dtype=torch.float64, device=device)
    content, canvas = (dist.global_mean(pixels) * dist.world_size()).tolist()
    return {"padding_fraction": round(1 - content / canvas, 4) if canvas else None,
            "data_time_fraction": round(waited / spent, 4) if spent else None}
