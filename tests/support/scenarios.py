"""The tiny calibration scenario many tests start from: one calibrate cell of RetinaNet in fp32 on
this host, two repeats of a short window, no data and no env to build."""

TINY = """\
name: {name}
matrix:
  framework: [calibrate]
  model: [retinanet]
  precision: [fp32]
  platform: [{platform}]
  gpus: [1]
batch_per_gpu: 2
input_size: [320, 320]
warmup: 2
measure: {measure}
repeats: {repeats}
timeout_s: 30
calibrate:
  iteration_ms: 10
  data_ms: 1
"""


def tiny_scenario(name="tiny", platform="local", measure=10, repeats=2):
    """The tiny scenario's text, with another name, platform, window or count of repeats."""
    return TINY.format(name=name, platform=platform, measure=measure, repeats=repeats)


# the scenario as most tests use it; its lines are fixed (tests name the line a change is on)
GOOD_SCENARIO = tiny_scenario()
