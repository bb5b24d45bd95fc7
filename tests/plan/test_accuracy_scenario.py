"""`mode: accuracy` scenarios: the accuracy section is checked against the matrix, each bad value
one line naming file, line and field (exit 2 through the CLI); the speed mode stays the default."""
import re

import pytest
from click.testing import CliRunner

from harness import launch
from harness.cli import main
from harness.errors import UserError
from harness.plan import learnable


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("learnable")
    learnable.make_learnable(root, images=2, val_images=1, size=(32, 32))
    return root


def text(data, **replace):
    base = """name: acc
mode: accuracy
matrix:
  framework: [detbench-trainer, torchvision]
  model: [retinanet]
batch_per_gpu: 2
input_size: [64, 64]
accuracy:
  data: DATA
  iterations: 100
  eval_every: 25
  lr_per_image: 0.0025
  warmup_iters: 10
  lr_steps: [80]
  seeds: [0, 1, 2]
  reference: torchvision
  targets:
    retinanet: {metric: bbox_AP50, value: 0.5}
""".replace("DATA", str(data))
    for old, new in replace.items():
        assert old.replace("_", " ") in base or old in base, old
        base = base.replace(old, new)
    return base


def error_of(tmp_path, body):
    path = tmp_path / "s.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(UserError) as info:
        launch.load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    return path, message


CASES = [   # (replace old -> new, line, field, words)
    ({"eval_every: 25": "eval_every: 500"}, 11, "accuracy.eval_every", "more than iterations"),
    ({"lr_steps: [80]": "lr_steps: [80, 40]"}, 14, "accuracy.lr_steps", "each after the one before"),
    ({"lr_steps: [80]": "lr_steps: [100]"}, 14, "accuracy.lr_steps.0", "not before the last iteration"),
    ({"seeds: [0, 1, 2]": "seeds: [0, 0]"}, 15, "accuracy.seeds", "seed twice"),
    ({"reference: torchvision": "reference: mmdetection"}, 16, "accuracy.reference", "not in the matrix"),
    ({"value: 0.5": "value: 1.5"}, 18, "accuracy.targets.retinanet.value", "less than or equal to 1"),
    ({"metric: bbox_AP50": "metric: segm_AP50"}, 18, "accuracy.targets.retinanet.metric", "no masks"),
    ({"    retinanet: {": "    faster_rcnn: {"}, 18, "accuracy.targets.faster_rcnn", "not in the matrix"),
    ({"batch_per_gpu: 2": "batch_per_gpu: 2\nwarmup: 5"}, 7, "warmup", "speed-mode key"),
    ({"  data: ": "  data: /nonexistent"}, 9, "accuracy.data", "make-coco --learnable"),
    ({"  warmup_iters: 10": "  warmup_iters: 10\n  roi_batch_per_image: 0"}, 14, "accuracy.roi_batch_per_image",
     "greater than or equal to 1"),
]


@pytest.mark.parametrize("replace,line,field,words", CASES, ids=[c[2] + "-" + c[3].split()[0] for c in CASES])
def test_bad_accuracy_value_is_one_line_at_its_field(tmp_path, data, replace, line, field, words):
    body = text(data, **replace)
    if "  data: /nonexistent" in body:
        body = re.sub(r"  data: /nonexistent\S*", "  data: /nonexistent", body)
    path, message = error_of(tmp_path, body)
    assert message.startswith("%s:%d: %s: " % (path, line, field)), message
    assert words in message


def test_a_model_without_weights_is_refused_at_the_matrix(tmp_path, data):
    path, message = error_of(tmp_path, text(data))
    assert message.startswith("%s:5: matrix.model.0: retinanet has no weights" % path), message
    assert "weights make retinanet --depth 18" in message


def test_accuracy_section_in_a_speed_scenario_is_an_error(tmp_path, data):
    body = text(data).replace("mode: accuracy\n", "")
    path, message = error_of(tmp_path, body)
    assert message.startswith("%s:7: accuracy: an accuracy key" % path), message


def test_accuracy_mode_without_its_section_is_an_error(tmp_path, data):
    body = text(data).split("accuracy:\n")[0]
    path, message = error_of(tmp_path, body)
    assert message.startswith("%s:2: mode: an accuracy scenario has an accuracy: section" % path), message


def test_cli_validate_exits_2_with_the_line(tmp_path, data):
    path = tmp_path / "s.yaml"
    path.write_text(text(data, **{"eval_every: 25": "eval_every: 500"}), encoding="utf-8")
    out = CliRunner().invoke(main, ["validate", str(path)])
    assert out.exit_code == 2
    assert "%s:11: accuracy.eval_every:" % path in out.output


def test_speed_mode_stays_the_default(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nmatrix:\n  framework: [calibrate]\n  model: [retinanet]\n", encoding="utf-8")
    sc = launch.load_scenario(path)
    assert sc.mode == "train" and sc.accuracy is None


def test_an_mmdetection_bf16_cell_is_refused_at_its_precision(tmp_path, data):
    body = (text(data).replace("[detbench-trainer, torchvision]", "[detbench-trainer, mmdetection]")
            .replace("reference: torchvision", "reference: mmdetection")
            .replace("  model: [retinanet]\n", "  model: [retinanet]\n  precision: [fp32, bf16]\n"))
    from harness.plan import weights
    if not weights.available():
        pytest.skip("making a weights file needs torch and torchvision")
    weights.make("retinanet", tmp_path / "w.pt", seed=0, depth=18)
    body += "weights: {retinanet: %s}\n" % (tmp_path / "w.pt")
    path, message = error_of(tmp_path, body)
    assert message.startswith("%s:6: matrix.precision.1: mmdetection has no accuracy recipe for retinanet bf16"
                              % path), message
