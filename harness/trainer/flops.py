"""Floating-point work of a training step, split into the part every iteration does and the
parts that grow with the detection work it logs:
`python -m harness.trainer.flops CONFIG [--set key=value ...] [--mode train|inference]`.

What is counted is what torch's FLOP counter (torch.utils.flop_counter) counts: matrix products
and convolutions, forward and backward. Elementwise work (activations, normalisation, losses),
RoIAlign (torchvision's kernel counts nothing; the sparse lever is counted as the kernel),
anchor matching, sampling and NMS count nothing.

Training (`--mode train`) prints the work as a model of the step:

- `fixed_flops`: the part that runs once per batch at the config's input size and batch,
  whatever the batch holds: backbone, FPN, the RPN head or RetinaNet's heads over all
  anchors, forward and backward (frozen stages without their weight gradients).
- `unit_flops`: per unit of a `DETBENCH_WORK` count, the part that runs once per unit:
  per sampled RoI the box head (two fc layers, class scores, box deltas), per mask RoI the
  mask head (four 3x3 convolutions, the 2x deconvolution and the logits of the RoI's own
  class, the only ones a training step reads), forward and backward. Proposals, positive
  RoIs and positive anchors feed only matching and the losses: they cost nothing here.

The unit costs are counted on each head alone, on two units and on one, and differenced; the
fixed part is one whole step on a synthetic batch less its units (`counted` names that step).
A trial's work per iteration is then `fixed_flops + sum(unit_flops[k] * count[k])` with the
counts it logged (harness.measure.compute), so a framework that samples fewer RoIs is counted
for fewer. The step is counted in the model's plain form (`COUNTED_FORM`): levers that change
how the same work is computed (sparse RoIAlign, target-class mask logits, the sync-free padded
slots, RetinaNet's merged first convolutions and fused focal loss) change nothing counted.

Inference (`--mode inference`) prints `flops_per_image`: the test-time forward of one
synthetic batch with its post-processing, divided by its images.

Prints one JSON object. Exit 2 with one line for a config that does not build.
"""
import argparse
import dataclasses
import json
import sys

from .config import ConfigError, apply_overrides, load_config_module

# the plain form every step is counted in: (model field, value)
COUNTED_FORM = (("roi_align", "torchvision"), ("mask_target_class_only", True), ("sync_free", False),
                ("retina_merge_first_convs", False), ("fused_focal_loss", False))


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.flops", description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--mode", choices=("train", "inference"), default="train",
                   help="a training step (forward and backward), or the inference network's forward")
    return p.parse_args(argv)


def counted_form(cfg):
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **dict(COUNTED_FORM)))


def _counted(run):
    """FLOPs torch's counter sees while run() runs."""
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return counter.get_total_flops()


def _per_unit(head_step):
    """FLOPs of head_step(n) per unit: counted at two units and at one, differenced."""
    return _counted(lambda: head_step(2)) - _counted(lambda: head_step(1))


def unit_costs(model, cfg):
    """{work count: FLOPs per unit} of a two-stage model's heads (empty for RetinaNet): each
    head's forward and backward alone, its input needing a gradient as in a step (the RoI
    features come from trained FPN levels)."""
    import torch
    heads = getattr(model, "roi_heads", None)
    if heads is None:
        return {}
    channels = cfg.model.fpn_channels
    gen = torch.Generator().manual_seed(0)

    def box_step(n):
        x = torch.randn(n, channels, *heads.box_extractor.output_size, generator=gen, requires_grad=True)
        scores, deltas = heads.box_head(x)
        (scores.sum() + deltas.sum()).backward()

    def mask_step(n):
        x = torch.randn(n, channels, *heads.mask_extractor.output_size, generator=gen, requires_grad=True)
        labels = torch.randint(1, cfg.model.num_classes + 1, (n,), generator=gen)
        heads.mask_head(x, labels).sum().backward()      # the RoI's own class only
    units = {"sampled_rois": _per_unit(box_step)}
    if heads.mask_head is not None:
        units["mask_rois"] = _per_unit(mask_step)
    model.zero_grad(set_to_none=True)
    return units


def train_work(cfg, build_detector):
    """The work model of one training step (module docstring): {"fixed_flops", "unit_flops",
    "counted"}, per batch of cfg.data.images_per_device images."""
    import torch

    from . import data
    from .engine import work_counts
    cfg = counted_form(cfg)
    torch.manual_seed(cfg.train.seed)
    model = build_detector(cfg)
    images, targets = next(iter(data.build_batches(cfg, torch.device("cpu"), 0, 1)))
    torch.manual_seed(cfg.train.seed + 1)
    model.train()

    def step():
        losses = model(images, targets)
        sum(losses.values()).backward()
    total = _counted(step)
    counts = {k: int(v) for k, v in work_counts(model).items()}
    model.zero_grad(set_to_none=True)
    units = unit_costs(model, cfg)
    fixed = total - sum(cost * counts.get(k, 0) for k, cost in units.items())
    return {"fixed_flops": fixed, "unit_flops": units, "counted": dict(counts, step_flops=total)}


def inference_work(cfg, build_detector):
    """Counted FLOPs per image of the test-time forward of one synthetic batch, with its
    post-processing (harness/trainer/postprocess.py; NMS and the mask paste count no matrix work)."""
    import torch

    from . import data, postprocess
    cfg = counted_form(cfg)
    torch.manual_seed(cfg.train.seed)
    model = build_detector(cfg)
    images, _ = next(iter(data.build_batches(cfg, torch.device("cpu"), 0, 1)))
    model.eval()

    def forward():
        with torch.inference_mode():
            postprocess.predict(model, images, [tuple(images.shape[-2:])] * len(images))
    return _counted(forward) / cfg.data.images_per_device


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        module = load_config_module(args.config)
        cfg = apply_overrides(module.CONFIG, args.overrides)
        if args.mode == "inference":
            work = {"flops_per_image": inference_work(cfg, module.build_detector)}
        else:
            work = train_work(cfg, module.build_detector)
    except ConfigError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    out = {"model": cfg.model.name, "input_size": list(cfg.data.input_size),
           "images_per_device": cfg.data.images_per_device, "mode": args.mode}
    out.update(work)
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
