"""`detbench report --mlperf`: imported MLPerf runs side by side, per epoch, and their curves."""
import re

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.measure import mllog
from harness.report import mlperf as mlperf_report
from tests.support import mllogs


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def results(tmp_path):
    top = tmp_path / "v2.1"
    mllogs.write_system(top, "box_n1", "ssd", [40.0, 41.0, 42.0, 43.0, 44.0])
    mllogs.write_system(top, "box_n2", "ssd", [24.0, 25.0, 26.0, 27.0, 28.0], nodes=2)
    assert invoke("import", top, "--results", tmp_path / "res").exit_code == 0
    return tmp_path / "res"


def row(text, system):
    return next(line for line in text.splitlines() if line.startswith("|" + system))


def test_systems_side_by_side_with_score_spread_rate_and_scaling(results):
    out = invoke("report", "--mlperf", "--results", results)
    assert out.exit_code == 0, out.output
    text = out.output
    assert "#### MLPerf Training v2.1: RetinaNet (ssd)" in text
    one, two = row(text, "box_n1 (Vendor)"), row(text, "box_n2 (Vendor)")
    assert one.endswith("|NVIDIA A100-SXM4-80GB x 8|1|PyTorch NVIDIA Release 22.04|42.00 (40.00-44.00, 5)|-|100%|")
    assert two.endswith("|NVIDIA A100-SXM4-80GB x 16|2|PyTorch NVIDIA Release 22.04|26.00 (24.00-28.00, 5)|-|%.0f%%|"
                        % (100 * 42.0 * 8 / (26.0 * 16)))
    assert text.index(two) < text.index(one)  # fastest first
    assert "box_n1: open division" in text  # its data set and target may not be the closed one's


def test_scaling_efficiency_against_the_fewest_nodes_of_the_same_hardware():
    def run(run_id, nodes, minutes):
        return {"run_id": run_id, "score_minutes": minutes,
                "platform": {"submitter": "V", "device": "A100", "devices_per_node": 8, "host_cpu": "EPYC",
                             "nodes": nodes, "devices": 8 * nodes}}

    runs = [run("a", 1, 40.0), run("b", 2, 25.0), run("c", 4, 16.0)]
    eff = mlperf_report.efficiency(runs)
    assert eff == {"a": pytest.approx(1.0), "b": pytest.approx(40.0 * 8 / (25.0 * 16)),
                   "c": pytest.approx(40.0 * 8 / (16.0 * 32))}
    other = dict(runs[1], run_id="d", platform=dict(runs[1]["platform"], device="H100"))
    assert "d" not in mlperf_report.efficiency(runs + [other])  # one node count of its hardware


def test_per_epoch_rate_and_time_outside_epochs(tmp_path):
    path = mllogs.write_result(tmp_path / "result_0.txt", shape="ssd-pytorch", minutes=10, epochs=4, init_s=60)
    import dataclasses

    result = dataclasses.replace(mllog.read_result(str(path), "2.1.0"), division="closed")
    run = {"run_id": "r", "round": "2.1", "ruleset": "2.1.0", "benchmark": "ssd", "division": "closed",
           "score_minutes": 10.0, "score_note": None, "scaling_factor": 1.0,
           "platform": {"system": "box", "submitter": "V", "device": "A100", "devices": 8, "devices_per_node": 8,
                        "host_cpu": "EPYC", "nodes": 1, "framework": "PyTorch"},
           "results": [("result_0.txt", result)]}
    _title, head, body, _notes = mlperf_report.epochs_grid("2.1", "ssd", [run])
    cells = dict(zip(head, body[0]))
    per_epoch = 1170301 / result.epochs[0].seconds / 8
    assert cells["images/s per accelerator per epoch: median (min-max)"].startswith("%.1f" % per_epoch)
    assert cells["CV over epochs"] == "0.0%"
    third = result.curve[2]  # 0.345: the first at the closed target 0.34
    assert cells["target met at, min"] == "%.2f (1 of 1)" % (third.seconds / 60.0)
    assert cells["init before run_start, s"] == "60"
    inside = sum(e.seconds for e in result.epochs)
    assert cells["outside training epochs"] == "%.1f%%" % (100 * (600.0 - inside) / 600.0)
    _title, head, body, _notes = mlperf_report.systems_grid("2.1", "ssd", [run])
    rate = dict(zip(head, body[0]))["images/s per accelerator"]
    assert re.fullmatch(r"%.1f \(\+-0\.\d\d%%\)" % per_epoch, rate)


def test_html_has_the_tables_and_a_curve_escaped(results):
    out = invoke("report", "--mlperf", "--format", "html", "--results", results)
    assert out.exit_code == 0
    assert "<h2>MLPerf Training v2.1: RetinaNet (ssd)</h2>" in out.output
    assert out.output.count('src="data:image/png;base64,') == 1


def test_no_imported_runs_is_one_line(tmp_path):
    out = invoke("report", "--mlperf", "--results", tmp_path)
    assert out.exit_code == 2 and "no results store here" in out.output


def test_a_cpu_only_system_counts_its_sockets(tmp_path):
    top = tmp_path / "v2.1"
    mllogs.write_system(top, "cpu_n2", "ssd", [300.0, 301.0, 302.0, 303.0, 304.0], nodes=2, per_node=0)
    assert invoke("import", top, "--results", tmp_path / "res").exit_code == 0
    text = invoke("report", "--mlperf", "--results", tmp_path / "res").output
    assert "|cpu_n2 (Vendor)|AMD EPYC 7742 x 4|2|" in text  # two sockets a node
    assert "A system without accelerators counts its host CPU sockets in their place." in text
