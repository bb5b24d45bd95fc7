"""The speed levers give the numbers the plain trainer gives: each one switched on alone, on
the same seeded model and batches, trains to the same losses within rounding.

  model.fused_focal_loss          focal.py's one-function focal loss vs torchvision's
  model.retina_merge_first_convs  both RetinaNet towers' first conv as one convolution
  model.mask_target_class_only    mask logits of each RoI's own class only
  train.fused_sgd                 torch's fused SGD kernel
  model.roi_align=sparse          RoIAlign as sparse matrix products (auto: on the CPU)
"""
import dataclasses

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


def fused_sgd_kinds():
    from harness.trainer.train import fused_sgd_devices
    kinds = [k for k in ("cpu", "cuda") if k in fused_sgd_devices(torch)]
    return [pytest.param(k, marks=pytest.mark.skipif(k == "cuda" and not torch.cuda.is_available(),
                                                     reason="no CUDA device here")) for k in kinds]


@pytest.mark.parametrize("kind", fused_sgd_kinds())
def test_a_first_step_the_loss_scaler_skips_leaves_fused_sgd_where_plain_sgd_is(kind):
    # fp16 training overflows on its first steps as the scaler finds its scale: the skipped
    # step must not leave the fused kernel's momentum uninitialised (torch makes it with
    # empty_like and fills it in the step the scaler skips). CPU autocast has no fp16 scaling
    # in the trainer, but torch's CPU scaler drives the same fused-kernel path.
    _, cfg = built("retina_tiny", "train.fused_sgd=true", "train.momentum=0.9")
    params = {}
    for fused in (False, True):
        model = torch.nn.Linear(3, 2).to(kind)
        torch.nn.init.constant_(model.weight, 1.0)
        torch.nn.init.constant_(model.bias, 0.5)
        optimizer, _ = engine.make_optimizer(model, dataclasses.replace(
            cfg, train=dataclasses.replace(cfg.train, fused_sgd=fused)), 1)
        scaler = torch.amp.GradScaler(kind, init_scale=2.0 ** 4)
        x = torch.ones(4, 3, device=kind)
        for overflow in (True, False, False):
            optimizer.zero_grad()
            loss = model(x).sum() * (float("inf") if overflow else 1.0)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        params[fused] = [p.detach().cpu().clone() for p in model.parameters()]
        buffers = [optimizer.state[p]["momentum_buffer"] for p in model.parameters()]
        assert all(torch.isfinite(b).all() for b in buffers)
    for plain, fused in zip(params[False], params[True]):
        assert torch.allclose(plain, fused, rtol=1e-6, atol=1e-6), (plain, fused)


@pytest.mark.parametrize("scaled", [False, True])
def test_the_clip_bounds_the_total_gradient_norm_after_the_scaler_unscales(scaled):
    # gradients of total norm 10 (the loss scaled by 16 under the scaler) clipped to 2: the step
    # uses gradients of norm 2 in the same direction, and the scaler does not unscale twice
    model = torch.nn.Linear(3, 2, bias=False)
    torch.nn.init.constant_(model.weight, 0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=16.0) if scaled else None
    x = torch.tensor([[6.0, 0.0, 0.0], [0.0, 8.0, 0.0]])
    loss = model(x).sum() / 2 ** 0.5     # each of W's rows gets (6, 8, 0) / sqrt(2): total norm 10
    (scaler.scale(loss) if scaled else loss).backward()
    engine.clip_gradients(optimizer, scaler, 2.0)
    assert float(model.weight.grad.norm()) == pytest.approx(2.0, rel=1e-6)
    if scaled:
        scaler.step(optimizer)
    else:
        optimizer.step()
    step = -model.weight.detach()
    assert float(step.norm()) == pytest.approx(2.0, rel=1e-6)
    assert float(step[0, 1]) == pytest.approx(0.2 * 8 / 2 ** 0.5, rel=1e-6)   # the direction is kept


def assert_same_losses(plain, lever, rel=1e-4):
    assert len(plain) == len(lever) > 0
    for it, (a, b) in enumerate(zip(plain, lever)):
        assert set(a) == set(b)
        for name in a:
            assert b[name] == pytest.approx(a[name], rel=rel, abs=1e-6), (it, name, a[name], b[name])


def pyramid_and_boxes(seed=1, count=60):
    """Four levels of a 128x192 canvas, and boxes on every level: inside, on the canvas's edges,
    past them, and under one feature pixel."""
    gen = torch.Generator().manual_seed(seed)
    size = (128, 192)
    feats = [torch.randn(2, 8, size[0] // s, size[1] // s, generator=gen, requires_grad=True) for s in (4, 8, 16, 32)]
    xy = torch.rand(count, 2, generator=gen) * torch.tensor([size[1], size[0]])
    boxes = torch.cat([xy, xy + torch.rand(count, 2, generator=gen) * 160 + 1], dim=1)
    boxes[: count // 2, 0::2] = boxes[: count // 2, 0::2].clamp(0, size[1])
    boxes[: count // 2, 1::2] = boxes[: count // 2, 1::2].clamp(0, size[0])
    boxes[:8] = torch.tensor([[0.0, 0.0, 192, 128], [150.0, 100.0, 192, 128], [0.0, 90.0, 12.0, 128],
                              [180.0, 0.0, 192, 9.0], [-20.0, -20.0, 10.0, 10.0], [190.0, 120.0, 260.0, 200.0],
                              [50.0, 50.0, 50.5, 50.2], [191.5, 127.5, 191.9, 127.9]])
    rois = torch.cat([torch.randint(0, 2, (count, 1), generator=gen).float(), boxes], dim=1)
    return feats, rois


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("ratio", [1, 2, 3])
def test_sparse_roi_align_and_its_gradient_are_torchvision_s(aligned, ratio):
    from harness.trainer.roi import MultiLevelRoIAlign
    feats, rois = pyramid_and_boxes()
    results = []
    for sparse in (False, True):
        pool = MultiLevelRoIAlign(output_size=7, sampling_ratio=ratio, aligned=aligned, canonical_size=56,
                                  sparse=sparse)
        assert sorted(set(pool.levels(rois[:, 1:]).tolist())) == [0, 1, 2, 3]
        out = pool(feats, rois)
        weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
        results.append((out.detach(), torch.autograd.grad((out * weight).sum(), feats)))
    (plain, plain_grads), (sparse, sparse_grads) = results
    # the same samples and weights, summed in another order: float32 rounding apart, which
    # grows with the gradient's size (a feature pixel gathers many samples; how torch orders
    # those sums differs between CPUs and builds: 6.7e-6 at a gradient of 11.4 was seen)
    torch.testing.assert_close(sparse, plain, rtol=2e-6, atol=5e-6)
    for a, b in zip(sparse_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=2e-6, atol=5e-6)


def autocast_cases():
    """(device, dtype) of every half-precision autocast this host can run (bf16 on any CPU:
    emulated where it has no kernels, which costs little at these sizes)."""
    cases = [pytest.param("cpu", torch.bfloat16, id="cpu-bf16")]
    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
    cases += [pytest.param("cuda", dtype, marks=cuda, id="cuda-" + name)
              for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16))]
    return cases


@pytest.mark.parametrize("device,dtype", autocast_cases())
def test_sparse_roi_align_under_autocast_gives_the_kernel_s_values_and_gradients(device, dtype):
    """Under autocast the pyramid is in half precision. Every RoIAlign path pools in float32
    (torchvision's kernel, plain or from the sync-free atlas, through its autocast rule; the
    sparse product with autocast off) and hands back rows and gradients in the pyramid's dtype:
    the sparse and kernel paths give the same float32 sums, rounded once to that dtype."""
    from harness.trainer.roi import MultiLevelRoIAlign
    feats32, rois = pyramid_and_boxes()
    rois = rois.to(device)
    weight = torch.randn((rois.shape[0], 8, 7, 7), generator=torch.Generator().manual_seed(2)).to(device)
    paths = {"kernel": {}, "atlas": {"sync_free": True}, "sparse": {"sparse": True}}
    results = {}
    for (path, options), half in ((p, h) for p in paths.items() for h in (True, False)):
        feats = [f.detach().to(device, dtype if half else torch.float32).requires_grad_() for f in feats32]
        pool = MultiLevelRoIAlign(output_size=7, sampling_ratio=2, canonical_size=56, **options)
        with torch.autocast(device_type=device, dtype=dtype, enabled=half):
            out = pool(feats, rois)
        (out.float() * weight).sum().backward()
        assert out.dtype == feats[0].dtype and all(f.grad.dtype == feats[0].dtype for f in feats), path
        results[path, half] = (out.detach().float(), [f.grad.float() for f in feats])
    # the half dtype's relative step: 2^-8 for bf16, 2^-11 for fp16; one rounding apart at most
    step = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    (sparse, sparse_grads), (kernel, kernel_grads) = results["sparse", True], results["kernel", True]
    torch.testing.assert_close(sparse, kernel, rtol=step, atol=step)
    for a, b in zip(sparse_grads, kernel_grads):
        assert a.abs().max() > 0
        torch.testing.assert_close(a, b, rtol=step, atol=step)
    # each path under autocast is its float32 self on the same (rounded) pyramid, to that precision
    for path in paths:
        (out, grads), (ref, ref_grads) = results[path, True], results[path, False]
        torch.testing.assert_close(out, ref, rtol=step, atol=step)
        for a, b in zip(grads, ref_grads):
            torch.testing.assert_close(a, b, rtol=2 * step, atol=2 * step * float(b.abs().max()))


def test_fused_focal_loss_of_half_precision_logits_is_float32_with_the_gradient_in_their_dtype():
    logits32, pos_class, weight = focal_case(7)
    logits = logits32.detach().to(torch.bfloat16).requires_grad_()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = focal_loss_sum(logits, pos_class, weight)
    grad, = torch.autograd.grad(loss, logits)
    assert loss.dtype == torch.float32 and grad.dtype == torch.bfloat16
    exact = logits.detach().float().requires_grad_()
    ref = torchvision_focal(exact, pos_class, weight, 0.25, 2.0)
    ref_grad, = torch.autograd.grad(ref, exact)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
    torch.testing.assert_close(grad.float(), ref_grad, rtol=2.0 ** -7, atol=1e-6)


def test_sparse_roi_align_of_no_boxes_is_empty_with_zero_gradients():
    from harness.trainer.roi import MultiLevelRoIAlign
    feats, rois = pyramid_and_boxes()
    out = MultiLevelRoIAlign(output_size=7, sparse=True)(feats, rois[:0])
    assert tuple(out.shape) == (0, 8, 7, 7)
    grads = torch.autograd.grad(out.sum(), feats, allow_unused=True)
    assert all(g is None or not g.any() for g in grads)


@pytest.mark.parametrize("model", ["retina_r50v1_fpn_1x", "faster_r50v1_fpn_1x", "mask_r50v1_fpn_1x"])
def test_channels_last_auto_is_on_for_a_cpu_at_avx512_level_only(model):
    from harness.trainer.config import apply_overrides, load_config_module, resolve_for_device
    cfg = load_config_module(config_path(model)).CONFIG
    assert cfg.train.channels_last == "auto"
    assert resolve_for_device(cfg, "cpu", "AVX512").train.channels_last == "true"
    assert resolve_for_device(cfg, "cpu", "AVX512_BF16").train.channels_last == "true"
    assert resolve_for_device(cfg, "cpu", "AVX2").train.channels_last == "false"     # no gain measured there
    assert resolve_for_device(cfg, "cuda", "AVX512").train.channels_last == "false"
    bf16 = apply_overrides(cfg, ["train.precision=bf16"])
    assert resolve_for_device(bf16, "cpu", "AVX512_BF16").train.channels_last == "true"
    for said, meant in (("true", "true"), ("on", "true"), ("0", "false")):
        forced = apply_overrides(cfg, ["train.channels_last=" + said])
        assert resolve_for_device(forced, "cpu", "AVX2").train.channels_last == meant


def test_channels_last_takes_true_false_or_auto_and_names_the_key_otherwise():
    from harness.trainer.config import ConfigError, TrainConfig
    assert TrainConfig(channels_last=True).channels_last == "true"
    assert TrainConfig().channels_last == "false"
    with pytest.raises(ConfigError, match=r"train.channels_last='nhwc' is not one of true, false, auto"):
        built("faster_tiny", "train.channels_last=nhwc")


def test_roi_align_auto_is_sparse_on_the_cpu_and_torchvision_s_kernel_elsewhere():
    from harness.trainer.config import ConfigError, resolve_for_device
    _, cfg = built("faster_tiny")
    assert cfg.model.roi_align == "auto"
    assert resolve_for_device(cfg, "cpu").model.roi_align == "sparse"
    assert resolve_for_device(cfg, "cuda").model.roi_align == "torchvision"
    _, adaptive = built("faster_tiny", "model.roi_align_sampling_ratio=0")
    assert resolve_for_device(adaptive, "cpu").model.roi_align == "torchvision"
    with pytest.raises(ConfigError, match="model.roi_align=sparse needs model.roi_align_sampling_ratio >= 1"):
        built("faster_tiny", "model.roi_align=sparse", "model.roi_align_sampling_ratio=0")
    model, _ = built("mask_tiny", "model.roi_align=sparse")
    assert model.roi_heads.box_extractor.sparse and model.roi_heads.mask_extractor.sparse


def test_the_trainer_s_meta_line_names_the_roi_align_that_ran(train_inprocess):
    rc, iters, metas, _ = train_inprocess("faster_tiny", "train.device=cpu", "train.max_iter=1")
    assert rc == 0 and metas[0]["roi_align"] == "sparse"


@pytest.mark.parametrize("config", ["faster_tiny", "mask_tiny"])
def test_a_sparse_roi_align_step_asks_the_host_nothing(config):
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["model.sync_free=true", "model.roi_align=sparse", "train.device=cpu"])
    torch.manual_seed(0)
    model = module.build_detector(cfg).train()
    from harness.trainer import data as trainer_data
    images, targets = next(iter(trainer_data.build_batches(cfg, torch.device("cpu"), 0, 1)))
    recorder = OpRecorder()
    with recorder:
        sum(model(images, targets).values()).backward()
    assert recorder.syncing == set()


@pytest.mark.parametrize("config,lever", [
    ("faster_tiny", "model.roi_align"),
    ("mask_tiny", "model.roi_align"),
])
def test_sparse_roi_align_trains_to_the_plain_trainer_s_losses(config, lever):
    plain = step_losses(config, False, extra=[lever + "=torchvision"])
    assert_same_losses(plain, step_losses(config, False, extra=[lever + "=sparse"]))


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
    assert mask_cfg.model.roi_align == "auto"      # sparse on the CPU: a tenth of the kernel's backward


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


def test_on_the_defaults_the_lever_benchmark_switches_only_the_chosen_levers():
    import benchmarks.trainer_levers as bench
    faster = bench.variants("faster_rcnn", ["channels_last"], on_defaults=True)
    # sparse RoIAlign and fused SGD stay as the config ships them: not named, so not switched
    assert faster == {"plain": ["train.channels_last=false"], "channels_last": ["train.channels_last=true"]}


def test_the_lever_benchmark_refuses_bf16_where_the_cpu_would_emulate_it(monkeypatch, capsys):
    import benchmarks.trainer_levers as bench
    monkeypatch.setattr(bench.hostcpu, "has_bf16_kernels", lambda flags: False)
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--precision", "bf16", "--quick", "--models", "retinanet"])
    assert stopped.value.code == 2
    assert "this CPU has no bf16 kernels" in capsys.readouterr().err
