"""A bf16 cell on a CPU that only emulates bf16 is refused before anything runs: it would time
torch's emulation, not the framework."""
import io

import pytest

from harness import launch
from harness import run as run_mod
from harness.errors import UserError
from harness.launch import hostcpu
from harness.spec.scenario import Cell

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
XEON = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512dq avx512bw avx512vl amx_bf16\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"


def cells(*precisions, framework="detbench-trainer"):
    return [Cell(framework, "retinanet", p, "local", 1, 1, 0) for p in precisions]


@pytest.mark.parametrize("text, native", [(EPYC, False), (XEON, True), (GRAVITON, True)])
def test_bf16_kernels_are_read_from_the_cpus_flags(tmp_path, text, native):
    (tmp_path / "cpuinfo").write_text(text)
    assert hostcpu.has_bf16_kernels(hostcpu.cpu(str(tmp_path / "cpuinfo"))[1]) is native


def test_bf16_cells_on_an_emulating_cpu_are_one_line_naming_the_cpu_and_cells(tmp_path):
    (tmp_path / "cpuinfo").write_text(EPYC)
    why = hostcpu.bf16_refusal(cells("fp32", "bf16"), str(tmp_path / "cpuinfo"))
    assert why.startswith("this host's CPU (AMD EPYC) has no bf16 kernels") and "\n" not in why
    assert "1 bf16 cell(s)" in why and "detbench-trainer/retinanet/bf16/local/1/1" in why
    assert why.endswith("exclude precision bf16 on this host")


def test_fp32_cells_the_calibration_workload_and_native_cpus_pass(tmp_path):
    (tmp_path / "cpuinfo").write_text(EPYC)
    assert hostcpu.bf16_refusal(cells("fp32"), str(tmp_path / "cpuinfo")) is None
    assert hostcpu.bf16_refusal(cells("bf16", framework="calibrate"), str(tmp_path / "cpuinfo")) is None
    (tmp_path / "cpuinfo").write_text(XEON)
    assert hostcpu.bf16_refusal(cells("bf16"), str(tmp_path / "cpuinfo")) is None
    assert hostcpu.bf16_refusal(cells("bf16"), str(tmp_path / "missing")) is None     # unreadable: no guess


SCENARIO = """\
name: emulated
matrix:
  framework: [detbench-trainer]
  model: [retinanet]
  precision: [fp32, bf16]
warmup: 1
measure: 1
"""


def test_a_run_with_bf16_cells_on_an_emulating_cpu_stops_before_writing_anything(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(EPYC)
    monkeypatch.setattr(hostcpu, "CPUINFO", str(tmp_path / "cpuinfo"))
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: False)
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    with pytest.raises(UserError, match=r"^this host's CPU \(AMD EPYC\) has no bf16 kernels"):
        run_mod.start(path, tmp_path / "results", backend="local", out=io.StringIO())
    assert not (tmp_path / "results").exists()
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: True)       # a GPU host runs bf16 there
    launch.launcher("local").preflight(launch.load_scenario(path), cells("bf16"))
