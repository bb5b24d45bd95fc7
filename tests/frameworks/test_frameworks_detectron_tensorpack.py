"""The SimpleDet paper's other two systems: Detectron (Caffe2) and tensorpack's FasterRCNN example.

Their commands as upstream's train scripts take them (and what each refuses), their data links,
their recipes' pins, and logs written here in each one's printed format from known iteration
times: the scrapers' records give the window figure the times imply.
"""
import ast
import datetime
import json
import random
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.frameworks import FRAMEWORKS, detectron, tensorpack
from harness.frameworks.base import TrialContext
from harness.launch import images
from harness.plan import trialfiles
from harness.measure import records as rec_kinds, scrapers, stats
from harness.report import published

ROOT = Path(__file__).resolve().parents[2]
COCO = {"annotations": "/d/annotations/train.json", "images": "/d/images"}


def ctx(framework, model="faster_rcnn", precision="fp32", gpus=1, nodes=1, batch=2, iterations=25, data=COCO,
        **kw):
    return TrialContext(framework=framework, model=model, precision=precision, gpus=gpus, nodes=nodes,
                        batch_per_gpu=batch, input_size=(800, 1333), iterations=iterations, data=data,
                        python="/usr/bin/python3", **kw)


def overrides(argv, start):
    """The KEY VALUE pairs of a Detectron argv after `start`, as a dict."""
    rest = argv[argv.index(start) + 1:]
    assert len(rest) % 2 == 0, rest
    return dict(zip(rest[0::2], rest[1::2]))


# ------------------------------------------------------------------ Detectron

@pytest.mark.parametrize("model, config, lr", [
    ("faster_rcnn", "e2e_faster_rcnn_R-50-FPN_1x.yaml", "0.02"),
    ("mask_rcnn", "e2e_mask_rcnn_R-50-FPN_1x.yaml", "0.02"),
    ("retinanet", "retinanet_R-50-FPN_1x.yaml", "0.01"),
])
def test_detectron_runs_train_net_on_the_12_2017_baseline_config(model, config, lr):
    argv = FRAMEWORKS["detectron"].command(ctx("detectron", model=model, gpus=8, iterations=90))
    assert argv[:5] == ["/usr/bin/python2", "/opt/detectron/tools/train_net.py", "--cfg",
                        "/opt/detectron/configs/12_2017_baselines/" + config, "--skip-test"]
    assert overrides(argv, "--skip-test") == {
        "NUM_GPUS": "8", "TRAIN.IMS_PER_BATCH": "2", "SOLVER.MAX_ITER": "90", "SOLVER.BASE_LR": lr,
        "TRAIN.WEIGHTS": "", "TRAIN.DATASETS": "('coco_2014_train',)", "OUTPUT_DIR": "{trial_dir}/output"}
    assert not any("://" in a for a in argv)          # the configs' https:// weights are overridden


def test_detectron_scales_the_learning_rate_linearly_with_the_minibatch():
    one = overrides(FRAMEWORKS["detectron"].command(ctx("detectron", gpus=1, batch=2)), "--skip-test")
    four = overrides(FRAMEWORKS["detectron"].command(ctx("detectron", model="retinanet", gpus=4, batch=1)),
                     "--skip-test")
    assert float(one["SOLVER.BASE_LR"]) == pytest.approx(0.02 * 2 / 16)
    assert float(four["SOLVER.BASE_LR"]) == pytest.approx(0.01 * 4 / 16)
    s = FRAMEWORKS["detectron"].settings(ctx("detectron", gpus=1, batch=2))
    assert s["lr"] == pytest.approx(0.0025) and s["warmup"] == "linear from 0.333333 over 500 iterations"


def test_detectron_reads_the_scenarios_coco_through_its_catalog_links(tmp_path):
    fw = FRAMEWORKS["detectron"]
    c = ctx("detectron")
    assert fw.links(c) == {"coco/coco_train2014": "/d/images",
                           "coco/annotations/instances_train2014.json": "/d/annotations/train.json"}
    trialfiles.prepare(tmp_path, fw.command(c), fw.trial_files(c))
    assert (tmp_path / "work" / "coco" / "coco_train2014").resolve() == Path("/d/images")
    # the image points the catalog's data/coco at the coco/ folder of the directory the trial runs in
    recipe = (ROOT / "dockerfiles" / "detectron" / "Dockerfile").read_text()
    assert "ln -s /proc/self/cwd/coco detectron/datasets/data/coco" in recipe


def test_detectron_weights_come_from_a_mounted_file():
    argv = FRAMEWORKS["detectron"].command(ctx("detectron", options={"weights": "/w/R-50.pkl"}))
    assert overrides(argv, "--skip-test")["TRAIN.WEIGHTS"] == "/w/R-50.pkl"
    assert FRAMEWORKS["detectron"].settings(ctx("detectron", options={"weights": "/w/R-50.pkl"}))["init"] \
        == "file:R-50.pkl"


@pytest.mark.parametrize("change, message", [
    ({"options": {"weights": "R-50.pkl"}}, "absolute path"),
    ({"options": {"wieghts": "/w/R-50.pkl"}}, "unknown options wieghts"),
    ({"options": {"weights": "https://dl.fbaipublicfiles.com/detectron/R-50.pkl"}}, "would download"),
    ({"nodes": 2}, "nodes must be 1, got 2"),
    ({"precision": "fp16"}, "fp32 only"),
    ({"data": None}, "reads COCO files only"),
])
def test_detectron_refuses_what_it_cannot_honour_in_one_line(change, message):
    with pytest.raises(UserError, match=message) as err:
        FRAMEWORKS["detectron"].command(ctx("detectron", **change))
    assert "\n" not in str(err.value)


def test_detectron_claims_fp32_only_and_its_settings_say_what_its_configs_do():
    fw = FRAMEWORKS["detectron"]
    assert fw.precisions == {"fp32"} and fw.models == {"faster_rcnn", "mask_rcnn", "retinanet"}
    s = fw.settings(ctx("detectron", batch=2))
    assert (s["input_size"], s["frozen_stages"], s["norm"], s["flip"]) == ([800, 1333], 1, "frozen_bn", True)
    assert s["rpn_post_nms_train"] == 1000       # the top 2000 of a GPU's two images


# ------------------------------------------------------------------ tensorpack

def config_of(argv):
    """train.py's --config items as config.py's update_args reads them: {key: raw value}."""
    items = argv[argv.index("--config") + 1:]
    return dict(item.split("=", 1) for item in items)


# the keys of examples/FasterRCNN/config.py at d71184 that the adapter sets, and whether their
# default is a string (then update_args keeps the text, else it evaluates it as Python)
CONFIG_KEYS = {"MODE_MASK": False, "MODE_FPN": False, "DATA.BASEDIR": True, "DATA.TRAIN": False,
               "TRAIN.NUM_GPUS": False, "TRAIN.STEPS_PER_EPOCH": False, "TRAIN.LR_SCHEDULE": True,
               "TRAIN.EVAL_PERIOD": False, "TRAIN.CHECKPOINT_PERIOD": False, "BACKBONE.WEIGHTS": True}


@pytest.mark.parametrize("model, mask", [("faster_rcnn", False), ("mask_rcnn", True)])
def test_tensorpack_runs_the_fasterrcnn_example_with_key_value_configs(model, mask):
    argv = FRAMEWORKS["tensorpack"].command(ctx("tensorpack", model=model, gpus=8, batch=1, iterations=25))
    assert argv[:5] == ["/usr/bin/python3", "/opt/tensorpack/examples/FasterRCNN/train.py", "--logdir",
                        "{trial_dir}/train_log", "--config"]
    config = config_of(argv)
    assert set(config) == set(CONFIG_KEYS)
    values = {k: (v if CONFIG_KEYS[k] else ast.literal_eval(v)) for k, v in config.items()}
    assert values["MODE_MASK"] is mask and values["MODE_FPN"] is True
    assert values["DATA.BASEDIR"] == "{trial_dir}/work/coco" and values["DATA.TRAIN"] == ("coco_train2017",)
    assert values["TRAIN.NUM_GPUS"] == 8 and values["TRAIN.EVAL_PERIOD"] == 0
    assert values["BACKBONE.WEIGHTS"] == ""
    assert FRAMEWORKS["tensorpack"].links(ctx("tensorpack", batch=1)) == {
        "coco/train2017": "/d/images", "coco/annotations/instances_train2017.json": "/d/annotations/train.json"}


@pytest.mark.parametrize("gpus", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("iterations", [1, 9, 10, 11, 25, 300])
def test_tensorpack_runs_the_whole_epochs_that_cover_the_window(gpus, iterations):
    argv = FRAMEWORKS["tensorpack"].command(ctx("tensorpack", gpus=gpus, batch=1, iterations=iterations))
    config = config_of(argv)
    steps = int(config["TRAIN.STEPS_PER_EPOCH"])
    schedule = ast.literal_eval(config["TRAIN.LR_SCHEDULE"])    # finalize_configs evaluates it
    # train.py: factor = 8. / NUM_GPUS; max_epoch = LR_SCHEDULE[-1] * factor // stepnum
    max_epoch = int(schedule[-1] * (8. / gpus) // steps)
    assert max_epoch == -(-iterations // steps)
    assert max_epoch * steps >= iterations > (max_epoch - 1) * steps
    # the decays fall after the last epoch; no checkpoint before it
    assert all(int(s * (8. / gpus) // steps) >= max_epoch for s in schedule[:-1])
    assert int(config["TRAIN.CHECKPOINT_PERIOD"]) > max_epoch


@pytest.mark.parametrize("change, message", [
    ({"batch": 2}, "one image per GPU; batch_per_gpu must be 1, got 2"),
    ({"gpus": 3}, "1, 2, 4 or a multiple of 8 GPUs"),
    ({"gpus": 12}, "1, 2, 4 or a multiple of 8 GPUs"),
    ({"precision": "fp16"}, "fp32 only"),
    ({"nodes": 2}, "nodes must be 1, got 2"),
    ({"options": {"weights": "ImageNet-R50-AlignPadding.npz"}}, "absolute path"),
    ({"options": {"steps": 5}}, "unknown options steps"),
    ({"data": None}, "reads COCO files only"),
])
def test_tensorpack_refuses_what_it_cannot_honour_in_one_line(change, message):
    kw = dict({"batch": 1}, **change)
    with pytest.raises(UserError, match=message) as err:
        FRAMEWORKS["tensorpack"].command(ctx("tensorpack", **kw))
    assert "\n" not in str(err.value)


def test_tensorpack_claims_no_retinanet_and_fp32_only():
    fw = FRAMEWORKS["tensorpack"]
    assert fw.models == {"faster_rcnn", "mask_rcnn"} and fw.precisions == {"fp32"}
    assert not fw.supports("retinanet", "fp32") and not fw.supports("faster_rcnn", "fp16")
    argv = fw.command(ctx("tensorpack", batch=1, options={"weights": "/w/ImageNet-R50-AlignPadding.npz"}))
    assert config_of(argv)["BACKBONE.WEIGHTS"] == "/w/ImageNet-R50-AlignPadding.npz"
    s = fw.settings(ctx("tensorpack", batch=1, gpus=16))
    assert (s["input_size"], s["rpn_post_nms_train"], s["images_per_device"]) == ([800, 1344], 2000, 1)
    assert s["warmup"] == "linear from 0.165 over 1000 iterations"     # 0.33 x 8 / 16 beyond 8 GPUs


# ------------------------------------------------------------------ registries, recipes, paper

def test_both_are_registered_with_their_own_recipe_and_scraper():
    for name in ("detectron", "tensorpack"):
        assert FRAMEWORKS[name].scraper == name and name in scrapers.FORMATS and name in scrapers.PATH_SCRAPERS
        assert images.default_recipe(name) == name and images.RECIPES[name].python == "python3"


@pytest.mark.parametrize("module, recipe, arg", [(detectron, "detectron", "DETECTRON_COMMIT"),
                                                 (tensorpack, "tensorpack", "TENSORPACK_COMMIT")])
def test_each_recipe_checks_out_the_adapters_commit(module, recipe, arg):
    text = (ROOT / "dockerfiles" / recipe / "Dockerfile").read_text()
    assert "ARG %s=%s\n" % (arg, module.COMMIT) in text and 'git checkout "$%s"' % arg in text
    assert "UNVERIFIED-DIGEST" in text


def test_the_papers_columns_are_these_frameworks():
    pub = published.load("simpledet-paper")
    assert set(pub.frameworks) <= set(FRAMEWORKS)
    assert {"detectron", "tensorpack"} <= set(pub.frameworks)


# ------------------------------------------------------------------ logs from known times

def detectron_log(times, start_iter=0, period=20):
    """Detectron's json_stats lines of a run whose iteration k (0-based) took times[k - start_iter]:
    the timer's mean since the start, reset right after iteration start_iter + 20 is logged."""
    max_iter = start_iter + len(times)
    out = ["INFO train_net.py:  95: Called with args:"]
    timed = []
    for k in range(start_iter, max_iter):
        timed.append(times[k - start_iter])
        if k % period == 0 or k == max_iter - 1:
            mean = sum(timed) / len(timed)
            stats_line = {"iter": k, "time": "{:.6f}".format(mean), "lr": "0.006667", "loss": "1.250000",
                          "eta": str(datetime.timedelta(seconds=int(mean * (max_iter - k)))),
                          "mb_qsize": 64, "mem": 6001, "accuracy_cls": "0.900000"}
            out.append("json_stats: " + json.dumps(stats_line, sort_keys=True))
        if k == start_iter + period:
            timed = []
    return "\n".join(out) + "\n"


def known_times(n, seed):
    rng = random.Random(seed)
    return [round(0.5 + rng.random() * 0.2, 6) for _ in range(n)]


@pytest.mark.parametrize("warmup, measure", [(21, 60), (41, 40), (20, 61), (1, 99)])
def test_two_detectron_running_means_give_the_true_window_mean(warmup, measure):
    times = known_times(100, seed=warmup)
    recs, errors = scrapers.get("detectron")(detectron_log(times).splitlines())
    assert not errors and {r.kind for r in recs} == {rec_kinds.CUMULATIVE_MEAN}
    est = stats.reported(recs, warmup, measure, 16)
    first, last = est.window
    truth = sum(times[first - 1:last]) / (last - first + 1)
    assert est.kind == rec_kinds.EXACT_CUMULATIVE
    n1, n2 = first - 1, last
    assert est.iteration_time_s == pytest.approx(truth, abs=0.5e-6 * (n1 + n2) / (n2 - n1))
    if warmup % 20 == 1:        # records at 1-based 1, 21, 41, ... and the last: the window's own edges
        assert est.window == (warmup + 1, warmup + measure)
    assert est.exact == (est.window == (warmup + 1, warmup + measure))   # 6 decimals: well within 0.1%


def test_a_resumed_detectron_run_is_placed_with_its_start_iteration():
    times = known_times(60, seed=7)
    recs, errors = scrapers.get("detectron")(detectron_log(times, start_iter=40).splitlines(), start_iter=40)
    assert not errors and [r.iteration for r in recs] == [41, 61, 81, 100]
    est = stats.reported(recs, 61, 39, 2)
    assert est.window == (62, 100)           # records at 41 (since 41), 61 (since 41), 81 and 100 (since 62)
    assert est.iteration_time_s == pytest.approx(sum(times[21:60]) / 39, abs=1e-5)


def tensorpack_log(times, steps, gpus):
    """The epoch-end lines of tensorpack's trainer and ScalarPrinter for epochs of `steps` steps."""
    out = []
    for e in range(1, len(times) // steps + 1):
        secs = sum(times[(e - 1) * steps:e * steps])
        out += ["[0901 10:00:00 @base.py:275] Start Epoch %d ..." % e,
                "[0901 10:00:09 @base.py:285] Epoch %d (global_step %d) finished, time:%.3g seconds." % (
                    e, e * steps, secs),
                "[0901 10:00:09 @monitor.py:474] QueueInput/queue_size: 50",
                "[0901 10:00:09 @monitor.py:474] Throughput (samples/sec): {:.5g}".format(steps * gpus / secs),
                "[0901 10:00:09 @monitor.py:474] total_cost: 1.5"]
    return "\n".join(out) + "\n"


def test_tensorpack_epoch_throughput_gives_the_windows_images_per_second():
    times = known_times(60, seed=3)
    text = tensorpack_log(times, tensorpack.STEPS_PER_EPOCH, gpus=8)
    recs, errors = scrapers.get("tensorpack")(text.splitlines(), **FRAMEWORKS["tensorpack"].scrape_options)
    assert not errors and [r.iteration for r in recs] == [10, 20, 30, 40, 50, 60]
    est = stats.reported(recs, 20, 40, 8)
    assert est.kind == rec_kinds.THROUGHPUT_FIGURE and est.window == (21, 60)
    assert est.throughput == pytest.approx(40 * 8 / sum(times[20:60]), rel=1e-4)


@pytest.mark.parametrize("fixture, name", [("detectron.log", "detectron"), ("tensorpack.log", "tensorpack")])
def test_a_log_cut_at_any_character_never_raises(fixture, name):
    text = (ROOT / "tests" / "scrapers" / "fixtures" / fixture).read_text(encoding="utf-8")
    whole, _ = scrapers.get(name)(text.splitlines())
    for cut in range(0, len(text), 7):
        line = text[:cut].count("\n")          # the line the cut falls in
        recs, errors = scrapers.get(name)(text[:cut].splitlines())
        before = [r for r in whole if r.line < line]
        if name == "tensorpack":   # an epoch's loss comes lines after its record: the cut may fall between
            recs = [r._replace(loss=None) for r in recs]
            before = [r._replace(loss=None) for r in before]
        assert recs[:len(before)] == before and all(r.line <= line for r in recs)
        assert all(e.line <= line for e in errors)
