"""This machine's dense compute ceiling per precision: `python -m harness.trainer.peak [--device D]`.

For each precision the device runs (CPU: fp32, and bf16 where oneDNN has bf16 kernels for the
CPU, which then run on its AVX-512 BF16 or AMX tiles; CUDA: fp32, tf32, fp16, bf16), the
matrix products and convolutions the bundled detectors spend their time in are timed: the
backbone's stem, 3x3 and 1x1 convolutions at each stage's size, the FPN and head 3x3
convolutions, the box head's fc layers over a batch's sampled RoIs, the mask head's 3x3
convolutions over its RoIs, and one square GEMM. Each shape is run WARMUP_CALLS times, then
timed at least MIN_CALLS times and until `--seconds` have passed; its best time gives its rate
and the spread of its timed calls (best, median, worst) is kept beside it. The precision's
peak is the best rate of all its shapes: a ceiling, which a busy machine can only measure low.

Prints one JSON object: the device, the thread count, the CPU's instruction set as torch
dispatches it (and whether it has AMX tiles), and per precision each shape's best GFLOP/s,
its spread and the peak. The harness runs it in a subprocess (it never imports torch) and
caches the answer per machine fingerprint and thread count.

Exit 0, or 2 with one line on stderr when the device, or a precision it runs, cannot be measured.
"""
import argparse
import json
import math
import statistics
import sys
import time

METHOD = 2           # 1: one timed call per shape within a time budget; 2: this
WARMUP_CALLS = 2
MIN_CALLS = 5
SAMPLE_S = 0.002     # on a GPU one timed sample runs back-to-back calls for at least this long

def detector_shapes(images, height, width, box_rois, mask_rois, gemms):
    """(name, kind, shape) of what an R50-FPN detector's step runs on `images` images of height x
    width: a matrix product m x k @ k x n ("gemm"), or a convolution of a batch x cin x h x w input
    with cout filters of k x k at a stride, padded by k // 2 ("conv"). The stem; each residual
    stage's 3x3 convolution at its stride (4 to 32) and the bottleneck's 1x1 convolutions; the FPN
    and head 3x3 convolution at stride 8; the box head's fc layers over `box_rois` sampled RoIs;
    the mask head's 3x3 convolution over `mask_rois` RoIs; and square GEMMs of the `gemms` sides."""
    def at(stride):
        return -(-height // stride), -(-width // stride)
    shapes = [("gemm %d" % n, "gemm", (n, n, n)) for n in gemms]
    shapes += [("box fc6 %d RoIs" % box_rois, "gemm", (box_rois, 256 * 7 * 7, 1024)),
               ("box fc7 %d RoIs" % box_rois, "gemm", (box_rois, 1024, 1024)),
               ("stem conv7x7/2 3->64 %dx%d" % (height, width), "conv", (images, 3, height, width, 64, 7, 2))]
    for stage, channels in enumerate((64, 128, 256, 512)):
        h, w = at(4 << stage)
        shapes.append(("conv3x3 %dch %dx%d" % (channels, h, w), "conv", (images, channels, h, w, channels, 3, 1)))
    (h4, w4), (h8, w8), (h16, w16) = at(4), at(8), at(16)
    shapes += [("conv1x1 256->64 %dx%d" % (h4, w4), "conv", (images, 256, h4, w4, 64, 1, 1)),
               ("conv1x1 1024->256 %dx%d" % (h16, w16), "conv", (images, 1024, h16, w16, 256, 1, 1)),
               ("head conv3x3 256ch %dx%d" % (h8, w8), "conv", (images, 256, h8, w8, 256, 3, 1)),
               ("mask conv3x3 256ch 14x14 %d RoIs" % mask_rois, "conv", (mask_rois, 256, 14, 14, 256, 3, 1))]
    return tuple(shapes)


# on the CPU: 2 images at 320x320 (the CPU scenarios), 512 sampled RoIs per image
CPU_SHAPES = detector_shapes(2, 320, 320, box_rois=1024, mask_rois=32, gemms=(2048,))
# on a GPU: 8 images at 800x1344, 512 sampled RoIs per image, and GEMMs large enough to fill it
CUDA_SHAPES = detector_shapes(8, 800, 1344, box_rois=4096, mask_rois=512, gemms=(4096, 8192))
CPU_PRECISIONS = ("fp32", "bf16")
CUDA_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


class PeakError(Exception):
    """A precision the device runs could not be measured; the message is the one line printed."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.peak", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seconds", type=float, default=0.3,
                   help="least time spent timing each shape, after warmup (at least %d calls whatever it is)"
                        % MIN_CALLS)
    return p.parse_args(argv)


def flops(kind, shape):
    if kind == "gemm":
        m, k, n = shape
        return 2.0 * m * k * n
    b, cin, h, w, cout, k, stride = shape
    out_h, out_w = -(-h // stride), -(-w // stride)       # padded by k // 2: ceil(size / stride)
    return 2.0 * b * cout * out_h * out_w * cin * k * k


def operation(torch, kind, shape, dtype, device):
    gen = torch.Generator(device="cpu").manual_seed(0)
    if kind == "gemm":
        m, k, n = shape
        a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
        return lambda: torch.mm(a, b)
    bsz, cin, h, w, cout, k, stride = shape
    x = torch.randn(bsz, cin, h, w, generator=gen).to(device=device, dtype=dtype)
    weight = torch.randn(cout, cin, k, k, generator=gen).to(device=device, dtype=dtype)
    return lambda: torch.nn.functional.conv2d(x, weight, stride=stride, padding=k // 2)


def timed_calls(run, sync, seconds, clock=time.perf_counter, sample_s=0.0):
    """Seconds per call of each timed sample of run(): WARMUP_CALLS untimed calls, then samples
    until at least MIN_CALLS are timed and `seconds` have passed. A sample is one call, or as
    many back-to-back calls as take `sample_s` (for devices whose calls return before they end)."""
    start = clock()
    for _ in range(WARMUP_CALLS):
        run()
    sync()
    warm = (clock() - start) / WARMUP_CALLS
    reps = max(1, int(math.ceil(sample_s / warm))) if sample_s and warm > 0 else 1
    times, spent = [], 0.0
    while len(times) < MIN_CALLS or spent < seconds:
        begin = clock()
        for _ in range(reps):
            run()
        sync()
        took = clock() - begin
        spent += took
        times.append(took / reps)
    return times


def spread(work, times):
    """{best, median, worst} GFLOP/s and the number of timed calls, from seconds per call."""
    if not times or min(times) <= 0:
        raise ValueError("no timed call took a measurable time")
    rates = sorted(work / t / 1e9 for t in times)
    return {"best": round(rates[-1], 1), "median": round(statistics.median(rates), 1),
            "worst": round(rates[0], 1), "calls": len(times)}


def supported(torch, precision, device):
    if device.type == "cuda":
        return precision != "bf16" or torch.cuda.is_bf16_supported()
    if precision == "fp32":
        return True
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check()) if check is not None else False


def cpu_tiles():
    """Whether this CPU has AMX tiles (/proc/cpuinfo), None where that cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return None


def measure(torch, device, seconds, shapes=None):
    """{precision: {"shapes_gflops", "spread", "peak_gflops", "peak_shape"} or {"skipped"}}.
    Raises PeakError naming the precision and shape a timing failed on."""
    cuda = device.type == "cuda"
    shapes = shapes or (CUDA_SHAPES if cuda else CPU_SHAPES)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)
    out = {}
    for precision in (CUDA_PRECISIONS if cuda else CPU_PRECISIONS):
        if not supported(torch, precision, device):
            out[precision] = {"skipped": "no %s kernels on this %s" % (precision, device.type)}
            continue
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
        figures = {}
        with torch.inference_mode():
            for name, kind, shape in shapes:
                try:
                    run = operation(torch, kind, shape, dtype, device)
                    figures[name] = spread(flops(kind, shape),
                                           timed_calls(run, sync, seconds, sample_s=SAMPLE_S if cuda else 0.0))
                    del run
                except (RuntimeError, ValueError, MemoryError) as exc:
                    said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise PeakError("cannot time %s %s on this %s: %s"
                                    % (precision, name, device.type, said[:200])) from exc
        best = max(figures, key=lambda n: figures[n]["best"])
        out[precision] = {"shapes_gflops": {n: f["best"] for n, f in figures.items()}, "spread": figures,
                          "peak_gflops": figures[best]["best"], "peak_shape": best}
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not (args.seconds >= 0 and math.isfinite(args.seconds)):
        print("error: --seconds must be a finite number of seconds, 0 or more", file=sys.stderr)
        return 2
    import torch
    kind = args.device
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is visible", file=sys.stderr)
        return 2
    device = torch.device(kind)
    name = torch.cuda.get_device_name(device) if kind == "cuda" else "cpu"
    result = {"method": METHOD, "device": kind, "name": name, "threads": torch.get_num_threads(),
              "torch": torch.__version__, "min_calls": MIN_CALLS}
    if kind == "cpu":
        result["isa"] = torch.backends.cpu.get_cpu_capability()
        result["amx"] = cpu_tiles()
    try:
        result["precisions"] = measure(torch, device, args.seconds)
    except PeakError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
