"""The harness benchmarks run end to end in their tiny modes (figures are not judged here)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(*args):
    return subprocess.run([sys.executable] + list(args), cwd=str(ROOT), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)


def test_scale_benchmark_builds_a_store_and_times_the_commands():
    proc = bench("-m", "benchmarks.scale", "--quick")
    assert "store of 4 runs, 400 trials" in proc.stdout, proc.stdout
    for command in ("report", "compare", "dry-run"):
        assert "\n" + command in proc.stdout, proc.stdout


def test_scrape_speed_benchmark_counts_every_record():
    proc = bench("benchmarks/scrape_speed.py", "--mb", "0.2", "--formats", "mmdet-v2", "detectron2")
    rows = [l.split() for l in proc.stdout.splitlines() if l.startswith(("mmdet-v2", "detectron2"))]
    assert len(rows) == 2, proc.stdout
    for _name, lines, records, errors, *_ in rows:
        assert int(errors) == 0 and int(records) == int(lines) - int(lines) // 20, proc.stdout


def tiny_quick(tmp_path):
    """scenarios/accuracy-quick.yaml on a tiny schedule (8 iterations at 64x64, batch 2, the trainer
    alone, fp32), its learnable set and weights file made under `tmp_path`: the scenario file the
    benchmark is given and runs as it is."""
    from harness.plan import learnable, weights

    learnable.make_learnable(tmp_path / "data", images=8, val_images=2, size=(64, 64))
    weights.make("retinanet", str(tmp_path / "r18.pt"), 0, 18)
    text = (ROOT / "scenarios" / "accuracy-quick.yaml").read_text(encoding="utf-8")
    for old, new in (("[detbench-trainer, torchvision, mmdetection, detectron2]", "[detbench-trainer]"),
                     ("precision: [fp32, bf16]", "precision: [fp32]"), ("batch_per_gpu: 4", "batch_per_gpu: 2"),
                     ("input_size: [128, 128]", "input_size: [64, 64]"), ("iterations: 200", "iterations: 8"),
                     ("eval_every: 50", "eval_every: 4"), ("warmup_iters: 50", "warmup_iters: 4"),
                     ("data/shapes128-quick ", "%s " % (tmp_path / "data")),
                     ("data/weights/retinanet-r18.pt ", "%s " % (tmp_path / "r18.pt")),
                     ("  reference: torchvision\n", "")):
        assert old in text, old
        text = text.replace(old, new)
    text = "\n".join(x for x in text.splitlines() if "{framework: " not in x).replace("exclude:\n", "")
    path = tmp_path / "tiny.yaml"
    path.write_text(text + "\n", encoding="utf-8")
    return path


def test_time_to_accuracy_runs_a_declared_scenario_as_it_is_and_says_when_nothing_could_be_judged(tmp_path):
    """The trainer alone for 8 iterations: its untrained weights' noise floor is measured, the run's
    table printed, and with no rival and no target reached nothing can be judged: the headline says
    so, one line on stderr, exit 2."""
    pytest.importorskip("torchvision")
    pytest.importorskip("pycocotools")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.time_to_accuracy", "--scenario",
                           str(tiny_quick(tmp_path))], cwd=str(ROOT), capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 2, out + proc.stderr
    assert "# noise floor of retinanet (untrained weights, val split): bbox_AP50 " in out
    assert "| detbench-trainer | fp32 | 2 |" in out
    assert "Protocol declared before the run: subject detbench-trainer, claim 1.20x" in out
    assert out.rstrip().splitlines()[-1].startswith("time to accuracy: not judged")
    assert proc.stderr.startswith("time_to_accuracy: nothing could be judged: ")
    assert len(proc.stderr.splitlines()) == 1


def test_time_to_accuracy_adds_the_trainer_s_bf16_cells_to_a_stored_run_and_shows_them_as_exploratory(
        tmp_path, monkeypatch, capsys):
    """--add-bf16 on a finished fp32 run: the trainer's bf16 cells train as a second run of the store
    with the first's recipe and are shown joined to it, as exploratory: they were not declared before
    the run, so the verdict is the first run's alone. On every CPU: where torch only emulates bf16 the
    benchmark's kernel check is set aside and the trainer told to allow the emulation (its own
    tests' switch), on the same tiny schedule as above."""
    pytest.importorskip("torchvision")
    pytest.importorskip("pycocotools")
    from benchmarks import time_to_accuracy as tta
    from harness.frameworks import accuracy as recipes
    from harness.plan import hostcpu

    native = hostcpu.has_bf16_kernels(hostcpu.cpu()[1])
    train_argv = recipes.train_argv

    def emulation_allowed(framework, model, s, *rest, **kw):
        argv = train_argv(framework, model, s, *rest, **kw)
        return argv if native or s.precision != "bf16" else argv + ["--set", "train.allow_emulated_bf16=true"]

    assert tta.main(["--scenario", str(tiny_quick(tmp_path)), "--work", str(tmp_path)]) == 2
    monkeypatch.setattr(hostcpu, "has_bf16_kernels", lambda flags: True)
    monkeypatch.setattr(recipes, "train_argv", emulation_allowed)
    capsys.readouterr()
    status = tta.main(["--from", str(tmp_path / "results"), "--add-bf16"])
    out, err = capsys.readouterr()
    # the verdict is the first run's alone: at 8 iterations nothing learned, so nothing judged (exit 2)
    assert status == (2 if "nothing could be judged" in err else 1), out + err
    [first] = [p.name[len("scenario-bf16-of-"):-len(".yaml")] for p in tmp_path.glob("scenario-bf16-of-*.yaml")]
    assert "[1/1] detbench-trainer/retinanet/bf16/local/1/1 seed 0" in out
    assert "# Time to accuracy: time-to-accuracy-quick (run %s, with run " % first in out
    assert "| detbench-trainer | fp32 | 2 |" in out and "| detbench-trainer | bf16 | 2 |" in out
    assert ("joined outside the declared plan (run %s declared no sequential plan): its seeds are in the tables, "
            "not in the verdict" % first) in out
    assert "bf16 vs fp32" not in out.split("## Verdict")[1].split("Detail, on")[0]    # no check of the joined cells


def _block(failed_seed=None):
    from harness.measure.accuracy import AccuracyPoint
    from harness.report.accuracy import ModelBlock, Series

    def series(precision, finals):
        s = Series("detbench-trainer", precision, 4)
        for seed, ap50 in enumerate(finals):
            if seed == failed_seed and precision == "bf16":
                s.failed[seed] = "training exited with 3: ... | error: loss is nan (not finite) at iteration 188"
            else:
                s.curves[seed] = [AccuracyPoint(1500, 400.0, ap50 / 2, ap50)]
        return s
    return ModelBlock("retinanet", "bbox_AP50", 0.5, "detbench-trainer",
                      [series("fp32", [0.70, 0.10, 0.65]), series("bf16", [0.66, 0.68, 0.69])], [0, 1, 2])


def test_the_bf16_check_judges_within_the_fp32_seed_spread_and_not_over_failed_seeds():
    import io
    from benchmarks import time_to_accuracy as tta
    out = io.StringIO()
    assert tta.bf16_verdict(_block(), out) is True        # 0.677 vs 0.483 +- 0.333: inside the spread
    assert "bf16 vs fp32 final bbox_AP50 0.677 vs 0.483 +- 0.333: PASS" in out.getvalue()
    out = io.StringIO()
    assert tta.bf16_verdict(_block(failed_seed=1), out) is True
    assert out.getvalue().startswith("retinanet: bf16 vs fp32: not judged: bf16 seed 1 failed (error: loss is nan")
    assert "PASS" not in out.getvalue()


def _curves(fp32, bf16):
    """A trainer block from {iteration: [AP50 per seed]} per precision."""
    from harness.measure.accuracy import AccuracyPoint
    from harness.report.accuracy import ModelBlock, Series

    def series(precision, by_iteration):
        s = Series("detbench-trainer", precision, 4)
        for it, values in sorted(by_iteration.items()):
            for seed, ap50 in enumerate(values):
                s.curves.setdefault(seed, []).append(AccuracyPoint(it, it * 0.5, ap50 / 2, ap50))
        return s
    return ModelBlock("retinanet", "bbox_AP50", 0.5, "detbench-trainer",
                      [series("fp32", fp32), series("bf16", bf16)], [0, 1, 2])


def test_the_bf16_curve_is_judged_at_every_checkpoint_not_only_the_last():
    import io
    from benchmarks import time_to_accuracy as tta
    fp32 = {200: [0.30, 0.32, 0.34], 400: [0.60, 0.62, 0.64]}
    out = io.StringIO()
    assert tta.bf16_verdict(_curves(fp32, {200: [0.31, 0.33, 0.35], 400: [0.61, 0.63, 0.62]}), out) is True
    assert ("retinanet: bf16 vs fp32 bbox_AP50 by iteration (bf16 vs fp32 +- fp32 sd): "
            "200 0.330 vs 0.320 +- 0.020, 400 0.620 vs 0.620 +- 0.020: PASS") in out.getvalue()
    # the same final point, but bf16 far behind at the first checkpoint: the curves differ
    out = io.StringIO()
    assert tta.bf16_verdict(_curves(fp32, {200: [0.10, 0.12, 0.14], 400: [0.61, 0.63, 0.62]}), out) is False
    assert "bf16 vs fp32 final bbox_AP50 0.620 vs 0.620 +- 0.020: PASS" in out.getvalue()
    assert out.getvalue().rstrip().endswith("FAIL (apart at iteration 200)")


def test_a_checkpoint_some_seed_did_not_score_is_left_out_of_the_curve_check():
    import io
    from benchmarks import time_to_accuracy as tta
    block = _curves({200: [0.30, 0.32, 0.34], 400: [0.60, 0.62, 0.64]},
                    {200: [0.10, 0.12, 0.14], 400: [0.61, 0.63, 0.62]})
    bf16 = next(s for s in block.series if s.precision == "bf16")
    bf16.curves[2] = bf16.curves[2][1:]      # seed 2's first checkpoint was never scored
    out = io.StringIO()
    assert tta.bf16_verdict(block, out) is True
    assert "by iteration (bf16 vs fp32 +- fp32 sd): 400 0.620 vs 0.620 +- 0.020: PASS" in out.getvalue()
