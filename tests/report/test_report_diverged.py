"""A cell whose training diverged is NA with the divergence, alike for the bundled trainer (which stops
itself) and a rival that goes on printing a NaN loss (mmdetection 3.x), and the other cells keep their
figures. The trials go from their logs through ingest into the store, as a run's do."""
import json
import math

from click.testing import CliRunner

from harness import api, jsonlog
from harness.cli import main
from harness.measure import ingest
from harness.plan import scenario as scenario_mod
from harness.results.store import Store

WARMUP, MEASURE = 2, 6


def trainer_lines(stop_at=None):
    """DETBENCH_ITER lines; where stop_at is given, the trainer's NonFiniteLoss line there (exit 3)."""
    last = WARMUP + MEASURE if stop_at is None else stop_at - 1
    lines = [jsonlog.iter_line(i, 0.5, 0.01, 2, loss=2.0 - 0.01 * i) for i in range(1, last + 1)]
    if stop_at is not None:
        lines.append("error: loss is nan (not finite) at iteration %d: loss_cls nan, loss_box_reg 0.41" % stop_at)
    return lines


def mmengine_lines(nan_from=None):
    """mmengine's LogProcessor text, one line per iteration (interval 1); the loss printed as Python
    formats it, 'nan' from `nan_from` on."""
    out = []
    for i in range(1, WARMUP + MEASURE + 1):
        loss = "nan" if nan_from is not None and i >= nan_from else "%.4f" % (2.0 - 0.01 * i)
        out.append("12/01 10:00:%02d - mmengine - INFO - Iter(train) [%2d/%d]  lr: 2.5000e-03  eta: 0:00:10  "
                   "time: 0.6000  data_time: 0.0100  memory: 0  loss: %s  loss_rpn_cls: %s  loss_bbox: 0.0871"
                   % (i, i, WARMUP + MEASURE, loss, loss))
    return out


CELLS = {   # framework -> (scraper, each repeat's (log lines, exit code))
    "detbench-trainer": ("detbench-jsonl", [(trainer_lines(stop_at=5), 3), (trainer_lines(stop_at=5), 3)]),
    "mmdetection": ("mmdet-v3", [(mmengine_lines(nan_from=5), 0), (mmengine_lines(), 0)]),
    "torchvision": ("detbench-jsonl", [(trainer_lines(), 0), (trainer_lines(), 0)]),
}


def store_run(root):
    sc = scenario_mod.Scenario.model_validate({
        "name": "diverging", "matrix": {"framework": ["calibrate"], "model": ["mask_rcnn"]},
        "warmup": WARMUP, "measure": MEASURE, "repeats": 2})
    store = Store(root)
    cells = [dict(cell_key="%s/mask_rcnn/fp32/local/1/1" % fw, framework=fw, model="mask_rcnn", precision="fp32",
                  platform="local", gpus=1, nodes=1, batch_per_gpu=2, images_per_iteration=2, excluded=None)
             for fw in CELLS]
    trials = [(i + 1, c["cell_key"], rep, ["true"]) for i, (rep, c) in enumerate(
        [(r, c) for r in (1, 2) for c in cells])]
    store.create_run("run-1", sc.name, "s.yaml", sc.model_dump_json(), "local", {}, cells, trials)
    for t in store.trials("run-1"):
        scraper, repeats = CELLS[t["cell_key"].split("/")[0]]
        lines, code = repeats[t["repeat"] - 1]
        folder = store.trial_dir(t["id"])
        folder.mkdir(parents=True)
        (folder / "log.txt").write_text("".join(line + "\n" for line in lines))
        (folder / "trial.json").write_text(json.dumps({"exit_code": code, "end_wall": 1.0}))
        store.finish_trial(t["id"], ingest.analyse(str(folder), scraper, WARMUP, MEASURE, 2))
    store.close()


def test_a_diverged_cell_is_na_with_its_divergence_for_every_framework_alike(tmp_path):
    store_run(tmp_path / "results")
    out = CliRunner().invoke(main, ["report", "--platform", "local", "--results", str(tmp_path / "results")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    row = next(k for k, line in enumerate(lines) if line.startswith("|Mask R-CNN"))
    cells = dict(zip(lines[row - 2].strip("|").split("|")[1:], lines[row].strip("|").split("|")[1:]))
    assert cells["detbench-trainer (PyTorch)"].startswith("NA") and cells["mmdetection"].startswith("NA")
    assert cells["torchvision"] == "4.00(500ms)"       # its figure kept: 2 images per 0.5 s
    assert "diverged (2 of 2 trials): loss nan at iteration 5 (error: loss is nan (not finite) at iteration 5" \
        in out.output
    # one repeat of mmdetection diverged: the other's figure does not stand for the cell
    assert "diverged (1 of 2 trials): loss nan at iteration 5 (not finite; log.txt line 5)" in out.output


def test_the_api_gives_a_diverged_cell_no_figure_as_the_report_gives_it_none(tmp_path):
    store_run(tmp_path / "results")
    with api.open(tmp_path / "results") as res:
        cells = res.cells().set_index("framework")
    assert math.isnan(cells.loc["mmdetection", "throughput"]) and cells.loc["mmdetection", "n"] == 1
    assert math.isnan(cells.loc["detbench-trainer", "throughput"])
    assert cells.loc["torchvision", "throughput"] == 4.0
