"""`detbench platform detect`, matching hosts to platforms/*.yaml, and `run --force`."""
import json
import os
import sqlite3
import subprocess
import sys

import psutil
import pytest
from click.testing import CliRunner

import runner
from harness.plan import platforms
from harness.cli import main
from tests.support.fake_pynvml_source import fake_module
from tests.support.scenarios import tiny_scenario

TWO_SOCKETS = "\n\n".join(
    "processor\t: %d\nmodel name\t: Intel(R) Xeon(R) Platinum 8163 CPU @ 2.50GHz\nphysical id\t: %d\n"
    "core id\t\t: %d\n" % (i, i // 4 % 2, i % 2) for i in range(8)) + "\n"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_cpuinfo_parsing_counts_sockets_cores_threads():
    # 8 hardware threads, 2 sockets, 2 cores per socket (2 threads per core)
    assert runner.cpu_facts(TWO_SOCKETS) == {
        "model": "Intel(R) Xeon(R) Platinum 8163 CPU @ 2.50GHz", "sockets": 2, "cores": 4, "threads": 8}


def test_detect_agrees_with_proc_cpuinfo_nproc_and_psutil():
    facts = platforms.host_facts()
    with open("/proc/cpuinfo") as f:
        cpuinfo = f.read()
    models = {l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")}
    assert facts["cpu"]["model"] in models
    assert facts["cpu"]["threads"] == psutil.cpu_count(logical=True) == os.cpu_count()
    assert facts["cpu"]["cores"] == psutil.cpu_count(logical=False)
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    assert facts["cores_available"] == int(nproc)
    assert abs(facts["memory_mb"] * 2 ** 20 - psutil.virtual_memory().total) < 2 ** 20
    assert facts["os"]["kernel"] == os.uname().release
    assert facts["numa_nodes"] >= 1


def test_platform_detect_prints_this_host():
    out = invoke("platform", "detect")
    assert out.exit_code == 0, out.output
    facts = platforms.host_facts()
    assert facts["cpu"]["model"] in out.output and facts["os"]["kernel"] in out.output
    assert "%d threads" % facts["cpu"]["threads"] in out.output
    assert "not P2: cpu.model" in out.output or "matches:     P2" in out.output
    as_json = json.loads(invoke("platform", "detect", "--json").output)
    assert as_json["facts"]["cpu"] == facts["cpu"]
    assert as_json["fingerprint"].startswith("fp2-" if "isa" in facts["cpu"] else "fp1-")
    isa_line = next(line for line in out.output.splitlines() if line.startswith("isa:"))
    if "isa" in facts["cpu"]:        # the extensions the fingerprint hashes, as /proc/cpuinfo lists them
        assert isa_line.split()[1:] == as_json["fingerprinted"]["isa"]
        assert ("avx2" in isa_line.split()) == ("avx2" in open("/proc/cpuinfo").read().split())
    else:
        assert "unknown" in isa_line
    assert set(as_json["differences"]) | set(as_json["matches"]) == set(platforms.known_names()) - {platforms.LOCAL}


def p2_facts(monkeypatch, names=("GeForce RTX 2080 Ti",) * 8):
    """Host facts of a machine built like P2 (fake pynvml; old drivers name GPUs without NVIDIA)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(NAMES=list(names), MEMORY_MB=11019))
    facts = platforms.host_facts()
    facts["cpu"] = runner.cpu_facts(TWO_SOCKETS)
    return facts


def test_a_p2_machine_matches_p2_only(monkeypatch):
    host = platforms.detect_local(p2_facts(monkeypatch))
    result = platforms.compare_all(host)
    assert result["P2"] == []
    assert result["P1"] == ["cpu.model: host 'Intel(R) Xeon(R) Platinum 8163 CPU @ 2.50GHz', "
                            "P1 'Intel Xeon E5-2682 v4'",
                            "gpus.model: host 'GeForce RTX 2080 Ti', P1 'NVIDIA GeForce GTX 1080 Ti'"]


def test_differences_name_gpu_count_and_sockets(monkeypatch):
    facts = p2_facts(monkeypatch, names=["GeForce RTX 2080 Ti"] * 4)
    facts["cpu"]["sockets"] = 1
    diffs = platforms.differences(platforms.detect_local(facts), platforms.load("P2"))
    assert diffs == ["cpu.sockets: host 1, P2 2", "gpus.count: host 4, P2 8"]


def test_detect_text_shows_gpus_and_interconnect(monkeypatch):
    from harness.plan import hostreport
    monkeypatch.setitem(sys.modules, "pynvml", fake_module(NAMES=["NVIDIA H100 80GB HBM3"] * 2,
                                                           NVLINK_PAIRS={(0, 1): 12}))
    text = hostreport.render_text()
    assert "gpus:        2, driver 550.54.15, CUDA 12.4" in text
    assert "GPU1       NVIDIA H100 80GB HBM3, 79.6 GiB" in text
    assert "NVLink on 1 of 1 pairs" in text and "GPU0  X     NV12" in text


P2_SCENARIO = tiny_scenario(name="on-p2", platform="P2", measure=8, repeats=1)


def test_run_refuses_a_platform_this_host_is_not(tmp_path, write_scenario):
    if not platforms.compare_all(platforms.detect_local())["P2"] == []:
        path = write_scenario(P2_SCENARIO)
        out = invoke("run", "--scenario", str(path), "--results", str(tmp_path / "r"))
        assert out.exit_code == 2
        assert "this host is not platform P2: cpu.model: host" in out.output and "--force" in out.output
        assert not (tmp_path / "r" / "detbench.sqlite").exists()
    else:   # pragma: no cover - only on a real P2 machine
        pytest.skip("this host is a P2")


def test_the_forced_note_reads_the_host_record_a_run_stored():
    # host_record stores the platforms that differ by name, each with its differences
    forced = {"fingerprint": "fp2-a", "forced": {"P1": ["gpus: 0, P1 8"], "P2": ["cpu.model: host A, P2 B"]}}
    assert platforms.forced_note(forced) == ("Forced run on a host that is not P1, P2: gpus: 0, P1 8; "
                                             "cpu.model: host A, P2 B.")
    for host in (None, {}, {"fingerprint": "fp2-a"}, {"forced": {}}, {"forced": ["P2"]}):
        assert platforms.forced_note(host) is None, host


def test_forced_run_is_marked_and_every_report_says_so(tmp_path, write_scenario):
    if platforms.compare_all(platforms.detect_local())["P2"] == []:   # pragma: no cover
        pytest.skip("this host is a P2")
    path, results = write_scenario(P2_SCENARIO), tmp_path / "r"
    out = invoke("run", "--scenario", str(path), "--results", str(results), "--force")
    assert out.exit_code == 0, out.output
    assert "FORCED: this host is not P2" in out.output
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    host = json.loads(db.execute("SELECT host_json FROM runs").fetchone()[0])
    assert host["forced"]["P2"][0].startswith("cpu.model: host")
    fp = db.execute("SELECT fingerprint FROM trials").fetchone()[0]
    assert fp == host["fingerprint"]
    report = invoke("report", "--platform", "P2", "--results", str(results))
    assert report.exit_code == 0, report.output
    assert report.output.count("Forced run on a host that is not P2: cpu.model: host") == 2   # both tables
