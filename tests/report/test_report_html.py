"""The HTML report: seed tables, figures, published beside measured, nothing injectable."""
import re
import sqlite3

import pytest
from click.testing import CliRunner

from harness.plan import scenario as scenario_mod
from harness.cli import main
from harness.measure.result import TrialResult
from harness.results.store import Store
from tests.support.htmlpage import Page

INJECT = """\
name: inject
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn]
  precision: [fp32]
  platform: [local]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 1
measure: 2
repeats: 1
timeout_s: 30
exclude:
  - {model: faster_rcnn, reason: "<script>alert('exclude')</script>"}
extra_args:
  calibrate: [--iterations, "<script>alert('log')</script>"]
"""


def invoke(*args):
    out = CliRunner().invoke(main, list(args))
    assert out.exit_code == 0, out.output
    return out.output


def test_nothing_from_a_log_or_a_scenario_becomes_markup(tmp_path):
    (tmp_path / "s.yaml").write_text(INJECT)
    results = tmp_path / "results"
    invoke("run", "--scenario", str(tmp_path / "s.yaml"), "--results", str(results))
    db = sqlite3.connect(str(results / "detbench.sqlite"))
    with db:   # a scenario name no YAML would pass, as a hostile store could hold it
        db.execute("UPDATE runs SET scenario = ?", ("<script>alert('scenario')</script>",))
    db.close()
    page = invoke("report", "--platform", "local", "--results", str(results), "--format", "html")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#39;exclude&#39;)&lt;/script&gt;" in page
    assert "invalid int value: &#34;&lt;script&gt;alert(&#39;log&#39;)&lt;/script&gt;&#34;" in page
    assert "&lt;script&gt;alert(&#39;scenario&#39;)&lt;/script&gt;" in page
    parsed = Page(page)
    assert "script" not in parsed.tags
    assert "NA2" in parsed.cells or "NA1" in parsed.cells          # NA cells with their footnote marks


def synthetic_store(root, peak_mem=True):
    """A finished run on P2 with two frameworks, two repeats and per-iteration records."""
    sc = scenario_mod.Scenario.model_validate({
        "name": "synthetic", "matrix": {"framework": ["calibrate"], "model": ["retinanet"]},
        "warmup": 2, "measure": 6, "repeats": 2})
    store = Store(root)
    cells = [dict(cell_key="%s/%s/fp32/P2/8/1" % (fw, m), framework=fw, model=m, precision="fp32", platform="P2",
                  gpus=8, nodes=1, batch_per_gpu=2, images_per_iteration=16, excluded=None)
             for fw in ("detbench-trainer", "calibrate") for m in ("retinanet", "faster_rcnn")]
    trials = [(i + 1, c["cell_key"], rep, ["true"]) for i, (rep, c) in enumerate(
        [(r, c) for r in (1, 2) for c in cells])]
    store.create_run("run-1", sc.name, "s.yaml", sc.model_dump_json(), "local", {"cpu": {"model": "Xeon <b>"}},
                     cells, trials)
    speed = {"detbench-trainer/retinanet": 0.29, "detbench-trainer/faster_rcnn": 0.26, "calibrate/retinanet": 0.40,
             "calibrate/faster_rcnn": 0.33}
    for t in store.trials("run-1"):
        it = speed["/".join(t["cell_key"].split("/")[:2])] * (1 + 0.01 * t["repeat"])
        logs_memory = peak_mem and t["cell_key"].startswith("detbench-trainer/")
        store.finish_trial(t["id"], TrialResult(
            status="done", throughput=16 / it, observed=16 / it, iteration_time_s=it, data_time_s=0.01,
            exact=True, peak_mem_mb=5000.0 + 100 * t["seq"] if logs_memory else None, records=8,
            peak_rss_mb=3000.0 + 100 * t["seq"] if peak_mem else None, settings={"images_per_device": 2},
            iterations=tuple((k, it * (3 if k <= 2 else 1), 0.01, None) for k in range(1, 9))))
    store.close()


def test_published_figures_sit_beside_measured_ones_and_all_figures_are_there(tmp_path):
    synthetic_store(tmp_path / "results")
    page = invoke("report", "--platform", "P2", "--results", str(tmp_path / "results"),
                  "--published", "simpledet-benchmark", "--format", "html")
    parsed = Page(page)
    assert "55.5(288ms)" in parsed.cells                             # published SimpleDet RetinaNet
    assert "%.1f(%.0fms)" % (16 / (0.29 * 1.015), 0.29 * 1.015 * 1000) in parsed.cells  # measured median
    assert "simpledet (published)" in page
    images = [i for i in parsed.imgs if i["src"].startswith("data:image/png;base64,")]
    assert len(images) == len(parsed.imgs)                            # self-contained: no external images
    alts = [i["alt"] for i in images]
    assert "throughput, P2 FP32" in alts and "peak resident memory of the trial's process tree" in alts
    assert "data time share" in alts
    assert sum(a.startswith("iteration trace ") for a in alts) == 4
    assert 'id="scaling"' not in page                                 # one device count only
    assert "iterations 3-8 measured, 2 warmup" in page
    assert "Xeon &lt;b&gt;" in page                                   # the host fingerprint, escaped
    assert re.search(r"<dt>data-bound</dt><dd>data-bound: data time is more than 10%", page)


def test_memory_figure_only_when_memory_was_recorded(tmp_path):
    synthetic_store(tmp_path / "results", peak_mem=False)
    page = invoke("report", "--platform", "P2", "--results", str(tmp_path / "results"), "--format", "html")
    assert 'id="memory"' not in page and 'id="traces"' in page


def test_html_of_published_figures_alone(tmp_path):
    page = invoke("report", "--platform", "P2", "--published", "simpledet-benchmark", "--format", "html",
                  "--results", str(tmp_path / "none"))
    parsed = Page(page)
    assert "313ms(0ms)" in parsed.cells and "55.5(288ms)" in parsed.cells
    assert any(i["alt"] == "throughput, P2 FP16" for i in parsed.imgs)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_out_writes_a_file_and_says_so(tmp_path, fmt):
    target = tmp_path / ("r." + fmt)
    out = CliRunner().invoke(main, ["report", "--platform", "P2", "--published", "simpledet-benchmark",
                                    "--format", fmt, "--out", str(target), "--results", str(tmp_path / "none")])
    assert out.exit_code == 0 and "wrote %s" % target in out.output
    assert "55.5(288ms)" in target.read_text()
