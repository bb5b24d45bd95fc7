"""What every driver shares: the log lines, and for inference the flags, the pool of raw images,
the device set-up and the timing of each batch.

The drivers run as scripts in their framework's pinned env, where the harness package is not
importable (the script's own folder is on the path, the checkout's root is not), and are imported
as ``harness.drivers.*`` by the harness's tests and the bundled trainer. Each imports this module
either way (``from harness.drivers import common``, else ``import common``), and this module gives
them ``jsonlog``: harness/jsonlog.py, the one declaration of every line's prefix and keys, loaded
from its file beside this folder when the package is not importable.

The inference flags are those `harness.frameworks.base.infer_args` writes, in its order; a driver
adds its own (its config, its device) and its own refusals. Every inference driver times a batch
the one way (docs/methodology.md, "Inference"): from the end of the previous batch to the moment
its final detections are ready, the device synchronised, in parts (fetching its raw images,
pre-processing, the network, post-processing), and prints one DETBENCH_ITER and one DETBENCH_PHASES
line for it. The pool is 8 seeded random uint8 images at the input size, or the first 8 images of
a COCO file; batch k takes images (k-1)*N .. (k-1)*N + N-1 of it, cyclically.

Standard library at import; torch (and numpy and PIL for a COCO pool) only inside the calls that
need them, so the settings line's helpers (asrun.py) stay importable without torch.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

try:
    from harness import jsonlog
except ImportError:         # run as a script in a framework's pinned env: load the file itself
    _PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jsonlog.py")
    _SPEC = importlib.util.spec_from_file_location("detbench_jsonlog", _PATH)
    jsonlog = importlib.util.module_from_spec(_SPEC)
    _SPEC.loader.exec_module(jsonlog)

POOL = 8
PRECISIONS = ("fp32", "bf16", "fp16", "tf32")
CUDA_ONLY = ("fp16", "tf32")
MIN_SIDE = 32


class WorkCounts:
    """The work counts of the iteration in flight (the keys of jsonlog.WORK_KEYS), added by the
    wrappers and hooks a driver sets on its framework's own modules; a count may stay a tensor
    until `line` reads it, so counting forces no device sync."""

    def __init__(self):
        self.counts = {}

    def add(self, key, value):
        self.counts[key] = self.counts.get(key, 0) + value

    def line(self, iteration):
        """The WORK line of the iteration just done (reads the counts), and a fresh count."""
        counts, self.counts = self.counts, {}
        return jsonlog.work_line(iteration, **counts)


class InputError(ValueError):
    """Input a driver cannot use (an unreadable annotations file or image): one line naming it."""


def breakdown_hooks(model, optimizer):
    """breakdown.attach_from_env(model, optimizer): where the trial's environment asks for it, the
    phases of each training step timed through the model's and optimizer's own hooks."""
    try:
        from harness.drivers import breakdown
    except ImportError:     # run as a script in a framework's pinned env
        import breakdown
    return breakdown.attach_from_env(model, optimizer)


# --- the flags --------------------------------------------------------------------------------

def inference_parser(description, models=None, model_required=True, nms_threshold=0.5, device=True, prog=None):
    """An ArgumentParser with the flags of base.infer_args (and --device unless device=False)."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--model", choices=models, required=model_required)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--batches", type=int, required=True, help="batches to run, warmup included")
    p.add_argument("--input-size", required=True, metavar="HxW")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score-threshold", type=float, default=0.05)
    p.add_argument("--nms-threshold", type=float, default=nms_threshold)
    p.add_argument("--detections", type=int, default=100, help="kept per image")
    p.add_argument("--weights", metavar="FILE", help="initial weights of the whole detector")
    p.add_argument("--data", metavar="ANNOTATIONS", help="COCO annotations: take the pool from its images")
    p.add_argument("--images", metavar="DIR")
    if device:
        import torch
        p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return p


def parse_inference(p, argv=None, cpu_precisions=("fp32", "bf16")):
    """The parsed flags with `size` (height, width) added; p.error (exit 2, one line) on flags no
    driver can run: a bad HxW, counts below 1, --data without --images, a CUDA-only precision on
    a --device that is not CUDA."""
    args = p.parse_args(argv)
    try:
        args.size = tuple(int(v) for v in args.input_size.lower().split("x"))
        assert len(args.size) == 2 and min(args.size) >= MIN_SIDE
    except (ValueError, AssertionError):
        p.error("--input-size takes HxW, each at least %d, e.g. 320x320" % MIN_SIDE)
    if args.batch_size < 1 or args.batches < 1 or args.detections < 1:
        p.error("--batch-size, --batches and --detections must be at least 1")
    if bool(args.data) != bool(args.images):
        p.error("--data and --images go together")
    device = getattr(args, "device", None)
    if device is not None:
        problem = cuda_only(args.precision, device.startswith("cuda"), cpu_precisions)
        if problem:
            p.error(problem)
    return args


def cuda_only(precision, cuda, cpu_precisions=("fp32", "bf16")):
    """The one line refusing a CUDA-only precision off CUDA, else None."""
    if precision in CUDA_ONLY and not cuda:
        return "--precision %s needs a CUDA device; use %s on the CPU" % (precision, " or ".join(cpu_precisions))
    return None


# --- the images -------------------------------------------------------------------------------

def raw_pool(args):
    """The pool of raw uint8 images [h, w, 3] (RGB): seeded noise at the input size, or COCO images."""
    import torch
    if not args.data:
        g = torch.Generator().manual_seed(args.seed)
        return list(torch.randint(0, 256, (POOL, args.size[0], args.size[1], 3), dtype=torch.uint8, generator=g))
    import numpy as np
    from PIL import Image
    try:
        with open(args.data, encoding="utf-8") as f:
            files = [im["file_name"] for im in json.load(f).get("images", [])][:POOL]
    except (OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
        raise InputError("%s: cannot read the annotations: %s" % (args.data, exc)) from None
    if not files:
        raise InputError("%s: no images" % args.data)
    pool = []
    for name in files:
        path = os.path.join(args.images, name)
        try:
            pool.append(torch.from_numpy(np.asarray(Image.open(path).convert("RGB")).copy()))
        except OSError as exc:
            raise InputError("%s: not a readable image: %s" % (path, exc)) from None
    return pool


# --- the device -------------------------------------------------------------------------------

def device_and_sync(name, precision):
    """(torch.device(name), a function that waits for it), with TF32 matrix products on for tf32."""
    import torch
    device = torch.device(name)
    if precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return device, sync


def autocast(precision, device):
    """torch.autocast in the precision's dtype (bf16, fp16), or switched off (fp32, tf32)."""
    import torch
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    return torch.autocast(device.type, dtype=dtype) if dtype else torch.autocast(device.type, enabled=False)


def meta_line(args, device, **extra):
    """The DETBENCH_META line of an inference run: what every driver states, then `extra`
    (a driver's own test-time settings; a key of it replaces the common one)."""
    import torch
    meta = {"mode": "inference", "model": args.model, "images_per_device": args.batch_size,
            "input_size": list(args.size), "precision": args.precision, "device": device.type,
            "score_threshold": args.score_threshold, "nms_threshold": args.nms_threshold,
            "detections_per_image": args.detections, "torch": torch.__version__,
            "threads": torch.get_num_threads(), "data": "coco" if args.data else "synthetic"}
    meta.update(extra)
    return jsonlog.meta_line(meta)


# --- the timing -------------------------------------------------------------------------------

class Marks:
    """Where one batch's parts end, set by the driver's step: `pre_done()` when the network's input
    is ready, `net_done()` when its raw outputs are. `post_in_net`: seconds of post-processing the
    framework runs inside the network's span; `net_in_post`: seconds of network run after
    net_done() (a mask head on the final boxes). Each mark synchronises the device first."""

    def __init__(self, sync):
        self.sync, self.pre_end, self.net_end = sync, None, None
        self.post_in_net = self.net_in_post = 0.0

    def pre_done(self):
        self.sync()
        self.pre_end = time.perf_counter()

    def net_done(self):
        self.sync()
        self.net_end = time.perf_counter()


class Timed:
    """Wraps a bound method of `owner` in place: the seconds its calls took since the last reset,
    the device synchronised before and after each call."""

    def __init__(self, owner, name, sync):
        self.inner, self.sync, self.spent = getattr(owner, name), sync, 0.0
        setattr(owner, name, self)

    def __call__(self, *a, **kw):
        self.sync()
        start = time.perf_counter()
        out = self.inner(*a, **kw)
        self.sync()
        self.spent += time.perf_counter() - start
        return out


def time_batches(args, pool, step, sync, post_timers=(), out=None):
    """Run args.batches batches of args.batch_size images from the pool through `step(raws, marks)`,
    which returns the detections kept, and print each batch's ITER and PHASES lines to `out`
    (stdout). The seconds of `post_timers` (Timed wrappers of post-processing the network's forward
    calls) move from the network's part to post-processing."""
    out = sys.stdout if out is None else out
    n = args.batch_size
    prev = time.perf_counter()
    for k in range(1, args.batches + 1):
        raws = [pool[((k - 1) * n + i) % len(pool)] for i in range(n)]
        fetched = time.perf_counter()
        for timer in post_timers:
            timer.spent = 0.0
        marks = Marks(sync)
        kept = step(raws, marks)
        sync()
        end = time.perf_counter()
        moved = sum(t.spent for t in post_timers) + marks.post_in_net - marks.net_in_post
        print(jsonlog.iter_line(k, end - prev, fetched - prev, n), file=out)
        print(jsonlog.phases_line(k, marks.pre_end - fetched, marks.net_end - marks.pre_end - moved,
                                  end - marks.net_end + moved, kept), file=out, flush=True)
        prev = end


# --- accuracy: a checkpoint's val-split detections in COCO's result format ----------------------

def coco_detection(image_id, category_id, box, score, segmentation=None):
    """One COCO result of an (x0, y0, x1, y1) box in the image's own pixels: the box as x, y, w, h."""
    x0, y0, x1, y1 = box
    det = {"image_id": image_id, "category_id": category_id,
           "bbox": [round(x0, 2), round(y0, 2), round(x1 - x0, 2), round(y1 - y0, 2)], "score": round(score, 5)}
    if segmentation is not None:
        det["segmentation"] = segmentation
    return det


def write_detections(path, detections, images):
    """Write the results whole (a reader never sees half a file) and print the one JSON summary line."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(detections, fh)
    os.replace(tmp, path)
    print(json.dumps({"images": images, "detections": len(detections), "out": path}), flush=True)


# the test-time settings every accuracy dump shares (torchvision's defaults; the others set to them)
DUMP_SCORE_THRESHOLD, DUMP_NMS_THRESHOLD, DUMP_DETECTIONS = 0.05, 0.5, 100


def dump_parser(description, models, depths):
    """The flags every accuracy dump takes (its framework's models and ResNet depths)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--score-threshold", type=float, default=DUMP_SCORE_THRESHOLD,
                   help="the shared 0.05 unless told (the tests take every candidate)")
    p.add_argument("--model", choices=sorted(models), required=True)
    p.add_argument("--depth", type=int, choices=sorted(depths), default=50)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--data", required=True, help="COCO instances JSON of the val split")
    p.add_argument("--images", required=True)
    p.add_argument("--input-size", default="800x1333")
    p.add_argument("--out", required=True)
    p.add_argument("--batch-size", type=int, default=8)
    return p


# --- accuracy: the flags every training driver takes for an accuracy run ------------------------

def add_accuracy_flags(p, weight_decay=1e-4):
    """The LR steps and their factor, the weight decay, the gradient clip, a checkpoint every N iterations (and at the
    end) and its folder, and a checkpoint of the run to go on from."""
    p.add_argument("--lr-steps", default="", help="comma-separated iterations after which the lr is multiplied "
                   "by --gamma")
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=weight_decay)
    p.add_argument("--clip-grad-norm", type=float, default=0.0, help="clip the gradients' total L2 norm to this "
                   "before each step (0: no clipping)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="write a checkpoint every N iterations and at "
                   "the end (0: none)")
    p.add_argument("--checkpoint-dir", help="folder of the checkpoints")
    p.add_argument("--resume", metavar="FILE", help="a checkpoint of this run to go on from")


def checked_accuracy_flags(p, args):
    """`args` with --lr-steps as a tuple of whole iterations; argparse's error for a bad value or
    --checkpoint-every without --checkpoint-dir."""
    if args.checkpoint_every and not args.checkpoint_dir:
        p.error("--checkpoint-every needs --checkpoint-dir")
    if not args.clip_grad_norm >= 0:
        p.error("--clip-grad-norm must be >= 0 (0: no clipping), not %r" % args.clip_grad_norm)
    try:
        args.lr_steps = tuple(int(v) for v in args.lr_steps.split(",") if v.strip())
    except ValueError:
        p.error("--lr-steps takes whole iterations separated by commas, not %r" % args.lr_steps)
    return args


def read_dump_inputs(args, is_own, weights_only=True):
    """(checkpoint state, val-split annotation document) of a dump's flags, or None after one
    `error:` line on stderr. `is_own(state)` says whether a loaded state is the driver's checkpoint."""
    import pickle

    import torch
    try:
        state = torch.load(args.checkpoint, map_location="cpu", weights_only=weights_only)
        with open(args.data, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        print("error: %s" % str(exc).splitlines()[0], file=sys.stderr, flush=True)
        return None
    if not is_own(state):
        print("error: %s is not a checkpoint this framework's accuracy run wrote" % args.checkpoint,
              file=sys.stderr, flush=True)
        return None
    return state, doc
