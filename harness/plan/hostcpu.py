"""What this host's CPU runs natively, read from /proc/cpuinfo through runner.cpu_facts, the one
reader of it that the host record uses too (no torch import here).

torch runs bf16 on the CPU through oneDNN kernels only where the CPU has them: on x86, AVX-512
with its BW, VL and DQ parts (AVX512-BF16 and AMX make them faster still); on Arm, the BF16
extension. Elsewhere autocast still runs, on emulated paths tens of times slower than fp32, so a
bf16 cell there measures the emulation, not the framework. A run whose trials run on this host
marks such cells NA with that reason (a host with GPUs runs them there instead), as a scenario's
own `exclude` rules do, so the rest of the table is still measured. fp16 and tf32 cells, which
have no CPU path at all, are marked NA the same way on a host without a GPU.
"""

import dataclasses
import os
import shutil
from typing import List, Optional, Set, Tuple

import runner
from harness.plan.scenario import Cell, PlannedCell

CPUINFO = "/proc/cpuinfo"
X86_BF16 = ("avx512bw", "avx512vl", "avx512dq")  # what torch's oneDNN bf16 check asks of x86
ARM_BF16 = "bf16"
NO_COMPUTE = ("calibrate",)  # the calibration workload sleeps its known times in any precision
THIS_HOST = "this host's CPU"  # how the reasons of the cells this module marks NA begin


def cpu(path: Optional[str] = None) -> Tuple[str, Set[str]]:
    """(model name, the speed-relevant instruction-set extensions every processor lists:
    runner.CPU_FEATURES); ("", set()) where /proc/cpuinfo cannot be read or lists no flags."""
    facts = runner.cpu_facts(runner.read_text(path or CPUINFO))
    if "isa" not in facts:
        return "", set()
    return str(facts.get("model") or ""), set(facts["isa"])


def has_bf16_kernels(flags: Set[str]) -> bool:
    return all(f in flags for f in X86_BF16) or ARM_BF16 in flags


def emulated_bf16(cell: Cell, path: Optional[str] = None) -> Optional[str]:
    """Why `cell` cannot be measured on this host (bf16 of a framework that computes, on a CPU
    without bf16 kernels and no GPU), or None (also when /proc/cpuinfo is unreadable: no guess)."""
    if cell.precision != "bf16" or cell.framework in NO_COMPUTE or host_has_gpus():
        return None
    name, flags = cpu(path)
    if not flags or has_bf16_kernels(flags):
        return None
    return (
        THIS_HOST + " (%s) has no bf16 kernels (x86 without AVX-512 BW/VL/DQ, or Arm without BF16) "
        "and there is no GPU: bf16 would time torch's emulation, tens of times slower than fp32"
        % (name or os.uname().machine)
    )


GPU_ONLY = ("fp16", "tf32")  # precisions with no CPU path: autocast with loss scaling, TF32 matmuls


def gpu_only(cell: Cell) -> Optional[str]:
    """Why `cell` cannot run on this host (fp16 or tf32 of a framework that computes, and no GPU),
    or None."""
    if cell.precision not in GPU_ONLY or cell.framework in NO_COMPUTE or host_has_gpus():
        return None
    return (
        THIS_HOST + " has no GPU to run %s on (it has no CPU path): use fp32, or bf16 where the CPU "
        "has bf16 kernels" % cell.precision
    )


def exclude_unmeasurable(planned: List[PlannedCell], path: Optional[str] = None) -> List[PlannedCell]:
    """The planned cells with those this host cannot measure marked NA, with the reason."""
    out = []
    for p in planned:
        why = None if p.excluded is not None else (emulated_bf16(p.cell, path) or gpu_only(p.cell))
        out.append(dataclasses.replace(p, excluded=why) if why else p)
    return out


def host_has_gpus() -> bool:
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None
