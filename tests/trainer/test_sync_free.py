"""The sync-free, fixed-shape two-stage path (`model.sync_free=true`) computes what the plain
path computes, and asks the host nothing while it does.

On a GPU, every op whose output size depends on the data (nonzero, boolean indexing, unique,
torchvision's NMS) or that reads a value back (.item(), .tolist()) makes the host wait for
the device. Without a GPU here, the ops themselves are watched: a dispatch mode records every
aten op a training step runs, and the sync-free step must run none of those.
"""
import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
torchvision = pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torchvision.ops import batched_nms  # noqa: E402

from conftest import config_path, record_losses  # noqa: E402
from harness.trainer import data as trainer_data  # noqa: E402
from harness.trainer.config import apply_overrides, load_config_module  # noqa: E402
from harness.trainer.nms import greedy_keep  # noqa: E402
from harness.trainer.roi import MultiLevelRoIAlign  # noqa: E402


def random_boxes(gen, groups, k, size=100.0):
    """[G, K, 4] boxes in clusters, so that suppression chains form, and scores [G, K]."""
    centres = torch.rand(groups, k // 8 + 1, 2, generator=gen) * size
    pick = torch.randint(0, centres.shape[1], (groups, k), generator=gen)
    c = centres.gather(1, pick[..., None].expand(-1, -1, 2)) + torch.randn(groups, k, 2, generator=gen) * 4
    wh = torch.rand(groups, k, 2, generator=gen) * 20 + 4
    boxes = torch.cat([c - wh / 2, c + wh / 2], dim=-1)
    return boxes, torch.rand(groups, k, generator=gen)


def torchvision_keep(boxes, scores, valid, thresh):
    g, k = scores.shape
    flat = valid.view(-1).nonzero().squeeze(1)
    groups = torch.arange(g)[:, None].expand(g, k).reshape(-1)
    kept = batched_nms(boxes.view(-1, 4)[flat], scores.view(-1)[flat], groups[flat], thresh)
    out = torch.zeros(g * k, dtype=torch.bool)
    out[flat[kept]] = True
    return out.view(g, k)


@pytest.mark.parametrize("thresh", [0.3, 0.5, 0.7])
def test_fixed_point_nms_keeps_what_torchvision_keeps(thresh):
    gen = torch.Generator().manual_seed(int(thresh * 10))
    boxes, scores = random_boxes(gen, groups=6, k=300)
    valid = torch.rand(6, 300, generator=gen) > 0.1
    keep, unsettled = greedy_keep(boxes, scores, valid, thresh, passes=300)
    assert int(unsettled) == 0
    assert torch.equal(keep, torchvision_keep(boxes, scores, valid, thresh))
    assert not (keep & ~valid).any()


def test_too_few_passes_are_counted_not_hidden():
    # a chain: each box overlaps the next one, so box i's fate waits on box i-1's
    n = 12
    x = torch.arange(n, dtype=torch.float32) * 5
    boxes = torch.stack([x, torch.zeros(n), x + 10, torch.full((n,), 10.0)], dim=-1)[None]
    scores = torch.linspace(1, 0.1, n)[None]
    valid = torch.ones(1, n, dtype=torch.bool)
    exact = torchvision_keep(boxes, scores, valid, 0.3)
    assert exact[0].tolist() == [i % 2 == 0 for i in range(n)]     # every other box survives
    short, unsettled = greedy_keep(boxes, scores, valid, 0.3, passes=2)
    assert int(unsettled) == 1 and not torch.equal(short, exact)
    enough, unsettled = greedy_keep(boxes, scores, valid, 0.3, passes=n)
    assert int(unsettled) == 0 and torch.equal(enough, exact)


@pytest.mark.parametrize("aligned,sampling", [(False, 2), (True, 2), (False, 0)])
def test_roialign_from_the_atlas_equals_the_per_level_calls(aligned, sampling):
    gen = torch.Generator().manual_seed(1)
    size = (128, 192)                                    # H, W of the canvas
    feats = [torch.randn(2, 8, size[0] // s, size[1] // s, generator=gen, requires_grad=True)
             for s in (4, 8, 16, 32)]
    xy = torch.rand(40, 2, generator=gen) * torch.tensor([size[1], size[0]])
    wh = torch.rand(40, 2, generator=gen) * 160 + 1
    boxes = torch.cat([xy, xy + wh], dim=1)
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, size[1])
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, size[0])
    boxes[:4] = torch.tensor([[0.0, 0.0, size[1], size[0]], [150.0, 100.0, size[1], size[0]],
                              [0.0, 90.0, 12.0, size[0]], [180.0, 0.0, size[1], 9.0]])   # on the edges
    rois = torch.cat([torch.randint(0, 2, (40, 1), generator=gen).float(), boxes], dim=1)
    outs = []
    for sync_free in (False, True):
        # a small canonical size spreads these boxes over all four levels
        pool = MultiLevelRoIAlign(output_size=7, sampling_ratio=sampling, aligned=aligned, canonical_size=56,
                                  sync_free=sync_free)
        assert sorted(set(pool.levels(rois[:, 1:]).tolist())) == [0, 1, 2, 3]
        with torch.no_grad():
            outs.append(pool(feats, rois))
    # the one known difference: a box under one feature pixel tall (or wide) on the map's far
    # edge, whose single-pixel bin torchvision's kernel reads as zeros past the edge
    edge = past_the_edge(rois, pool, feats, aligned)
    assert edge[:4].tolist() == [False] * 4
    # aligned boxes start half a pixel early and are never widened: none reaches past the edge
    assert int(edge.sum()) == 0 if aligned else 0 < int(edge.sum()) < 5
    # unit-sized features; a box moved into the atlas carries its coordinates' float32 rounding
    # at the atlas's offsets (up to about 1e-5 of a pixel here)
    torch.testing.assert_close(outs[1][~edge], outs[0][~edge], rtol=1e-4, atol=5e-5)
    clean = ~edge
    grads = []
    for sync_free in (False, True):
        pool = MultiLevelRoIAlign(output_size=7, sampling_ratio=sampling, aligned=aligned, canonical_size=56,
                                  sync_free=sync_free)
        out = pool(feats, rois[clean])
        weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
        grads.append(torch.autograd.grad((out * weight).sum(), feats))
    for plain, atlas in zip(*grads):
        torch.testing.assert_close(atlas, plain, rtol=1e-4, atol=5e-5)


def past_the_edge(rois, pool, feats, aligned):
    """Which boxes' sampling grid reaches past their level's map (RoIAlign widens a box under
    one pixel to one pixel, unless aligned)."""
    lvl = pool.levels(rois[:, 1:])
    scale = torch.tensor([1.0 / s for s in pool.strides])[lvl]
    size = torch.tensor([[f.shape[-1], f.shape[-2]] for f in feats], dtype=torch.float32)[lvl]   # (W, H)
    start = rois[:, 1:3] * scale[:, None] - (0.5 if aligned else 0.0)
    extent = (rois[:, 3:5] - rois[:, 1:3]) * scale[:, None]
    if not aligned:
        extent = extent.clamp(min=1.0)
    return (start + extent > size + 1e-6).any(dim=1)


def step_losses(config, sync_free, iterations=3, extra=()):
    """Each iteration's losses of a seeded tiny training run (model, batches and RNG all seeded)."""
    from harness.trainer import engine
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["model.sync_free=%s" % ("true" if sync_free else "false"),
                                          "train.max_iter=%d" % iterations, "train.device=cpu"] + list(extra))
    torch.manual_seed(0)
    model = module.build_detector(cfg)
    device = torch.device("cpu")
    model = engine.prepare_model(model, cfg, device, 1)
    batches = trainer_data.build_batches(cfg, device, 0, 1)
    recorded = record_losses(model)
    torch.manual_seed(0)
    engine.train(model, batches, cfg, device, 1, out=open("/dev/null", "w"))
    return recorded


@pytest.mark.parametrize("config", ["faster_tiny", "mask_tiny"])
def test_sync_free_training_gives_the_plain_losses(config):
    plain = step_losses(config, False)
    fixed = step_losses(config, True)
    assert len(plain) == len(fixed) == 3
    for it, (a, b) in enumerate(zip(plain, fixed)):
        assert set(a) == set(b)
        for name in a:
            assert b[name] == pytest.approx(a[name], rel=1e-4, abs=1e-6), (it, name, a[name], b[name])


# ops whose output size depends on the data or that copy a value to the host
SYNCING = {"aten::nonzero", "aten::_local_scalar_dense", "aten::masked_select", "aten::unique_dim",
           "aten::_unique2", "aten::_unique", "aten::unique_consecutive", "torchvision::nms",
           "aten::item", "aten::equal", "aten::is_nonzero"}


class OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.syncing = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        if name in SYNCING:
            self.syncing.add(name)
        elif name in ("aten::index.Tensor", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"):
            # boolean masks as indices find their positions on the host
            indices = args[1] if len(args) > 1 else ()
            if any(t is not None and t.dtype == torch.bool for t in indices):
                self.syncing.add(name + " with a boolean mask")
        return func(*args, **(kwargs or {}))


def syncing_ops(config, sync_free):
    module = load_config_module(config_path(config))
    cfg = apply_overrides(module.CONFIG, ["model.sync_free=%s" % ("true" if sync_free else "false"),
                                          "train.device=cpu"])
    torch.manual_seed(0)
    model = module.build_detector(cfg).train()
    images, targets = next(iter(trainer_data.build_batches(cfg, torch.device("cpu"), 0, 1)))
    recorder = OpRecorder()
    with recorder:
        losses = model(images, targets)
        sum(losses.values()).backward()
    return recorder.syncing


@pytest.mark.parametrize("config", ["faster_tiny", "mask_tiny"])
def test_a_sync_free_step_runs_no_op_that_waits_for_the_device(config):
    assert syncing_ops(config, sync_free=False), "the recorder should see the plain path's syncs"
    assert syncing_ops(config, sync_free=True) == set()


def test_retinanet_steps_are_sync_free_already():
    assert syncing_ops("retina_tiny", sync_free=False) == set()

