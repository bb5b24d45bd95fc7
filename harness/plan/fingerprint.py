"""The machine fingerprint: a short hash over the facts that decide how fast a trial can run.

Two trials with the same fingerprint ran on machines that look the same to a benchmark:
same CPU (model name; vendor, family, model number and stepping; the instruction-set
extensions that change speed, such as AVX2, FMA, AVX-512 F/BW/VL, AVX512_BF16 and AMX
tiles), sockets, cores and hardware threads, NUMA nodes, installed memory (whole GiB),
kernel release, GPU models, memory sizes and compute capabilities in index order, GPU
driver, and the way each pair of GPUs is connected (PCIe path and NVLink count).

The CPU's model name alone does not tell CPUs apart: a virtual machine may show "AMD EPYC"
for an AVX2 part and for one with AVX-512 BF16, and the second runs bf16 several times faster.

Left out on purpose, because they change while the machine does not:
- the hostname (two identical cluster nodes share a fingerprint), GPU serials and UUIDs;
- anything measured in the moment: free memory, load, clocks, temperatures, power;
- the CPUs a job is bound to (taskset, Slurm, docker --cpus) and CUDA_VISIBLE_DEVICES:
  NVML always lists every GPU of the machine;
- the Linux distribution and anything else inside the trial's environment (a container
  image is not the machine); framework-side versions (cuDNN, NCCL) come from the
  workload's own META line and settings, not from here.

A kernel or GPU driver upgrade does change the fingerprint: figures from before and
after are not like for like. One caveat: GPU facts come from pynvml inside the trial's
environment, so an environment without pynvml records no GPUs and gets a different
fingerprint from one with it on the same machine (its trial.json says why: gpu_source).

Versions. "fp2-" fingerprints hash the facts above. "fp1-" ones are of host records made
before the CPU's identity and instruction set were recorded (and of hosts whose CPU lists
no flags): they hash the model name, counts, memory, kernel and GPUs only, and are computed
the same way now as then, so stored runs, baselines and the peaks cached under them keep
their fingerprint. An fp1 record cannot show which instruction set its CPU had, so
`differences` never calls it the same machine as an fp2 one.
"""

import hashlib
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

Facts = Dict[str, Any]  # a host record as runner.host_facts writes it

VERSION = 2
PREFIX = "fp%d-" % VERSION
OLD_PREFIX = "fp1-"
# the instruction-set extensions an fp2 fingerprint hashes (runner.CPU_FEATURES records at least these)
X86_FEATURES = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
ARM_FEATURES = ("asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme")
FEATURES = X86_FEATURES + ARM_FEATURES
CPU_ID = ("vendor", "family", "model_number", "stepping")
NO_ISA = "does not record the instruction set"


def _cpu(facts: object) -> Dict[str, Any]:
    cpu = facts.get("cpu") if isinstance(facts, dict) else None
    return cpu if isinstance(cpu, dict) else {}


def records_isa(facts: object) -> bool:
    """Whether the facts record the CPU's instruction set (an fp2 record)."""
    """True when host facts list the CPU's instruction set (what an fp2 fingerprint needs)."""
    return isinstance(_cpu(facts).get("isa"), list)


def version(facts: object) -> int:
    """The fingerprint version these facts give: 2 where they record the instruction set, else 1."""
    return VERSION if records_isa(facts) else 1


def _gib(mb: Optional[float]) -> int:
    return int(round((mb or 0) / 1024.0))


def stable_facts(facts: Facts, as_version: Optional[int] = None) -> Dict[str, Any]:
    """The part of runner.host_facts() that the fingerprint hashes: fp2's where the facts list
    the instruction set, else fp1's (`as_version=1` gives fp1's part of any facts)."""
    v = as_version or version(facts)
    cpu = _cpu(facts)
    out: Dict[str, Any] = {
        "v": v,
        "cpu": [cpu.get("model"), cpu.get("sockets"), cpu.get("cores"), cpu.get("threads")],
        "numa_nodes": facts.get("numa_nodes"),
        "memory_gib": _gib(facts.get("memory_mb")),
        "kernel": (facts.get("os") or {}).get("kernel"),
        "gpus": [[g.get("name"), _gib(g.get("memory_mb"))] for g in facts.get("gpus") or []],
        "gpu_driver": facts.get("gpu_driver"),
        "gpu_links": [[l.get("a"), l.get("b"), l.get("path"), l.get("nvlinks")] for l in facts.get("gpu_links") or []],
    }
    if v >= 2:
        isa = set(cpu.get("isa") or [])
        out["cpu_id"] = [cpu.get(k) for k in CPU_ID]
        out["isa"] = [f for f in FEATURES if f in isa]
        out["gpus"] = [row + [g.get("compute_capability")] for row, g in zip(out["gpus"], facts.get("gpus") or [])]
    return out


def _hash(stable: Dict[str, Any]) -> str:
    canon = json.dumps(stable, sort_keys=True, separators=(",", ":"))
    return "fp%d-" % stable["v"] + hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def fingerprint(facts: Optional[Facts]) -> Optional[str]:
    """'fp2-' (or, for facts without the instruction set, 'fp1-') and 16 hex digits of the
    SHA-256 of the stable facts, or None without facts."""
    if not facts:
        return None
    return _hash(stable_facts(facts))


def isa_split(facts: Facts) -> Optional[Tuple[List[str], List[str]]]:
    """(the hashed extensions this CPU has, those of its architecture it lacks), or None when the
    facts do not record the instruction set."""
    if not records_isa(facts):
        return None
    have = stable_facts(facts)["isa"]
    arch = (
        ARM_FEATURES
        if set(have) & set(ARM_FEATURES) or str((facts.get("os") or {}).get("machine")).startswith(("aarch64", "arm"))
        else X86_FEATURES
    )
    return have, [f for f in arch if f not in have]


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def differences(base: Facts, cand: Facts, names: Sequence[str] = ("baseline", "candidate")) -> List[str]:
    """Why two host facts are not the same machine, one line per difference ([] when they are).

    Each instruction-set extension that differs is named with both sides ("avx512_bf16:
    baseline no, candidate yes"). Where either side does not record the instruction set, the
    facts both record are compared and one more line says the machines cannot be shown to be
    the same: an fp1 record and an fp2 one never match.
    """
    both = min(version(base), version(cand))
    a, b = stable_facts(base, both), stable_facts(cand, both)
    out: List[str] = []
    for key in sorted(set(a) | set(b)):
        if key == "v" or a.get(key) == b.get(key):
            continue
        if key == "isa":
            out += [
                "%s: %s %s, %s %s" % (f, names[0], _yes(f in a["isa"]), names[1], _yes(f in b["isa"]))
                for f in FEATURES
                if (f in a["isa"]) != (f in b["isa"])
            ]
        elif key == "cpu_id":
            out += ["cpu %s %r -> %r" % (k, x, y) for k, x, y in zip(CPU_ID, a[key], b[key]) if x != y]
        else:
            out.append("%s %r -> %r" % (key, a.get(key), b.get(key)))
    lacking = [n for n, f in zip(names, (base, cand)) if not records_isa(f)]
    if lacking and len(lacking) < 2:
        which = lacking[0]
        out.append(
            "the %s's fingerprint (%s) %s, so it cannot show the same CPU as the %s's (%s)"
            % (
                which,
                fingerprint(base if which == names[0] else cand),
                NO_ISA,
                names[1] if which == names[0] else names[0],
                fingerprint(cand if which == names[0] else base),
            )
        )
    return out
