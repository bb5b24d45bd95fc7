"""The calibration workload: exactly known iteration and data times."""
from harness.frameworks.base import IMAGE_VENV, RUNS_HERE, Framework, ImageRecipe
from harness.vocab.catalog import MODELS, PRECISIONS


# harness/workloads/calibrate.py's options (tests/frameworks/test_extra_options.py holds them to its parser)
FLAGS = frozenset((
    "-h", "--help", "--iterations", "--iteration-ms", "--data-ms", "--images", "--lines-per-iteration",
    "--busy-threads", "--busy-processes", "--fail-at", "--hold-mb", "--inference", "--post-ms", "--tail-every",
    "--tail-ms"))


def command(ctx):
    opts = ctx.options
    argv = [ctx.python, "-m", "harness.workloads.calibrate",
            "--iterations", str(ctx.iterations),
            "--iteration-ms", repr(float(opts.get("iteration_ms", 50.0))),
            "--data-ms", repr(float(opts.get("data_ms", 5.0))),
            "--images", str(ctx.batch_per_gpu * ctx.gpus * ctx.nodes)]
    for key in ("lines_per_iteration", "busy_threads", "hold_mb"):
        if opts.get(key):
            argv += ["--" + key.replace("_", "-"), str(int(opts[key]))]
    return argv + list(ctx.extra_args)


def infer(ctx):
    """An inference trial of known batch latencies: every batch iteration_ms, every tail_every-th
    tail_ms, of which data_ms pre-processing and post_ms post-processing."""
    opts = ctx.options
    argv = [ctx.python, "-m", "harness.workloads.calibrate", "--inference",
            "--iterations", str(ctx.iterations), "--images", str(ctx.batch_per_gpu),
            "--iteration-ms", repr(float(opts.get("iteration_ms", 50.0))),
            "--data-ms", repr(float(opts.get("data_ms", 5.0))),
            "--post-ms", repr(float(opts.get("post_ms", 0.0)))]
    if opts.get("tail_every"):
        argv += ["--tail-every", str(int(opts["tail_every"])), "--tail-ms", repr(float(opts["tail_ms"]))]
    for key in ("lines_per_iteration", "busy_threads", "hold_mb"):
        if opts.get(key):
            argv += ["--" + key.replace("_", "-"), str(int(opts[key]))]
    return argv + list(ctx.extra_args)


def infer_settings(ctx):
    out = {"mode": "inference", "images_per_device": ctx.batch_per_gpu, "devices": 1,
           "input_size": list(ctx.input_size), "precision": ctx.precision, "data": "synthetic"}
    out.update((k, ctx.options.get(k)) for k in ("iteration_ms", "data_ms", "post_ms", "tail_ms", "tail_every"))
    out.update((k, v) for k, v in (ctx.inference or {}).items())
    return out


def settings(ctx):
    return {"images_per_device": ctx.batch_per_gpu, "devices": ctx.gpus * ctx.nodes,
            "input_size": list(ctx.input_size), "precision": ctx.precision, "data": "synthetic",
            "iteration_ms": ctx.options.get("iteration_ms", 50.0),
            "data_ms": ctx.options.get("data_ms", 5.0)}


FRAMEWORK = Framework(
    name="calibrate", title="calibrate", scraper="detbench-jsonl",
    models=frozenset(MODELS), precisions=frozenset(PRECISIONS), status=RUNS_HERE,
    why="standard library only; sleeps to exact deadlines",
    figures="per iteration, exact", command=command, settings=settings,
    infer=infer, infer_models=frozenset(MODELS), infer_precisions=frozenset(PRECISIONS),
    infer_settings=infer_settings, infer_why="batches of exactly known latency, with a known tail",
    images=(ImageRecipe("calibrate", IMAGE_VENV, wheels=True, local_base=True),),
    flags=FLAGS,
)
