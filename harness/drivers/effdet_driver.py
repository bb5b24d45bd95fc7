"""Train EfficientDet through the effdet library (PyPI effdet 0.4.1) for N iterations, logging
like efficientdet-pytorch's train.py.

Runs in the effdet framework's pinned env (it imports torch and effdet; the harness does not),
on the CPU or one CUDA device. Everything the step computes is effdet's own:
``create_model(MODEL, bench_task="train", pretrained=False, pretrained_backbone=False,
image_size=(H, W))`` (random weights, nothing downloaded; ``--weights FILE`` loads a state dict
of the EfficientDet model), its ``DetBenchTrain`` (EfficientNet backbone, BiFPN, heads, focal
and Huber losses), its training transforms (random flip, random scale 0.1-2.0 with crop and
pad to the input size) and its collate with the anchor labeler (as train.py's default:
labels assigned in the loader), timm's optimizer factory (SGD with momentum 0.9, weight
decay 4e-5, none on biases and norms) and gradient clipping at norm 10, train.py's defaults.
What train.py does on CUDA only is done here on the device of the run: its prefetcher's
normalisation (ImageNet mean and std on the uint8 batch) is part of getting the batch, and
mixed precision is torch.autocast on the device (bf16 on the CPU; fp16 with a gradient
scaler on CUDA).

Each iteration prints train.py's line (--log-interval 1), read by the effdet scraper (one line,
shown here in two):

    Train: 0 [   3/10 ( 33%)]  Loss:  1.234567 (1.2500)  Time: 0.412s,    4.85/s  (0.420s,    4.76/s)
    LR: 1.000e-02  Data: 0.012 (0.015)

with each value of this iteration and, in parentheses, the mean since the first (timm's
AverageMeter). An iteration's time runs from the end of the previous iteration to the end of
this one (the previous line's printing included, the device synchronised), its data time is
the wait for the batch. After it one ``DETBENCH_WORK {json}`` line gives the iteration's
positive anchors, summed over the batch's images. Before the first iteration one
``DETBENCH_SETTINGS {json}`` line gives the settings read from effdet's config, the built
bench, the optimizer and the loader (asrun.py).
"""
import argparse
import os
import random
import sys
import time

import numpy as np
import torch

try:
    from harness.drivers import asrun, common    # imported from the harness (tests)
except ImportError:
    import asrun                                # run as a script in the framework's pinned env
    import common

MODELS = ("efficientdet_d0",)
NUM_CLASSES = 80               # classes drawn for synthetic boxes (1-based, as COCO's category ids)
MOMENTUM = 0.9                 # train.py's defaults
WEIGHT_DECAY = 4e-5
CLIP_NORM = 10.0
MEAN = (0.485, 0.456, 0.406)   # effdet's IMAGENET_DEFAULT_MEAN and _STD
STD = (0.229, 0.224, 0.225)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--input-size", default="512x512", help="HxW, each side a multiple of 128")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a COCO instances JSON")
    p.add_argument("--images", help="image folder of --data")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", metavar="FILE", help="a state dict of the EfficientDet model")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    try:
        args.size = tuple(int(v) for v in args.input_size.lower().split("x"))
        assert len(args.size) == 2 and min(args.size) > 0
    except (ValueError, AssertionError):
        p.error("--input-size takes HxW, got %r" % args.input_size)
    if any(v % 128 for v in args.size):
        p.error("EfficientDet's pyramid (levels 3 to 7) needs sides that are multiples of 128, got %s"
                % args.input_size)
    if args.iterations < 1 or args.batch_size < 1:
        p.error("--iterations and --batch-size are at least 1")
    if args.precision == "fp16" and not args.device.startswith("cuda"):
        p.error("--precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU")
    if args.data != "synthetic" and not args.images:
        p.error("--data FILE needs --images DIR")
    return args


class Synthetic(torch.utils.data.Dataset):
    """Seeded random images of the input size with 1-8 random boxes each, in the form effdet's
    COCO parser gives (boxes y0 x0 y1 x1 in pixels, classes 1-based); effdet's transforms apply."""

    def __init__(self, n, height, width, seed):
        self.n, self.h, self.w, self.seed = n, height, width, seed
        self.transform = None

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        from PIL import Image
        rng = np.random.RandomState((self.seed * 100003 + index) % (2 ** 32))
        img = Image.fromarray(rng.randint(0, 256, (self.h, self.w, 3), dtype=np.uint8))
        k = rng.randint(1, 9)
        y0x0 = rng.rand(k, 2) * [self.h * 0.7, self.w * 0.7]
        size = 16 + rng.rand(k, 2) * [self.h * 0.3, self.w * 0.3]
        y1x1 = np.minimum(y0x0 + size, [self.h - 1.0, self.w - 1.0])
        target = {"img_idx": index, "img_size": (self.w, self.h),
                  "bbox": np.concatenate([y0x0, y1x1], 1).astype(np.float32),
                  "cls": rng.randint(1, NUM_CLASSES + 1, k).astype(np.int64)}
        if self.transform is not None:
            img, target = self.transform(img, target)
        return img, target


def coco_dataset(ann_file, images):
    """effdet's own dataset and COCO parser (pycocotools) over a COCO instances file."""
    from pathlib import Path
    from effdet.data import DetectionDatset
    from effdet.data.parsers import CocoParserCfg, create_parser
    return DetectionDatset(Path(images), parser=create_parser("coco", cfg=CocoParserCfg(ann_filename=ann_file)))


class Normalized:
    """The batches of a loader, uint8 images turned to normalised floats on the device: what
    train.py's CUDA prefetcher does, done here as part of getting the batch."""

    def __init__(self, loader, device):
        self.loader, self.device = loader, device
        self.mean = torch.tensor([x * 255 for x in MEAN], device=device).view(1, 3, 1, 1)
        self.std = torch.tensor([x * 255 for x in STD], device=device).view(1, 3, 1, 1)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for images, target in self.loader:
            images = images.to(self.device, non_blocking=True).float().sub_(self.mean).div_(self.std)
            yield images, {k: v.to(self.device, non_blocking=True) for k, v in target.items()}


class Meter:
    """timm's AverageMeter: the last value and the mean since the first."""

    def __init__(self):
        self.val, self.sum, self.count = 0.0, 0.0, 0

    def update(self, value, n=1):
        self.val = value
        self.sum += value * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def build(args):
    from effdet import create_model
    bench = create_model(args.model, bench_task="train", pretrained=False, pretrained_backbone=False,
                         image_size=args.size)
    if args.weights:
        try:
            state = torch.load(args.weights, map_location="cpu", weights_only=True)
            bench.model.load_state_dict(state.get("state_dict", state) if isinstance(state, dict) else state)
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            sys.exit("error: %s: not a state dict of %s at %dx%d: %s" % ((args.weights, args.model) + args.size
                                                                          + (str(exc).splitlines()[0],)))
    return bench


def make_loader(args, config, n_images):
    from effdet.anchors import AnchorLabeler, Anchors
    from effdet.data.loader import DetectionFastCollate
    from effdet.data.transforms import resolve_fill_color, transforms_coco_train
    if args.data == "synthetic":
        dataset = Synthetic(n_images, args.size[0], args.size[1], args.seed)
    else:
        dataset = coco_dataset(args.data, args.images)
    # train.py's defaults: random interpolation, padding with the mean colour, uint8 out
    dataset.transform = transforms_coco_train(args.size, interpolation="random", use_prefetcher=True,
                                              fill_color=resolve_fill_color("mean", MEAN), mean=MEAN, std=STD)
    labeler = AnchorLabeler(Anchors.from_config(config), config.num_classes, match_threshold=0.5)
    sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=n_images,
                                             generator=torch.Generator().manual_seed(args.seed))
    collate = DetectionFastCollate(anchor_labeler=labeler)
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                                       num_workers=args.workers, collate_fn=collate, drop_last=True)


def _anchor_sizes(config):
    """effdet's anchor sizes per level: anchor_scale x stride x 2^(octave / num_scales)."""
    return [[config.anchor_scale * 2 ** level * 2 ** (octave / config.num_scales)
             for octave in range(config.num_scales)] for level in range(config.min_level, config.max_level + 1)]


def _anchor_ratios(config):
    """Height / width of each of effdet's aspect ratios: a pair is (x, y) factors, a number r is
    x = sqrt(r), y = 1 / sqrt(r)."""
    return [a[1] / a[0] if hasattr(a, "__len__") else 1.0 / a for a in config.aspect_ratios]


def as_run(args, bench, optimizer, loader, amp_dtype, version):
    """(settings, implementation) of the SETTINGS line, read from effdet's config of the built bench,
    its loss, the optimizer and the loader (`loader` is the Normalized wrapper)."""
    config, inner = bench.config, loader.loader
    loss = getattr(bench, "loss_fn", config)
    backbone = bench.model.backbone
    stages = ([[backbone.conv_stem, backbone.bn1]] + list(backbone.blocks)
              if hasattr(backbone, "conv_stem") and hasattr(backbone, "blocks") else [backbone])
    norm, norm_impl = asrun.norm(backbone.modules())
    transforms = getattr(getattr(inner.dataset, "transform", None), "transforms", ())
    flip = any(type(t).__name__ == "RandomFlip" and (t.horizontal or t.vertical) and t.prob > 0 for t in transforms)
    settings = {
        "images_per_device": inner.batch_size, "devices": 1, "input_size": [int(v) for v in config.image_size],
        "precision": asrun.precision(amp_dtype),
        "data": "synthetic" if isinstance(inner.dataset, Synthetic) else "coco",
        "frozen_stages": asrun.frozen_stages(stages), "norm": norm, "loader_workers": inner.num_workers,
        "flip": flip, "threads": torch.get_num_threads(),
        "init": "file:" + os.path.basename(args.weights) if args.weights else "random",
        "momentum": asrun.momentum(optimizer), "weight_decay": asrun.weight_decay(optimizer),
        "box_loss": "huber(delta %g) x %g" % (float(loss.delta), float(loss.box_loss_weight)),
        "cls_loss": asrun.focal(loss.alpha, loss.gamma) + (
            ", label smoothing %g" % float(loss.label_smoothing) if getattr(loss, "label_smoothing", 0) else ""),
        "anchors": asrun.anchors(_anchor_sizes(config), _anchor_ratios(config)),
        "trainer": "effdet %s library" % version,
    }
    # the driver keeps its rate constant (no warmup); its sampler draws at random
    settings.update(asrun.normalized.schedule(optimizer.defaults["lr"], 0, 1.0,
                                              isinstance(inner.sampler, torch.utils.data.RandomSampler), ((), 1.0)))
    return settings, {"batch_norm": norm_impl, "optimizer": asrun.optimizer(optimizer),
                      "memory_format": asrun.memory_format(bench.model.backbone.modules())}


def line(batch_idx, total, batch, loss, batch_time, data_time, lr):
    """train.py's training line, value by value."""
    last_idx = max(total - 1, 1)
    return ("Train: 0 [{:>4d}/{} ({:>3.0f}%)]  Loss: {:>9.6f} ({:>6.4f})  Time: {:.3f}s, {:>7.2f}/s  "
            "({:.3f}s, {:>7.2f}/s)  LR: {:.3e}  Data: {:.3f} ({:.3f})").format(
        batch_idx, total, 100.0 * batch_idx / last_idx, loss.val, loss.avg, batch_time.val,
        batch / max(batch_time.val, 1e-9), batch_time.avg, batch / max(batch_time.avg, 1e-9), lr,
        data_time.val, data_time.avg)


def main(argv=None):
    args = parse_args(argv)
    import timm
    from effdet.version import __version__ as effdet_version
    from timm.optim import create_optimizer_v2
    from timm.utils import dispatch_clip_grad
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    bench = build(args).to(device)
    bench.train()
    loader = Normalized(make_loader(args, bench.config, args.iterations * args.batch_size), device)
    optimizer = create_optimizer_v2(bench, opt="momentum", lr=args.lr, weight_decay=WEIGHT_DECAY, momentum=MOMENTUM)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
    print("effdet %s timm %s torch %s model %s device %s images/iter %d input %dx%d threads %d lr %g workers %d "
          "data %s" % (effdet_version, timm.__version__, torch.__version__, args.model, device, args.batch_size,
                       args.size[0], args.size[1], torch.get_num_threads(), args.lr, args.workers,
                       "synthetic" if args.data == "synthetic" else "coco"), flush=True)
    print(common.jsonlog.settings_line(*as_run(args, bench, optimizer, loader, amp_dtype, effdet_version)),
          flush=True)
    batch_time, data_time, losses = Meter(), Meter(), Meter()
    total = len(loader)
    end = time.perf_counter()         # the first iteration's time starts here, with the loader
    batches = iter(loader)
    for i in range(total):
        fetch = time.perf_counter()
        images, target = next(batches)
        data_time.update(time.perf_counter() - fetch)
        positives = int(target["label_num_positives"].sum())
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            output = bench(images, target)
        loss = output["loss"]
        losses.update(loss.item(), images.size(0))
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            dispatch_clip_grad(bench.parameters(), value=CLIP_NORM, mode="norm")
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            dispatch_clip_grad(bench.parameters(), value=CLIP_NORM, mode="norm")
            optimizer.step()
        if cuda:
            torch.cuda.synchronize(device)
        now = time.perf_counter()
        batch_time.update(now - end)
        end = now
        # from here on, the time belongs to the next iteration
        print(line(i, total, images.size(0), losses, batch_time, data_time, optimizer.param_groups[0]["lr"]),
              flush=True)
        print(common.jsonlog.work_line(i + 1, positive_anchors=positives), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
