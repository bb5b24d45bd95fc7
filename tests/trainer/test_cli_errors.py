"""Bad input gives one clear line on stderr and a non-zero exit (module run as a subprocess)."""
import json

import pytest

pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path, run_module  # noqa: E402


def _error_line(proc):
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_unknown_set_key():
    proc = run_module([config_path("retina_tiny"), "--set", "train.max_iters=3"])
    assert proc.returncode == 2
    assert "train.max_iters" in _error_line(proc)


def test_bad_set_value_names_key():
    proc = run_module([config_path("retina_tiny"), "--set", "train.precision=fp8"])
    assert proc.returncode == 2
    assert "train.precision" in _error_line(proc)
    proc = run_module([config_path("retina_tiny"), "--set", "data.input_size=big"])
    assert proc.returncode == 2
    assert "data.input_size" in _error_line(proc)


def test_missing_dataset(tmp_path):
    proc = run_module([config_path("faster_tiny"), "--set", "data.source=coco",
                       "--set", f"data.coco_json={tmp_path / 'nope.json'}",
                       "--set", f"data.coco_images={tmp_path}"])
    assert proc.returncode == 2
    line = _error_line(proc)
    assert "not found" in line and "nope.json" in line


def test_missing_image_dir(tiny_coco, tmp_path):
    ann, _ = tiny_coco
    proc = run_module([config_path("faster_tiny"), "--set", "data.source=coco",
                       "--set", f"data.coco_json={ann}", "--set", f"data.coco_images={tmp_path / 'x'}"])
    assert proc.returncode == 2
    assert "directory not found" in _error_line(proc)


@pytest.mark.parametrize("content", ["[1, 2, 3]", "not json at all", json.dumps({"images": []})])
def test_not_a_coco_file(tmp_path, content):
    bad = tmp_path / "ann.json"
    bad.write_text(content)
    proc = run_module([config_path("faster_tiny"), "--set", "data.source=coco",
                       "--set", f"data.coco_json={bad}", "--set", f"data.coco_images={tmp_path}"])
    assert proc.returncode == 2
    assert "not a COCO annotation file" in _error_line(proc)


def test_config_that_does_not_build(tmp_path):
    cfg = tmp_path / "broken.py"
    cfg.write_text("raise RuntimeError('boom')\n")
    proc = run_module([str(cfg)])
    assert proc.returncode == 2
    line = _error_line(proc)
    assert "does not build" in line and "boom" in line


def test_fp16_on_cpu_is_refused():
    proc = run_module([config_path("retina_tiny"), "--set", "train.precision=fp16",
                       "--set", "train.device=cpu"])
    assert proc.returncode == 2
    assert "fp16" in _error_line(proc)


def test_nan_loss_stops_with_exit_3():
    proc = run_module([config_path("retina_tiny"), "--set", "train.max_iter=5",
                       "--set", "train.lr=1e30"])
    assert proc.returncode == 3
    line = _error_line(proc)
    assert "iteration" in line and "not finite" in line
