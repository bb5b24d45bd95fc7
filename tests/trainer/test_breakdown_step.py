"""The bundled trainer's step breakdown (harness/drivers/breakdown.py through its one call in
engine.train): asked for by the trial's environment, its phases add up to the step it logged."""
import io
import json

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path  # noqa: E402

from harness import jsonlog  # noqa: E402
from harness.measure import breakdown, ingest  # noqa: E402


def train(monkeypatch, config, model_name, iterations, env=True, sets=()):
    from harness.trainer import data, engine
    from harness.trainer.config import apply_overrides, load_config_module
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["train.max_iter=%d" % iterations] + list(sets))
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = engine.prepare_model(module.build_detector(cfg), cfg, device, 1)
    if env:
        monkeypatch.setenv(jsonlog.BREAKDOWN_ENV, "detbench-trainer/" + model_name)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)      # the hooks print where the trainer's lines go
    engine.train(model, data.build_batches(cfg, device, 0, 1), cfg, device, 1, out=out)
    return out.getvalue()


def test_the_phases_add_up_to_the_measured_step_within_3_percent(monkeypatch, tmp_path):
    text = train(monkeypatch, "faster_tiny", "faster_rcnn", 5)
    (tmp_path / "log.txt").write_text(text)
    (tmp_path / "trial.json").write_text(json.dumps({"exit_code": 0, "end_wall": 1.0}))
    result = ingest.analyse(str(tmp_path), "detbench-jsonl", 2, 3, 2)
    assert result.status == "done", result.reason
    assert result.scrape_errors == 0
    got = result.breakdown
    assert got["mismatch"] is None, got
    assert abs(got["hooked_step_s"] - result.iteration_time_s) <= 0.03 * result.iteration_time_s
    assert breakdown.phase_sum(got) == pytest.approx(result.iteration_time_s)
    assert got["idle"] == []
    for name in ("backbone", "fpn", "rpn", "roi sampling", "roi pooling", "box head"):
        assert got["phases"]["%s forward" % name] > 0, name
    assert got["phases"]["backbone backward"] > 0 and got["phases"]["optimizer"] > 0
    assert got["phases"]["data"] == pytest.approx(result.data_time_s)


def test_without_the_variable_the_trainer_prints_no_breakdown(monkeypatch):
    monkeypatch.delenv(jsonlog.BREAKDOWN_ENV, raising=False)
    text = train(monkeypatch, "retina_tiny", "retinanet", 2, env=False)
    assert jsonlog.ITER_PREFIX in text and jsonlog.BREAKDOWN_PREFIX not in text


def test_a_captured_step_says_in_one_line_that_it_runs_no_hooks(monkeypatch):
    # on the CPU the static-input step runs uncaptured (engine.train), as the tests of graphs.py run it
    text = train(monkeypatch, "retina_tiny", "retinanet", 2, sets=["train.cuda_graph=true"])
    lines = [line for line in text.splitlines() if line.startswith(jsonlog.BREAKDOWN_PREFIX)]
    assert [jsonlog.read_breakdown(line[len(jsonlog.BREAKDOWN_PREFIX):]) for line in lines] == [
        (None, None, "detbench-trainer retinanet: train.cuda_graph's replays run no hooks")]
    assert text.count(jsonlog.ITER_PREFIX) == 2
