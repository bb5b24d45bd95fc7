"""`python -m harness.trainer.profile`: where a step's time goes, the trainer and torchvision
side by side on the same batch and weights."""
import re

import pytest

pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path  # noqa: E402
from harness.trainer import profile  # noqa: E402

SMALL = ["--set", "data.input_size=96x128", "--set", "data.images_per_device=1", "--steps", "1", "--warmup", "0"]


def rows_of(text):
    return {m.group(1): m.group(2).split(" | ") for m in re.finditer(r"^\| (\S[^|]*?) \| (.*) \|$", text, re.M)}


@pytest.mark.slow
@pytest.mark.parametrize("config,phases", [
    ("retina_r50v1_fpn_1x", {"backbone", "fpn", "head", "anchors+loss", "backward", "optimizer"}),
    ("mask_r50v1_fpn_1x", {"backbone", "fpn", "rpn", "roi ops", "roi heads", "roi rest", "backward"}),
])
def test_both_sides_get_every_phase_of_their_model(capsys, config, phases):
    assert profile.main([config_path(config)] + SMALL) == 0
    rows = rows_of(capsys.readouterr().out)
    assert rows["phase"] == ["detbench-trainer ms", "torchvision ms"]
    for phase in phases:
        assert all(float(v) >= 0 for v in rows[phase]), (phase, rows[phase])
    assert rows["transform"][0] == "-" and float(rows["transform"][1]) > 0   # torchvision's own transform
    steps = [float(v.strip("*")) for v in rows["**step**"]]
    assert all(s > 0 for s in steps)
    assert all(float(rows["backward"][i]) < steps[i] for i in range(2))


def test_a_non_standard_config_profiles_the_trainer_alone(capsys):
    assert profile.main([config_path("faster_tiny"), "--set", "data.input_size=64x64"] + SMALL[2:]) == 0
    out = capsys.readouterr().out
    assert rows_of(out)["phase"] == ["detbench-trainer ms"] and "the trainer's side alone" in out


def test_a_bad_override_is_one_line(capsys):
    assert profile.main([config_path("faster_tiny"), "--set", "model.no_such_key=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err


@pytest.mark.parametrize("fused", [False, True])
def test_the_trainer_side_steps_with_the_trainer_s_optimizer(monkeypatch, capsys, fused):
    import torch
    seen = []

    class Recording(torch.optim.SGD):
        def __init__(self, params, **options):
            seen.append(bool(options.get("fused")))
            super().__init__(params, **options)
    monkeypatch.setattr(torch.optim, "SGD", Recording)
    argv = [config_path("retina_tiny"), "--set", "train.fused_sgd=%s" % str(fused).lower(), "--trainer-only"]
    assert profile.main(argv + SMALL[2:]) == 0
    assert seen == [fused]


def test_the_profile_runs_in_the_trainer_s_precision_and_says_its_scope(capsys):
    # bf16 autocast on any CPU (emulated where it has no kernels: tiny shapes keep it cheap)
    sets = ["--set", "train.device=cpu", "--set", "train.precision=bf16", "--set", "train.allow_emulated_bf16=true"]
    assert profile.main([config_path("retina_tiny"), "--set", "data.input_size=64x64"] + sets + SMALL[2:]) == 0
    out = capsys.readouterr().out
    scope = out.splitlines()[0]
    assert scope.startswith("cpu (") and scope.endswith(", bf16, 64x64, batch 1: median of 1 steps after 0 warm-up")
    assert float(rows_of(out)["**step**"][0].strip("*")) > 0


def test_a_precision_this_hardware_cannot_run_is_refused_in_one_line(capsys):
    assert profile.main([config_path("retina_tiny"), "--set", "train.device=cpu", "--set", "train.precision=fp16"]
                        + SMALL[2:]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: train.precision=fp16 needs a CUDA device")


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device here")
def test_on_a_gpu_both_sides_profile_in_fp16_with_loss_scaling(capsys):
    sets = ["--set", "train.device=cuda", "--set", "train.precision=fp16", "--set", "model.sync_free=true"]
    assert profile.main([config_path("mask_r50v1_fpn_1x")] + sets + SMALL) == 0
    out = capsys.readouterr().out
    assert ", fp16, 96x128, batch 1" in out.splitlines()[0]
    assert all(float(v.strip("*")) > 0 for v in rows_of(out)["**step**"])
