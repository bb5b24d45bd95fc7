"""The rival adapters: launch commands as the seed (or upstream) gives them, scrapers that
read their formats with the options they declare, and settings under one vocabulary."""
import json

import pytest
from click.testing import CliRunner

from harness import scrapers
from harness.cli import main
from harness.frameworks import FRAMEWORKS
from harness.frameworks.base import CONTAINER_ONLY, NEEDS_GPU, RUNS_HERE, TrialContext
from harness.records import IterationRecord
from harness.rivals import settings as rival_settings

RIVALS = ["torchvision", "mmdetection", "detectron2", "effdet", "nvidia-efficientdet-tf2",
          "mmdetection-v1", "maskrcnn-benchmark", "simpledet-mxnet"]
COCO = {"annotations": "/d/ann.json", "images": "/d/img"}
SETTING_KEYS = {"images_per_device", "devices", "input_size", "precision", "data", "frozen_stages",
                "norm", "loader_workers", "flip"}


def ctx(framework, model="retinanet", precision="fp32", gpus=1, nodes=1, data=COCO, **kw):
    return TrialContext(framework=framework, model=model, precision=precision, gpus=gpus, nodes=nodes,
                        batch_per_gpu=2, input_size=(320, 320), iterations=25, data=data,
                        python="/env/bin/python", **kw)


def test_every_rival_is_listed_with_a_status_and_a_reason():
    out = CliRunner().invoke(main, ["frameworks"]).output
    for name in RIVALS:
        fw = FRAMEWORKS[name]
        assert fw.status in (RUNS_HERE, NEEDS_GPU, CONTAINER_ONLY)
        assert fw.why and fw.figures
        assert fw.scraper in scrapers.SCRAPERS
        assert name in out and fw.why in out


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
    assert "rpn_post_nms_train" not in s or model in rival_settings.TWO_STAGE


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


def test_mmdetection_v1_follows_the_seed_command():
    fw = FRAMEWORKS["mmdetection-v1"]
    fp32 = " ".join(fw.command(ctx("mmdetection-v1", model="faster_rcnn", gpus=8)))
    fp16 = " ".join(fw.command(ctx("mmdetection-v1", model="faster_rcnn", precision="fp16", gpus=8)))
    assert "torch.distributed.launch --nproc_per_node=8" in fp32 and "--launcher pytorch" in fp32
    assert fp32.endswith("configs/faster_rcnn_r50_fpn_1x.py --launcher pytorch")
    assert "configs/fp16/faster_rcnn_r50_fpn_fp16_1x.py" in fp16


def test_simpledet_mxnet_follows_the_seed_command():
    fw = FRAMEWORKS["simpledet-mxnet"]
    assert fw.command(ctx("simpledet-mxnet", model="faster_rcnn"))[1:] == [
        "/opt/simpledet/detection_train.py", "--config", "/opt/simpledet/config/faster_r50v1_fpn_accel_1x.py"]
    assert fw.command(ctx("simpledet-mxnet", model="mask_rcnn"))[-1].endswith("config/mask_r50v1_fpn_1x.py")


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
    "torchvision": "Epoch: [0]  [3/25]  eta: 0:00:05  lr: 0.002500  loss: 1.2000 (1.3000)  time: 0.5000  data: 0.0100  max mem: 0",
    "mmdetection": "11/21 05:00:00 - mmengine - INFO - Iter(train) [ 4/25]  lr: 1.0e-05  eta: 0:00:10  time: 0.5000  data_time: 0.0100  loss: 1.2000",
    "maskrcnn-benchmark": "eta: 0:00:10  iter: 20  loss: 1.2 (1.3)  time: 0.5000 (0.5100)  data: 0.0100 (0.0200)  lr: 0.002000  max mem: 3012",
    "simpledet-mxnet": "Epoch[0] Batch [20]\tIter: 20/87960\tLr: 0.00693\tSpeed: 28.71 samples/sec\tTrain-RpnAcc=0.981232,",
    "effdet": "Train: 0 [   3/100 (  3%)]  Loss: 1.234567 (1.2500)  Time: 0.412s,   38.83/s  (0.420s,   38.10/s)  LR: 1.000e-02  Data: 0.012 (0.015)",
    "detectron2": " eta: 0:01:00  iter: 39  total_loss: 1.104  time: 0.3716  last_time: 0.3690  data_time: 0.0132  last_data_time: 0.0095   lr: 0.00079922  max_mem: 3189M",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_scraper_reads_its_framework_with_the_declared_options(name):
    fw = FRAMEWORKS[name]
    records, errors = scrapers.get(fw.scraper)([SAMPLES[name]], **fw.scrape_options)
    assert errors == [] and len(records) == 1 and isinstance(records[0], IterationRecord)
    if name in ("torchvision", "mmdetection", "effdet"):
        assert records[0].span == 1                      # exact per-iteration figures
    if name == "detectron2":
        assert records[0].time_s == pytest.approx(0.3690)  # prefer="last": the iteration's own time
