"""Training speed of the bundled trainer against torchvision's reference detectors.

Both sides train the same architecture (ResNet-50 FPN, frozen stem + stage 1, frozen BN) on
the same synthetic batches at the same input size, batch and precision, with SGD and the
same RPN/RoI sampling sizes. Runs of the two are interleaved in rounds inside one process so
that drift and heat hit both alike. Prints images/s of each and the ratio ours/torchvision.

    python benchmarks/trainer_vs_torchvision.py --size 320x320 --batch 2 --precision fp32
    python benchmarks/trainer_vs_torchvision.py --device cuda --size 800x1333 --precision fp16

On a GPU each timed step ends with a synchronize (the loss is read back), and fp16 runs both
sides through one kind of loss scaler each. The ratio's interval is a percentile bootstrap over
the per-round median iteration times of each side; "parity" when it spans 1.

torchvision's builders (retinanet_resnet50_fpn, ...) ignore trainable_backbone_layers and
use plain BatchNorm when no weights are given, so the torchvision side is assembled from the
same torchvision parts those builders use, with FrozenBatchNorm2d and 3 trainable stages,
which is what the builder produces for a pretrained backbone. No weights are downloaded.
"""
import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torchvision.models import resnet50  # noqa: E402
from torchvision.models.detection import FasterRCNN, MaskRCNN, RetinaNet  # noqa: E402
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor  # noqa: E402
from torchvision.ops.feature_pyramid_network import LastLevelP6P7  # noqa: E402
from torchvision.ops.misc import FrozenBatchNorm2d  # noqa: E402

from harness.results.significance import bootstrap_ratio_ci  # noqa: E402
from harness.trainer.config import apply_overrides, load_config_module, resolve_for_device  # noqa: E402
from harness.trainer.data import SyntheticBatches  # noqa: E402
from harness.trainer.masks import per_image_targets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {"retina": "retina_r50v1_fpn_1x.py", "faster": "faster_r50v1_fpn_1x.py",
           "mask": "mask_r50v1_fpn_1x.py"}


def ours(kind, args):
    path = os.path.join(HERE, "..", "harness", "trainer", "configs", CONFIGS[kind])
    module = load_config_module(path)
    cfg = apply_overrides(module.CONFIG, [
        f"data.input_size={args.size}", f"data.images_per_device={args.batch}",
        f"train.precision={args.precision}", f"train.channels_last={str(args.channels_last).lower()}"])
    cfg = resolve_for_device(cfg, args.device)  # model.roi_align=auto: the kernel the trainer picks there
    torch.manual_seed(0)
    model = module.build_detector(cfg)
    if args.channels_last:
        model.to(memory_format=torch.channels_last)
    return model.train(), cfg


def theirs(kind, cfg):
    h, w = cfg.data.input_size
    size = dict(min_size=min(h, w), max_size=max(h, w), image_mean=[0.0] * 3, image_std=[1.0] * 3)
    torch.manual_seed(0)
    body = resnet50(weights=None, norm_layer=FrozenBatchNorm2d)
    m = cfg.model
    trainable = 4 - m.frozen_stages  # torchvision counts layer1..layer4 plus conv1 as 5
    if kind == "retina":
        backbone = _resnet_fpn_extractor(body, trainable, returned_layers=[2, 3, 4],
                                         extra_blocks=LastLevelP6P7(256, 256))
        model = RetinaNet(backbone, m.num_classes, **size)
    else:
        rcnn = dict(rpn_pre_nms_top_n_train=m.rpn_pre_nms_top_n_train,
                    rpn_post_nms_top_n_train=m.rpn_post_nms_top_n_train,
                    rpn_batch_size_per_image=m.rpn_batch_per_image,
                    box_batch_size_per_image=m.roi_batch_per_image,
                    box_positive_fraction=m.roi_positive_fraction, **size)
        backbone = _resnet_fpn_extractor(body, trainable)
        cls = MaskRCNN if kind == "mask" else FasterRCNN
        model = cls(backbone, m.num_classes + 1, **rcnn)
    return model.train()


def to_torchvision(images, targets, kind):
    # real boxes first in each image's slots; mask crops pasted back onto the canvas (masks.py)
    tgts = per_image_targets(images, targets)
    if kind == "retina":
        for t in tgts:
            t["labels"] = t["labels"] - 1  # sigmoid classes without a background slot
    return list(images), tgts


AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def step(model, optimizer, scaler, inputs, precision, device):
    ctx = (torch.autocast(device.type, dtype=AUTOCAST[precision]) if precision in AUTOCAST
           else contextlib.nullcontext())
    with ctx:
        losses = model(*inputs)
    total = sum(losses.values())
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        total.backward()
        optimizer.step()
    else:
        scaler.scale(total).backward()
        scaler.step(optimizer)
        scaler.update()
    return float(total.detach())  # reads the loss back: on a GPU, the step has ended here


def differences(kind, cfg, args):
    m = cfg.model
    lines = [f"  both: {args.device}, input {args.size}, {args.batch} images/iter, {args.precision}, "
             f"frozen stem+{m.frozen_stages} stage(s), FrozenBN, SGD momentum, synthetic data"]
    if kind != "retina":
        lines.append(f"  both: RPN pre/post NMS top-n {m.rpn_pre_nms_top_n_train}/"
                     f"{m.rpn_post_nms_top_n_train}, RPN batch {m.rpn_batch_per_image}, "
                     f"RoI batch {m.roi_batch_per_image} x {m.roi_positive_fraction}")
    lines.append("  differs: ours gets normalized batched tensors; torchvision's transform "
                 "normalizes and resizes (scale 1.0) each image inside the model")
    if kind == "mask":
        lines.append(f"  differs by design: our mask branch caps positive RoIs at "
                     f"{m.mask_max_rois_per_image}/image; torchvision uses all (<= "
                     f"{int(m.roi_batch_per_image * m.roi_positive_fraction)}/image from its sampler)")
    if args.channels_last:
        lines.append("  differs: ours runs channels_last, torchvision its default layout")
    return lines


def bench(kind, args):
    device = torch.device(args.device)
    mine, cfg = ours(kind, args)
    ref = theirs(kind, cfg)
    mine.to(device)
    ref.to(device)
    data_cfg = dataclasses.replace(cfg.data, synthetic_pool=args.pool)
    src = SyntheticBatches(data_cfg, cfg.model.num_classes, kind == "mask", device, 0, 1, 0)
    batches = [src.batch(i) for i in range(args.pool)]
    sides = {
        "ours": (mine, lambda b: b),
        "torchvision": (ref, lambda b: to_torchvision(b[0], b[1], kind)),
    }
    opts = {name: torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=args.lr,
                                  momentum=0.9, weight_decay=1e-4) for name, (m, _) in sides.items()}
    scalers = {name: torch.amp.GradScaler(device.type) if args.precision == "fp16" else None
               for name in sides}
    times = {name: [] for name in sides}
    round_medians = {name: [] for name in sides}
    losses = {name: [] for name in sides}
    n = 0
    for rnd in range(args.warmup_rounds + args.rounds):
        for name, (model, convert) in sides.items():
            this_round = []
            for _ in range(args.iters):
                inputs = convert(batches[n % len(batches)])
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                start = time.perf_counter()
                loss = step(model, opts[name], scalers[name], inputs, args.precision, device)
                this_round.append(time.perf_counter() - start)
                losses[name].append(loss)
            if rnd >= args.warmup_rounds:
                times[name] += this_round
                round_medians[name].append(statistics.median(this_round))
            n += 1
    rates = {name: args.batch * len(t) / sum(t) for name, t in times.items()}
    med_rates = {name: args.batch / statistics.median(t) for name, t in times.items()}
    print(f"{kind}:")
    for line in differences(kind, cfg, args):
        print(line)
    for name in sides:
        t = times[name]
        print(f"  {name:<12} {rates[name]:6.2f} images/s over all timed iters, "
              f"{med_rates[name]:6.2f} at the median iter ({statistics.median(t) * 1000:.0f} ms; "
              f"{len(t)} iters, last loss {losses[name][-1]:.3f})")
    ratio = rates["ours"] / rates["torchvision"]
    med_ratio = med_rates["ours"] / med_rates["torchvision"]
    # speed ratio ours/torchvision = their time / our time; each side's rounds resampled on its own
    low, high = bootstrap_ratio_ci(round_medians["ours"], round_medians["torchvision"])
    word = "parity" if low <= 1.0 <= high else ("faster" if low > 1.0 else "slower")
    print(f"  ratio ours/torchvision: {ratio:.2f}x (total time), {med_ratio:.2f}x (median iter), "
          f"95% interval [{low:.2f}, {high:.2f}] over {args.rounds} rounds: {word}", flush=True)
    return ratio


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="320x320", help="input HxW")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="fp16 on a GPU only")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--models", default="retina,faster,mask")
    p.add_argument("--iters", type=int, default=3, help="iterations per side per round")
    p.add_argument("--rounds", type=int, default=4, help="measured rounds")
    p.add_argument("--warmup-rounds", type=int, default=1)
    p.add_argument("--pool", type=int, default=4, help="distinct synthetic batches cycled")
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    if args.precision == "fp16" and args.device != "cuda":
        p.error("--precision fp16 needs --device cuda: torch has no fp16 autocast on the CPU here")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device")
    if args.threads:
        torch.set_num_threads(args.threads)
    # one process holds both sides, so an allocator setting (GLIBC_TUNABLES) acts on both alike
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r}")
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}, size {args.size}, "
          f"batch {args.batch}, precision {args.precision}, {args.rounds} rounds x {args.iters} iters "
          f"per side (after {args.warmup_rounds} warm-up round)", flush=True)
    ratios = {kind: bench(kind, args) for kind in args.models.split(",")}
    print("summary (total-time ratio): " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
