"""A bf16 cell on a CPU that only emulates bf16 (and no GPU) is NA with that reason, and the rest
of the table is measured: it would time torch's emulation, not the framework."""
import io

import pytest

from harness import run as run_mod
from harness.errors import UserError
from harness.plan import hostcpu
from harness.results.store import Store
from harness.plan.scenario import Cell, PlannedCell

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
XEON = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512dq avx512bw avx512vl amx_bf16\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"


def cells(*precisions, framework="detbench-trainer"):
    return [Cell(framework, "retinanet", p, "local", 1, 1, 0) for p in precisions]


@pytest.mark.parametrize("text, native", [(EPYC, False), (XEON, True), (GRAVITON, True)])
def test_bf16_kernels_are_read_from_the_cpus_flags(tmp_path, text, native):
    (tmp_path / "cpuinfo").write_text(text)
    assert hostcpu.has_bf16_kernels(hostcpu.cpu(str(tmp_path / "cpuinfo"))[1]) is native


def planned(*precisions, framework="detbench-trainer"):
    return [PlannedCell(c) for c in cells(*precisions, framework=framework)]


def test_bf16_cells_on_an_emulating_cpu_are_na_with_the_reason(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(EPYC)
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: False)
    fp32, bf16 = hostcpu.exclude_unmeasurable(planned("fp32", "bf16"), str(tmp_path / "cpuinfo"))
    assert fp32.excluded is None
    assert bf16.excluded == ("this host's CPU (AMD EPYC) has no bf16 kernels (x86 without AVX-512 BW/VL/DQ, or "
                             "Arm without BF16) and there is no GPU: bf16 would time torch's emulation, tens of "
                             "times slower than fp32")


def test_the_calibration_workload_native_cpus_and_gpu_hosts_keep_their_bf16_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: False)
    (tmp_path / "cpuinfo").write_text(EPYC)
    assert hostcpu.emulated_bf16(cells("bf16", framework="calibrate")[0], str(tmp_path / "cpuinfo")) is None
    assert hostcpu.emulated_bf16(cells("bf16")[0], str(tmp_path / "missing")) is None     # unreadable: no guess
    (tmp_path / "cpuinfo").write_text(XEON)
    assert hostcpu.emulated_bf16(cells("bf16")[0], str(tmp_path / "cpuinfo")) is None
    (tmp_path / "cpuinfo").write_text(EPYC)
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: True)        # a GPU host runs bf16 there
    assert hostcpu.emulated_bf16(cells("bf16")[0], str(tmp_path / "cpuinfo")) is None


def test_fp16_and_tf32_cells_on_a_host_without_a_gpu_are_na_and_a_gpu_host_keeps_them(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(XEON)      # bf16 kernels do not make fp16 runnable on the CPU
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: False)
    fp32, fp16, tf32 = hostcpu.exclude_unmeasurable(planned("fp32", "fp16", "tf32"), str(tmp_path / "cpuinfo"))
    assert fp32.excluded is None
    assert fp16.excluded == ("this host's CPU has no GPU to run fp16 on (it has no CPU path): use fp32, or bf16 "
                             "where the CPU has bf16 kernels")
    assert tf32.excluded.startswith("this host's CPU has no GPU to run tf32 on")
    assert hostcpu.gpu_only(cells("fp16", framework="calibrate")[0]) is None
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: True)
    assert [p.excluded for p in hostcpu.exclude_unmeasurable(planned("fp16", "tf32"))] == [None, None]


SCENARIO = """\
name: emulated
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [%s]
calibrate:
  iteration_ms: 5
warmup: 1
measure: 2
repeats: 1
"""


@pytest.fixture
def emulating_host(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(EPYC)
    monkeypatch.setattr(hostcpu, "CPUINFO", str(tmp_path / "cpuinfo"))
    monkeypatch.setattr(hostcpu, "host_has_gpus", lambda: False)
    monkeypatch.setattr(hostcpu, "NO_COMPUTE", ())     # the calibration workload stands in for a framework


def test_a_run_measures_the_rest_and_shows_the_bf16_cells_na(tmp_path, emulating_host):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO % "fp32, bf16")
    out = io.StringIO()
    run_id = run_mod.start(path, tmp_path / "results", backend="local", out=out)
    assert "# NA calibrate/retinanet/bf16/local/1/1: this host's CPU (AMD EPYC) has no bf16 kernels" in out.getvalue()
    store = Store(tmp_path / "results", create=False)
    assert [(t["cell_key"], t["status"]) for t in store.trials(run_id)] == [
        ("calibrate/retinanet/fp32/local/1/1", "done")]


def test_a_run_with_nothing_measurable_here_is_one_line_and_writes_nothing(tmp_path, emulating_host):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO % "bf16")
    with pytest.raises(UserError, match=r"s\.yaml: no cell of this scenario can be measured on this host "
                                        r"\(this host's CPU \(AMD EPYC\) has no bf16 kernels"):
        run_mod.start(path, tmp_path / "results", backend="local", out=io.StringIO())
    assert not (tmp_path / "results").exists()
