"""Where a training step's time goes: `python -m harness.trainer.profile CONFIG [--set k=v ...]`.

Trains the bundled model and torchvision's same detector (built as the torchvision driver
builds it, loaded with the same weights: `detbench weights make` layout, made here from
--seed) on the same synthetic batch, and times each phase of every step with forward hooks
on the modules that make it up (the device synchronised at each border). Both run on the
trainer's device (`train.device`: auto takes a GPU where there is one) in its precision
(`train.precision`: the forward under autocast, fp16 with loss scaling), and the trainer's
side is prepared as a training run prepares it:

  data        building the batch (the same synthetic batch source for both)
  transform   torchvision only: its in-model normalisation and batching (the trainer
              normalises in its data pipeline)
  backbone    the ResNet body
  fpn         the feature pyramid (and RetinaNet's P6/P7)
  rpn         two-stage: the RPN head, anchors, proposals, anchor assignment and RPN losses
  head        RetinaNet: the classification and box towers
  anchors+loss  RetinaNet: anchors, assignment and the focal and box losses (the rest of the forward)
  roi ops     two-stage: RoIAlign for the box (and mask) head
  roi heads   two-stage: the box head (and mask head) on the pooled features
  roi rest    two-stage: RoI sampling, target building and the second-stage losses
  backward    loss.backward()
  optimizer   SGD step and zero_grad (the trainer's: fused when train.fused_sgd; torchvision's: plain;
              with fp16, the loss scaler's check and update too)

It prints a table of the median milliseconds per phase over the measured steps, side by side.
The steps are not the benchmark's figure (hooks and syncs add a little); they say where the
time goes on each side. Exit 2 with one line for a config that does not build.
"""
import argparse
import contextlib
import statistics
import sys
import time

from .config import ConfigError, apply_overrides, load_config_module, resolve_for_device
from .weights import TRAINER_MODELS

PHASES = ("data", "transform", "backbone", "fpn", "rpn", "head", "anchors+loss", "roi ops", "roi heads",
          "roi rest", "backward", "optimizer")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.profile", description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--steps", type=int, default=5, help="measured steps (after --warmup)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0, help="of the shared weights both sides load")
    p.add_argument("--trainer-only", action="store_true", help="profile the bundled trainer alone")
    return p.parse_args(argv)


class Clock:
    """Accumulates seconds per phase for one step; module phases come from forward hooks."""

    def __init__(self, sync):
        self.sync, self.spent, self.started = sync, {}, {}

    def add(self, name, seconds):
        self.spent[name] = self.spent.get(name, 0.0) + seconds

    def watch(self, module, name):
        def before(_m, _a):
            self.sync()
            self.started[name] = time.perf_counter()

        def after(_m, _a, _o):
            self.sync()
            self.add(name, time.perf_counter() - self.started.pop(name))
        return [module.register_forward_pre_hook(before), module.register_forward_hook(after)]

    @contextlib.contextmanager
    def phase(self, name):
        self.sync()
        start = time.perf_counter()
        yield
        self.sync()
        self.add(name, time.perf_counter() - start)


def trainer_parts(model):
    """(phase, module) of the bundled model; the forward's remainder goes to 'anchors+loss' or 'roi rest'."""
    parts = [("backbone", model.backbone), ("fpn", model.neck)]
    if hasattr(model, "rpn"):
        heads = model.roi_heads
        parts += [("rpn", model.rpn), ("roi ops", heads.box_extractor), ("roi heads", heads.box_head)]
        if getattr(heads, "mask_head", None) is not None:
            parts += [("roi ops", heads.mask_extractor), ("roi heads", heads.mask_head)]
        return parts, ("roi rest", heads)
    return parts + [("head", model.head)], None


def torchvision_parts(model):
    parts = [("transform", model.transform), ("backbone", model.backbone.body), ("fpn", model.backbone.fpn)]
    if hasattr(model, "rpn"):
        heads = model.roi_heads
        parts += [("rpn", model.rpn), ("roi ops", heads.box_roi_pool), ("roi heads", heads.box_head),
                  ("roi heads", heads.box_predictor)]
        if getattr(heads, "mask_head", None) is not None:
            parts += [("roi ops", heads.mask_roi_pool), ("roi heads", heads.mask_head),
                      ("roi heads", heads.mask_predictor)]
        return parts, ("roi rest", heads)
    return parts + [("head", model.head)], None


def profile(model, parts, rest, step_batch, forward, steps, warmup, sync, lr=0.001, fused=False, scaler=None):
    """{phase: median ms per step} over `steps` measured steps of SGD on `model` (`fused`:
    torch's fused SGD kernel, as the trainer's train.fused_sgd; `scaler`: a loss scaler for
    fp16, or None)."""
    from .engine import sgd
    optimizer = sgd([p for p in model.parameters() if p.requires_grad], lr, 0.9, fused)
    per_step = []
    for i in range(warmup + steps):
        clock = Clock(sync)
        hooks = []
        for name, module in parts:
            hooks += clock.watch(module, name)
        if rest is not None:
            hooks += clock.watch(rest[1], rest[0] + " total")
        try:
            with clock.phase("data"):
                batch = step_batch(i)
            with clock.phase("forward total"):
                losses = forward(model, batch)
            total = sum(losses.values())
            with clock.phase("backward"):
                (total if scaler is None else scaler.scale(total)).backward()
            with clock.phase("optimizer"):
                if scaler is None:
                    optimizer.step()
                else:
                    scaler.step(optimizer)
                    scaler.update()
                optimizer.zero_grad(set_to_none=True)
        finally:
            for h in hooks:
                h.remove()
        spent = dict(clock.spent)
        forward_s = spent.pop("forward total")
        if rest is not None:
            inner = sum(spent.get(n, 0.0) for n in ("roi ops", "roi heads"))
            spent[rest[0]] = spent.pop(rest[0] + " total") - inner
        else:
            named = sum(spent.get(n, 0.0) for n in ("transform", "backbone", "fpn", "head"))
            spent["anchors+loss"] = forward_s - named
        if i >= warmup:
            per_step.append(spent)
    return {name: statistics.median(s.get(name, 0.0) for s in per_step) * 1000.0
            for name in PHASES if any(name in s for s in per_step)}


def table(results):
    names = list(results)
    lines = ["| phase | %s |" % " | ".join("%s ms" % n for n in names),
             "|---|%s|" % "|".join("---:" for _ in names)]
    for phase in PHASES:
        if any(phase in r for r in results.values()):
            lines.append("| %s | %s |" % (phase, " | ".join(
                "%.1f" % results[n][phase] if phase in results[n] else "-" for n in names)))
    lines.append("| **step** | %s |" % " | ".join("**%.1f**" % sum(results[n].values()) for n in names))
    return "\n".join(lines)


def run(args):
    import dataclasses
    import tempfile

    import torch

    from . import weights
    from .data import SyntheticBatches
    from .engine import autocast_for, prepare_model
    from .masks import per_image_targets
    from .train import resolve_device
    module = load_config_module(args.config)
    cfg = apply_overrides(module.CONFIG, args.overrides)
    kind = resolve_device(cfg)          # refuses, in one line, what this hardware cannot run
    cfg = resolve_for_device(cfg, kind, torch.backends.cpu.get_cpu_capability())
    model_name = TRAINER_MODELS.get(cfg.model.name)
    if model_name is None:
        raise ConfigError("no profile for model %r" % cfg.model.name)
    device = torch.device(kind)
    if kind == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = cfg.train.tf32
    torch.manual_seed(cfg.train.seed)

    def sync():
        if kind == "cuda":
            torch.cuda.synchronize(device)

    precision = cfg.train.precision

    def in_precision(m, b):
        with autocast_for(precision, device):
            return m(*b)

    def scaler():
        return torch.amp.GradScaler("cuda") if precision == "fp16" else None

    height, width = cfg.data.input_size
    scope = "%s, %s, %dx%d, batch %d: median of %d steps after %d warm-up" % (
        torch.cuda.get_device_name(device) if kind == "cuda" else "cpu (%d threads)" % torch.get_num_threads(),
        precision, height, width, cfg.data.images_per_device, args.steps, args.warmup)
    masks = model_name == "mask_rcnn"
    data = dataclasses.replace(cfg.data, images_per_device=cfg.data.images_per_device)
    source = SyntheticBatches(data, cfg.model.num_classes, masks, device, 0, 1, cfg.train.seed)
    trainer = module.build_detector(cfg)
    standard = cfg.model.num_classes == 80 and cfg.model.block == "bottleneck"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = "%s/%s.pt" % (tmp, model_name)
        if standard:
            weights.save(path, model_name, args.seed, weights.make(model_name, args.seed))
            weights.load_into(trainer, path, model_name, "detbench-trainer")
        trainer = prepare_model(trainer, cfg, device, 1)
        parts, rest = trainer_parts(trainer)
        results["detbench-trainer"] = profile(trainer, parts, rest, source.batch, in_precision, args.steps,
                                              args.warmup, sync, fused=cfg.train.fused_sgd, scaler=scaler())
        if args.trainer_only or not standard:
            return results, standard, scope
        tv = weights.reference_model(model_name)
        tv.transform.min_size, tv.transform.max_size = (min(height, width),), max(height, width)
        weights.load_into(tv, path, model_name, "torchvision")
        tv.to(device).train()
        mean = torch.tensor(tv.transform.image_mean, device=device).view(3, 1, 1)
        std = torch.tensor(tv.transform.image_std, device=device).view(3, 1, 1)

        def tv_batch(i):
            images, targets = source.batch(i)
            return [im * std + mean for im in images], per_image_targets(images, targets)
        parts, rest = torchvision_parts(tv)
        results["torchvision"] = profile(tv, parts, rest, tv_batch, in_precision, args.steps, args.warmup, sync,
                                         scaler=scaler())
    return results, standard, scope


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        results, standard, scope = run(args)
    except ConfigError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    print(scope)
    print(table(results))
    if not standard and not args.trainer_only:
        print("\n(torchvision builds only the standard R50-FPN with 80 classes: the trainer's side alone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
