"""Checkpoints: atomic writes, exact resume, refusals before training, and the loop's timing."""
import io
import itertools
import os
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import ROOT, config_path, env_for_subprocess, parse_lines, run_module  # noqa: E402

from harness.trainer import checkpoint  # noqa: E402

SMALL = ["data.input_size=64x96"]


def sets(*pairs):
    out = []
    for pair in list(SMALL) + list(pairs):
        out += ["--set", pair]
    return out


def train_main(capsys, args):
    """Run the entry point in this process; returns (exit code, stdout, stderr)."""
    from harness.trainer import train
    capsys.readouterr()
    rc = train.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def losses_of(records):
    return [(r["iteration"], r["loss"], r["losses"], r["lr"]) for r in records]


def assert_same_state(a, b):
    """Two checkpoint files hold bit-identical model, optimizer and torch RNG state."""
    sa = torch.load(a, map_location="cpu", weights_only=True)
    sb = torch.load(b, map_location="cpu", weights_only=True)
    assert sa["iteration"] == sb["iteration"]
    assert sa["model"].keys() == sb["model"].keys()
    for key in sa["model"]:
        assert torch.equal(sa["model"][key], sb["model"][key]), key
    oa, ob = sa["optimizer"], sb["optimizer"]
    assert oa["param_groups"] == ob["param_groups"]
    assert oa["state"].keys() == ob["state"].keys() and oa["state"]
    for index in oa["state"]:
        for name, value in oa["state"][index].items():
            assert torch.equal(value, ob["state"][index][name]), (index, name)
    for ra, rb in zip(sa["rng"], sb["rng"]):
        assert torch.equal(ra["torch"], rb["torch"])


def test_next_save():
    assert checkpoint.next_save(0, 0, 10) == 0                       # off
    assert [checkpoint.next_save(d, 4, 10) for d in (0, 3, 4, 8, 9, 10)] == [4, 4, 8, 10, 10, 0]
    assert checkpoint.next_save(0, 20, 10) == 10                     # the end is always written


def run_until_checkpoint(args, name):
    """Run the trainer in a subprocess and kill -9 it once checkpoint `name` is written."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.trainer.train"] + args, cwd=ROOT,
                            env=env_for_subprocess(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("checkpoint ") and line.strip().endswith(name):
                proc.kill()
                break
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(lines), proc.returncode


def test_resume_after_kill_is_bit_identical(tmp_path):
    """N=6 iterations uninterrupted (a) against a run killed after its checkpoint at k=4 (b)
    resumed by `--resume` (c): the logged losses and lr are equal, and the final checkpoints of
    a and c hold bit-identical weights, optimizer state and RNG states. The 1x steps of a
    6-iteration run (4, 5) fall after the resume point."""
    cfg = config_path("faster_tiny")
    a = run_module([cfg] + sets("train.max_iter=6", "train.checkpoint_every=6",
                                f"train.checkpoint_dir={tmp_path / 'a'}"))
    assert a.returncode == 0, a.stderr
    full, _ = parse_lines(a.stdout)
    assert [r["iteration"] for r in full] == [1, 2, 3, 4, 5, 6]

    out, rc = run_until_checkpoint([cfg] + sets("train.max_iter=6", "train.checkpoint_every=2",
                                                f"train.checkpoint_dir={tmp_path / 'b'}"), "iter_0000004.pth")
    assert rc in (0, -signal.SIGKILL)
    killed, _ = parse_lines(out)
    assert losses_of(killed) == losses_of(full[:4])     # writing checkpoints changed nothing

    c = run_module([cfg, "--resume", str(tmp_path / "b" / "iter_0000004.pth")]
                   + sets("train.max_iter=6", "train.checkpoint_every=2", f"train.checkpoint_dir={tmp_path / 'c'}"))
    assert c.returncode == 0, c.stderr
    resumed, metas = parse_lines(c.stdout)
    assert metas[0]["resumed_after_iteration"] == 4
    assert losses_of(resumed) == losses_of(full[4:])
    assert resumed[0]["lr"] == pytest.approx(full[0]["lr"] * 0.1)
    assert sorted(os.listdir(tmp_path / "c")) == ["iter_0000006.pth"]
    assert_same_state(tmp_path / "a" / "iter_0000006.pth", tmp_path / "c" / "iter_0000006.pth")
    # the trainer draws nothing from Python's random: c carries on b's restored state
    saved = torch.load(tmp_path / "b" / "iter_0000004.pth", weights_only=True)["rng"][0]
    final = torch.load(tmp_path / "c" / "iter_0000006.pth", weights_only=True)["rng"][0]
    assert final["python"] == saved["python"] and final["numpy"][2] == saved["numpy"][2]


def resume_after_3_of_6(capsys, tmp_path, config, data):
    """Train 6 iterations with a checkpoint every 3 (folder a), resume from the one after 3
    (folder b): the resumed run's losses and final state are the uninterrupted one's."""
    pairs = list(data) + ["train.max_iter=6", "train.checkpoint_every=3"]
    rc, out, err = train_main(capsys, [config_path(config)] + sets(*pairs, f"train.checkpoint_dir={tmp_path / 'a'}"))
    assert rc == 0, err
    full, _ = parse_lines(out)
    rc, out, err = train_main(capsys, [config_path(config), "--resume", tmp_path / "a" / "iter_0000003.pth"]
                              + sets(*pairs, f"train.checkpoint_dir={tmp_path / 'b'}"))
    assert rc == 0, err
    resumed, _ = parse_lines(out)
    assert losses_of(resumed) == losses_of(full[3:])
    assert_same_state(tmp_path / "a" / "iter_0000006.pth", tmp_path / "b" / "iter_0000006.pth")
    return pairs


def test_resume_mid_epoch_of_coco_data_is_bit_identical(capsys, tiny_coco, tmp_path):
    # 4 images, 2 a batch: the checkpoint after 3 batches is in the middle of the second epoch
    ann, images = tiny_coco
    resume_after_3_of_6(capsys, tmp_path, "faster_tiny", ["data.source=coco", f"data.coco_json={ann}",
                                                          f"data.coco_images={images}", "data.shuffle=true"])


def test_resume_mid_epoch_of_aspect_grouped_batches_is_bit_identical(capsys, mixed_coco, tmp_path):
    """The grouped order (data.aspect_grouping) and each image's flip and scale draw are
    replayed from the checkpoint's iteration count: 8 images, 2 a batch, checkpoint after 3."""
    ann, images = mixed_coco
    pairs = resume_after_3_of_6(capsys, tmp_path, "mask_tiny", [
        "data.source=coco", f"data.coco_json={ann}", f"data.coco_images={images}", "data.canvas=batch",
        "data.aspect_grouping=true", "data.flip_prob=0.5", "data.scales=48,64", "model.num_classes=2"])
    # the order is part of what a checkpoint must match
    rc, out, err = train_main(capsys, [config_path("mask_tiny"), "--resume", tmp_path / "a" / "iter_0000003.pth"]
                              + sets(*pairs, "data.aspect_grouping=false", f"train.checkpoint_dir={tmp_path / 'c'}"))
    assert rc == 2 and "data.aspect_grouping=True there, False here" in err, err


@pytest.fixture(scope="module")
def faster_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    done = run_module([config_path("faster_tiny")] + sets("train.max_iter=2", "train.checkpoint_every=1",
                                                          f"train.checkpoint_dir={folder}"))
    assert done.returncode == 0, done.stderr
    return str(folder / "iter_0000001.pth")


def error_lines(err):
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("config, extra, message", [
    ("retina_tiny", (), "is from another config: model.name=faster there, retina here"),
    ("faster_tiny", ("model.fc_dim=32",), "is from another config: model.fc_dim=64 there, 32 here"),
    ("faster_tiny", ("model.layers=1,2,1,1",), "is from another config: model.layers=1,1,1,1 there, 1,2,1,1 here"),
    ("faster_tiny", ("data.images_per_device=1",), "is from another config: data.images_per_device=2 there"),
])
def test_a_checkpoint_of_another_config_is_refused(capsys, faster_checkpoint, config, extra, message):
    rc, out, err = train_main(capsys, [config_path(config), "--resume", faster_checkpoint] + sets(*extra))
    assert rc == 2
    line = error_lines(err)
    assert faster_checkpoint in line and message in line, line
    assert "DETBENCH_ITER" not in out


def test_a_checkpoint_that_does_not_fit_the_model_is_refused(capsys, faster_checkpoint, tmp_path):
    other = tmp_path / "wider.py"
    other.write_text("import torch\n"
                     "from harness.trainer.configs.faster_tiny import CONFIG, build_detector as base\n"
                     "def build_detector(cfg):\n"
                     "    model = base(cfg)\n"
                     "    model.extra = torch.nn.Linear(2, 2)\n"
                     "    return model\n")
    rc, out, err = train_main(capsys, [other, "--resume", faster_checkpoint] + sets())
    assert rc == 2
    line = error_lines(err)
    assert faster_checkpoint in line and "does not fit this model: it has no extra.weight" in line
    assert "DETBENCH_ITER" not in out


def test_unreadable_checkpoints_are_refused(tmp_path, faster_checkpoint):
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(open(faster_checkpoint, "rb").read()[:5000])
    other = tmp_path / "other.pth"
    torch.save({"weights": torch.zeros(3)}, other)
    cases = [(truncated, "cannot be read"), (other, "is not a detbench trainer checkpoint"),
             (tmp_path / "missing.pth", "checkpoint file not found")]
    for path, message in cases:
        proc = run_module([config_path("faster_tiny"), "--resume", str(path)] + sets())
        assert proc.returncode == 2, proc.stderr
        line = error_lines(proc.stderr)
        assert str(path) in line and message in line, line
        assert "Traceback" not in proc.stderr and "DETBENCH_ITER" not in proc.stdout


def test_checkpointing_needs_a_folder(train_inprocess, tmp_path):
    rc, iters, _, err = train_inprocess("retina_tiny", "train.checkpoint_every=2")
    assert rc == 2 and "train.checkpoint_dir" in error_lines(err) and not iters
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, iters, _, err = train_inprocess("retina_tiny", "train.checkpoint_every=2",
                                        f"train.checkpoint_dir={blocker / 'sub'}")
    assert rc == 2 and "train.checkpoint_dir" in error_lines(err) and not iters


KILL_MID_WRITE = """
import os, signal, sys
import torch
sys.path.insert(0, {root!r})
from harness.trainer import checkpoint
path = sys.argv[1]
checkpoint.write_atomic(path, {{"v": torch.arange(10)}})

def dying_save(obj, fh):
    fh.write(b"PK\\x03\\x04 half a zip file")
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = dying_save
checkpoint.write_atomic(path, {{"v": torch.arange(20)}})
"""


def test_kill_9_mid_write_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "iter_0000002.pth"
    done = subprocess.run([sys.executable, "-c", KILL_MID_WRITE.format(root=ROOT), str(path)],
                          env=env_for_subprocess(), capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert torch.equal(torch.load(path, weights_only=True)["v"], torch.arange(10))
    leftovers = [n for n in os.listdir(tmp_path) if n != path.name]
    assert len(leftovers) == 1 and leftovers[0].startswith(".iter_0000002.pth.") and leftovers[0].endswith(".tmp")


def test_data_can_start_at_any_batch(tiny_coco):
    from harness.trainer import data
    from harness.trainer.config import apply_overrides, load_config_module
    for size, world, start in itertools.product((1, 5), (1, 2, 3), (0, 3, 7)):
        for rank in range(world):
            whole = data.InfiniteShardedSampler(size, rank, world, seed=4)
            late = data.InfiniteShardedSampler(size, rank, world, seed=4, start=start)
            assert list(itertools.islice(late, 12)) == list(itertools.islice(whole, start, start + 12))
    ann, images = tiny_coco
    base = load_config_module(config_path("faster_tiny")).CONFIG
    cfg = apply_overrides(base, ["data.source=coco", f"data.coco_json={ann}", f"data.coco_images={images}"])
    cpu = torch.device("cpu")
    rng = torch.get_rng_state()
    whole = list(itertools.islice(data.build_batches(cfg, cpu, 0, 1), 5))
    late = list(itertools.islice(data.build_batches(cfg, cpu, 0, 1, start=3), 2))
    assert torch.equal(torch.get_rng_state(), rng)    # the loader does not draw from the global stream
    for (ia, ta), (ib, tb) in zip(whole[3:], late):
        assert torch.equal(ia, ib) and torch.equal(ta["boxes"], tb["boxes"])
    synth = apply_overrides(base, SMALL)
    a = list(itertools.islice(data.build_batches(synth, cpu, 0, 1), 3))[2]
    b = next(iter(data.build_batches(synth, cpu, 0, 1, start=2)))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1]["boxes"], b[1]["boxes"])


WRITE_DELAY_S = 1.0


def build(tmp_path, *pairs):
    from harness.trainer import data, engine
    from harness.trainer.config import apply_overrides, load_config_module
    module = load_config_module(config_path("retina_tiny"))
    cfg = apply_overrides(module.CONFIG, SMALL + list(pairs) + [f"train.checkpoint_dir={tmp_path}"])
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = engine.prepare_model(module.build_detector(cfg), cfg, device, 1)
    return model, data.build_batches(cfg, device, 0, 1), cfg, device


def test_checkpoint_writes_are_in_no_iterations_time(tmp_path, monkeypatch):
    from harness.trainer import engine
    real, spent = checkpoint.save, []

    def slow_save(*args):
        begin = time.perf_counter()
        time.sleep(WRITE_DELAY_S)
        path = real(*args)
        spent.append(time.perf_counter() - begin)
        return path

    monkeypatch.setattr(checkpoint, "save", slow_save)
    model, batches, cfg, device = build(tmp_path, "train.max_iter=4", "train.checkpoint_every=2")
    out = io.StringIO()
    start = time.perf_counter()
    engine.train(model, batches, cfg, device, 1, out=out)
    wall = time.perf_counter() - start
    iters, _ = parse_lines(out.getvalue())
    assert [r["iteration"] for r in iters] == [1, 2, 3, 4]
    assert sorted(os.listdir(tmp_path)) == ["iter_0000002.pth", "iter_0000004.pth"]
    assert len(spent) == 2
    # iteration 3 follows a write, iteration 4 none: a write counted in 3 would add its whole delay
    # (against the next iteration, not a fixed bound: a loaded machine's tiny step alone nears 1 s)
    assert iters[2]["time_s"] < iters[3]["time_s"] + WRITE_DELAY_S / 2, iters
    # the iterations' times add up to the loop's wall time less the writes and the set-up (which
    # a loaded machine may stretch: half a write's delay still tells one write counted from none)
    total = sum(r["time_s"] for r in iters)
    assert wall - sum(spent) - WRITE_DELAY_S / 2 < total <= wall - sum(spent) + 0.01


def test_with_checkpointing_off_nothing_is_written(tmp_path, monkeypatch):
    from harness.trainer import engine

    def no_save(*args):
        raise AssertionError("checkpoint written with train.checkpoint_every=0")

    monkeypatch.setattr(checkpoint, "save", no_save)
    model, batches, cfg, device = build(tmp_path, "train.max_iter=3")
    assert cfg.train.checkpoint_every == 0
    out = io.StringIO()
    engine.train(model, batches, cfg, device, 1, out=out)
    assert len(parse_lines(out.getvalue())[0]) == 3
    assert os.listdir(tmp_path) == []
