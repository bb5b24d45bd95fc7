"""Each speed lever of the bundled trainer measured on its own, side by side with the plain trainer.

For each model, the plain trainer and the trainer with one lever switched on (and with all
of the model's levers together) train on the same generated COCO set from the same weights
file, in fresh processes, the variants interleaved round by round in a shuffled order, so
drift on a noisy machine reaches all of them alike. Each run is launched as the
detbench-trainer adapter launches a benchmark trial (constant learning rate, the file's
order, --weights), with OMP_NUM_THREADS as the only thread setting. It prints, per model,
each variant's median iteration time over the rounds (each round's figure being the median
of its measured iterations), its range, and its ratio to the plain trainer with a 95%
bootstrap interval.

    python benchmarks/trainer_levers.py                               # 3 models, 3 rounds
    python benchmarks/trainer_levers.py --models retinanet --rounds 5
    python benchmarks/trainer_levers.py --quick                       # 128x128, 1 round: does it run
    python benchmarks/trainer_levers.py --parts                       # only the parts, in one process
    python benchmarks/trainer_levers.py --levers channels_last --on-defaults --size 512x512
                                                                      # one lever on top of the shipped ones

Whole iterations on a shared machine move by several percent from run to run, more than a
lever that saves tens of milliseconds. --parts (also printed before the iteration table)
times only what each lever replaces, both ways alternated in one process at the model's
320x320 shapes: forward and backward of the focal loss on RetinaNet's 19,206 anchors x 80
classes, of the first tower convs on the five levels, of the mask predictor on 128 RoIs, and
one SGD step over the R50 Mask R-CNN's trained parameters, and RoIAlign (torchvision's kernel
against the sparse products) of the box head's 1024 RoIs at 7x7 and the mask head's 128 at
14x14 on P2-P5.

Levers (docs/methodology.md, "Speed levers of the bundled trainer"); "plain" switches every
lever that applies off, whatever the R50 config's default:
  fused_focal_loss   model.fused_focal_loss           RetinaNet
  merge_first_convs  model.retina_merge_first_convs   RetinaNet
  mask_class_only    model.mask_target_class_only     Mask R-CNN
  sparse_roi_align   model.roi_align=sparse           Faster and Mask R-CNN (off: torchvision)
  fused_sgd          train.fused_sgd                  all
  channels_last      train.channels_last              all
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.convergence import model_list  # noqa: E402
from benchmarks.trainer_vs_rivals import ratio_ci  # noqa: E402
from harness import jsonlog  # noqa: E402
from harness.plan import hostcpu  # noqa: E402
from harness.frameworks.detbench_trainer import CONFIG_DIR, CONFIGS  # noqa: E402

ALL = frozenset(CONFIGS)
LEVERS = {
    "fused_focal_loss": ("model.fused_focal_loss", frozenset({"retinanet"})),
    "merge_first_convs": ("model.retina_merge_first_convs", frozenset({"retinanet"})),
    "mask_class_only": ("model.mask_target_class_only", frozenset({"mask_rcnn"})),
    "sparse_roi_align": ("model.roi_align", frozenset({"faster_rcnn", "mask_rcnn"})),
    "fused_sgd": ("train.fused_sgd", ALL),
    "channels_last": ("train.channels_last", ALL),
}
# (off, on) of the keys that are not booleans
VALUES = {"model.roi_align": ("torchvision", "sparse")}
# "together" is every chosen lever of the model except channels_last, which is measured alone
ALL_EXCEPT = ("channels_last",)


def variants(model, chosen, on_defaults=False):
    """{variant name: --set items} for one model: plain (every lever that applies switched
    off, whatever the config's defaults), each lever alone, and all of them but channels_last
    together where two or more apply. `on_defaults`: plain is the config's defaults with only
    the chosen levers switched off, so each lever is measured on top of the others as they ship."""
    keys = {name: key for name, (key, models) in LEVERS.items() if model in models}
    if on_defaults:
        keys = {name: key for name, key in keys.items() if name in chosen}
    plain = {key: VALUES.get(key, ("false", "true"))[0] for key in keys.values()}

    def switched(*names):
        sets = dict(plain, **{keys[n]: VALUES.get(keys[n], ("false", "true"))[1] for n in names})
        return ["%s=%s" % kv for kv in sorted(sets.items())]
    out = {"plain": switched()}
    for name in chosen:
        if name in keys:
            out[name] = switched(name)
    combined = [name for name in out if name != "plain" and name not in ALL_EXCEPT]
    if len(combined) > 1:
        out["together"] = switched(*combined)
    return out


def detbench(*args):
    subprocess.run([sys.executable, "-m", "harness.cli"] + [str(a) for a in args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def run_once(model, sets, args, data, weights):
    """Median seconds per measured iteration of one fresh trainer process."""
    argv = [sys.executable, "-m", "harness.trainer.train", os.path.join(CONFIG_DIR, CONFIGS[model])]
    common = ["train.max_iter=%d" % (args.warmup + args.measure), "train.schedule=constant",
              "train.warmup_iters=0", "train.lr=0.000008", "data.images_per_device=2",
              "data.input_size=%s" % args.size, "data.source=coco",
              "data.coco_json=%s" % os.path.join(data, "annotations", "instances_train.json"),
              "data.coco_images=%s" % os.path.join(data, "images"), "data.workers=0", "data.shuffle=false",
              "train.precision=%s" % args.precision]
    for s in common + list(sets):
        argv += ["--set", s]
    argv += ["--weights", weights]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit("%s %s failed: %s" % (model, " ".join(sets) or "plain", tail))
    times = [json.loads(line[len(jsonlog.ITER_PREFIX):])["time_s"] for line in proc.stdout.splitlines()
             if line.startswith(jsonlog.ITER_PREFIX)]
    return statistics.median(times[args.warmup:])


def parts(repeats=15):
    """{part: (plain ms, lever ms)}: medians of `repeats` alternated timings in this process."""
    import time

    import torch
    import torch.nn.functional as F
    from torchvision.ops import sigmoid_focal_loss

    from harness.trainer.config import apply_overrides, load_config_module
    from harness.trainer.engine import make_optimizer
    from harness.trainer.focal import focal_loss_sum
    from harness.trainer.rcnn import MaskHead
    from harness.trainer.retina import RetinaHead

    gen = torch.Generator().manual_seed(0)
    sides = (40, 20, 10, 5, 3)            # P3-P7 of a 320x320 image
    anchors = 9 * sum(n * n for n in sides)
    logits = (torch.randn(2, anchors, 80, generator=gen) - 4).requires_grad_()
    pos_class = torch.full((2, anchors), -1, dtype=torch.long)
    pos_class[:, :160] = torch.randint(0, 80, (2, 160), generator=gen)
    weight = torch.ones(2, anchors)

    def focal_plain():
        target = torch.zeros_like(logits)
        target.scatter_(2, pos_class.clamp(min=0)[..., None], (pos_class >= 0)[..., None].float())
        (sigmoid_focal_loss(logits, target, 0.25, 2.0, reduction="none").sum(-1) * weight).sum().backward()

    def focal_fused():
        focal_loss_sum(logits, pos_class, weight).backward()

    feats = [torch.randn(2, 256, n, n, generator=gen) for n in sides]
    heads = {merge: RetinaHead(num_classes=80, merge_first=merge) for merge in (False, True)}
    heads[True].load_state_dict(heads[False].state_dict())

    def towers(merge):
        head = heads[merge]

        def step():
            cls, box = head(feats)
            (cls.sum() + box.sum()).backward()
        return step

    pooled = torch.randn(128, 256, 14, 14, generator=gen)
    labels = torch.randint(1, 81, (128,), generator=gen)
    mask_head = MaskHead(num_classes=80)

    def mask(class_only):
        def step():
            if class_only:
                out = mask_head(pooled, labels)
            else:
                full = mask_head(pooled)
                out = full.gather(1, labels[:, None, None, None].expand(-1, 1, *full.shape[2:]))[:, 0]
            F.binary_cross_entropy_with_logits(out, torch.zeros_like(out)).backward()
        return step

    module = load_config_module(os.path.join(CONFIG_DIR, CONFIGS["mask_rcnn"]))
    model = module.build_detector(module.CONFIG)
    optimizers = {}
    for fused in (False, True):
        cfg = apply_overrides(module.CONFIG, ["train.fused_sgd=%s" % str(fused).lower()])
        optimizers[fused] = make_optimizer(model, cfg, 1)[0]
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.randn_like(p) * 1e-3

    def sgd(fused):
        return optimizers[fused].step

    from harness.trainer.roi import MultiLevelRoIAlign
    levels = [torch.randn(2, 256, n, n, generator=gen, requires_grad=True) for n in (80, 40, 20, 10)]

    def roi_align(count, size):
        """(plain, sparse) steps pooling the same `count` boxes at size x size."""
        xy = torch.rand(count, 2, generator=gen) * 280
        wh = torch.rand(count, 2, generator=gen) * 150 + 8
        rois = torch.cat([torch.randint(0, 2, (count, 1), generator=gen).float(), xy, (xy + wh).clamp(max=320)], 1)

        def step_with(sparse):
            pool = MultiLevelRoIAlign(output_size=size, sampling_ratio=2, sparse=sparse)

            def step():
                pool(levels, rois).sum().backward()
            return step
        return step_with(False), step_with(True)

    cases = {"focal loss": (focal_plain, focal_fused), "first tower convs": (towers(False), towers(True)),
             "mask predictor": (mask(False), mask(True)), "SGD step": (sgd(False), sgd(True)),
             "box RoIAlign": roi_align(1024, 7), "mask RoIAlign": roi_align(128, 14)}
    out = {}
    for name, pair in cases.items():
        spent = ([], [])
        for _ in range(repeats):
            for i, fn in enumerate(pair):
                start = time.perf_counter()
                fn()
                spent[i].append(1000 * (time.perf_counter() - start))
        out[name] = tuple(statistics.median(t[2:]) for t in spent)
    return out


def print_parts(threads):
    import torch
    torch.set_num_threads(threads)
    print("parts, %d threads: median ms of 13 alternated timings after 2" % threads)
    print("%-18s %9s %9s %9s" % ("part", "plain", "lever", "saved"))
    for name, (plain, lever) in parts().items():
        print("%-18s %9.1f %9.1f %9.1f" % (name, plain, lever, plain - lever))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="retinanet,faster_rcnn,mask_rcnn")
    p.add_argument("--levers", default=",".join(LEVERS))
    p.add_argument("--size", default="320x320")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--measure", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                   help="train.precision of every variant (bf16: only where the CPU has bf16 kernels)")
    p.add_argument("--images", type=int, default=64)
    p.add_argument("--work", help="folder for the data and weights (default: a temporary one)")
    p.add_argument("--quick", action="store_true", help="128x128, 1 round of 1+2 iterations")
    p.add_argument("--parts", action="store_true", help="time only the parts the levers replace")
    p.add_argument("--on-defaults", action="store_true",
                   help="plain is the R50 config's defaults with only the chosen levers off")
    args = p.parse_args(argv)
    if args.parts or not (args.quick or args.on_defaults):
        print_parts(args.threads)
    if args.parts:
        return 0
    if args.quick:
        args.size, args.rounds, args.warmup, args.measure, args.images = "128x128", 1, 1, 2, 8
    models = model_list(p, args.models, CONFIGS)
    if args.precision == "bf16" and not hostcpu.has_bf16_kernels(hostcpu.cpu()[1]):
        p.error("--precision bf16: this CPU has no bf16 kernels (torch would emulate it; an emulation is "
                "never timed)")
    chosen = [x for x in args.levers.split(",") if x]
    for name in chosen:
        if name not in LEVERS:
            p.error("unknown lever %s (known: %s)" % (name, ", ".join(LEVERS)))
    work = args.work or tempfile.mkdtemp(prefix="trainer-levers-")
    data = os.path.join(work, "coco%s" % args.size)
    if not os.path.exists(os.path.join(data, "annotations", "instances_train.json")):
        detbench("dataset", "make-coco", data, "--images", args.images, "--size", args.size)
    plan = {}
    for model in models:
        weights = os.path.join(work, "weights", model + ".pt")
        if not os.path.exists(weights):
            detbench("weights", "make", model, "--out", weights)
        for name, sets in variants(model, chosen, args.on_defaults).items():
            plan[(model, name)] = (sets, weights)
    times = {key: [] for key in plan}
    rng = random.Random(0)
    for r in range(args.rounds):
        order = list(plan)
        rng.shuffle(order)
        for key in order:
            sets, weights = plan[key]
            times[key].append(run_once(key[0], sets, args, data, weights))
            print("round %d/%d  %-12s %-18s %7.1f ms" % (r + 1, args.rounds, key[0], key[1], 1000 * times[key][-1]),
                  file=sys.stderr, flush=True)
    print("%s, batch 2, %s, OMP_NUM_THREADS=%d, %d rounds of %d measured iterations (after %d); plain: %s"
          % (args.size, args.precision, args.threads, args.rounds, args.measure, args.warmup,
             "the config's defaults with the chosen levers off" if args.on_defaults else "every lever off"))
    print("%-12s %-18s %10s %19s  %s" % ("model", "variant", "median ms", "range", "plain/variant [95% CI]"))
    for model in models:
        base = times[(model, "plain")]
        for (m, name), t in times.items():
            if m != model:
                continue
            line = "%-12s %-18s %10.1f %8.1f-%-8.1f" % (model, name, 1000 * statistics.median(t), 1000 * min(t),
                                                          1000 * max(t))
            if name != "plain":
                r, lo, hi = ratio_ci(base, t)
                line += "  %.3fx [%.3f, %.3f]" % (r, lo, hi)
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
