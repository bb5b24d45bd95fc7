"""The normalized settings a training program computes itself, in a rival's environment.

The keys and what they mean are in harness/frameworks/settings.py, which builds the settings an
adapter declares; these two are also what asrun.py's DETBENCH_SETTINGS line reports from the
framework's built objects, so they live here, where the drivers import them (standard library
only: a driver imports this file from its own folder where the harness is not importable).
"""


def schedule(lr, warmup_iters, warmup_factor, shuffle):
    """The learning-rate schedule and image order of a trial: they decide how the weights,
    and with them the proposals and positives, move from the shared start."""
    warmup = ("linear from %g over %d iterations" % (round(float(warmup_factor), 6), int(warmup_iters))
              if int(warmup_iters) > 0 else "none")
    return {"lr": round(float(lr), 8), "warmup": warmup, "shuffle": bool(shuffle)}


def mask_rois_cap(roi_batch_per_image, roi_positive_fraction, own_cap=None):
    """The most RoIs per image a mask head trains on: the positive RoIs, which the sampler caps at
    batch x fraction, and the framework's own cap where it has one (None: none of its own)."""
    cap = int(roi_batch_per_image * roi_positive_fraction)
    return cap if own_cap is None else min(cap, int(own_cap))
