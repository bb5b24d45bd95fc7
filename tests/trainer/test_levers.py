"""The speed levers give the numbers the plain trainer gives: each one switched on alone, on
the same seeded model and batches, trains to the same losses within rounding.

  model.fused_focal_loss          focal.py's one-function focal loss vs torchvision's
  model.retina_merge_first_convs  both RetinaNet towers' first conv as one convolution
  model.mask_target_class_only    mask logits of each RoI's own class only
  train.fused_sgd                 torch's fused SGD kernel
"""
import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from torchvision.ops import sigmoid_focal_loss  # noqa: E402

from conftest import config_path  # noqa: E402
from harness.trainer import engine  # noqa: E402
from harness.trainer.config import apply_overrides, load_config_module  # noqa: E402
from harness.trainer.focal import focal_loss_sum  # noqa: E402
from test_sync_free import OpRecorder, step_losses  # noqa: E402


def focal_case(seed, n=600, c=7):
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, c, generator=gen) * 4).requires_grad_()
    pos_class = torch.randint(0, c, (n,), generator=gen)
    kind = torch.rand(n, generator=gen)
    pos_class[kind < 0.8] = -1                       # about a fifth positive
    weight = (kind > 0.05).float()                   # and some ignored anchors (weight 0)
    weight[pos_class >= 0] = 1.0
    return logits, pos_class, weight


def torchvision_focal(logits, pos_class, weight, alpha, gamma):
    target = torch.zeros_like(logits)
    rows = (pos_class >= 0).nonzero().squeeze(1)
    target[rows, pos_class[rows]] = 1.0
    return (sigmoid_focal_loss(logits, target, alpha, gamma, reduction="none").sum(1) * weight).sum()


@pytest.mark.parametrize("alpha,gamma", [(0.25, 2.0), (0.5, 1.5), (0.0, 0.0)])
def test_fused_focal_loss_and_its_gradient_are_torchvision_s(alpha, gamma):
    logits, pos_class, weight = focal_case(int(gamma * 10) + 1)
    ref = torchvision_focal(logits, pos_class, weight, alpha, gamma)
    ref_grad, = torch.autograd.grad(ref * 3.0, logits)
    ours = focal_loss_sum(logits, pos_class, weight, alpha, gamma)
    grad, = torch.autograd.grad(ours * 3.0, logits)
    assert float(ours.detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-7)
    # ignored anchors get no gradient at all
    assert grad[weight == 0].abs().max() == 0


def test_fused_focal_loss_without_positives_is_the_negatives_loss():
    logits, _, weight = focal_case(4)
    none = torch.full((logits.shape[0],), -1)
    ref = torchvision_focal(logits, none, weight, 0.25, 2.0)
    assert float(focal_loss_sum(logits, none, weight)) == pytest.approx(float(ref), rel=1e-5)


def test_fused_focal_loss_asks_the_host_nothing():
    logits, pos_class, weight = focal_case(5)
    recorder = OpRecorder()
    with recorder:
        focal_loss_sum(logits, pos_class, weight).backward()
    assert recorder.syncing == set()


def built(config, *sets):
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, list(sets))
    return module.build_detector(cfg), cfg


@pytest.mark.parametrize("on", [False, True])
def test_each_lever_key_reaches_the_part_it_switches(on):
    value = "true" if on else "false"
    retina, _ = built("retina_tiny", "model.fused_focal_loss=" + value, "model.retina_merge_first_convs=" + value)
    assert retina.fused_focal_loss is on and retina.head.merge_first is on
    mask, cfg = built("mask_tiny", "model.mask_target_class_only=" + value, "train.fused_sgd=" + value)
    assert mask.roi_heads.mask_target_class_only is on
    optimizer, _ = engine.make_optimizer(mask, cfg, 1)
    assert bool(optimizer.defaults.get("fused")) is on


def assert_same_losses(plain, lever, rel=1e-4):
    assert len(plain) == len(lever) > 0
    for it, (a, b) in enumerate(zip(plain, lever)):
        assert set(a) == set(b)
        for name in a:
            assert b[name] == pytest.approx(a[name], rel=rel, abs=1e-6), (it, name, a[name], b[name])


@pytest.mark.parametrize("config,lever", [
    ("retina_tiny", "model.fused_focal_loss"),
    ("retina_tiny", "model.retina_merge_first_convs"),
    ("mask_tiny", "model.mask_target_class_only"),
    ("faster_tiny", "train.fused_sgd"),
    ("retina_tiny", "train.fused_sgd"),
])
def test_a_lever_trains_to_the_plain_trainer_s_losses(config, lever):
    # three steps: the second and third start from weights the first step's gradients moved
    plain = step_losses(config, False, extra=[lever + "=false"])
    assert_same_losses(plain, step_losses(config, False, extra=[lever + "=true"]))


RETINA_LEVERS = ("model.fused_focal_loss", "model.retina_merge_first_convs", "train.fused_sgd")
MASK_LEVERS = ("model.mask_target_class_only", "train.fused_sgd")


def test_all_levers_together_give_the_plain_losses_sync_free_too():
    def switched(levers, on):
        return [name + ("=true" if on else "=false") for name in levers]
    assert_same_losses(step_losses("retina_tiny", False, extra=switched(RETINA_LEVERS, False)),
                       step_losses("retina_tiny", False, extra=switched(RETINA_LEVERS, True)))
    assert_same_losses(step_losses("mask_tiny", False, extra=switched(MASK_LEVERS, False)),
                       step_losses("mask_tiny", True, extra=switched(MASK_LEVERS, True)))


def test_the_r50_configs_switch_on_the_levers_that_pay_on_the_cpu():
    # benchmarks/trainer_levers.py --parts: the merged tower conv was slower on the CPU
    retina, retina_cfg = built("retina_tiny")
    mask, mask_cfg = built("mask_tiny")
    assert retina.fused_focal_loss and not retina.head.merge_first
    assert mask.roi_heads.mask_target_class_only
    assert retina_cfg.train.fused_sgd and mask_cfg.train.fused_sgd


def test_the_target_class_mask_logits_are_the_full_head_s():
    from harness.trainer.rcnn import MaskHead
    torch.manual_seed(0)
    head = MaskHead(in_channels=8, conv_dim=8, num_classes=5)
    x = torch.randn(6, 8, 14, 14)
    labels = torch.tensor([0, 1, 5, 3, 3, 2])
    full = head(x)
    picked = full[torch.arange(6), labels]
    torch.testing.assert_close(head(x, labels), picked, rtol=1e-5, atol=1e-6)


def test_the_lever_benchmark_s_plain_trainer_has_every_lever_off():
    import benchmarks.trainer_levers as bench
    retina = bench.variants("retinanet", list(bench.LEVERS))
    assert retina["plain"] == ["model.fused_focal_loss=false", "model.retina_merge_first_convs=false",
                               "train.channels_last=false", "train.fused_sgd=false"]
    assert "model.fused_focal_loss=true" in retina["fused_focal_loss"]
    assert retina["fused_focal_loss"].count("train.fused_sgd=false") == 1
    assert "train.channels_last=false" in retina["together"]
    mask = bench.variants("mask_rcnn", ["mask_class_only", "channels_last"])
    assert set(mask) == {"plain", "mask_class_only", "channels_last"}     # one lever: no "together"
