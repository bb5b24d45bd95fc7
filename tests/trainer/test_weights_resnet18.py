"""The small scale of accuracy scenarios: `detbench weights make MODEL --depth 18` writes a
ResNet-18 FPN start that torchvision's model and the bundled trainer's (basic blocks, 2-2-2-2)
both load, computing the same features; its depth is read off the file."""
import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from conftest import config_path  # noqa: E402

from harness.drivers import weights_map  # noqa: E402
from harness.trainer import weights  # noqa: E402
from harness.trainer.config import load_config_module  # noqa: E402


def trainer_r18(config):
    module = load_config_module(config_path(config))
    cfg = module.CONFIG
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, block="basic", layers=(2, 2, 2, 2),
                                                             frozen_stages=0))
    return module.build_detector(cfg)


@pytest.mark.parametrize("model,config", [("retinanet", "retina_r50v1_fpn_1x"), ("faster_rcnn", "faster_r50v1_fpn_1x")])
def test_one_resnet18_file_gives_trainer_and_torchvision_the_same_features(tmp_path, model, config):
    state = weights.make(model, 3, depth=18)
    assert weights_map.depth_of(state) == 18 and "backbone.body.layer1.0.conv3.weight" not in state
    path = str(tmp_path / "r18.pt")
    weights.save(path, model, 3, state)
    assert weights_map.check(path, model) == len(state)
    assert torch.load(path, weights_only=True)["depth"] == 18
    tv, bt = weights.reference_model(model, 18), trainer_r18(config)
    weights.load_into(tv, path, model, "torchvision")
    weights.load_into(bt, path, model, "detbench-trainer")
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, theirs = bt.neck(bt.backbone(x)), list(tv.eval().backbone(x).values())
    for a, b in zip(ours, theirs):
        assert float((a - b).abs().max() / b.abs().max()) < 1e-4


def test_a_resnet18_file_does_not_load_into_the_resnet50_model(tmp_path):
    path = str(tmp_path / "r18.pt")
    weights.save(path, "retinanet", 0, weights.make("retinanet", 0, depth=18))
    with pytest.raises(weights_map.WeightsError, match="r18.pt"):
        weights.load_into(weights.reference_model("retinanet", 50), path, "retinanet", "torchvision")
