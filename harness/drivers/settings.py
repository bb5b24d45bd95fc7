"""The normalized settings a training program computes itself, in a rival's environment.

The keys and what they mean are in harness/frameworks/settings.py, which builds the settings an
adapter declares; these two are also what asrun.py's DETBENCH_SETTINGS line reports from the
framework's built objects, so they live here, where the drivers import them (standard library
only: a driver imports this file from its own folder where the harness is not importable).
"""


def schedule(lr, warmup_iters, warmup_factor, shuffle, decay=None):
    """The learning-rate schedule and image order of a trial: they decide how the weights,
    and with them the proposals and positives, move from the shared start.

    `decay`: (steps, gamma) of a step schedule as the program holds it (no steps: a constant
    rate after warmup), or the schedule's name where it is not a step schedule; None leaves
    `lr_decay` out (a declared setting that nobody read from a running program)."""
    warmup = ("linear from %g over %d iterations" % (round(float(warmup_factor), 6), int(warmup_iters))
              if int(warmup_iters) > 0 else "none")
    out = {"lr": round(float(lr), 8), "warmup": warmup, "shuffle": bool(shuffle)}
    if decay is not None:
        out["lr_decay"] = lr_decay(*decay) if isinstance(decay, tuple) else str(decay)
    return out


def lr_decay(steps, gamma):
    """'x0.1 at 800, 900' (the rate multiplied by gamma once the program has done each step's
    iterations), or 'none'."""
    steps = sorted(int(s) for s in steps or ())
    return "x%g at %s" % (float(gamma), ", ".join(map(str, steps))) if steps else "none"


def mask_rois_cap(roi_batch_per_image, roi_positive_fraction, own_cap=None):
    """The most RoIs per image a mask head trains on: the positive RoIs, which the sampler caps at
    batch x fraction, and the framework's own cap where it has one (None: none of its own)."""
    cap = int(roi_batch_per_image * roi_positive_fraction)
    return cap if own_cap is None else min(cap, int(own_cap))
