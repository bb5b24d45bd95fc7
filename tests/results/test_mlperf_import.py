"""`detbench import` of MLPerf Training results: one run per system and benchmark, scored as the
official summarizer scores it, bad files named and the rest imported."""
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.results.mlperf_store import MlperfTables
from harness.results.store import Store
from tests.support import mllogs

ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def stored(results):
    store = Store(results, create=False)
    try:
        return {(r["system"], r["benchmark"]): r for r in MlperfTables(store).runs()}
    finally:
        store.close()


def olympic(minutes):
    ordered = sorted(minutes)
    return sum(ordered[1:-1]) / (len(ordered) - 2)


@pytest.fixture
def round_dir(tmp_path):
    top = tmp_path / "training_results_v2.1"
    mllogs.write_system(top, "box_n1", "maskrcnn", [30.0, 31.5, 29.0, 33.0, 30.5])
    mllogs.write_system(top, "box_n2", "maskrcnn", [16.0, 15.5, 17.0, 16.2, 15.9], nodes=2)
    mllogs.write_system(top, "box_n1", "ssd", [80.0, 82.0, 79.0, 81.0, 90.0], shape="tpu")
    return top


def test_a_round_imports_one_run_per_system_and_benchmark_scored_by_the_olympic_mean(round_dir, tmp_path):
    out = invoke("import", round_dir, "--results", tmp_path / "res")
    assert out.exit_code == 0, out.output
    runs = stored(tmp_path / "res")
    assert sorted(runs) == [("box_n1", "maskrcnn"), ("box_n1", "ssd"), ("box_n2", "maskrcnn")]
    assert runs[("box_n1", "maskrcnn")]["score_minutes"] == pytest.approx(olympic([30.0, 31.5, 29.0, 33.0, 30.5]))
    assert runs[("box_n1", "ssd")]["score_minutes"] == pytest.approx(81.0)
    assert runs[("box_n1", "maskrcnn")]["ruleset"] == "2.1.0"  # from the folder's name
    two = runs[("box_n2", "maskrcnn")]
    assert two["platform"]["nodes"] == 2 and two["platform"]["devices"] == 16
    assert two["platform"]["device"] == "NVIDIA A100-SXM4-80GB"
    assert [name for name, _ in two["results"]] == ["result_%d.txt" % n for n in range(5)]
    assert "score 16.033 min" in out.output


def test_scores_equal_the_official_summarizer_on_the_same_folder(round_dir, tmp_path):
    assert invoke("import", round_dir, "--results", tmp_path / "res").exit_code == 0
    subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(round_dir) + "/{*}", "training",
                    "2.1.0", "--csv", str(tmp_path / "s.csv")], cwd=str(tmp_path), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(tmp_path / "s.csv", newline="") as f:
        official = {(row["system"], b): float(row[b]) for row in csv.DictReader(f) for b in ("maskrcnn", "ssd")
                    if row[b]}
    ours = {key: run["score_minutes"] for key, run in stored(tmp_path / "res").items()}
    assert official.keys() == ours.keys()
    for key, minutes in official.items():
        assert ours[key] == pytest.approx(minutes, abs=1e-9), key


def test_a_result_the_rules_refuse_is_dropped_as_the_slowest(tmp_path):
    top = tmp_path / "v2.0"
    folder = mllogs.write_system(top, "box", "ssd", [50.0, 40.0, 45.0, 44.0])
    # a fifth run that never reached its accuracy checks: the open rules want an eval_accuracy
    mllogs.write_result(folder / "result_4.txt", accuracy=(1.5,), minutes=10.0)
    out = invoke("import", top, "--results", tmp_path / "res")
    assert out.exit_code == 0, out.output
    run = stored(tmp_path / "res")[("box", "ssd")]
    # the summarizer's rule: the fastest dropped, the refused one stands for the slowest
    assert run["score_minutes"] == pytest.approx((44.0 + 45.0 + 50.0) / 3)
    refused = dict(run["results"])["result_4.txt"]
    assert refused.compliance and "eval_accuracy" in refused.compliance


def test_bad_files_are_named_with_their_line_and_the_rest_imported(tmp_path):
    top = tmp_path / "v2.0"
    folder = mllogs.write_system(top, "box", "maskrcnn", [30.0, 31.0, 32.0])
    cut = mllogs.write_result(folder / "result_3.txt", shape="maskrcnn-pytorch", benchmark="maskrcnn", stop=False)
    other = mllogs.write_result(folder / "result_4.txt", benchmark="ssd")
    (folder / "result_5.txt").write_text("Epoch 1: loss 0.3\n")
    twice = mllogs.write_result(folder / "result_6.txt", shape="maskrcnn-pytorch", benchmark="maskrcnn",
                                extra=lambda log, t0: log.start("run_start", None, time_ms=t0 + 3))
    mllogs.write_system(top, "lost", "ssd", [20.0, 21.0, 22.0])
    os.remove(top / "Vendor" / "systems" / "lost.json")
    out = invoke("import", top, "--results", tmp_path / "res")
    assert out.exit_code == 0, out.output
    n_cut = len(cut.read_text().splitlines())
    assert "%s:%d: run_stop: missing" % (cut, n_cut) in out.output
    assert "%s:1: submission_benchmark: ssd in the maskrcnn folder" % other in out.output
    assert "%s:1: not an MLLOG result file" % (folder / "result_5.txt") in out.output
    assert "%s:" % twice in out.output and "run_start: a second run_start" in out.output
    assert "%s: missing: the system's description" % (top / "Vendor" / "systems" / "lost.json") in out.output
    runs = stored(tmp_path / "res")
    assert list(runs) == [("box", "maskrcnn")]
    assert [name for name, _ in runs[("box", "maskrcnn")]["results"]] == ["result_0.txt", "result_1.txt",
                                                                          "result_2.txt"]
    # four files dropped: more than the rule allows, so no score, and why
    assert runs[("box", "maskrcnn")]["score_minutes"] is None
    assert "4 results dropped" in runs[("box", "maskrcnn")]["score_note"]


def test_nothing_importable_exits_2_naming_each_file(tmp_path):
    top = tmp_path / "v2.0"
    folder = mllogs.write_system(top, "box", "ssd", [])
    mllogs.write_result(folder / "result_0.txt", stop=False)
    (folder / "result_1.txt").write_bytes(b"\x00\x01binary")
    out = invoke("import", top, "--results", tmp_path / "res")
    assert out.exit_code == 2
    assert "result_0.txt:" in out.output and "run_stop: missing" in out.output
    assert "result_1.txt:1: not a text file" in out.output
    assert "nothing imported: every one of 2 result files was refused" in out.output
    assert not (tmp_path / "res").exists()


def test_an_unknown_round_or_none_exits_2(round_dir, tmp_path):
    out = invoke("import", round_dir, "--round", "9.9", "--results", tmp_path / "res")
    assert out.exit_code == 2 and "round 9.9: mlperf-logging has no training rules for it" in out.output
    plain = tmp_path / "elsewhere"
    round_dir.rename(plain)
    out = invoke("import", plain / "Vendor", "--results", tmp_path / "res")
    assert out.exit_code == 2 and "give --round X.Y" in out.output


def test_one_result_file_is_a_run_of_one_trial_without_a_score(round_dir, tmp_path):
    one = round_dir / "Vendor" / "results" / "box_n1" / "maskrcnn" / "result_2.txt"
    out = invoke("import", one, "--results", tmp_path / "res")
    assert out.exit_code == 0, out.output
    run = stored(tmp_path / "res")[("box_n1", "maskrcnn")]
    assert [name for name, _ in run["results"]] == ["result_2.txt"]
    assert run["score_minutes"] is None and "one result file" in run["score_note"]
    assert run["results"][0][1].minutes == pytest.approx(29.0)


def test_importing_again_replaces_the_systems_run(round_dir, tmp_path):
    system = round_dir / "Vendor" / "results" / "box_n1"
    for _ in range(2):
        assert invoke("import", system, "--results", tmp_path / "res").exit_code == 0
    assert sorted(stored(tmp_path / "res")) == [("box_n1", "maskrcnn"), ("box_n1", "ssd")]


def test_training_logs_still_need_their_cell(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("Epoch [1][50/100]\n")
    out = invoke("import", log, "--results", tmp_path / "res")
    assert out.exit_code == 2 and "give --scenario-name, --model, --precision" in out.output
