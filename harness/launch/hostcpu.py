"""What this host's CPU runs natively, read from /proc/cpuinfo (no torch import here).

torch runs bf16 on the CPU through oneDNN kernels only where the CPU has them: on x86, AVX-512
with its BW, VL and DQ parts (AVX512-BF16 and AMX make them faster still); on Arm, the BF16
extension. Elsewhere autocast still runs, on emulated paths tens of times slower than fp32, so a
bf16 cell there measures the emulation, not the framework. The launchers that run trials on this
host refuse such cells before anything is written (a host with GPUs runs them there instead).
"""
import os
import shutil

from harness.errors import UserError

CPUINFO = "/proc/cpuinfo"
X86_BF16 = ("avx512bw", "avx512vl", "avx512dq")     # what torch's oneDNN bf16 check asks of x86
ARM_BF16 = "bf16"
NO_COMPUTE = ("calibrate",)     # the calibration workload sleeps its known times in any precision


def cpu(path=None):
    """(model name, flags) of the first processor listed; ("", set()) where it cannot be read."""
    try:
        with open(path or CPUINFO) as f:
            text = f.read()
    except OSError:
        return "", set()
    name, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return name, flags


def has_bf16_kernels(flags):
    return all(f in flags for f in X86_BF16) or ARM_BF16 in flags


def bf16_refusal(cells, path=None):
    """One line refusing the bf16 cells of frameworks that compute, when this host's CPU has no
    bf16 kernels; None when there are none or the CPU has them (or /proc/cpuinfo is unreadable)."""
    bf16 = [c for c in cells if c.precision == "bf16" and c.framework not in NO_COMPUTE]
    if not bf16:
        return None
    name, flags = cpu(path)
    if not flags or has_bf16_kernels(flags):
        return None
    keys = ", ".join(c.key for c in bf16[:3]) + (", ..." if len(bf16) > 3 else "")
    return ("this host's CPU (%s) has no bf16 kernels (x86 without AVX-512 BW/VL/DQ, or Arm without BF16) "
            "and there is no GPU, so its %d bf16 cell(s) would time an emulation tens of times slower than "
            "fp32 (%s): exclude precision bf16 on this host" % (name or os.uname().machine, len(bf16), keys))


def host_has_gpus():
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def refuse_emulated_bf16(cells):
    """UserError when bf16 cells would run on a CPU that only emulates bf16 and no GPU is here."""
    why = None if host_has_gpus() else bf16_refusal(cells)
    if why:
        raise UserError(why)
