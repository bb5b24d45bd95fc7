"""Initial weights from a file: an ImageNet ResNet-50 for the backbone, or a whole detector.

The backbone file is torchvision's resnet50 state_dict with seeded, non-trivial batch-norm
weights and running statistics; loaded with model.backbone_weights, the bundled backbone
(frozen norms folded into the convs) gives torchvision's eval-mode features of every stage.
A file that does not fit is refused before training with one line naming the file and
the first key that does not fit, exit 2.
"""
import os
import types

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
torchvision = pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import config_path  # noqa: E402

from harness.frameworks import detbench_trainer  # noqa: E402
from harness.trainer import pretrained, weights  # noqa: E402
from harness.trainer.backbone import ResNet  # noqa: E402
from harness.trainer.config import ConfigError, apply_overrides, load_config_module  # noqa: E402
from harness.trainer.train import with_weights_option  # noqa: E402

RTOL = 1e-4
R50 = "torchvision's ResNet (bottleneck blocks, layers 3,4,6,3)"
TINY_RUN = ("train.max_iter=1", "data.images_per_device=1", "data.input_size=64x64", "train.device=cpu")


def imagenet_state(seed=5):
    """torchvision's resnet50 state with seeded weights and batch norms far from the identity."""
    torch.manual_seed(seed)
    net = torchvision.models.resnet50(weights=None)
    g = torch.Generator().manual_seed(seed)
    state = net.state_dict()
    with torch.no_grad():
        for name, module in net.named_modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                n = module.num_features
                state[name + ".weight"].copy_(0.5 + torch.rand(n, generator=g))
                state[name + ".bias"].copy_(0.1 * torch.randn(n, generator=g))
                state[name + ".running_mean"].copy_(0.1 * torch.randn(n, generator=g))
                state[name + ".running_var"].copy_(0.5 + torch.rand(n, generator=g))
    return {k: v.clone() for k, v in state.items()}


@pytest.fixture(scope="module")
def r50(tmp_path_factory):
    """(path, state) of a seeded ImageNet-layout resnet50 file."""
    state = imagenet_state()
    path = str(tmp_path_factory.mktemp("pretrained") / "resnet50.pth")
    torch.save(state, path)
    return path, state


def rel_error(a, b):
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))


def torchvision_stages(state, x):
    net = torchvision.models.resnet50(weights=None)
    net.load_state_dict(state)
    net.eval()
    with torch.no_grad():
        y = net.maxpool(net.relu(net.bn1(net.conv1(x))))
        outs = []
        for layer in (net.layer1, net.layer2, net.layer3, net.layer4):
            y = layer(y)
            outs.append(y)
    return outs


def bundled_stages(path, norm="frozen_bn", x=None):
    backbone = ResNet(norm=norm, out_stages=(2, 3, 4, 5))
    count = pretrained.load_backbone(backbone, path)
    backbone.eval()
    with torch.no_grad():
        return count, backbone(x)


def image(seed=0, size=(64, 96)):
    return torch.rand(1, 3, *size, generator=torch.Generator().manual_seed(seed))


def model_of(config, *sets):
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, list(sets))
    return module.build_detector(cfg)


# --- parity of the loaded backbone ----------------------------------------------------------------

@pytest.mark.parametrize("norm", ["frozen_bn", "bn"])
def test_the_backbone_computes_torchvision_s_resnet50_features_from_an_imagenet_file(r50, norm):
    path, state = r50
    x = image()
    theirs = torchvision_stages(state, x)
    count, ours = bundled_stages(path, norm, x)
    counters = norm == "bn"            # BatchNorm2d keeps num_batches_tracked; the frozen norm has none
    assert count == len([k for k in state if not k.startswith("fc.")
                         and (counters or not k.endswith("num_batches_tracked"))])
    assert len(ours) == len(theirs) == 4
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        assert rel_error(a, b) < RTOL


def test_the_batch_norm_statistics_matter(r50):
    """Without the file's running statistics the features differ: the test above checks the folding."""
    path, state = r50
    x = image(1)
    plain = {k: v for k, v in state.items()}
    for k in plain:
        if k.endswith("running_mean"):
            plain[k] = torch.zeros_like(plain[k])
    theirs = torchvision_stages(plain, x)
    _, ours = bundled_stages(path, "frozen_bn", x)
    assert rel_error(ours[0], theirs[0]) > 1e-3


@pytest.mark.parametrize("wrapper", ["state_dict", "model"])
def test_a_wrapped_state_dict_loads_the_same(r50, tmp_path, wrapper):
    path, state = r50
    wrapped = str(tmp_path / "wrapped.pth")
    torch.save({wrapper: state, "epoch": 90}, wrapped)
    a, b = ResNet(), ResNet()
    pretrained.load_backbone(a, path)
    pretrained.load_backbone(b, wrapped)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(sa["stages.3.2.conv3.norm.running_var"], state["layer4.2.bn3.running_var"])


def test_the_trainer_starts_from_an_imagenet_backbone(r50, train_inprocess):
    path, _ = r50
    sets = TINY_RUN + ("model.backbone_weights=" + path,)
    rc, iters, _, err = train_inprocess("retina_r50v1_fpn_1x", *sets)
    assert rc == 0, err
    assert len(iters) == 1


# --- whole detectors --------------------------------------------------------------------------------

def test_a_plain_bundled_state_dict_loads_into_the_detector(tmp_path):
    torch.manual_seed(1)
    source = model_of("retina_tiny")
    path = str(tmp_path / "retina.pth")
    torch.save(source.state_dict(), path)
    torch.manual_seed(2)
    net = model_of("retina_tiny")
    count, layout = pretrained.load_detector(net, path, "retinanet")
    assert layout == "trainer" and count == len(source.state_dict())
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in source.state_dict().items())


def test_a_trainer_checkpoint_starts_a_new_run(tmp_path, train_inprocess, capsys):
    folder = str(tmp_path / "ckpt")
    rc, _, _, err = train_inprocess("faster_tiny", "train.max_iter=1", "train.checkpoint_every=1",
                                    "train.checkpoint_dir=" + folder, "train.device=cpu")
    assert rc == 0, err
    path = os.path.join(folder, "iter_0000001.pth")
    saved = torch.load(path, map_location="cpu", weights_only=True)["model"]
    net = model_of("faster_tiny")
    count, layout = pretrained.load_detector(net, path, "faster_rcnn")
    assert layout == "trainer checkpoint" and count == len(saved)
    assert all(torch.equal(saved[k], v) for k, v in net.state_dict().items())
    from harness.trainer import train
    assert train.main([config_path("faster_tiny"), "--set", "model.weights=" + path, "--set", "train.max_iter=1",
                       "--set", "train.device=cpu"]) == 0
    assert "loaded weights %s: %d tensors (trainer checkpoint layout)" % (path, count) in capsys.readouterr().out
    with pytest.raises(pretrained.WeightsError, match="checkpoint of a faster model, this run trains retina"):
        pretrained.load_detector(model_of("retina_tiny"), path, "retinanet")


def test_a_plain_torchvision_detector_state_dict_is_mapped(tmp_path):
    state = weights.make("retinanet", 3)
    path = str(tmp_path / "tv.pth")
    torch.save({"model": state}, path)
    net = model_of("retina_r50v1_fpn_1x")
    count, layout = pretrained.load_detector(net, path, "retinanet")
    assert layout == "torchvision" and count == len(net.state_dict())
    assert torch.equal(net.state_dict()["backbone.stages.3.2.conv3.norm.running_var"],
                       state["backbone.body.layer4.2.bn3.running_var"])


def test_weights_option_is_model_weights():
    cfg = load_config_module(config_path("retina_tiny")).CONFIG
    assert with_weights_option(cfg, "a.pt").model.weights == "a.pt"
    same = apply_overrides(cfg, ["model.weights=a.pt"])
    assert with_weights_option(same, "a.pt") == same
    with pytest.raises(ConfigError, match="--weights b.pt and model.weights=a.pt name different files"):
        with_weights_option(same, "b.pt")


# --- refusals: one line, the file and the first key, exit 2 -----------------------------------------

def refused(train_inprocess, config, *sets):
    rc, iters, _, err = train_inprocess(config, *(TINY_RUN + sets))
    assert rc == 2 and not iters
    assert err.count("\n") == 1, err
    return err.strip()


def test_backbone_file_refusals(r50, tmp_path, train_inprocess):
    path, state = r50
    junk = tmp_path / "junk.pth"
    junk.write_bytes(os.urandom(300))
    err = refused(train_inprocess, "retina_tiny", "model.backbone_weights=%s" % junk)
    assert err.startswith("error: %s: not a torch file (" % junk)

    missing = str(tmp_path / "missing.pth")
    torch.save({k: v for k, v in state.items() if k != "layer4.2.bn3.running_var"}, missing)
    err = refused(train_inprocess, "retina_r50v1_fpn_1x", "model.backbone_weights=" + missing)
    assert err == "error: %s: no value for layer4.2.bn3.running_var of %s" % (missing, R50)

    err = refused(train_inprocess, "retina_tiny", "model.backbone_weights=" + path)
    assert err == "error: %s: key conv1.weight has shape [64, 3, 7, 7], this backbone expects [16, 3, 7, 7]" % path

    other = str(tmp_path / "vgg.pth")
    torch.save({"features.0.weight": torch.zeros(64, 3, 3, 3), "features.0.bias": torch.zeros(64)}, other)
    err = refused(train_inprocess, "retina_r50v1_fpn_1x", "model.backbone_weights=" + other)
    assert err == "error: %s: key features.0.weight is not in %s" % (other, R50)

    err = refused(train_inprocess, "retina_tiny", "model.backbone_weights=" + str(tmp_path / "none.pth"))
    assert err == "error: %s: no such file" % (tmp_path / "none.pth")


def test_a_resnet18_or_a_detector_file_is_not_a_resnet50_backbone(r50, tmp_path):
    r18 = str(tmp_path / "r18.pth")
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), r18)
    with pytest.raises(pretrained.WeightsError) as err:
        pretrained.load_backbone(ResNet(), r18)
    assert str(err.value) == ("%s: key layer1.0.conv1.weight has shape [64, 64, 3, 3], this backbone expects "
                              "[64, 64, 1, 1]" % r18)
    det = str(tmp_path / "det.pth")
    torch.save({"backbone.body.conv1.weight": torch.zeros(64, 3, 7, 7)}, det)
    with pytest.raises(pretrained.WeightsError, match="key backbone.body.conv1.weight is not in .*"
                       r"\(a detector's weights: use model.weights\)"):
        pretrained.load_backbone(ResNet(), det)


def test_detector_file_refusals(r50, tmp_path, train_inprocess):
    torch.manual_seed(0)
    state = model_of("retina_tiny").state_dict()
    path = str(tmp_path / "retina.pth")
    torch.save(state, path)

    err = refused(train_inprocess, "faster_tiny", "model.weights=" + path)     # RetinaNet's FPN starts at C3
    assert err == ("error: %s: key neck.lateral.0.weight has shape [32, 32, 1, 1], this trainer's faster model "
                   "expects [32, 16, 1, 1]" % path)

    err = refused(train_inprocess, "retina_tiny", "model.weights=" + path, "model.num_classes=5")
    assert err == ("error: %s: key head.cls_logits.weight has shape [36, 32, 3, 3], this trainer's retina model "
                   "expects [45, 32, 3, 3]" % path)

    partial = str(tmp_path / "partial.pth")
    torch.save({k: v for k, v in state.items() if k != "head.box_deltas.bias"}, partial)
    err = refused(train_inprocess, "retina_tiny", "model.weights=" + partial)
    assert err == "error: %s: no value for this trainer's retina model's head.box_deltas.bias" % partial

    junk = tmp_path / "junk.pth"
    junk.write_text("not torch\n")
    err = refused(train_inprocess, "retina_tiny", "model.weights=%s" % junk)
    assert err.startswith("error: %s: not a torch file (" % junk)

    err = refused(train_inprocess, "retina_r50v1_fpn_1x", "model.weights=" + r50[0])
    assert err == "error: %s: key conv1.weight is not in this trainer's retina model" % r50[0]


def test_backbone_and_detector_weights_together_are_refused(train_inprocess):
    err = refused(train_inprocess, "retina_tiny", "model.weights=a.pth", "model.backbone_weights=b.pth")
    assert "model.backbone_weights and model.weights are both set" in err
    err = refused(train_inprocess, "retina_tiny", "model.norm=gn", "model.backbone_weights=b.pth")
    assert "model.backbone_weights needs batch norms" in err


# --- what the harness reports ------------------------------------------------------------------------

def test_the_reported_init_names_the_backbone_file():
    def ctx(options, shared=None):
        return types.SimpleNamespace(options=options, weights=shared)
    assert detbench_trainer._init(ctx({})) == "random"
    assert detbench_trainer._init(ctx({"model.backbone_weights": "/w/resnet50.pth"})) == "backbone:resnet50.pth"
    assert detbench_trainer._init(ctx({"model.weights": "/w/det.pth"})) == "file:det.pth"
    assert detbench_trainer._init(ctx({}, "/w/shared.pt")) == "file:shared.pt"


def test_a_resumed_run_takes_its_tensors_from_the_checkpoint_not_the_weights_file(tmp_path, capsys):
    from harness.trainer import train
    torch.manual_seed(0)
    path = str(tmp_path / "retina.pth")
    torch.save(model_of("retina_tiny").state_dict(), path)
    folder = str(tmp_path / "ckpt")
    sets = ["--set", "model.weights=" + path, "--set", "train.max_iter=2", "--set", "train.checkpoint_every=1",
            "--set", "train.checkpoint_dir=" + folder, "--set", "train.device=cpu"]
    assert train.main([config_path("retina_tiny")] + sets) == 0
    os.unlink(path)
    capsys.readouterr()
    assert train.main([config_path("retina_tiny"), "--resume", os.path.join(folder, "iter_0000001.pth")] + sets) == 0
    assert "loaded weights" not in capsys.readouterr().out
    other = ["model.weights=other.pth" if s.startswith("model.weights=") else s for s in sets]
    assert train.main([config_path("retina_tiny"), "--resume", os.path.join(folder, "iter_0000001.pth")]
                      + other) == 2
    assert "model.weights=%s there, other.pth here" % path in capsys.readouterr().err
