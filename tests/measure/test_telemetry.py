"""Telemetry: runner.py's sampler (with and without psutil/pynvml) and the flags it feeds.

No GPU is lent to these tests: the pynvml paths run against a stand-in module
(tests/support/fake_pynvml_source.py), in-process through monkeypatch and in a subprocess
through PYTHONPATH.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runner
from harness.measure import flags, telemetry
from tests.support.fake_pynvml_source import fake_module, write_fake
from tests.launch.test_runner import python36

ROOT = Path(__file__).resolve().parents[2]
SPIN = "import time\nt = time.time()\nwhile time.time() - t < %s: pass\nprint('done')\n"


def run_runner(tmp_path, argv, python=sys.executable, interval="0.1", env=None):
    trial = tmp_path / "trial"
    cmd = [python, str(ROOT / "runner.py"), "--trial-dir", str(trial), "--sample-interval", interval,
           "--", *argv]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads((trial / "trial.json").read_text()), trial


# ---------------------------------------------------------------- runner.py, no GPU

def test_samples_cpu_memory_and_the_process_tree(tmp_path):
    record, trial = run_runner(tmp_path, [sys.executable, "-c", SPIN % 0.8])
    t = record["telemetry"]
    lines = [json.loads(l) for l in (trial / "telemetry.jsonl").read_text().splitlines()]
    assert t["samples"] == len(lines) >= 4
    assert t["cores"] == len(os.sched_getaffinity(0))
    assert all(len(s["cpu_util"]) == os.cpu_count() for s in lines)
    # a busy-looping child: its tree has one process using CPU, one thread ready to run
    assert t["tree_procs"]["max"] == 1 and t["tree_cpu_percent"]["max"] > 20
    assert t["tree_runnable"]["max"] >= 1 and t["tree_rss_mb"]["max"] > 1
    assert 0 < t["mem_available_mb"]["min"] <= t["memory_total_mb"]
    assert t["gpus"] == [] and t["sources"]["nvml"] is None and t["sources"]["tree"].startswith("proc")
    assert "tree_device_mb" not in t                            # no GPU: no device memory figure
    # the sampler's own cost is measured and small: well under 20 ms of CPU per sample
    assert 0 < t["sampler_ms_per_sample"] < 20


def test_interval_zero_disables_sampling(tmp_path):
    record, trial = run_runner(tmp_path, [sys.executable, "-c", "print(1)"], interval="0")
    assert "telemetry" not in record and not (trial / "telemetry.jsonl").exists()
    assert record["host"]["cpu"]["threads"] == os.cpu_count()


def test_missing_pynvml_leaves_gpu_fields_empty(tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "pynvml.py").write_text("raise ImportError('pynvml blocked by the test')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    record, _ = run_runner(tmp_path, [sys.executable, "-c", SPIN % 0.3], env=env)
    assert record["host"]["gpus"] == [] and record["host"]["gpu_driver"] is None
    assert "pynvml blocked by the test" in record["host"]["gpu_source"]
    assert record["telemetry"]["gpus"] == [] and record["exit_code"] == 0


def test_failing_nvml_init_leaves_gpu_fields_empty(tmp_path):
    fake = write_fake(tmp_path, FAIL_INIT=True)
    record, _ = run_runner(tmp_path, [sys.executable, "-c", SPIN % 0.3],
                           env=dict(os.environ, PYTHONPATH=str(fake)))
    assert record["host"]["gpus"] == [] and "Driver Not Loaded" in record["host"]["gpu_source"]
    assert record["telemetry"]["gpus"] == []


def test_bare_python_36_without_psutil_or_pynvml(tmp_path):
    py36 = python36()
    if py36 is None:
        pytest.skip("no Python 3.6 interpreter here (the vermin check in test_runner.py still applies)")
    record, trial = run_runner(tmp_path, [py36, "-c", SPIN % 0.5], python=py36)
    t = record["telemetry"]
    assert record["runner_python"].startswith("3.6") and t["samples"] >= 2
    assert "cpu_util_mean" in t and "mem_available_mb" in t     # from /proc, standard library
    # the process tree comes from /proc too: no module beyond the standard library needed
    assert t["tree_procs"]["max"] == 1 and t["tree_rss_mb"]["max"] > 1 and t["tree_cpu_percent"]["max"] > 20


# ---------------------------------------------------------------- runner.py with a fake pynvml

def test_fake_gpus_in_a_real_trial_under_both_pythons(tmp_path):
    fake = write_fake(tmp_path, REASONS=0x4 | 0x1)   # power cap (and idle, which never flags)
    env = dict(os.environ, PYTHONPATH=str(fake))
    for python in filter(None, [sys.executable, python36()]):
        record, _ = run_runner(tmp_path, [python, "-c", SPIN % 0.4], python=python, env=env)
        host, t = record["host"], record["telemetry"]
        assert [g["name"] for g in host["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
        assert host["gpu_driver"] == "550.54.15" and host["cuda_driver"] == "12.4"
        assert host["gpu_links"] == [{"a": 0, "b": 1, "path": "cross-socket", "nvlinks": 0}]
        g0 = t["gpus"][0]
        assert g0["util"]["mean"] == 97 and g0["power_w"]["max"] == 312.5 and g0["sm_mhz"]["min"] == 1410
        assert g0["throttle"] == {"sw_power_cap": g0["samples"], "gpu_idle": g0["samples"]}
        assert telemetry.trial_flags(t) == [flags.GPU_POWER]


def test_gpu_facts_read_topology_and_nvlink():
    nvml = fake_module(NAMES=["A100"] * 4, NVLINK_PAIRS={(0, 1): 4, (2, 3): 2},
                       LEVELS={(0, 1): 10, (0, 2): 30, (0, 3): 30, (1, 2): 30, (1, 3): 30, (2, 3): 0})
    facts = runner.gpu_facts(nvml)
    links = {(l["a"], l["b"]): (l["path"], l["nvlinks"]) for l in facts["links"]}
    assert links == {(0, 1): ("pcie-switch", 4), (0, 2): ("host-bridge", 0), (0, 3): ("host-bridge", 0),
                     (1, 2): ("host-bridge", 0), (1, 3): ("host-bridge", 0), (2, 3): ("same-board", 2)}


def test_sampler_reads_fake_gpus_in_process(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(REASONS=0x40))
    nvml, error = runner.load_nvml()
    assert error is None
    sampler = runner.Sampler(str(tmp_path / "t.jsonl"), 1.0, nvml, 2)
    sampler.pid = os.getpid()
    sampler.prev = sampler._baseline()
    sample = sampler.sample()
    assert [g["throttle"] for g in sample["gpus"]] == [0x40, 0x40]
    summary = sampler.summary()
    assert summary["gpus"][1]["throttle"] == {"hw_thermal": 1}
    assert telemetry.trial_flags(summary) == [flags.GPU_THERMAL]


def test_nvml_missing_or_failing_in_process(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)      # import raises ImportError
    assert runner.load_nvml()[0] is None
    assert runner.host_facts(*runner.load_nvml())["gpus"] == []
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(FAIL_INIT=True))
    nvml, error = runner.load_nvml()
    assert nvml is None and "Driver Not Loaded" in error


def test_throttle_mask_decoding():
    assert runner.decode_throttle(0) == []
    assert runner.decode_throttle(0x4 | 0x20 | 0x80) == ["sw_power_cap", "sw_thermal", "hw_power_brake"]


# ---------------------------------------------------------------- flags (pure functions)

def summary(**over):
    base = {"samples": 10, "cores": 8, "memory_total_mb": 64000,
            "cpu_util_mean": {"mean": 95.0}, "tree_runnable": {"mean": 1.0},
            "mem_available_mb": {"min": 30000}, "swap_in_mb": {"mean": 0.0}, "swap_out_mb": {"mean": 0.0},
            "gpus": []}
    base.update(over)
    return base


def test_a_quiet_trial_has_no_flags():
    assert telemetry.trial_flags(summary()) == []
    assert telemetry.trial_flags(None) == [] and telemetry.trial_flags({"samples": 0}) == []


def test_oversubscription_needs_ready_threads_beyond_the_cores_and_saturated_cores():
    assert telemetry.trial_flags(summary(tree_runnable={"mean": 160.0})) == [flags.CPU_OVERSUBSCRIBED]
    assert telemetry.trial_flags(summary(tree_runnable={"mean": 12.0})) == []          # 1.5 per core, not more
    assert telemetry.trial_flags(summary(tree_runnable={"mean": 40.0}, cpu_util_mean={"mean": 60.0})) == []
    # one busy thread on one core is not oversubscription
    assert telemetry.trial_flags(summary(cores=1, tree_runnable={"mean": 1.0}, cpu_util_mean={"mean": 100})) == []


def test_gpu_throttle_needs_a_share_of_the_samples():
    gpu = {"index": 0, "samples": 100, "throttle": {"sw_thermal": 5}}
    assert telemetry.trial_flags(summary(gpus=[gpu])) == [flags.GPU_THERMAL]
    gpu["throttle"] = {"sw_thermal": 4, "gpu_idle": 100, "applications_clocks": 100}
    assert telemetry.trial_flags(summary(gpus=[gpu])) == []
    gpu["throttle"] = {"hw_power_brake": 50, "hw_slowdown": 50}
    assert telemetry.trial_flags(summary(gpus=[gpu])) == [flags.GPU_THERMAL, flags.GPU_POWER]


def test_memory_pressure_from_swapping_or_little_available_memory():
    assert telemetry.trial_flags(summary(swap_out_mb={"mean": 10.0})) == [flags.MEMORY_PRESSURE]
    assert telemetry.trial_flags(summary(swap_out_mb={"mean": 6.0})) == []            # 60 MB in all
    assert telemetry.trial_flags(summary(mem_available_mb={"min": 3000})) == [flags.MEMORY_PRESSURE]


def test_cell_flags_join_trials_and_notice_mixed_hosts():
    hot = summary(gpus=[{"samples": 10, "throttle": {"hw_thermal": 10}}])
    assert telemetry.cell_flags([None, summary(), hot]) == [flags.GPU_THERMAL]
    assert telemetry.cell_flags([None, summary()], ["fp1-a", "fp1-a", None]) == []
    assert telemetry.cell_flags([["not a summary"], "{not json"]) == []   # what is no summary raises nothing
    assert telemetry.cell_flags([], ["fp1-a", "fp1-b"]) == [flags.MIXED_HOSTS]


# ---------------------------------------------------------------- the trial's process tree and its memory

ORPHAN = """\
import os, time
if os.fork() == 0:
    if os.fork() == 0:                       # a worker whose parent exits: init adopts it
        block = b"\\x01" * (96 * 2 ** 20)    # resident, not just reserved
        time.sleep(1.5)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(1.0)
print("done")
"""


def test_the_tree_keeps_a_worker_whose_parent_died(tmp_path):
    record, _ = run_runner(tmp_path, [sys.executable, "-c", ORPHAN])
    t = record["telemetry"]
    # the trial and its orphaned worker: the worker is no descendant any more, but of the trial's session
    assert t["tree_procs"]["max"] == 2
    assert t["tree_rss_mb"]["max"] > 96
    if "tree_pss_mb" in t:
        assert 96 < t["tree_pss_mb"]["max"] <= t["tree_rss_mb"]["max"]


def test_pss_reads_of_a_large_tree_are_spaced_to_one_percent_of_the_time(monkeypatch):
    # smaps_rollup walks every page under the process's memory-map lock: ~55 ms for a 3 GB
    # trainer. A read that costs 20 ms is not repeated for 2 s; RSS is still read every sample.
    reads = []

    def slow_pss(pid):
        reads.append(pid)
        time.sleep(0.02)
        return 1024

    monkeypatch.setattr(runner, "pss_kb", slow_pss)
    sampler = runner.Sampler(os.devnull, 0.05, None, 2)
    sampler.pss = True
    sampler.pid = os.getpid()
    sampler.prev = sampler._baseline()
    samples = []
    for _ in range(8):
        samples.append(sampler.sample())
        time.sleep(0.05)
    # one read per process of the tree (this process's session may hold others), all in the first sample
    assert sampler.pss_samples == 1 and len(reads) == len(set(reads)) >= 1
    assert ["tree_pss_mb" in s for s in samples] == [True] + [False] * 7
    assert all(s["tree_rss_mb"] > 0 for s in samples)
    assert sampler.summary()["pss_samples"] == 1
    sampler.pss_due = 0.0          # once the spacing has passed, the next sample reads it again
    assert "tree_pss_mb" in sampler.sample()


def test_device_memory_sums_the_trees_processes_on_every_gpu(tmp_path, monkeypatch):
    trial = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '20'])"],
                             start_new_session=True)
    try:
        child = None
        for _ in range(200):   # wait for the trial's own child to appear
            found = [p for p in runner.process_tree(trial.pid) if p != trial.pid]
            if found:
                child = found[0]
                break
            time.sleep(0.05)
        assert child is not None
        nvml = fake_module(PROCESSES={0: [(trial.pid, 1500), (os.getpid(), 7000)],   # not the trial's
                                      1: [(child, 500), (trial.pid, None)]})         # usage not available
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        sampler = runner.Sampler(str(tmp_path / "t.jsonl"), 1.0, runner.load_nvml()[0], 2)
        sampler.pid = trial.pid
        sampler.prev = sampler._baseline()
        sample = sampler.sample()
        assert [g["tree_mem_mb"] for g in sample["gpus"]] == [1500.0, 500.0]
        assert sample["tree_device_mb"] == 2000.0
        nvml.PROCESSES = {0: [(child, 2500)]}
        sampler.sample()
        assert sampler.summary()["tree_device_mb"]["max"] == 2500.0

        def unsupported(handle):
            raise nvml.NVMLError("Not Supported")
        monkeypatch.setattr(nvml, "nvmlDeviceGetComputeRunningProcesses", unsupported)
        assert "tree_device_mb" not in sampler.sample()
    finally:
        os.killpg(trial.pid, 9)
        trial.wait()


def test_gpus_the_environment_cannot_read_flag_the_trial(tmp_path, monkeypatch):
    gpus = tmp_path / "driver-gpus"
    for bus in ("0000:3b:00.0", "0000:af:00.0"):
        (gpus / bus).mkdir(parents=True)
    monkeypatch.setattr(runner, "NVIDIA_GPUS", str(gpus))
    assert runner.gpu_devices() == 2

    def summary_with(module, devices):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        nvml, error = runner.load_nvml()
        sampler = runner.Sampler(str(tmp_path / "t.jsonl"), 1.0, nvml, 2, nvml_error=error, devices=devices)
        sampler.pid = os.getpid()
        sampler.prev = sampler._baseline()
        sampler.sample()
        return sampler.summary()

    lost = summary_with(None, runner.gpu_devices())                 # pynvml does not import
    assert lost["gpu_telemetry_lost"].startswith("2 GPU(s) here, no NVML: ModuleNotFoundError")
    assert lost["sources"]["gpu_devices"] == 2 and lost["sources"]["nvml"] is None
    assert telemetry.trial_flags(lost) == [flags.GPU_TELEMETRY_LOST]
    assert telemetry.cell_flags([lost, None]) == [flags.GPU_TELEMETRY_LOST]
    failing = summary_with(fake_module(FAIL_INIT=True), 2)          # it imports, but nvmlInit fails
    assert "Driver Not Loaded" in failing["gpu_telemetry_lost"]
    assert telemetry.trial_flags(failing) == [flags.GPU_TELEMETRY_LOST]
    read = summary_with(fake_module(), 2)                           # NVML reads the GPUs: no flag
    assert read["gpu_telemetry_lost"] is None and flags.GPU_TELEMETRY_LOST not in telemetry.trial_flags(read)
    cpu_only = summary_with(None, 0)                                 # no GPU here: nothing is lost
    assert cpu_only["gpu_telemetry_lost"] is None and telemetry.trial_flags(cpu_only) == []


def test_gpu_devices_fall_back_to_the_device_nodes(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "NVIDIA_GPUS", str(tmp_path / "no-driver-folder"))
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "null"):
        (dev / name).write_text("")
    monkeypatch.setattr(runner, "DEVICES", str(dev))
    assert runner.gpu_devices() == 0                                 # control nodes alone are no GPU
    (dev / "nvidia0").write_text("")
    (dev / "nvidia1").write_text("")
    assert runner.gpu_devices() == 2
