"""Entry point: python -m harness.trainer.train CONFIG [--set key=value ...]

Exit codes: 0 done, 2 bad config/override/data input, 3 loss stopped being finite.
"""
import argparse
import os
import platform
import sys

from harness import jsonlog

from .config import ConfigError, apply_overrides, load_config_module


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m harness.trainer.train",
                                     description="Train a SimpleDet-style detector and log every iteration.")
    parser.add_argument("config", help="path to a trainer config .py file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. train.max_iter=50 (repeatable)")
    return parser.parse_args(argv)


def settings(cfg, device, world):
    import torch
    import torchvision
    m, d, t = cfg.model, cfg.data, cfg.train
    out = {
        "model": m.name, "images_per_device": d.images_per_device, "world_size": world,
        "images_per_iteration": d.images_per_device * world, "input_size": list(d.input_size),
        "precision": t.precision, "frozen_stages": m.frozen_stages, "norm": m.norm,
        "workers": d.workers if d.source == "coco" else 0, "data": d.source,
        "device": str(device.type), "torch": torch.__version__, "torchvision": torchvision.__version__,
        "channels_last": t.channels_last, "compile_backbone": t.compile_backbone,
        "checkpoint_backbone": t.checkpoint_backbone, "tf32": t.tf32, "seed": t.seed,
        "backbone": f"{m.block}{list(m.layers)}x{m.base_width}", "python": platform.python_version(),
    }
    if m.name in ("faster", "mask"):
        out.update(rpn_pre_nms_top_n_train=m.rpn_pre_nms_top_n_train,
                   rpn_post_nms_top_n_train=m.rpn_post_nms_top_n_train,
                   roi_batch_per_image=m.roi_batch_per_image)
    if m.name == "mask":
        out["mask_max_rois_per_image"] = m.mask_max_rois_per_image
    return out


def resolve_device(cfg):
    import torch
    kind = cfg.train.device
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device=cuda but no CUDA device is visible")
    if cfg.train.precision == "fp16" and kind != "cuda":
        raise ConfigError("train.precision=fp16 needs a CUDA device (autocast with loss scaling); "
                          "use bf16 or fp32 on the CPU")
    return kind


def run(argv):
    args = parse_args(argv)
    module = load_config_module(args.config)
    cfg = apply_overrides(module.CONFIG, args.overrides)
    import torch

    from . import data, dist, engine, hostmem
    kind = resolve_device(cfg)
    if kind == "cpu":
        hostmem.keep_freed_memory()
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    if cfg.train.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if kind == "cuda":
        torch.backends.cudnn.benchmark = True
    device, _, world = dist.setup(kind)
    try:
        torch.manual_seed(cfg.train.seed)
        try:
            model = module.build_detector(cfg)
        except Exception as exc:
            raise ConfigError(f"config {args.config} does not build: {type(exc).__name__}: {exc}") from None
        batches = data.build_batches(cfg, device, dist.rank(), world)
        model = engine.prepare_model(model, cfg, device, world)
        # the sampling noise after this point is the same on every rank count
        torch.manual_seed(cfg.train.seed + 1 + dist.rank())
        if dist.rank() == 0:
            print(jsonlog.meta_line(settings(cfg, device, world)), flush=True)
        engine.train(model, batches, cfg, device, world)
    finally:
        dist.cleanup()


def main(argv=None):
    from .coco import DataError
    from .engine import NonFiniteLoss
    try:
        run(sys.argv[1:] if argv is None else argv)
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except NonFiniteLoss as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
