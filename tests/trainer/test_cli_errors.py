"""Bad input gives one clear line on stderr and a non-zero exit (module run as a subprocess, or in
this process where the host's hardware is stood in for), before anything is built."""
import json
import re

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
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


def test_tf32_on_cpu_is_refused_not_run_as_fp32():
    proc = run_module([config_path("retina_tiny"), "--set", "train.tf32=true", "--set", "train.device=cpu"])
    assert proc.returncode == 2 and "DETBENCH_META" not in proc.stdout
    line = _error_line(proc)
    assert "train.tf32=true needs a CUDA device" in line and "plain fp32" in line


def test_a_lever_this_device_has_no_kernel_for_is_one_line_before_anything_is_built(train_inprocess, monkeypatch):
    from harness.trainer import train
    built = []
    monkeypatch.setattr(train, "fused_sgd_devices", lambda torch: ("cuda",))     # a torch without the CPU kernel
    monkeypatch.setattr(train, "load_initial_weights", lambda model, cfg: built.append(model))
    rc, iters, metas, err = train_inprocess("faster_tiny", "train.device=cpu", "train.fused_sgd=true")
    assert rc == 2 and not iters and not metas and not built
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == ["error: train.fused_sgd=true: torch %s has no fused SGD kernel for cpu devices; set "
                      "train.fused_sgd=false" % torch.__version__]
    rc, iters, _, err = train_inprocess("faster_tiny", "train.device=cpu", "train.fused_sgd=false", "train.max_iter=1")
    assert rc == 0 and len(iters) == 1 and len(built) == 1, err


def gpu(capability, bf16):
    """A stand-in for torch on a host whose GPU has this compute capability and bf16 support."""
    import types
    cuda = types.SimpleNamespace(get_device_capability=lambda device=None: capability,
                                 is_bf16_supported=lambda *a, **k: bf16)
    return types.SimpleNamespace(cuda=cuda, device=torch.device, backends=torch.backends,
                                 __version__=torch.__version__)


def test_a_gpu_without_tf32_or_bf16_refuses_them_and_no_option_emulates_bf16_there():
    from harness.trainer.config import apply_overrides, load_config_module
    from harness.trainer.train import hardware_refusal
    cfg = load_config_module(config_path("retina_tiny")).CONFIG

    def refusal(torch, *sets):
        return hardware_refusal(torch, apply_overrides(cfg, list(sets)), "cuda")
    volta, ampere = gpu((7, 0), bf16=False), gpu((8, 0), bf16=True)
    assert "compute capability 8.0 or newer; this one is 7.0" in refusal(volta, "train.tf32=true")
    assert refusal(ampere, "train.tf32=true") is None
    for sets in (("train.precision=bf16",), ("train.precision=bf16", "train.allow_emulated_bf16=true")):
        assert "train.precision=bf16 on a CUDA device without bf16 support" in refusal(volta, *sets)
        assert refusal(ampere, *sets) is None
    assert refusal(volta, "train.precision=fp16") is None


def test_nan_loss_stops_with_exit_3():
    proc = run_module([config_path("retina_tiny"), "--set", "train.max_iter=5",
                       "--set", "train.lr=1e30"])
    assert proc.returncode == 3
    line = _error_line(proc)
    assert re.fullmatch(r"error: loss is (nan|inf|-inf) \(not finite\) at iteration \d: "
                        r"loss_retina_\w+ (nan|inf|-inf)(, loss_retina_\w+ (nan|inf|-inf))?", line), line
