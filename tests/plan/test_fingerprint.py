"""The machine fingerprint: stable for one machine, different for different hardware."""
import copy
import json
import sys
from pathlib import Path

import runner
from harness.plan import fingerprint as fpmod
from harness.plan import platforms
from harness.plan.fingerprint import fingerprint, stable_facts
from tests.support.fake_pynvml_source import fake_module

ROOT = Path(__file__).resolve().parents[2]


def gpu_host(monkeypatch, **knobs):
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(**knobs))
    return platforms.host_facts()


def test_same_host_same_fingerprint_run_after_run():
    first, second = platforms.host_facts(), platforms.host_facts()
    assert fingerprint(first) == fingerprint(second)
    assert len(fingerprint(first)) == 20
    # this host's CPU lists its flags, so its fingerprint records the instruction set
    assert fingerprint(first).startswith("fp2-") == ("isa" in first["cpu"])


def test_what_changes_by_the_moment_is_left_out():
    facts = platforms.host_facts()
    other = copy.deepcopy(facts)
    other.update(hostname="another-node-of-the-same-kind", cores_available=1, gpu_source="whatever")
    other["os"]["distro"] = "the trial image's distribution"
    facts["memory_mb"], other["memory_mb"] = 64300, 64260   # MemTotal wobbles a little between boots
    assert fingerprint(other) == fingerprint(facts)


def test_hardware_and_kernel_changes_show():
    facts = platforms.host_facts()
    for path, value in ((("cpu", "model"), "Some Other CPU"), (("cpu", "threads"), 999),
                        (("os", "kernel"), "1.2.3"), (("numa_nodes",), 9), (("memory_mb",), 10 ** 7)):
        other = copy.deepcopy(facts)
        target = other
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert fingerprint(other) != fingerprint(facts), path


def test_two_gpu_models_never_share_a_fingerprint(monkeypatch):
    h100 = gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"] * 8)
    a100 = gpu_host(monkeypatch, NAMES=["NVIDIA A100-SXM4-80GB"] * 8)
    assert h100["gpus"] and a100["gpus"]
    assert fingerprint(h100) != fingerprint(a100)
    # same model, different count or interconnect: different machines too
    assert fingerprint(gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"] * 4)) != fingerprint(h100)
    nvlinked = gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"] * 8, NVLINK_PAIRS={(0, 1): 4})
    assert fingerprint(nvlinked) != fingerprint(h100)
    # and the same GPUs again give the same fingerprint
    assert fingerprint(gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"] * 8)) == fingerprint(h100)


def test_no_gpu_and_no_facts():
    assert fingerprint(None) is None
    assert stable_facts(runner.host_facts(None, "none"))["gpus"] == []


# ------------------------------------------------------------------ the CPU's identity and instruction set

X86_BASE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
            "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
            "extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
            "tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a "
            "misalignsse 3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep "
            "bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero "
            "xsaveerptr wbnoinvd arat umip pku ospke vaes vpclmulqdq rdpid fsrm")
ZEN4_EXTRA = ("avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vbmi2 gfni "
              "avx512_vnni avx512_bitalg avx512_vpopcntdq")


def cpuinfo(model, stepping, flags, processors=2):
    """/proc/cpuinfo of an AMD EPYC virtual machine that names its CPU only "AMD EPYC"."""
    return "\n\n".join(
        "processor\t: %d\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: %d\nmodel name\t: AMD EPYC\n"
        "stepping\t: %d\nmicrocode\t: 0x1000065\ncpu MHz\t\t: 2445.406\nphysical id\t: 0\nsiblings\t: %d\n"
        "core id\t\t: %d\ncpu cores\t: %d\nflags\t\t: %s\nbogomips\t: 4890.81\n"
        % (i, model, stepping, processors, i, processors, flags) for i in range(processors)) + "\n"


AVX2_EPYC = cpuinfo(1, 1, X86_BASE)                              # Zen 3 (Milan): AVX2, no AVX-512
BF16_EPYC = cpuinfo(17, 1, X86_BASE + " " + ZEN4_EXTRA)          # Zen 4 (Genoa): AVX-512 with BF16


def host_with(text, kernel="6.1.0-18-amd64"):
    """The facts runner.host_facts() would record on a 2-core VM with this /proc/cpuinfo."""
    return {"cpu": runner.cpu_facts(text), "numa_nodes": 1, "memory_mb": 24105, "hostname": "vm",
            "os": {"system": "Linux", "kernel": kernel, "distro": "Debian GNU/Linux 12", "machine": "x86_64"},
            "gpus": [], "gpu_driver": None, "cuda_driver": None, "gpu_links": [], "gpu_source": "none (no pynvml)",
            "cores_available": 2}


def test_cpuinfo_gives_the_cpus_identity_and_speed_relevant_extensions():
    cpu = runner.cpu_facts(BF16_EPYC)
    assert (cpu["vendor"], cpu["family"], cpu["model_number"], cpu["stepping"]) == ("AuthenticAMD", "25", "17", "1")
    assert {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"} <= set(cpu["isa"])
    assert not {"amx_tile", "amx_bf16", "avx512ifma", "hypervisor"} & set(cpu["isa"])   # only the listed ones
    old = runner.cpu_facts(AVX2_EPYC)
    assert {"avx2", "fma"} <= set(old["isa"]) and not [f for f in old["isa"] if f.startswith("avx512")]


def test_an_avx2_epyc_and_an_avx512_bf16_epyc_of_the_same_name_are_different_machines():
    avx2, bf16 = host_with(AVX2_EPYC), host_with(BF16_EPYC)
    assert avx2["cpu"]["model"] == bf16["cpu"]["model"] == "AMD EPYC"
    assert fingerprint(avx2).startswith("fp2-") and fingerprint(bf16).startswith("fp2-")
    assert fingerprint(avx2) != fingerprint(bf16)
    diffs = fpmod.differences(avx2, bf16)
    assert "cpu model_number '1' -> '17'" in diffs
    for feature in ("avx512f", "avx512bw", "avx512vl", "avx512_bf16"):
        assert "%s: baseline no, candidate yes" % feature in diffs
    assert "amx_tile: baseline no, candidate yes" not in diffs


def test_the_instruction_set_alone_tells_two_cpus_apart():
    # the same CPU identity with AVX-512 masked off by the hypervisor: only the extensions differ
    masked, full = host_with(cpuinfo(17, 1, X86_BASE)), host_with(BF16_EPYC)
    assert fingerprint(masked) != fingerprint(full)
    assert fpmod.differences(full, masked, names=("old", "new"))[0] == "avx512f: old yes, new no"
    assert all(line.startswith("avx512") for line in fpmod.differences(full, masked))
    assert fpmod.differences(full, host_with(BF16_EPYC)) == []


def test_an_extension_counts_only_when_every_processor_lists_it():
    mixed = cpuinfo(17, 1, X86_BASE + " " + ZEN4_EXTRA).replace(" avx512_bf16", "", 1)
    assert "avx512_bf16" not in runner.cpu_facts(mixed)["isa"] and "avx512f" in runner.cpu_facts(mixed)["isa"]


def test_a_cpuinfo_without_flags_records_no_instruction_set_rather_than_an_empty_one():
    cpu = runner.cpu_facts(AVX2_EPYC.replace("flags\t\t: " + X86_BASE + "\n", ""))
    assert "isa" not in cpu and cpu["vendor"] == "AuthenticAMD"
    facts = host_with(AVX2_EPYC)
    facts["cpu"] = cpu
    assert fingerprint(facts).startswith("fp1-") and not fpmod.records_isa(facts)


def test_an_arm_cpu_records_its_implementer_part_and_features():
    arm = "\n\n".join("processor\t: %d\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 "
                      "atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp sve sve2 i8mm bf16\n"
                      "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
                      "CPU revision\t: 1" % i for i in range(4)) + "\n"
    cpu = runner.cpu_facts(arm)
    assert (cpu["vendor"], cpu["family"], cpu["model_number"], cpu["stepping"]) == ("0x41", "8", "0xd4f", "1")
    assert cpu["isa"] == ["asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm"]


def test_the_recorder_lists_every_extension_the_fingerprint_hashes():
    assert set(fpmod.FEATURES) <= set(runner.CPU_FEATURES)


# ------------------------------------------------------------------ records made before the instruction set

def committed_baseline_host():
    return json.loads((ROOT / "baselines" / "nightly-cpu.json").read_text())["host"]


def test_an_old_record_keeps_the_fingerprint_it_was_stored_with():
    host = committed_baseline_host()
    assert "isa" not in host["facts"]["cpu"]
    assert fingerprint(host["facts"]) == host["fingerprint"] and host["fingerprint"].startswith("fp1-")


def test_an_old_record_is_never_taken_for_the_same_machine_as_a_new_one():
    new = host_with(AVX2_EPYC)
    old = copy.deepcopy(new)
    for key in ("vendor", "family", "model_number", "stepping", "isa"):
        del old["cpu"][key]
    assert fpmod.stable_facts(old) == fpmod.stable_facts(new, as_version=1)    # all the old record has agrees
    diffs = fpmod.differences(old, new)
    assert diffs == ["the baseline's fingerprint (%s) does not record the instruction set, so it cannot show the "
                     "same CPU as the candidate's (%s)" % (fingerprint(old), fingerprint(new))]
    assert fpmod.differences(old, copy.deepcopy(old)) == []      # two old records compare as they always did


# ------------------------------------------------------------------ GPUs

def test_a_gpus_compute_capability_is_part_of_the_machine(monkeypatch):
    hopper = gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"], COMPUTE_CAPABILITY=(9, 0))
    assert [g["compute_capability"] for g in hopper["gpus"]] == ["9.0"]
    other = gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"], COMPUTE_CAPABILITY=(8, 0))
    assert fingerprint(other) != fingerprint(hopper)
    unknown = gpu_host(monkeypatch, NAMES=["NVIDIA H100 80GB HBM3"], COMPUTE_CAPABILITY=None)
    assert [g["compute_capability"] for g in unknown["gpus"]] == [None]      # an NVML too old to say
    assert fingerprint(unknown) != fingerprint(hopper)
    assert any(line.startswith("gpus ") for line in fpmod.differences(hopper, other))
