"""The machine fingerprint: a short hash over the facts that decide how fast a trial can run.

Two trials with the same fingerprint ran on machines that look the same to a benchmark:
same CPU model, sockets, cores and hardware threads, NUMA nodes, installed memory (whole
GiB), kernel release, GPU models and memory sizes in index order, GPU driver, and the way
each pair of GPUs is connected (PCIe path and NVLink count).

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
"""
import hashlib
import json

VERSION = 1
PREFIX = "fp%d-" % VERSION


def stable_facts(facts):
    """The part of runner.host_facts() that the fingerprint hashes."""
    cpu = facts.get("cpu") or {}
    return {
        "v": VERSION,
        "cpu": [cpu.get("model"), cpu.get("sockets"), cpu.get("cores"), cpu.get("threads")],
        "numa_nodes": facts.get("numa_nodes"),
        "memory_gib": int(round((facts.get("memory_mb") or 0) / 1024.0)),
        "kernel": (facts.get("os") or {}).get("kernel"),
        "gpus": [[g.get("name"), int(round((g.get("memory_mb") or 0) / 1024.0))]
                 for g in facts.get("gpus") or []],
        "gpu_driver": facts.get("gpu_driver"),
        "gpu_links": [[l.get("a"), l.get("b"), l.get("path"), l.get("nvlinks")]
                      for l in facts.get("gpu_links") or []],
    }


def fingerprint(facts):
    """'fp1-' and 16 hex digits of the SHA-256 of the stable facts, or None without facts."""
    if not facts:
        return None
    canon = json.dumps(stable_facts(facts), sort_keys=True, separators=(",", ":"))
    return PREFIX + hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]
