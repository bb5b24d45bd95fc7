"""The calibration workload: exactly known iteration and data times."""
from harness.frameworks.base import RUNS_HERE, Framework
from harness.spec.catalog import MODELS, PRECISIONS


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


def settings(ctx):
    return {"images_per_device": ctx.batch_per_gpu, "devices": ctx.gpus * ctx.nodes,
            "input_size": list(ctx.input_size), "precision": ctx.precision, "data": "synthetic",
            "iteration_ms": ctx.options.get("iteration_ms", 50.0),
            "data_ms": ctx.options.get("data_ms", 5.0)}


FRAMEWORK = Framework(
    name="calibrate", title="calibrate", scraper="detbench-jsonl",
    models=frozenset(MODELS), precisions=frozenset(PRECISIONS), status=RUNS_HERE,
    why="standard library only; sleeps to exact deadlines",
    figures="per iteration, exact", command=command, settings=settings)
