"""Floating-point work per image of a training step, or of inference:
`python -m harness.trainer.flops CONFIG [--set key=value ...] [--mode train|inference]`.

Counts, with torch's FLOP counter (torch.utils.flop_counter: matrix products and
convolutions, forward and backward), one training step of the bundled model on one
synthetic batch of the config's size, and divides by the images in it. The parity tests
(tests/trainer/test_parity.py) show the bundled model is torchvision's architecture, so the
figure is the work per image of every framework training the same detector at that size;
reports divide achieved images/s x this figure by the machine's peak (MFU). Prints one
JSON object. Exit 2 with one line for a config that does not build.
"""
import argparse
import dataclasses
import json
import sys

from .config import ConfigError, apply_overrides, load_config_module


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.flops", description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--mode", choices=("train", "inference"), default="train",
                   help="a training step (forward and backward), or the inference network's forward")
    return p.parse_args(argv)


def count(cfg, build_detector, mode="train"):
    """Counted FLOPs per image of one batch: a training step (forward and backward), or in
    inference the network's test-time forward with its post-processing (harness/trainer/postprocess.py;
    NMS and the mask paste count no matrix work)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from . import data, postprocess
    # RoIAlign is no matrix work however it is computed: torchvision's kernel counts nothing,
    # and the sparse lever's products would count as dense ones
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, roi_align="torchvision"))
    torch.manual_seed(cfg.train.seed)
    model = build_detector(cfg)
    images, targets = next(iter(data.build_batches(cfg, torch.device("cpu"), 0, 1)))
    torch.manual_seed(cfg.train.seed + 1)
    counter = FlopCounterMode(display=False)
    if mode == "inference":
        model.eval()
        with torch.inference_mode(), counter:
            postprocess.predict(model, images, [tuple(images.shape[-2:])] * len(images))
    else:
        model.train()
        with counter:
            losses = model(images, targets)
            sum(losses.values()).backward()
    return counter.get_total_flops() / cfg.data.images_per_device


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        module = load_config_module(args.config)
        cfg = apply_overrides(module.CONFIG, args.overrides)
        per_image = count(cfg, module.build_detector, args.mode)
    except ConfigError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    print(json.dumps({"model": cfg.model.name, "input_size": list(cfg.data.input_size),
                      "images_per_device": cfg.data.images_per_device, "mode": args.mode,
                      "flops_per_image": per_image}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
