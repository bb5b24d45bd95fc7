"""The learning-rate schedule: pure functions, config checks, and the lr the trainer logs."""
import dataclasses
import math

import pytest

pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path, run_module  # noqa: E402

from harness.trainer import schedule  # noqa: E402
from harness.trainer.config import ConfigError, TrainConfig, apply_overrides, load_config_module  # noqa: E402


def old_warmup_lr(iteration, base_lr, t):
    """The trainer's learning rate before schedules existed: warmup, then flat."""
    if iteration >= t.warmup_iters:
        return base_lr
    alpha = iteration / t.warmup_iters
    return base_lr * (t.warmup_factor * (1 - alpha) + alpha)


def test_warmup_is_linear_from_the_factor_to_one():
    assert schedule.warmup_factor(0, 10, 0.25) == 0.25
    assert schedule.warmup_factor(5, 10, 0.25) == pytest.approx(0.625)
    assert schedule.warmup_factor(10, 10, 0.25) == 1.0
    assert schedule.warmup_factor(0, 0, 0.25) == 1.0


def test_one_x_steps_are_epochs_8_and_11_of_12():
    assert schedule.default_steps(90000) == (60000, 82500)
    assert schedule.default_steps(12) == (8, 11)
    assert schedule.default_steps(5) == (3, 4)
    assert schedule.default_steps(2) == (1,)          # both land on the same iteration
    assert schedule.default_steps(1) == ()            # nothing left to decay


def test_step_decay_counts_the_steps_reached():
    steps = (4, 7)
    got = [schedule.step_decay(i, steps, 0.5) for i in range(9)]
    assert got == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]


def test_one_x_config_decays_at_two_thirds_and_eleven_twelfths():
    t = TrainConfig(max_iter=90000, warmup_iters=500)
    assert schedule.resolved_steps(t) == (60000, 82500)
    assert schedule.lr_factor(59999, t) == 1.0
    assert schedule.lr_factor(60000, t) == pytest.approx(0.1)
    assert schedule.lr_factor(82499, t) == pytest.approx(0.1)
    assert schedule.lr_factor(82500, t) == pytest.approx(0.01)
    assert schedule.lr_factor(89999, t) == pytest.approx(0.01)


def test_explicit_steps_and_gamma():
    t = TrainConfig(max_iter=100, warmup_iters=0, steps=(10, 50), gamma=0.5)
    assert schedule.resolved_steps(t) == (10, 50)
    assert [schedule.lr_factor(i, t) for i in (0, 9, 10, 49, 50, 99)] == [1, 1, 0.5, 0.5, 0.25, 0.25]


def test_cosine_runs_from_one_towards_zero():
    t = TrainConfig(max_iter=100, warmup_iters=0, schedule="cosine")
    got = [schedule.lr_factor(i, t) for i in range(100)]
    assert got[0] == 1.0 and got[50] == pytest.approx(0.5)
    assert all(a > b for a, b in zip(got, got[1:]))
    assert 0 < got[-1] < 1e-3
    assert schedule.resolved_steps(t) == ()


def test_constant_is_warmup_only():
    t = TrainConfig(max_iter=100, warmup_iters=10, schedule="constant")
    assert [schedule.lr_factor(i, t) for i in (10, 50, 99)] == [1.0, 1.0, 1.0]


def test_warmup_multiplies_the_decay():
    t = TrainConfig(max_iter=100, warmup_iters=20, warmup_factor=0.5, steps=(10,), gamma=0.1)
    assert schedule.lr_factor(10, t) == pytest.approx(0.1 * (0.5 * 0.5 + 0.5))
    c = TrainConfig(max_iter=100, warmup_iters=20, warmup_factor=0.5, schedule="cosine")
    assert schedule.lr_factor(10, c) == pytest.approx(0.75 * schedule.cosine_decay(10, 100))


def test_warmup_lr_is_unchanged_bit_for_bit():
    from harness.trainer import engine
    t = TrainConfig(max_iter=3000, warmup_iters=500, warmup_factor=1.0 / 3)
    steps = schedule.resolved_steps(t)
    for i in list(range(0, 600, 7)) + [1999]:
        assert engine.lr_at(i, 0.0025, t, steps) == old_warmup_lr(i, 0.0025, t), i


@pytest.mark.parametrize("sets, key", [
    (("train.max_iter=8", "train.steps=[3,8]"), "train.steps"),
    (("train.max_iter=8", "train.steps=3,9"), "train.steps"),
    (("train.steps=4,2",), "train.steps"),
    (("train.steps=0,2",), "train.steps"),
    (("train.schedule=cosine", "train.steps=2"), "train.steps"),
    (("train.schedule=linear",), "train.schedule"),
    (("train.gamma=0",), "train.gamma"),
    (("train.clip_grad_norm=-1",), "train.clip_grad_norm"),
])
def test_bad_schedules_name_the_key(sets, key):
    base = load_config_module(config_path("faster_tiny")).CONFIG
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        apply_overrides(base, list(sets))
    assert "\n" not in str(err.value)


def test_steps_accept_brackets_and_commas():
    base = load_config_module(config_path("faster_tiny")).CONFIG
    cfg = apply_overrides(base, ["train.max_iter=100", "train.steps=[60, 80]"])
    assert cfg.train.steps == (60, 80)
    assert apply_overrides(base, ["train.max_iter=100", "train.steps=60,80"]).train.steps == (60, 80)


def test_a_shorter_run_makes_config_steps_invalid():
    base = load_config_module(config_path("faster_tiny")).CONFIG
    base = dataclasses.replace(base, train=dataclasses.replace(base.train, max_iter=100, steps=(60, 80)))
    with pytest.raises(ConfigError, match=r"train\.steps=60,80 has a step at or past the last iteration"):
        apply_overrides(base, ["train.max_iter=80"])


def test_a_step_past_the_end_exits_2_before_training():
    proc = run_module([config_path("retina_tiny"), "--set", "train.max_iter=5", "--set", "train.steps=2,5"])
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "train.steps" in lines[0], proc.stderr
    assert "DETBENCH_ITER" not in proc.stdout


def test_the_trainer_logs_the_scheduled_lr(train_inprocess):
    rc, iters, metas, err = train_inprocess("retina_tiny", "train.max_iter=6", "train.warmup_iters=2",
                                            "train.warmup_factor=0.5", "train.steps=3,4", "train.gamma=0.5",
                                            "train.lr=0.02", "data.input_size=64x64")
    assert rc == 0, err
    base = 0.02 * 2 / 2   # per lr_reference_batch=2 images, 2 images per iteration
    want = [base * 0.5, base * 0.75, base, base * 0.5, base * 0.25, base * 0.25]
    assert [r["lr"] for r in iters] == pytest.approx(want)
    assert metas[0]["schedule"] == "step" and metas[0]["steps"] == [3, 4] and metas[0]["gamma"] == 0.5


def test_the_default_schedule_of_a_run_is_1x_scaled(train_inprocess):
    rc, iters, metas, err = train_inprocess("retina_tiny", "train.max_iter=12", "data.input_size=64x64")
    assert rc == 0, err
    lrs = [r["lr"] for r in iters]
    assert metas[0]["steps"] == [8, 11]
    assert lrs[:8] == [lrs[0]] * 8
    assert lrs[8:11] == pytest.approx([lrs[0] * 0.1] * 3) and lrs[11] == pytest.approx(lrs[0] * 0.01)
    assert all(math.isfinite(r["loss"]) for r in iters)
