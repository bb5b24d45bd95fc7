"""This machine's dense compute ceiling per precision: `python -m harness.trainer.peak [--device D]`.

For each precision the device runs (CPU: fp32, and bf16 where the CPU has bf16 kernels; CUDA:
fp32, tf32, fp16, bf16), a few matrix products and convolutions of the shapes detection
networks spend their time in are timed (best of several runs, a short warmup first), and the
best rate over all of them is the precision's peak. Prints one JSON object: the device, the
thread count, and per precision each shape's GFLOP/s and the peak. The harness runs it in a
subprocess (it never imports torch) and caches the answer per machine fingerprint.

Exit 0, or 2 with one line on stderr when the device cannot be measured.
"""
import argparse
import json
import sys
import time

# (name, kind, shape): a matrix product m x k @ k x n, or a convolution batch x cin x h x w
# with cout filters of size k x k
SHAPES = (
    ("gemm 2048", "gemm", (2048, 2048, 2048)),
    ("gemm 4096", "gemm", (4096, 4096, 4096)),
    ("conv3x3 256ch 80x80", "conv", (2, 256, 80, 80, 256, 3)),
    ("conv3x3 64ch 160x160", "conv", (2, 64, 160, 160, 64, 3)),
    ("conv1x1 1024->256 40x40", "conv", (2, 1024, 40, 40, 256, 1)),
)
CPU_PRECISIONS = ("fp32", "bf16")
CUDA_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m harness.trainer.peak", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seconds", type=float, default=0.3, help="time spent on each shape (after warmup)")
    return p.parse_args(argv)


def flops(kind, shape):
    if kind == "gemm":
        m, k, n = shape
        return 2.0 * m * k * n
    b, cin, h, w, cout, k = shape
    return 2.0 * b * cout * h * w * cin * k * k     # stride 1, same padding


def operation(torch, kind, shape, dtype, device):
    gen = torch.Generator(device="cpu").manual_seed(0)
    if kind == "gemm":
        m, k, n = shape
        a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
        return lambda: torch.mm(a, b)
    bsz, cin, h, w, cout, k = shape
    x = torch.randn(bsz, cin, h, w, generator=gen).to(device=device, dtype=dtype)
    weight = torch.randn(cout, cin, k, k, generator=gen).to(device=device, dtype=dtype)
    return lambda: torch.nn.functional.conv2d(x, weight, padding=k // 2)


def rate(torch, run, work, device, seconds):
    """Best GFLOP/s of one operation: warm up, then time single calls until `seconds` pass."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    run()
    sync()
    best, spent = float("inf"), 0.0
    while spent < seconds or best == float("inf"):
        start = time.perf_counter()
        run()
        sync()
        took = time.perf_counter() - start
        best, spent = min(best, took), spent + took
    return work / best / 1e9


def supported(torch, precision, device):
    if device.type == "cuda":
        return precision != "bf16" or torch.cuda.is_bf16_supported()
    if precision == "fp32":
        return True
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check()) if check is not None else False


def measure(torch, device, seconds):
    out = {}
    for precision in (CUDA_PRECISIONS if device.type == "cuda" else CPU_PRECISIONS):
        if not supported(torch, precision, device):
            out[precision] = {"skipped": "no %s kernels on this %s" % (precision, device.type)}
            continue
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
        shapes = {}
        with torch.inference_mode():
            for name, kind, shape in SHAPES:
                shapes[name] = round(rate(torch, operation(torch, kind, shape, dtype, device),
                                          flops(kind, shape), device, seconds), 1)
        out[precision] = {"shapes_gflops": shapes, "peak_gflops": max(shapes.values())}
    return out


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    kind = args.device
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is visible", file=sys.stderr)
        return 2
    device = torch.device(kind)
    name = torch.cuda.get_device_name(device) if kind == "cuda" else "cpu"
    result = {"device": kind, "name": name, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "precisions": measure(torch, device, args.seconds)}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
