"""Learning-rate schedule: pure functions of the 0-based iteration index.

lr(i) = base_lr * warmup(i) * decay(i). Warmup is linear from `warmup_factor` to 1 over
`warmup_iters` iterations. Decay is one of

- step: multiplied by `gamma` at each step. A step s counts iterations done: the lr of
  iteration index s (logged as iteration s + 1) is the first decayed one. Without explicit
  steps the "1x" steps apply: epochs 8 and 11 of 12 scaled to max_iter, i.e.
  max_iter * 8 // 12 and max_iter * 11 // 12.
- cosine: 0.5 * (1 + cos(pi * i / max_iter)), from 1 down towards 0.
- constant: 1.
"""
import bisect
import math

SCHEDULES = ("step", "cosine", "constant")
ONE_X_FRACTIONS = ((8, 12), (11, 12))   # epochs 8 and 11 of 12


def warmup_factor(iteration, warmup_iters, factor):
    """Linear warmup: `factor` at iteration 0, 1 from iteration `warmup_iters` on."""
    if iteration >= warmup_iters:
        return 1.0
    alpha = iteration / warmup_iters
    return factor * (1 - alpha) + alpha


def default_steps(max_iter):
    """The 1x steps scaled to max_iter; those that would fall outside 1..max_iter-1 are left out."""
    steps = sorted({max_iter * num // den for num, den in ONE_X_FRACTIONS})
    return tuple(s for s in steps if 0 < s < max_iter)


def step_decay(iteration, steps, gamma):
    """gamma to the number of steps at or before `iteration` (steps sorted ascending)."""
    return gamma ** bisect.bisect_right(steps, iteration)


def cosine_decay(iteration, max_iter):
    return 0.5 * (1.0 + math.cos(math.pi * iteration / max_iter))


def resolved_steps(t):
    """The steps a TrainConfig trains with (empty unless the schedule is step)."""
    if t.schedule != "step":
        return ()
    return tuple(t.steps) if t.steps else default_steps(t.max_iter)


def decay_setting(t):
    """The decay TrainConfig `t` trains with, in the settings line's terms: (steps, gamma) of a
    step schedule (no steps for a constant rate), or the words for a cosine one."""
    if t.schedule == "cosine":
        return "cosine to 0 over %d iterations" % t.max_iter
    return resolved_steps(t), t.gamma


def lr_factor(iteration, t, steps=None):
    """The multiplier of the base learning rate at `iteration` for TrainConfig `t`.

    `steps` may pass resolved_steps(t) to save resolving them on every call."""
    warm = warmup_factor(iteration, t.warmup_iters, t.warmup_factor)
    if t.schedule == "step":
        if steps is None:
            steps = resolved_steps(t)
        return warm * step_decay(iteration, steps, t.gamma)
    if t.schedule == "cosine":
        return warm * cosine_decay(iteration, t.max_iter)
    return warm


def check_steps(steps, max_iter):
    """A message naming train.steps when a step is out of order or outside 1..max_iter-1, else None."""
    shown = ",".join(str(s) for s in steps)
    if any(b <= a for a, b in zip(steps, steps[1:])):
        return f"train.steps={shown} must be strictly increasing"
    if steps and steps[0] < 1:
        return f"train.steps={shown} has a step below 1"
    if steps and steps[-1] >= max_iter:
        return (f"train.steps={shown} has a step at or past the last iteration "
                f"(train.max_iter={max_iter}); a step s decays the lr from iteration s+1 on")
    return None
