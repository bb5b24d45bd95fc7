"""The rival adapters: launch commands as the seed (or upstream) gives them, scrapers that
read their formats with the options they declare, and settings under one vocabulary."""
import json

import pytest

from harness.measure import scrapers
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.measure.records import CUMULATIVE_MEAN, IterationRecord
from harness.frameworks import settings as normalized

OWN = {"calibrate", "detbench-trainer"}      # detbench's own programs; every other framework is a rival
RIVALS = sorted(set(FRAMEWORKS) - OWN)
COCO = {"annotations": "/d/ann.json", "images": "/d/img"}
SETTING_KEYS = {"images_per_device", "devices", "input_size", "precision", "data", "frozen_stages",
                "norm", "loader_workers", "flip"}


def ctx(framework, model="retinanet", precision="fp32", gpus=1, nodes=1, data=COCO, **kw):
    return TrialContext(framework=framework, model=model, precision=precision, gpus=gpus, nodes=nodes,
                        batch_per_gpu=2, input_size=(320, 320), iterations=25, data=data,
                        python="/env/bin/python", **kw)


@pytest.mark.parametrize("name", RIVALS)
def test_settings_use_the_shared_keys(name):
    fw = FRAMEWORKS[name]
    model = sorted(fw.models)[0]
    s = fw.settings(ctx(name, model=model))
    assert SETTING_KEYS <= set(s)
    assert s["precision"] == "fp32" and s["devices"] == 1 and s["images_per_device"] == 2
    assert s["norm"] in ("frozen_bn", "bn", "syncbn", "gn")
    json.dumps(s)
    two = fw.settings(ctx(name, model="faster_rcnn")) if "faster_rcnn" in fw.models else {}
    if two:
        assert isinstance(two["rpn_post_nms_train"], int)
    assert "rpn_post_nms_train" not in s or model in normalized.TWO_STAGE


def test_maskrcnn_benchmark_follows_the_seed_command():
    fw = FRAMEWORKS["maskrcnn-benchmark"]
    argv = fw.command(ctx("maskrcnn-benchmark", model="mask_rcnn", precision="fp16", gpus=8))
    text = " ".join(argv)
    assert "-m torch.distributed.launch --nproc_per_node=8" in text
    assert "tools/train_net.py --config-file" in text and text.count("e2e_mask_rcnn_R_50_FPN_1x.yaml") == 1
    assert "MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN 2000" in text and "DTYPE float16" in text
    assert "SOLVER.MAX_ITER 25" in text and "SOLVER.IMS_PER_BATCH 16" in text
    retina = " ".join(fw.command(ctx("maskrcnn-benchmark", gpus=8)))
    assert "retinanet/retinanet_R-50-FPN_1x.yaml" in retina and "FPN_POST_NMS" not in retina


def test_mmdetection_v1_follows_the_seed_command_on_a_derived_config():
    fw = FRAMEWORKS["mmdetection-v1"]
    fp32 = fw.command(ctx("mmdetection-v1", model="faster_rcnn", gpus=8))
    text = " ".join(fp32)
    assert "torch.distributed.launch --nproc_per_node=8" in text and "--launcher pytorch" in text
    assert fp32[fp32.index("/opt/mmdetection/tools/train.py") + 1] == "{trial_dir}/detbench_mmdet_v1.py"
    assert fp32[fp32.index("--work_dir") + 1] == "{trial_dir}/work"
    fp16 = fw.trial_files(ctx("mmdetection-v1", model="faster_rcnn", precision="fp16", gpus=8))
    assert "_base = '/opt/mmdetection/configs/fp16/faster_rcnn_r50_fpn_fp16_1x.py'" in fp16["detbench_mmdet_v1.py"]


def test_simpledet_mxnet_starts_detection_train_on_a_derived_config():
    fw = FRAMEWORKS["simpledet-mxnet"]
    argv = fw.command(ctx("simpledet-mxnet", model="faster_rcnn"))
    assert argv[1].endswith("harness/drivers/simpledet_launch.py")
    assert argv[2:] == ["--trial-dir", "{trial_dir}", "--config", "detbench_simpledet.py",
                        "--simpledet", "/opt/simpledet"]
    derived = fw.trial_files(ctx("simpledet-mxnet", model="mask_rcnn"))["detbench_simpledet.py"]
    assert "_BASE = '/opt/simpledet/config/mask_r50v1_fpn_1x.py'" in derived


def test_local_rivals_log_every_iteration():
    tv = FRAMEWORKS["torchvision"].command(ctx("torchvision"))
    assert tv[0] == "/env/bin/python" and tv[tv.index("--print-freq") + 1] == "1"
    assert tv[tv.index("--iterations") + 1] == "25" and tv[tv.index("--input-size") + 1] == "320x320"
    mm = FRAMEWORKS["mmdetection"].command(ctx("mmdetection"))
    assert mm[0] == "/env/bin/python" and mm[mm.index("--iterations") + 1] == "25"
    assert FRAMEWORKS["mmdetection"].scrape_options == {"window": 1}
    assert FRAMEWORKS["torchvision"].scrape_options == {"window": 1}
    dist = " ".join(FRAMEWORKS["mmdetection"].command(ctx("mmdetection", gpus=8)))
    assert "torch.distributed.run --nproc_per_node 8" in dist and dist.endswith("--launcher pytorch")


def test_mmdetection_needs_coco_files_and_says_how_to_make_them():
    from harness.errors import UserError
    with pytest.raises(UserError, match="dataset make-coco"):
        FRAMEWORKS["mmdetection"].command(ctx("mmdetection", data=None))


def test_unknown_rival_options_are_rejected():
    from harness.errors import UserError
    with pytest.raises(UserError, match="unknown options"):
        FRAMEWORKS["torchvision"].command(ctx("torchvision", options={"wokers": 2}))


SAMPLES = {
    "torchvision": "Epoch: [0]  [3/25]  eta: 0:00:05  lr: 0.002500  loss: 1.2000 (1.3000)  time: 0.5000  "
                   "data: 0.0100  max mem: 0",
    "mmdetection": "11/21 05:00:00 - mmengine - INFO - Iter(train) [ 4/25]  lr: 1.0e-05  eta: 0:00:10  "
                   "time: 0.5000  data_time: 0.0100  loss: 1.2000",
    "maskrcnn-benchmark": "eta: 0:00:10  iter: 20  loss: 1.2 (1.3)  time: 0.5000 (0.5100)  data: 0.0100 (0.0200)  "
                          "lr: 0.002000  max mem: 3012",
    "simpledet-mxnet": "Epoch[0] Batch [20]\tIter: 20/87960\tLr: 0.00693\tSpeed: 28.71 samples/sec\t"
                       "Train-RpnAcc=0.981232,",
    "effdet": "Train: 0 [   3/100 (  3%)]  Loss: 1.234567 (1.2500)  Time: 0.412s,   38.83/s  (0.420s,   38.10/s)  "
              "LR: 1.000e-02  Data: 0.012 (0.015)",
    "detectron2-cuda": " eta: 0:01:00  iter: 39  total_loss: 1.104  time: 0.3716  data_time: 0.0132  lr: 0.00079922  "
                  "max_mem: 3189M",
}


BANNERS = {"detectron2-cuda": "[11/21 05:00:00 d2.engine.train_loop]: Starting training from iteration 0"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_scraper_reads_its_framework_with_the_declared_options(name):
    fw = FRAMEWORKS[name]
    # detectron2's running means are differenced from the start its trainer prints as it begins
    lines = ([BANNERS[name]] if name in BANNERS else []) + [SAMPLES[name]]
    records, errors = scrapers.get(fw.scraper)(lines, **fw.scrape_options)
    assert errors == [] and len(records) == 1 and isinstance(records[0], IterationRecord)
    if name in ("torchvision", "mmdetection"):
        assert records[0].span == 1                      # exact per-iteration figures
    if name in ("maskrcnn-benchmark", "effdet", "detectron2-cuda"):   # running means, differenced exactly
        assert records[0].kind == CUMULATIVE_MEAN
    if name == "detectron2-cuda":   # the 0.3-era line: the mean of iterations 3..40
        assert (records[0].time_s, records[0].span) == (0.3716, 38)


# --- equal work in the frameworks that run here -------------------------------------

HERE = ["detbench-trainer", "torchvision", "mmdetection", "detectron2"]
SHARED_KEYS = {
    "retinanet": {"box_loss", "extra_levels_from"},
    "faster_rcnn": {"rpn_pre_nms_train", "rpn_post_nms_train", "rpn_batch_per_image", "rpn_positive_fraction",
                    "roi_batch_per_image", "roi_positive_fraction", "roi_align_sampling_ratio",
                    "roi_align_aligned", "box_loss"},
}
SHARED_KEYS["mask_rcnn"] = SHARED_KEYS["faster_rcnn"] | {"mask_rois_per_image_max"}


@pytest.mark.parametrize("model", sorted(SHARED_KEYS))
def test_the_frameworks_here_report_the_same_detection_settings(model):
    env = {"OMP_NUM_THREADS": "2"}
    seen = {name: FRAMEWORKS[name].settings(ctx(name, model=model, env=env)) for name in HERE}
    for name, s in seen.items():
        assert SHARED_KEYS[model] | {"threads"} <= set(s), name
        assert s["threads"] == 2
    for key in SHARED_KEYS[model] | {"threads", "frozen_stages", "norm"}:
        values = {name: s[key] for name, s in seen.items()}
        assert len({json.dumps(v) for v in values.values()}) == 1, (key, values)
    if model != "retinanet":
        assert seen["mmdetection"]["rpn_post_nms_train"] == 2000   # not mmdet's config value, 1000
        assert seen["detectron2"]["rpn_post_nms_train"] == 2000    # nor detectron2's, 1000
        assert seen["detbench-trainer"]["roi_align_sampling_ratio"] == 2
        assert seen["detbench-trainer"]["roi_align_aligned"] is False


def test_a_changed_setting_shows_in_the_settings_of_that_framework_only():
    model = "faster_rcnn"
    trainer = FRAMEWORKS["detbench-trainer"].settings(ctx(
        "detbench-trainer", model=model, options={"model.rpn_post_nms_top_n_train": 1000,
                                                  "model.roi_align_aligned": "true"}))
    mmdet = FRAMEWORKS["mmdetection"].settings(ctx("mmdetection", model=model,
                                                   options={"rpn_pre_nms_train": 1000}))
    assert trainer["rpn_post_nms_train"] == 1000 and trainer["roi_align_aligned"] is True
    assert mmdet["rpn_pre_nms_train"] == 1000 and mmdet["rpn_post_nms_train"] == 2000
    assert FRAMEWORKS["torchvision"].settings(ctx("torchvision", model=model))["threads"] == "default"


def test_proposal_counts_reach_the_rival_commands():
    tv = FRAMEWORKS["torchvision"].command(ctx("torchvision", model="faster_rcnn",
                                               options={"rpn_pre_nms_train": 1500}))
    assert tv[tv.index("--rpn-pre-nms-train") + 1] == "1500" and tv[tv.index("--rpn-post-nms-train") + 1] == "2000"
    mm = FRAMEWORKS["mmdetection"].command(ctx("mmdetection", model="mask_rcnn"))
    assert mm[mm.index("--rpn-pre-nms-train") + 1] == "2000" and mm[mm.index("--rpn-post-nms-train") + 1] == "2000"


def test_the_trainer_refuses_a_second_thread_count_at_validation():
    from harness.errors import UserError
    fw = FRAMEWORKS["detbench-trainer"]
    fw.command(ctx("detbench-trainer", options={"train.threads": 2}, env={"OMP_NUM_THREADS": "2"}))
    with pytest.raises(UserError, match="train.threads=4 differs from the scenario's OMP_NUM_THREADS=2"):
        fw.command(ctx("detbench-trainer", options={"train.threads": 4}, env={"OMP_NUM_THREADS": "2"}))


@pytest.mark.parametrize("how", [{"options": {"train.allow_emulated_bf16": True}},
                                 {"extra_args": ("--set", "train.allow_emulated_bf16=true")},
                                 {"extra_args": ("--set=train.allow_emulated_bf16=true",)}])
def test_the_trainer_refuses_its_test_only_emulation_switch_in_a_trial(how):
    from harness.errors import UserError
    with pytest.raises(UserError, match="train.allow_emulated_bf16 is for the trainer's own tests"):
        FRAMEWORKS["detbench-trainer"].command(ctx("detbench-trainer", precision="bf16", **how))


def mmdet_config(tmp_path, model, *extra):
    """The config mmdet_driver writes, executed as mmengine would (it is plain Python)."""
    from harness.drivers import mmdet_driver
    args = mmdet_driver.parse_args(["--model", model, "--iterations", "25", "--ann", "/d/ann.json",
                                    "--images", "/d/img", "--input-size", "320x320"] + list(extra))
    path = tmp_path / "cfg.py"
    mmdet_driver.write_config(args, str(path))
    scope = {}
    exec(compile(path.read_text(), str(path), "exec"), {"__builtins__": {"dict": dict}}, scope)
    return scope


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn", "mask_rcnn"])
def test_mmdet_config_freezes_bn_for_real_and_never_sleeps_on_a_wrap(tmp_path, model):
    from harness.drivers import mmdet_hooks
    cfg = mmdet_config(tmp_path, model)
    backbone = cfg["model"]["backbone"]
    assert backbone["norm_cfg"] == {"type": "BN", "requires_grad": False}
    assert backbone["norm_eval"] is True and backbone["frozen_stages"] == 1 and backbone["init_cfg"] is None
    assert cfg["train_dataloader"]["sampler"]["type"] == "InfiniteSampler"
    assert cfg["train_cfg"]["type"] == "IterBasedTrainLoop" and cfg["train_cfg"]["max_iters"] == 25
    assert cfg["default_hooks"]["timer"] == {"type": mmdet_hooks.TIMER_HOOK}
    assert cfg["default_hooks"]["logger"]["interval"] == 1 and cfg["log_processor"]["window_size"] == 1
    assert {"type": mmdet_hooks.WORK_HOOK} in cfg["custom_hooks"]


@pytest.mark.parametrize("model", ["faster_rcnn", "mask_rcnn"])
def test_mmdet_config_takes_the_shared_detection_settings(tmp_path, model):
    cfg = mmdet_config(tmp_path, model, "--rpn-pre-nms-train", "1500", "--rpn-post-nms-train", "1800")
    m = cfg["model"]
    assert m["train_cfg"]["rpn_proposal"] == {"nms_pre": 1500, "max_per_img": 1800}
    assert m["train_cfg"]["rpn"]["sampler"] == {"num": 256, "pos_fraction": 0.5}
    assert m["train_cfg"]["rpn"]["assigner"] == {"min_pos_iou": 0.0}   # low-quality matches at any IoU
    assert m["train_cfg"]["rcnn"]["sampler"] == {"num": 512, "pos_fraction": 0.25}
    extractors = ["bbox_roi_extractor"] + (["mask_roi_extractor"] if model == "mask_rcnn" else [])
    assert set(k for k in m["roi_head"] if k.endswith("extractor")) == set(extractors)
    for name in extractors:
        layer = m["roi_head"][name]["roi_layer"]
        assert (layer["sampling_ratio"], layer["aligned"]) == (2, False)
    for loss in (m["rpn_head"]["loss_bbox"], m["roi_head"]["bbox_head"]["loss_bbox"]):
        assert loss == {"type": "SmoothL1Loss", "beta": 1.0 / 9.0, "loss_weight": 1.0}


def test_mmdet_retinanet_takes_p6_from_p5_like_the_others(tmp_path):
    cfg = mmdet_config(tmp_path, "retinanet")
    assert cfg["model"]["neck"] == {"add_extra_convs": "on_output", "relu_before_extra_convs": True}
    assert "roi_head" not in cfg["model"] and "train_cfg" not in cfg["model"]


class FakeResult:
    def __init__(self, pos, neg):
        self.pos_inds, self.neg_inds = list(range(pos)), list(range(neg))


class FakeSampler:
    def __init__(self, results):
        self.results = iter(results)

    def sample(self, *args, **kwargs):
        return next(self.results)


class FakeExtractor:
    def register_forward_hook(self, hook):
        self.hook = hook


class FakeOutput:
    def __init__(self, rows):
        self.shape = (rows, 256, 14, 14)


class FakeRPN:
    def loss_and_predict(self, x, samples, proposal_cfg=None):
        return {"loss_rpn_cls": 0.5}, [list(range(2000)), list(range(1987))]


class FakeTwoStage:
    def __init__(self):
        self.rpn_head = FakeRPN()
        self.roi_head = type("RoIHead", (), {})()
        self.roi_head.with_mask = True
        self.roi_head.bbox_sampler = FakeSampler([FakeResult(30, 482), FakeResult(12, 500)])
        self.roi_head.mask_roi_extractor = FakeExtractor()


def test_mmdet_work_hook_counts_what_mmdets_own_calls_return():
    from harness import jsonlog
    from harness.drivers import mmdet_hooks
    model = FakeTwoStage()
    counter = mmdet_hooks.WorkCounter()
    assert counter.install(model)
    losses, proposals = model.rpn_head.loss_and_predict("x", "samples", proposal_cfg={})
    assert losses == {"loss_rpn_cls": 0.5} and len(proposals) == 2     # passed through unchanged
    model.roi_head.bbox_sampler.sample("assign", "priors", "gt")
    model.roi_head.bbox_sampler.sample("assign", "priors", "gt")
    model.roi_head.mask_roi_extractor.hook(None, ("feats", "rois"), FakeOutput(42))
    line = counter.line(7)
    assert line.startswith(jsonlog.WORK_PREFIX)
    assert json.loads(line[len(jsonlog.WORK_PREFIX):]) == {
        "iteration": 7, "proposals": 3987, "sampled_rois": 1024, "positive_rois": 42, "mask_rois": 42}
    assert counter.line(8) == jsonlog.work_line(8)     # each iteration counts afresh


def test_mmdet_work_hook_counts_retinanet_positive_anchors():
    from harness.drivers import mmdet_hooks
    model = type("RetinaNet", (), {})()
    model.bbox_head = type("Head", (), {})()
    model.bbox_head.sampler = FakeSampler([FakeResult(17, 0), FakeResult(25, 0)])
    counter = mmdet_hooks.WorkCounter()
    assert counter.install(model)
    model.bbox_head.sampler.sample()
    model.bbox_head.sampler.sample()
    from harness import jsonlog
    assert counter.line(1) == jsonlog.WORK_PREFIX + '{"iteration":1,"positive_anchors":42}'


def test_rival_drivers_declare_no_log_line_of_their_own():
    # every prefix is declared once, in harness/jsonlog.py, which the drivers reach through common.py
    import pathlib
    import re
    driver = pathlib.Path(FRAMEWORKS["torchvision"].command(ctx("torchvision"))[1])
    for path in sorted(driver.parent.glob("*.py")):
        assert not re.search(r"[\"']DETBENCH_[A-Z]+ [\"']", path.read_text()), path.name


@pytest.mark.parametrize("kind", ["mask_rcnn", "retinanet"])
def test_torchvision_work_counter_reads_torchvisions_own_sampling(kind):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from torchvision.models.detection import MaskRCNN, RetinaNet
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from harness import jsonlog
    from harness.drivers import torchvision_driver

    class Backbone(torch.nn.Module):      # one level, 8 channels: small enough for a unit test
        out_channels = 8

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, stride=4, padding=1)

        def forward(self, x):
            return {"0": self.conv(x)}

    torch.manual_seed(0)
    size = dict(min_size=64, max_size=64)
    if kind == "retinanet":
        anchors = AnchorGenerator(((16, 32),), ((0.5, 1.0, 2.0),))
        model = RetinaNet(Backbone(), 5, anchor_generator=anchors, **size)
    else:
        anchors = AnchorGenerator(((16, 32),), ((0.5, 1.0, 2.0),))
        from torchvision.ops import MultiScaleRoIAlign
        model = MaskRCNN(Backbone(), 5, rpn_anchor_generator=anchors, rpn_pre_nms_top_n_train=300,
                         rpn_post_nms_top_n_train=60, box_batch_size_per_image=32,
                         box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
                         mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2), **size)
    model.train()
    counter = torchvision_driver.WorkCounter(model)
    boxes = torch.tensor([[4.0, 4.0, 40.0, 30.0], [20.0, 10.0, 60.0, 60.0]])
    masks = torch.zeros(2, 64, 64, dtype=torch.uint8)
    masks[0, 4:30, 4:40] = 1
    masks[1, 10:60, 20:60] = 1
    target = {"boxes": boxes, "labels": torch.tensor([1, 3]), "masks": masks}
    model([torch.rand(3, 64, 64), torch.rand(3, 64, 64)], [target, dict(target)])
    work = json.loads(counter.line(1)[len(jsonlog.WORK_PREFIX):])
    if kind == "retinanet":
        assert set(work) == {"iteration", "positive_anchors"} and work["positive_anchors"] >= 4
        return
    assert set(work) == {"iteration", "proposals", "sampled_rois", "positive_rois", "mask_rois"}
    assert 0 < work["proposals"] <= 2 * 60
    assert work["sampled_rois"] == 2 * 32            # the gt boxes join: enough candidates
    assert 2 * 2 <= work["positive_rois"] <= 2 * 8   # at least the gt boxes, at most 25%
    assert work["mask_rois"] == work["positive_rois"]
    assert json.loads(counter.line(2)[len(jsonlog.WORK_PREFIX):]) == {"iteration": 2}


@pytest.mark.parametrize("name", ["rivals-cpu.yaml", "rivals-cpu-512.yaml", "rivals-cpu-800x1344.yaml"])
def test_rivals_cpu_sets_every_compared_setting_equal_in_every_cell(name):
    import pathlib
    from harness.plan import yamlfile
    root = pathlib.Path(__file__).resolve().parents[2]
    doc, _ = yamlfile.load(root / "scenarios" / name)
    m = doc["matrix"]
    assert set(m["framework"]) == set(HERE) and set(m["model"]) == set(SHARED_KEYS)
    excluded = {(r["framework"], r.get("precision")) for r in doc["exclude"]}
    assert excluded == {("mmdetection", "bf16")}
    for model in m["model"]:
        for precision in m["precision"]:
            seen = {}
            for name in m["framework"]:
                if (name, precision) in excluded:
                    continue
                c = TrialContext(framework=name, model=model, precision=precision, gpus=1, nodes=1,
                                 batch_per_gpu=doc["batch_per_gpu"], input_size=tuple(doc["input_size"]),
                                 iterations=doc["warmup"] + doc["measure"], data=COCO,
                                 options=doc["options"][name], env=doc["env"])
                seen[name] = FRAMEWORKS[name].settings(c)
            keys = set.intersection(*(set(s) for s in seen.values()))
            assert {"lr", "warmup", "shuffle", "threads", "flip", "loader_workers"} <= keys
            differing = {k: {n: s[k] for n, s in seen.items()} for k in keys
                         if len({json.dumps(s[k]) for s in seen.values()}) > 1}
            # detectron2's own train_net.py has no unshuffled sampler: the one setting it runs differently
            shuffled = {n: n == "detectron2" for n in seen}
            assert differing in ({}, {"shuffle": shuffled}), (model, precision, differing)
            assert seen["detectron2"]["shuffle"] is True
