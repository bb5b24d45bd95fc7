"""What the drivers share (harness/drivers/common.py): the inference flags the adapters write, the
one timing of a batch, the pool of raw images, and the log lines of harness/jsonlog.py, which a
driver run as a script in a framework's env (the harness not importable) loads from its file."""
import io
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness import jsonlog
from harness.drivers import common
from harness.frameworks.base import TrialContext, infer_args

ROOT = common.__file__.rsplit("/harness/", 1)[0]
DRIVERS = ROOT + "/harness/drivers"


def context(**kw):
    base = dict(framework="torchvision", model="mask_rcnn", precision="bf16", gpus=1, nodes=1, batch_per_gpu=3,
                input_size=(320, 480), iterations=9, data={"annotations": "/d/ann.json", "images": "/d/img"},
                weights="/w/mask.pt", seed=4,
                inference={"score_threshold": 0.25, "nms_threshold": 0.6, "detections_per_image": 50})
    base.update(kw)
    return TrialContext(**base)


def test_the_shared_flags_are_exactly_the_ones_the_adapters_write():
    parser = common.inference_parser("x", ["mask_rcnn"], device=False)
    args = common.parse_inference(parser, infer_args(context()))
    assert (args.model, args.batch_size, args.batches, args.size, args.precision, args.seed) == (
        "mask_rcnn", 3, 9, (320, 480), "bf16", 4)
    assert (args.score_threshold, args.nms_threshold, args.detections) == (0.25, 0.6, 50)
    assert (args.weights, args.data, args.images) == ("/w/mask.pt", "/d/ann.json", "/d/img")
    written = {a for a in infer_args(context()) if a.startswith("--")}
    taken = {o for action in parser._actions for o in action.option_strings if o.startswith("--")} - {"--help"}
    assert written == taken


@pytest.mark.parametrize("argv,words", [
    (["--input-size", "320"], "HxW"),
    (["--input-size", "16x320"], "at least 32"),
    (["--batch-size", "0"], "at least 1"),
    (["--data", "/d/ann.json"], "go together"),
    (["--precision", "fp16", "--device", "cpu"], "needs a CUDA device; use fp32 on the CPU"),
])
def test_flags_no_driver_can_run_are_one_line_and_exit_2(argv, words, capsys):
    base = ["--model", "retinanet", "--batch-size", "2", "--batches", "3", "--input-size", "64x64"]
    parser = common.inference_parser("x", ["retinanet"])
    with pytest.raises(SystemExit) as exit_:
        common.parse_inference(parser, base + argv, cpu_precisions=("fp32",))
    assert exit_.value.code == 2
    assert words in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_batch_is_timed_in_its_parts_and_takes_the_pool_cyclically(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])

    def tick(seconds):
        clock[0] += seconds

    class Heads:
        def postprocess(self):          # post-processing the network's forward runs inside itself
            tick(0.2)
    heads = Heads()
    timer = common.Timed(heads, "postprocess", sync=lambda: None)
    taken = []

    def step(raws, marks):
        taken.append(list(raws))
        tick(0.1)
        marks.pre_done()
        tick(0.3)
        heads.postprocess()
        marks.net_done()
        tick(0.05)
        return 7
    out = io.StringIO()
    args = SimpleNamespace(batch_size=2, batches=3)
    common.time_batches(args, ["a", "b", "c"], step, lambda: None, post_timers=[timer], out=out)
    assert taken == [["a", "b"], ["c", "a"], ["b", "c"]]
    lines = out.getvalue().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["DETBENCH_ITER", "DETBENCH_PHASES"] * 3
    for k, (it, ph) in enumerate(zip(lines[::2], lines[1::2]), 1):
        it, ph = json.loads(it[len(jsonlog.ITER_PREFIX):]), json.loads(ph[len(jsonlog.PHASES_PREFIX):])
        assert it["iteration"] == ph["iteration"] == k and it["images"] == 2 and it["data_time_s"] == 0
        assert it["time_s"] == pytest.approx(0.65)
        assert (ph["pre_s"], ph["net_s"], ph["post_s"]) == pytest.approx((0.1, 0.3, 0.25))
        assert ph["detections"] == 7


def test_network_work_after_the_network_mark_counts_as_network(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])

    def step(raws, marks):
        marks.pre_done()
        clock[0] += 0.4
        marks.net_done()
        clock[0] += 0.5                 # of which a mask head on the final boxes took 0.3
        marks.net_in_post = 0.3
        return 1
    out = io.StringIO()
    common.time_batches(SimpleNamespace(batch_size=1, batches=1), ["a"], step, lambda: None, out=out)
    ph = json.loads(out.getvalue().splitlines()[1][len(jsonlog.PHASES_PREFIX):])
    assert (ph["pre_s"], ph["net_s"], ph["post_s"]) == pytest.approx((0.0, 0.7, 0.2))


def test_an_unreadable_pool_names_its_file(tmp_path):
    args = SimpleNamespace(data=str(tmp_path / "missing.json"), images=str(tmp_path), seed=0, size=(32, 32))
    with pytest.raises(common.InputError, match="missing.json: cannot read the annotations"):
        common.raw_pool(args)
    (tmp_path / "ann.json").write_text(json.dumps({"images": [{"file_name": "gone.jpg"}]}))
    args.data = str(tmp_path / "ann.json")
    with pytest.raises(common.InputError, match="gone.jpg: not a readable image"):
        common.raw_pool(args)


def test_a_seeded_pool_is_the_same_for_every_driver():
    torch = pytest.importorskip("torch")
    args = SimpleNamespace(data=None, seed=3, size=(40, 56))
    one, two = common.raw_pool(args), common.raw_pool(args)
    assert len(one) == common.POOL and one[0].shape == (40, 56, 3) and one[0].dtype == torch.uint8
    assert all(torch.equal(a, b) for a, b in zip(one, two))


def test_a_driver_run_as_a_script_prints_the_lines_of_jsonlog_from_its_file(tmp_path):
    # as in a framework's pinned env: the driver's folder on the path, the harness package not importable
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        "sys.modules['harness'] = None\n"
        "sys.path.insert(0, %r)\n"
        "import common, mmdet_hooks\n"
        "counter = mmdet_hooks.WorkCounter()\n"
        "counter.add('proposals', 5)\n"
        "counter.add('mask_rois', 2)\n"
        "print(common.jsonlog.__file__)\n"
        "print(counter.line(3))\n"
        "print(common.jsonlog.phases_line(3, 0.5, 1.0, 0.25, 4))\n" % DRIVERS)
    out = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    path, work, phases = out.stdout.splitlines()
    assert path == jsonlog.__file__
    assert work == jsonlog.work_line(3, proposals=5, mask_rois=2)
    assert phases == jsonlog.phases_line(3, 0.5, 1.0, 0.25, 4)


@pytest.mark.parametrize("driver", ["torchvision_infer", "mmdet_infer", "effdet_infer"])
def test_every_inference_driver_takes_the_shared_flags(driver):
    pytest.importorskip("torchvision")
    import importlib
    module = importlib.import_module("harness.drivers." + driver)
    model = "efficientdet_d0" if driver == "effdet_infer" else "faster_rcnn"
    ctx = context(model=model, precision="fp32", input_size=(384, 512),
                  inference={"score_threshold": 0.25, "nms_threshold": 0.5, "detections_per_image": 50})
    args = module.parse_args(infer_args(ctx) + ["--device", "cpu"])
    assert (args.model, args.batch_size, args.batches, args.size, args.detections, args.weights) == (
        model, 3, 9, (384, 512), 50, "/w/mask.pt")
