"""The command line, driven through click's CliRunner."""
import json
import re
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "scrapers" / "fixtures"


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_help_lists_the_verbs():
    out = invoke("--help")
    assert out.exit_code == 0
    for verb in ("run", "report", "validate", "scrape", "frameworks", "platform"):
        assert re.search(r"^\s+%s\b" % verb, out.output, re.M), verb


def test_frameworks_lists_status():
    out = invoke("frameworks")
    assert out.exit_code == 0
    assert re.search(r"^calibrate\s+runs here", out.output, re.M)
    assert re.search(r"^detbench-trainer\s+runs here", out.output, re.M)


def test_platform_list_has_the_seed_platforms_and_this_host():
    out = invoke("platform", "list")
    assert out.exit_code == 0, out.output
    assert "P1: 2x Intel Xeon E5-2682 v4, 220 GB, 8x NVIDIA GeForce GTX 1080 Ti" in out.output
    assert "P2: 2x Intel Xeon Platinum 8163, 377 GB, 8x NVIDIA GeForce RTX 2080 Ti" in out.output
    assert re.search(r"^local: ", out.output, re.M)


def test_dry_run_prints_interleaved_trials_and_writes_nothing(write_scenario, tmp_path):
    scenario = write_scenario(
        "name: dry\nmatrix:\n  framework: [calibrate]\n  model: [retinanet, faster_rcnn]\n"
        "repeats: 2\nexclude:\n  - {model: faster_rcnn, precision: fp32, reason: just because}\n"
        "warmup: 1\nmeasure: 2\n")
    results = tmp_path / "results"
    out = invoke("run", "--scenario", str(scenario), "--dry-run", "--results", str(results))
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert re.fullmatch(r"# dry: 2 cells, 2 trials, backend local, order seed \d+", lines[0]), lines[0]
    assert lines[1] == "# NA calibrate/faster_rcnn/fp32/local/1/1: just because"
    assert lines[2].startswith("1 calibrate/retinanet/fp32/local/1/1 repeat 1: ")
    assert lines[3].startswith("2 calibrate/retinanet/fp32/local/1/1 repeat 2: ")
    assert "--iterations 3" in lines[2]
    assert not results.exists()


def test_run_needs_a_scenario_or_a_run_to_resume():
    out = invoke("run")
    assert out.exit_code == 2 and "exactly one of --scenario FILE or --resume RUN_ID" in out.output


def test_resume_of_unknown_run(tmp_path):
    (tmp_path / "r").mkdir()
    invoke("run", "--scenario", str(ROOT / "scenarios" / "calibrate.yaml"), "--dry-run")
    out = invoke("run", "--resume", "nope", "--results", str(tmp_path / "r"))
    assert out.exit_code == 2 and "no results store here" in out.output


def test_report_of_published_figures_without_any_results(tmp_path):
    out = invoke("report", "--platform", "P2", "--published", "simpledet-benchmark",
                 "--results", str(tmp_path / "none"))
    assert out.exit_code == 0, out.output
    assert "|RetinaNet|55.5(288ms)|40.1(399ms)|49.7(322ms)|" in out.output
    assert "|Mask R-CNN w/ FPN|313ms(0ms)|360ms(40ms)|331ms(12ms)|" in out.output


def test_report_with_nothing_to_show(tmp_path):
    out = invoke("report", "--platform", "P1", "--results", str(tmp_path))
    assert out.exit_code == 2 and "nothing to report for platform 'P1'" in out.output


def test_report_unknown_published_name():
    out = invoke("report", "--platform", "P2", "--published", "nope")
    assert out.exit_code == 2 and "known: nvidia-efficientdet, simpledet-benchmark, simpledet-paper" in out.output


def test_scrape_prints_one_json_object_per_iteration(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("hello\nDETBENCH_ITER {\"iteration\": 1, \"time_s\": 0.5, \"data_time_s\": null, \"images\": 2}\n"
                   "DETBENCH_ITER {\"iteration\": 2, \"time_s\": 0.25, \"data_time_s\": 0.01, \"images\": 2}\n"
                   "DETBENCH_ITER {broken\n")
    out = invoke("scrape", "--framework", "calibrate", str(log))
    assert out.exit_code == 0
    objs = [json.loads(l) for l in out.stdout.splitlines()]
    assert [(o["iteration"], o["time_s"], o["data_time_s"]) for o in objs] == [(1, 0.5, None), (2, 0.25, 0.01)]
    assert "log.txt: 1 line did not parse (line 4: unreadable DETBENCH_ITER line" in out.stderr


def test_scrape_unknown_framework(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text("x\n")
    out = invoke("scrape", "--framework", "nope", str(log))
    assert out.exit_code == 2 and "unknown framework 'nope'" in out.output


def test_foreign_store_is_refused_and_untouched(tmp_path):
    import sqlite3
    results = tmp_path / "results"
    results.mkdir()
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    before = (results / "detbench.sqlite").read_bytes()
    out = invoke("report", "--platform", "local", "--results", str(results))
    assert out.exit_code == 2 and "not a detbench results store" in out.output
    out = invoke("run", "--scenario", str(ROOT / "scenarios" / "calibrate.yaml"), "--results", str(results))
    assert out.exit_code == 2 and "not a detbench results store" in out.output
    assert (results / "detbench.sqlite").read_bytes() == before


def test_corrupted_store_is_refused_and_untouched(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "detbench.sqlite").write_bytes(b"garbage" * 100)
    out = invoke("run", "--scenario", str(ROOT / "scenarios" / "calibrate.yaml"), "--results", str(results))
    assert out.exit_code == 2 and "not a detbench results store" in out.output
    assert (results / "detbench.sqlite").read_bytes() == b"garbage" * 100
    assert not (results / "trials").exists()
