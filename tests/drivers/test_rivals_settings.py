"""The DETBENCH_SETTINGS line of each rival driver: the settings come from the objects the
framework built (torchvision's model, mmdetection's merged config and model, effdet's config),
and where the framework honours what its adapter asked for they equal the declared ones.

torchvision's model is built here, in the project's env. mmdetection and effdet are not
installed in it: their readers are given the objects those libraries build, made here from
the same configs; a real trial of each checks the line end to end where its env is built.
"""
import copy
import io
import json
import sys
import types

import pytest

from harness import jsonlog
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import TrialContext
from harness.drivers import asrun
from tests.support.services import need_env

COCO = {"annotations": "/d/ann.json", "images": "/d/img"}
TWO_STAGE = ("faster_rcnn", "mask_rcnn")


def ctx(framework, model, data=None, size=(128, 160), **kw):
    return TrialContext(framework=framework, model=model, precision="fp32", gpus=1, nodes=1, batch_per_gpu=2,
                        input_size=size, iterations=3, data=data, env={"OMP_NUM_THREADS": "2"}, **kw)


def assert_declared_as_run(declared, ran):
    """Every declared key was read from what ran, with the declared value."""
    assert {k: ran.get(k, "(missing)") for k in declared} == declared


# ------------------------------------------------------------------ torchvision

@pytest.fixture(scope="module")
def tv():
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from harness.drivers import torchvision_driver
    return torchvision_driver


def tv_built(tv, c):
    """The model, optimizer and loader torchvision_driver.main builds for the adapter's argv."""
    import torch
    args = tv.parse_args(FRAMEWORKS["torchvision"].command(c)[2:])
    height, width = c.input_size
    model = tv.build_model(args, height, width).train()
    data = tv.Synthetic(args.iterations * args.batch_size, height, width, c.model == "mask_rcnn", 0)
    loader = tv.build_loader(args, data)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=args.lr, momentum=0.9,
                                weight_decay=1e-4)
    return args, model, optimizer, loader


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn", "mask_rcnn"])
def test_torchvision_settings_as_run_equal_the_declared_ones(tv, model):
    import torch
    c = ctx("torchvision", model)
    settings, implementation = tv.as_run(*tv_built(tv, c), None, torch.device("cpu"))
    assert_declared_as_run(FRAMEWORKS["torchvision"].settings(c), settings)
    assert settings["momentum"] == 0.9 and settings["weight_decay"] == 0.0001
    assert settings["norm"] == "frozen_bn" and "FrozenBatchNorm2d" in implementation["batch_norm"]
    if model == "retinanet":
        # the driver gives torchvision's generator the exact octave sizes, as the others use them
        # (torchvision's default truncates them to whole pixels: --retinanet-anchors whole-pixel)
        assert settings["anchors"] == ("sizes 32/40.32/50.8, 64/80.63/101.6, 128/161.3/203.2, 256/322.5/406.4, "
                                       "512/645.1/812.7; ratios 0.5, 1, 2")
        assert settings["cls_loss"] == "focal(alpha 0.25, gamma 2)" and "roi_align" not in implementation
        return
    assert settings["anchors"] == "sizes 32, 64, 128, 256, 512; ratios 0.5, 1, 2"
    assert implementation["roi_align"] == asrun.ROI_ALIGN_TORCHVISION
    if model == "mask_rcnn":
        assert settings["mask_head"] == "4 conv 256, 14x14 RoIs to 28x28 masks"
        assert implementation["mask_logits"] == "all 81 classes"
        assert implementation["mask_paste"] == ("resized into the box widened by one cell, corners truncated to "
                                                "whole pixels (torchvision.models.detection.roi_heads."
                                                "paste_masks_in_image)")
        assert implementation["mask_targets"] == ("RoIAlign without the half-pixel offset, fractions kept "
                                                  "(torchvision.models.detection.roi_heads.project_masks_on_boxes)")


def test_torchvision_settings_are_read_from_the_built_objects(tv):
    import torch
    args, model, optimizer, loader = tv_built(tv, ctx("torchvision", "faster_rcnn"))
    model.rpn._pre_nms_top_n["training"] = 123
    model.rpn._post_nms_top_n["training"] = 45
    model.roi_heads.fg_bg_sampler.batch_size_per_image = 64
    model.roi_heads.box_roi_pool.sampling_ratio = 0
    for p in model.backbone.body.layer2.parameters():
        p.requires_grad_(False)
    fused = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5, momentum=0.8,
                            foreach=True)
    plain = torch.utils.data.DataLoader(loader.dataset.inner, batch_size=3, collate_fn=tv.collate, num_workers=1)
    args.schedule = "declared"    # a loader not of the replica: the declared schedule is what it can say
    settings, implementation = tv.as_run(args, model, fused, plain, torch.bfloat16, torch.device("cpu"))
    assert (settings["rpn_pre_nms_train"], settings["rpn_post_nms_train"], settings["roi_batch_per_image"],
            settings["roi_align_sampling_ratio"]) == (123, 45, 64, 0)
    assert settings["frozen_stages"] == 2 and settings["precision"] == "bf16"
    assert (settings["lr"], settings["momentum"], settings["weight_decay"]) == (0.5, 0.8, 0.0)
    assert (settings["images_per_device"], settings["loader_workers"], settings["flip"], settings["shuffle"]) == \
        (3, 1, False, False)
    assert implementation["optimizer"] == "SGD, foreach"
    assert settings["lr_decay"] == "none"
    args.lr_steps, args.gamma = (900, 800), 0.5
    assert tv.as_run(args, model, fused, plain, None, torch.device("cpu"))[0]["lr_decay"] == "x0.5 at 800, 900"


@pytest.mark.slow
def test_torchvision_driver_prints_the_line_before_its_first_iteration(tv, capsys):
    assert tv.main(["--model", "retinanet", "--iterations", "1", "--batch-size", "1", "--input-size", "64x96",
                    "--seed", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [at] = [i for i, line in enumerate(lines) if line.startswith(jsonlog.SETTINGS_PREFIX)]
    assert at < min(i for i, line in enumerate(lines) if line.startswith("Epoch: [0]  ["))
    obj = json.loads(lines[at][len(jsonlog.SETTINGS_PREFIX):])
    assert obj["settings"]["input_size"] == [64, 96] and obj["settings"]["images_per_device"] == 1
    assert obj["implementation"]["memory_format"] == asrun.MEMORY_NCHW      # torchvision as its users run it
    assert set(obj["implementation"]) == {"batch_norm", "optimizer", "memory_format", "training_code"}
    assert obj["implementation"]["training_code"].startswith("detbench's replica of references/detection")
    assert "images resized to 64x96 in the data set" in obj["implementation"]["training_code"]


# ------------------------------------------------------------------ mmdetection

# the values of mmdet 3.3.0's R50-FPN model configs and 1x schedule that the reader looks at
MMDET_SCHEDULE = {
    "optim_wrapper": {"type": "OptimWrapper", "optimizer": {"type": "SGD", "lr": 0.02, "momentum": 0.9,
                                                            "weight_decay": 0.0001}},
    "param_scheduler": [{"type": "LinearLR", "start_factor": 0.001, "by_epoch": False, "begin": 0, "end": 500},
                        {"type": "MultiStepLR", "by_epoch": True, "milestones": [8, 11]}],
    "train_dataloader": {"batch_size": 2, "num_workers": 2, "sampler": {"type": "DefaultSampler", "shuffle": True},
                         "dataset": {"type": "CocoDataset"}},
    "load_from": None,
}
MMDET_TWO_STAGE = {
    "backbone": {"type": "ResNet", "depth": 50, "frozen_stages": 1, "norm_cfg": {"type": "BN", "requires_grad": True},
                 "norm_eval": True},
    "rpn_head": {"anchor_generator": {"type": "AnchorGenerator", "scales": [8], "ratios": [0.5, 1.0, 2.0],
                                      "strides": [4, 8, 16, 32, 64]},
                 "loss_cls": {"type": "CrossEntropyLoss", "use_sigmoid": True}, "loss_bbox": {"type": "L1Loss"}},
    "roi_head": {"bbox_roi_extractor": {"roi_layer": {"type": "RoIAlign", "output_size": 7, "sampling_ratio": 0}},
                 "bbox_head": {"num_classes": 80, "loss_cls": {"type": "CrossEntropyLoss", "use_sigmoid": False},
                               "loss_bbox": {"type": "L1Loss"}}},
    "train_cfg": {"rpn": {"sampler": {"num": 256, "pos_fraction": 0.5}},
                  "rpn_proposal": {"nms_pre": 2000, "max_per_img": 1000},
                  "rcnn": {"sampler": {"num": 512, "pos_fraction": 0.25}}},
}
MMDET_MASK = {
    "roi_head": {"mask_roi_extractor": {"roi_layer": {"type": "RoIAlign", "output_size": 14, "sampling_ratio": 0}},
                 "mask_head": {"type": "FCNMaskHead", "num_convs": 4, "conv_out_channels": 256, "num_classes": 80}},
    "train_cfg": {"rcnn": {"mask_size": 28}},
}
MMDET_RETINANET = {
    "backbone": MMDET_TWO_STAGE["backbone"],
    "neck": {"type": "FPN", "start_level": 1, "add_extra_convs": "on_input"},
    "bbox_head": {"anchor_generator": {"type": "AnchorGenerator", "octave_base_scale": 4, "scales_per_octave": 3,
                                       "ratios": [0.5, 1.0, 2.0], "strides": [8, 16, 32, 64, 128]},
                  "loss_cls": {"type": "FocalLoss", "use_sigmoid": True, "gamma": 2.0, "alpha": 0.25},
                  "loss_bbox": {"type": "L1Loss"}},
    "train_cfg": {"assigner": {"type": "MaxIoUAssigner"}},
}


def merged(base, child):
    """mmengine's merge of a child config onto its base: dicts merge key by key, `_delete_=True`
    replaces, everything else (lists too) replaces."""
    if not isinstance(base, dict) or not isinstance(child, dict) or child.get("_delete_"):
        return {k: v for k, v in child.items() if k != "_delete_"} if isinstance(child, dict) else child
    out = copy.deepcopy(base)
    for key, value in child.items():
        out[key] = merged(out.get(key), value)
    return out


def mmdet_cfg(tmp_path, model, *extra):
    """The driver's config for the adapter's argv, merged onto mmdet's base values."""
    from harness.drivers import mmdet_driver
    argv = FRAMEWORKS["mmdetection"].command(ctx("mmdetection", model, data=COCO))
    args = mmdet_driver.parse_args(argv[2:] + list(extra))
    path = tmp_path / ("%s.py" % model)
    mmdet_driver.write_config(args, str(path))
    child = {}
    exec(compile(path.read_text(), str(path), "exec"), {"__builtins__": {"dict": dict}}, child)
    child.pop("_base_")
    base_model = (MMDET_RETINANET if model == "retinanet" else
                  merged(MMDET_TWO_STAGE, MMDET_MASK) if model == "mask_rcnn" else MMDET_TWO_STAGE)
    base = dict(copy.deepcopy(MMDET_SCHEDULE), model=base_model)
    if model == "retinanet":
        base["optim_wrapper"]["optimizer"]["lr"] = 0.01
    return merged(base, child)


class RoIAlign:        # what mmcv.ops builds from a roi_layer dict (mmcv's defaults)
    __module__ = "mmcv.ops.roi_align"

    def __init__(self, output_size, sampling_ratio=0, aligned=True, use_torchvision=False, **_):
        self.output_size, self.sampling_ratio, self.aligned = output_size, sampling_ratio, aligned
        self.use_torchvision = use_torchvision


class OptimWrapper:
    def __init__(self, optimizer):
        self.optimizer = optimizer


def mmdet_objects(cfg):
    """Stand-ins for what mmdet builds from a merged config: a ResNet-like backbone whose BN
    layers follow norm_cfg and norm_eval, the RoIAlign layers, anchor generators and mask head,
    and the optimizer of optim_wrapper over the trainable parameters."""
    import torch
    m = cfg["model"]
    backbone_cfg = m["backbone"]

    class Backbone(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
            self.layer1 = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3), torch.nn.BatchNorm2d(4))
            for bn in (self.bn1, self.layer1[1]):
                for p in bn.parameters():
                    p.requires_grad_(backbone_cfg["norm_cfg"].get("requires_grad", True))

        def train(self, mode=True):
            super().train(mode)
            for module in self.modules():
                if isinstance(module, torch.nn.BatchNorm2d) and backbone_cfg.get("norm_eval"):
                    module.eval()
            return self

    def generator(g):
        scales = g.get("scales") or [g["octave_base_scale"] * 2 ** (i / g["scales_per_octave"])
                                     for i in range(g["scales_per_octave"])]
        ratios = torch.tensor(g["ratios"])
        # mmdet's base anchors: w = base * scale / sqrt(ratio), h = base * scale * sqrt(ratio), not rounded
        half_w = [base * torch.tensor(scales)[None, :] / ratios.sqrt()[:, None] / 2 for base in g["strides"]]
        half_h = [base * torch.tensor(scales)[None, :] * ratios.sqrt()[:, None] / 2 for base in g["strides"]]
        corners = [torch.stack([-w.reshape(-1), -h.reshape(-1), w.reshape(-1), h.reshape(-1)], dim=1)
                   for w, h in zip(half_w, half_h)]
        return types.SimpleNamespace(base_sizes=list(g["strides"]), scales=torch.tensor(scales),
                                     ratios=ratios, base_anchors=corners)

    net = torch.nn.Module()
    net.backbone = Backbone()
    if "roi_head" in m:
        roi = m["roi_head"]
        net.rpn_head = types.SimpleNamespace(prior_generator=generator(m["rpn_head"]["anchor_generator"]))
        net.roi_head = types.SimpleNamespace(
            bbox_roi_extractor=types.SimpleNamespace(roi_layers=[RoIAlign(**roi["bbox_roi_extractor"]["roi_layer"])]),
            with_mask="mask_head" in roi)
        if "mask_head" in roi:
            head = roi["mask_head"]
            net.roi_head.mask_head = MaskHead(
                num_convs=head["num_convs"], conv_out_channels=head["conv_out_channels"], roi_feat_size=(14, 14),
                class_agnostic=head.get("class_agnostic", False),
                conv_logits=torch.nn.Conv2d(head["conv_out_channels"], head["num_classes"], 1))
    else:
        net.bbox_head = types.SimpleNamespace(prior_generator=generator(m["bbox_head"]["anchor_generator"]))
    opt = cfg["optim_wrapper"]["optimizer"]
    optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=opt["lr"],
                                momentum=opt["momentum"], weight_decay=opt["weight_decay"])
    return net, OptimWrapper(optimizer)


class MaskHead(types.SimpleNamespace):
    """Stands for mmdet's FCNMaskHead, whose module holds the paste its predict calls (below)."""


def _do_paste_mask(masks, boxes, img_h, img_w, skip_empty=True):
    raise AssertionError("named, never called")


class BitmapMasks:      # mmdet.structures.mask's two kinds of masks, as the mask head's module imports them
    def crop_and_resize(self, bboxes, out_shape, inds, device="cpu", interpolation="bilinear", binarize=True):
        raise AssertionError("named, never called")


class PolygonMasks(BitmapMasks):
    def crop_and_resize(self, bboxes, out_shape, inds, device="cpu", interpolation="bilinear", binarize=True):
        raise AssertionError("named, never called")


for _kind in (BitmapMasks, PolygonMasks):
    _kind.__module__ = _kind.crop_and_resize.__module__ = "mmdet.structures.mask.structures"


@pytest.fixture
def mmdet_masks(monkeypatch):
    monkeypatch.setitem(sys.modules, "mmdet.structures.mask",
                        types.SimpleNamespace(BitmapMasks=BitmapMasks, PolygonMasks=PolygonMasks))


@pytest.mark.parametrize("model", ["retinanet", "faster_rcnn", "mask_rcnn"])
def test_mmdet_settings_as_run_equal_the_declared_ones(tmp_path, model, mmdet_masks):
    pytest.importorskip("torch")
    from harness.drivers import mmdet_hooks
    cfg = mmdet_cfg(tmp_path, model)
    net, wrapper = mmdet_objects(cfg)
    settings, implementation = mmdet_hooks.as_run(cfg, net, wrapper, 1, 2)
    assert_declared_as_run(FRAMEWORKS["mmdetection"].settings(ctx("mmdetection", model, data=COCO)), settings)
    assert settings["norm"] == "frozen_bn" and "eval mode without gradients" in implementation["batch_norm"]
    assert settings["precision"] == "fp32" and settings["weight_decay"] == 0.0001
    if model == "retinanet":
        assert settings["cls_loss"] == "focal(alpha 0.25, gamma 2)"
        assert settings["anchors"].startswith("sizes 32/40.32/50.8, 64/80.63/101.6,")
        return
    assert settings["cls_loss"] == "rpn bce, rcnn ce" and implementation["roi_align"] == asrun.ROI_ALIGN_MMCV
    if model == "mask_rcnn":
        assert settings["mask_head"] == "4 conv 256, 14x14 RoIs to 28x28 masks"
        assert implementation["mask_logits"] == "all 80 classes"
        # read off the head's own module, as mmdet's FCNMaskHead and its _do_paste_mask share one
        assert implementation["mask_paste"] == "bilinear over the float box (%s._do_paste_mask)" % __name__
        # LoadAnnotations makes bitmaps by default (poly2mask), and mask_target cuts them aligned
        assert implementation["mask_targets"] == ("RoIAlign with the half-pixel offset (aligned), binarised at 0.5 "
                                                  "(mmdet.structures.mask.structures.BitmapMasks.crop_and_resize)")
        for step in cfg["train_dataloader"]["dataset"]["pipeline"]:
            if step["type"] == "LoadAnnotations":
                step["poly2mask"] = False
        _, implementation = mmdet_hooks.as_run(cfg, net, wrapper, 1, 2)
        assert implementation["mask_targets"] == ("the polygons rasterised in the RoI's frame "
                                                  "(mmdet.structures.mask.structures.PolygonMasks.crop_and_resize)")


def test_mmdet_settings_are_read_from_the_merged_config_and_the_built_model(tmp_path):
    pytest.importorskip("torch")
    from harness.drivers import mmdet_hooks
    cfg = mmdet_cfg(tmp_path, "faster_rcnn", "--rpn-post-nms-train", "777", "--warmup-iters", "0")
    cfg["model"]["backbone"]["norm_eval"] = False               # BN statistics updated after all
    cfg["model"]["rpn_head"]["loss_bbox"] = {"type": "L1Loss"}
    cfg["train_dataloader"]["num_workers"] = 5
    net, wrapper = mmdet_objects(cfg)
    net.roi_head.bbox_roi_extractor.roi_layers[0].use_torchvision = True
    settings, implementation = mmdet_hooks.as_run(cfg, net, type("AmpOptimWrapper", (), {
        "optimizer": wrapper.optimizer, "cast_dtype": None})(), 1, 2)
    assert settings["rpn_post_nms_train"] == 777 and settings["warmup"] == "none"
    assert settings["norm"] == "bn"             # the statistics train, whatever the affine does
    assert settings["box_loss"] == "rpn l1, rcnn smooth_l1(1/9)" and settings["loader_workers"] == 5
    assert settings["precision"] == "bf16"     # mmengine's autocast without a dtype, on the CPU
    assert implementation["roi_align"] == asrun.ROI_ALIGN_TORCHVISION + " (through mmcv)"


@pytest.mark.parametrize("extra, scheduler, decay", [
    ((), None, "none"),                                  # the warmup's LinearLR alone: no decay
    (("--lr-steps", "800", "--gamma", "0.2"), None, "x0.2 at 800"),
    ((), {"type": "CosineAnnealingLR", "by_epoch": False, "begin": 0, "end": 1000}, "CosineAnnealingLR"),
    ((), {"type": "MultiStepLR", "by_epoch": True, "milestones": [8, 11]}, "MultiStepLR by epoch at [8, 11]"),
])
def test_mmdet_decay_is_read_from_the_merged_param_scheduler(tmp_path, extra, scheduler, decay):
    pytest.importorskip("torch")
    from harness.drivers import mmdet_hooks
    cfg = mmdet_cfg(tmp_path, "faster_rcnn", "--iterations", "1000", *extra)
    if scheduler:
        cfg["param_scheduler"] = list(cfg["param_scheduler"]) + [scheduler]
    net, wrapper = mmdet_objects(cfg)
    assert mmdet_hooks.as_run(cfg, net, wrapper, 1, 2)[0]["lr_decay"] == decay


# ------------------------------------------------------------------ effdet

EFFDET_D0 = dict(image_size=(128, 256), min_level=3, max_level=7, num_scales=3, anchor_scale=4.0,
                 aspect_ratios=[(1.0, 1.0), (1.4, 0.7), (0.7, 1.4)], alpha=0.25, gamma=1.5, delta=0.1,
                 box_loss_weight=50.0, label_smoothing=0.0)


def effdet_objects(workers=0):
    """Stand-ins for effdet's bench (its config and an EfficientNet-like backbone), timm's SGD
    (no weight decay on biases and norms) and the driver's loader with effdet's flip transform."""
    import torch
    from harness.drivers import effdet_driver
    backbone = torch.nn.Module()
    backbone.conv_stem, backbone.bn1 = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
    backbone.blocks = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3), torch.nn.BatchNorm2d(4))
    bench = types.SimpleNamespace(config=types.SimpleNamespace(**EFFDET_D0),
                                  model=types.SimpleNamespace(backbone=backbone.train()))
    params = list(backbone.parameters())
    optimizer = torch.optim.SGD([{"params": [p for p in params if p.dim() > 1], "weight_decay": 4e-5},
                                 {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}],
                                lr=0.01, momentum=0.9)
    data = effdet_driver.Synthetic(4, 128, 256, 0)
    data.transform = types.SimpleNamespace(transforms=[type("RandomFlip", (), {
        "horizontal": True, "vertical": False, "prob": 0.5})()])
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=workers,
                                         sampler=torch.utils.data.RandomSampler(data, True, 4))
    return bench, optimizer, effdet_driver.Normalized(loader, torch.device("cpu"))


@pytest.mark.filterwarnings("ignore:This DataLoader will create")   # built, never iterated
def test_effdet_settings_as_run_equal_the_declared_ones():
    pytest.importorskip("torch")
    from harness.drivers import effdet_driver
    c = ctx("effdet", "efficientdet_d0", size=(128, 256))
    args = effdet_driver.parse_args(FRAMEWORKS["effdet"].command(c)[2:])
    bench, optimizer, loader = effdet_objects(workers=args.workers)
    settings, implementation = effdet_driver.as_run(args, bench, optimizer, loader, None, "0.4.1")
    assert_declared_as_run(FRAMEWORKS["effdet"].settings(c), settings)
    assert settings["weight_decay"] == "4e-05, none on biases and norms"
    assert settings["cls_loss"] == "focal(alpha 0.25, gamma 1.5)" and settings["box_loss"] == "huber(delta 0.1) x 50"
    assert settings["anchors"] == ("sizes 32/40.32/50.8, 64/80.63/101.6, 128/161.3/203.2, 256/322.5/406.4, "
                                   "512/645.1/812.7; ratios 0.5, 1, 2")
    # torch's default update path for parameters on the CPU
    assert implementation == {"batch_norm": "trained BatchNorm2d", "optimizer": "SGD, per-parameter loop",
                              "memory_format": asrun.MEMORY_NCHW}


def test_effdet_settings_are_read_from_its_config():
    import torch
    from harness.drivers import effdet_driver
    bench, optimizer, loader = effdet_objects()
    bench.config.gamma, bench.config.image_size = 2.0, (256, 256)
    bench.loss_fn = types.SimpleNamespace(alpha=0.5, gamma=1.0, delta=0.2, box_loss_weight=10.0, label_smoothing=0.1)
    for p in bench.model.backbone.conv_stem.parameters():
        p.requires_grad_(False)
    bench.model.backbone.bn1.eval()
    args = effdet_driver.parse_args(["--model", "efficientdet_d0", "--iterations", "1", "--input-size", "256x256"])
    settings, _ = effdet_driver.as_run(args, bench, optimizer, loader, torch.bfloat16, "0.4.1")
    assert settings["input_size"] == [256, 256] and settings["precision"] == "bf16"
    assert settings["cls_loss"] == "focal(alpha 0.5, gamma 1), label smoothing 0.1"   # the bench's loss wins
    assert settings["box_loss"] == "huber(delta 0.2) x 10" and settings["data"] == "synthetic"
    assert settings["norm"] == "bn+bn_frozen_statistics" and settings["frozen_stages"] == -1


# ------------------------------------------------------------------ real trials

REAL = """\
name: settings-{fw}
matrix:
  framework: [{fw}]
  model: [{model}]
batch_per_gpu: 1
input_size: {size}
data:
  annotations: {ann}
  images: {images}
warmup: 1
measure: 1
repeats: 1
timeout_s: 900
env:
  OMP_NUM_THREADS: "2"
options:
  {fw}:
    workers: 0
"""


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("fw,model,size", [("torchvision", "faster_rcnn", [128, 128]),
                                           ("mmdetection", "mask_rcnn", [128, 128]),
                                           ("effdet", "efficientdet_d0", [256, 256])])
def test_a_real_trial_stores_the_settings_its_framework_ran_with(fw, model, size, tmp_path):
    from harness import run as run_mod
    from harness.results.store import Store
    from harness.plan import datasets
    need_env(fw)
    ann, images = datasets.make_coco(tmp_path / "coco", images=3, size=tuple(size))
    path = tmp_path / "s.yaml"
    path.write_text(REAL.format(fw=fw, model=model, size=size, ann=ann, images=images))
    run_id = run_mod.start(path, tmp_path / "results", out=io.StringIO())
    store = Store(tmp_path / "results", create=False)
    (trial,) = store.trials(run_id)
    log = (store.trial_dir(trial["id"]) / "log.txt").read_text(errors="replace")
    assert trial["status"] == "done", "%s\n%s" % (trial["reason"], log[-3000:])
    stored = json.loads(trial["settings_json"])
    assert stored["settings_source"] == "logged", log[-3000:]
    c = TrialContext(framework=fw, model=model, precision="fp32", gpus=1, nodes=1, batch_per_gpu=1,
                     input_size=tuple(size), iterations=2, data={"annotations": str(ann), "images": str(images)},
                     options={"workers": 0}, env={"OMP_NUM_THREADS": "2"})
    assert_declared_as_run(FRAMEWORKS[fw].settings(c), stored)
    assert stored["implementation"]["optimizer"].startswith("SGD")
