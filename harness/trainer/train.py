"""Entry point: python -m harness.trainer.train CONFIG [--set key=value ...] [--weights FILE] [--resume FILE]

Exit codes: 0 done, 2 bad config/override/data input/checkpoint, 3 loss stopped being finite.
"""
import argparse
import os
import platform
import sys

from harness import jsonlog

from .config import ConfigError, apply_overrides, load_config_module, resolve_for_device
from .schedule import decay_setting


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m harness.trainer.train",
                                     description="Train a SimpleDet-style detector and log every iteration.")
    parser.add_argument("config", help="path to a trainer config .py file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting, e.g. train.max_iter=50 (repeatable)")
    parser.add_argument("--weights", metavar="FILE",
                        help="initial weights of the whole detector, the same as --set model.weights=FILE "
                             "(`detbench weights make` files, trainer checkpoints, plain state_dicts)")
    parser.add_argument("--resume", metavar="FILE",
                        help="continue the run a checkpoint (train.checkpoint_every) was written in")
    return parser.parse_args(argv)


def settings(cfg, device, world):
    import torch
    import torchvision

    from .schedule import resolved_steps
    m, d, t = cfg.model, cfg.data, cfg.train
    out = {
        "model": m.name, "images_per_device": d.images_per_device, "world_size": world,
        "images_per_iteration": d.images_per_device * world, "input_size": list(d.input_size),
        "precision": t.precision, "frozen_stages": m.frozen_stages, "norm": m.norm,
        "workers": d.workers if d.source == "coco" else 0, "data": d.source,
        "shuffle": d.shuffle if d.source == "coco" else False,
        "device": str(device.type), "torch": torch.__version__, "torchvision": torchvision.__version__,
        "channels_last": t.channels_last == "true", "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "compile_backbone": t.compile_backbone,
        "checkpoint_backbone": t.checkpoint_backbone, "tf32": t.tf32, "seed": t.seed,
        "backbone": f"{m.block}{list(m.layers)}x{m.base_width}", "anchor_corners": m.anchor_corners,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(), "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "lr": t.lr * d.images_per_device * world / t.lr_reference_batch,
        "warmup_iters": t.warmup_iters, "warmup_factor": t.warmup_factor,
        "schedule": t.schedule, "steps": list(resolved_steps(t)), "gamma": t.gamma,
        "checkpoint_every": t.checkpoint_every, "fused_sgd": t.fused_sgd, "cuda_graph": t.cuda_graph,
        # a run that emulates bf16 (tests only) says so: its times are not bf16 training's
        "allow_emulated_bf16": t.allow_emulated_bf16, "emulated_bf16": emulates_bf16(torch, cfg, device.type),
    }
    if m.name in ("faster", "mask"):
        out.update(rpn_pre_nms_top_n_train=m.rpn_pre_nms_top_n_train,
                   rpn_post_nms_top_n_train=m.rpn_post_nms_top_n_train,
                   rpn_batch_per_image=m.rpn_batch_per_image,
                   rpn_positive_fraction=m.rpn_positive_fraction,
                   roi_batch_per_image=m.roi_batch_per_image,
                   roi_positive_fraction=m.roi_positive_fraction,
                   roi_align_sampling_ratio=m.roi_align_sampling_ratio,
                   roi_align_aligned=m.roi_align_aligned, roi_align=m.roi_align, sync_free=m.sync_free)
    if m.name == "mask":
        out["mask_max_rois_per_image"] = m.mask_max_rois_per_image
        out["mask_target_class_only"] = m.mask_target_class_only
    if m.name == "retina":
        out.update(retina_merge_first_convs=m.retina_merge_first_convs, fused_focal_loss=m.fused_focal_loss)
    if d.source == "coco" and (d.flip_prob or d.scales):      # augmentation, where it is on
        out.update(flip_prob=d.flip_prob, scales=list(d.scales))
    if d.source == "coco" and (d.canvas != "fixed" or d.aspect_grouping):
        out.update(canvas=d.canvas, aspect_grouping=d.aspect_grouping)
    if d.source == "coco" and m.name == "mask" and d.mask_crop:
        out["mask_crop"] = d.mask_crop
    return out


def check_threads(threads, omp_num_threads):
    """The intra-op thread count to set (0: leave torch's, which follows OMP_NUM_THREADS).

    train.threads may only repeat OMP_NUM_THREADS: a second, different thread count would
    give the trainer a setting the other frameworks of a scenario do not get."""
    if not threads:
        return 0
    try:
        omp = int(omp_num_threads) if omp_num_threads else None
    except ValueError:
        omp = None
    if omp is not None and omp != threads:
        raise ConfigError(f"train.threads={threads} differs from OMP_NUM_THREADS={omp_num_threads}: "
                          "set the thread count once, in the scenario's env (OMP_NUM_THREADS)")
    return threads


def with_weights_option(cfg, path):
    """`--weights FILE` is `--set model.weights=FILE`; giving both with different files is an error."""
    import dataclasses
    if not path:
        return cfg
    if cfg.model.weights and cfg.model.weights != path:
        raise ConfigError(f"--weights {path} and model.weights={cfg.model.weights} name different files: "
                          "give one")
    try:
        return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, weights=path))
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def load_initial_weights(model, cfg):
    """Start from model.weights (a whole detector) or model.backbone_weights (an ImageNet ResNet)."""
    from . import dist
    from .pretrained import WeightsError, load_backbone, load_detector
    from .weights import TRAINER_MODELS
    m = cfg.model
    try:
        if m.weights:
            count, layout = load_detector(model, m.weights, TRAINER_MODELS[m.name],
                                          what=f"this trainer's {m.name} model")
            line = f"loaded weights {m.weights}: {count} tensors ({layout} layout)"
        elif m.backbone_weights:
            count = load_backbone(model.backbone, m.backbone_weights)
            line = f"loaded backbone weights {m.backbone_weights}: {count} tensors (ImageNet ResNet)"
        else:
            return
    except WeightsError as exc:
        raise ConfigError(str(exc)) from None
    if dist.rank() == 0:
        print(line, flush=True)


def resolve_device(cfg):
    """The device kind this run trains on ("cpu" or "cuda"). A precision or lever that this
    hardware cannot run as asked is refused here, in one line, before anything is built: never
    a silent fallback that changes what is measured."""
    import torch
    kind = cfg.train.device
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device=cuda but no CUDA device is visible")
    problem = hardware_refusal(torch, cfg, kind)
    if problem:
        raise ConfigError(problem)
    return kind


def emulates_bf16(torch, cfg, device):
    """Whether this run's bf16 would be torch's emulation (a CPU without bf16 kernels)."""
    from .peak import supported
    return cfg.train.precision == "bf16" and not supported(torch, "bf16", torch.device(device))


def fused_sgd_devices(torch):
    """The device kinds torch's fused SGD kernel runs on (the list torch's optimizers check)."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:         # an older torch: fused kernels on CUDA only
        return ("cuda",)
    return tuple(_get_fused_kernels_supported_devices())


def hardware_refusal(torch, cfg, kind):
    """Why this run's precision or a lever cannot run on a `kind` device as asked, or None."""
    t = cfg.train
    if t.precision == "fp16" and kind != "cuda":
        return ("train.precision=fp16 needs a CUDA device (autocast with loss scaling); "
                "use fp32 on the CPU (or bf16, where it has bf16 kernels)")
    if t.tf32 and kind != "cuda":
        return ("train.tf32=true needs a CUDA device: TF32 is a GPU tensor-core mode, and on the CPU "
                "this run would be plain fp32")
    if t.tf32 and torch.cuda.get_device_capability() < (8, 0):
        return ("train.tf32=true needs a GPU of compute capability 8.0 or newer; this one is %d.%d, "
                "where the run would be plain fp32" % torch.cuda.get_device_capability())
    if emulates_bf16(torch, cfg, kind) and not (kind == "cpu" and t.allow_emulated_bf16):
        what = ("a CUDA device without bf16 support" if kind == "cuda" else
                "a CPU without bf16 kernels (torch's CPU capability: %s)" % torch.backends.cpu.get_cpu_capability())
        return ("train.precision=bf16 on %s would time an emulation tens of times slower than fp32; "
                "use fp32 here" % what)
    if t.fused_sgd and kind not in fused_sgd_devices(torch):
        return ("train.fused_sgd=true: torch %s has no fused SGD kernel for %s devices; set "
                "train.fused_sgd=false" % (torch.__version__, kind))
    return None


def run(argv):
    args = parse_args(argv)
    module = load_config_module(args.config)
    cfg = with_weights_option(apply_overrides(module.CONFIG, args.overrides), args.weights)
    import torch

    from . import checkpoint, data, dist, engine
    kind = resolve_device(cfg)
    cfg = resolve_for_device(cfg, kind, torch.backends.cpu.get_cpu_capability())
    # process-level settings (allocator, threads) come from the environment the scenario gives
    # every framework alike; the trainer adds none of its own
    threads = check_threads(cfg.train.threads, os.environ.get("OMP_NUM_THREADS"))
    if threads:
        torch.set_num_threads(threads)
    if cfg.train.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if kind == "cuda":
        torch.backends.cudnn.benchmark = True
    device, _, world = dist.setup(kind)
    try:
        from .graphs import refusal
        problem = refusal(cfg, kind, world)
        if problem:
            raise ConfigError(problem)
        resume = checkpoint.load(args.resume, cfg, world) if args.resume else None
        if cfg.train.checkpoint_every:
            checkpoint.prepare_dir(cfg.train.checkpoint_dir)
        torch.manual_seed(cfg.train.seed)
        try:
            model = module.build_detector(cfg)
        except Exception as exc:
            raise ConfigError(f"config {args.config} does not build: {type(exc).__name__}: {exc}") from None
        if resume is None:      # a resumed run takes every tensor from its checkpoint
            load_initial_weights(model, cfg)
        start = 0
        if resume is not None:
            checkpoint.load_model(model, resume, args.resume)
            start = resume["iteration"]
        batches = data.build_batches(cfg, device, dist.rank(), world, start)
        model = engine.prepare_model(model, cfg, device, world)
        # the sampling noise after this point is the same on every rank count
        torch.manual_seed(cfg.train.seed + 1 + dist.rank())
        if dist.rank() == 0:
            meta = settings(cfg, device, world)
            if resume is not None:
                meta["resumed_after_iteration"] = start
                print(f"resuming {args.resume} after iteration {start}", flush=True)
            print(jsonlog.meta_line(meta), flush=True)
            from harness.drivers import asrun   # the settings as run, in the rivals' keys, from what was built

            from .masks import roi_targets
            from .postprocess import paste_masks
            print(jsonlog.settings_line(*asrun.trainer(cfg, model, world, engine.make_optimizer(model, cfg, world)[0],
                                                       torch.get_num_threads(), decay_setting(cfg.train),
                                                       paste_masks, roi_targets)),
                  flush=True)
            if meta["emulated_bf16"]:
                print("warning: train.allow_emulated_bf16=true: this CPU has no bf16 kernels and torch emulates "
                      "them; this run's times are the emulation's, not bf16 training's", flush=True)
        engine.train(model, batches, cfg, device, world, resume=resume, resume_path=args.resume)
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
