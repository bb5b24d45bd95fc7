"""The machine fingerprint: stable for one machine, different for different hardware."""
import copy
import sys

import runner
from harness.spec import platforms
from harness.spec.fingerprint import fingerprint, stable_facts
from tests.fake_pynvml_source import fake_module


def gpu_host(monkeypatch, **knobs):
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(**knobs))
    return platforms.host_facts()


def test_same_host_same_fingerprint_run_after_run():
    first, second = platforms.host_facts(), platforms.host_facts()
    assert fingerprint(first) == fingerprint(second)
    assert fingerprint(first).startswith("fp1-") and len(fingerprint(first)) == 20


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
