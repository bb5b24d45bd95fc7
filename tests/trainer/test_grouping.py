"""Aspect-ratio grouping of batches (data.aspect_grouping) on a per-batch canvas (data.canvas=batch)."""
import itertools
import json

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from conftest import MIXED_SHAPES, config_path  # noqa: E402
from harness.trainer import engine  # noqa: E402
from harness.trainer.augment import fit_scale  # noqa: E402
from harness.trainer.config import ConfigError, DataConfig  # noqa: E402
from harness.trainer.data import AspectGroupedSampler, CocoBatches, InfiniteShardedSampler  # noqa: E402


def stream(sampler, n):
    return list(itertools.islice(iter(sampler), n))


@pytest.mark.parametrize("size, batch, world", [(13, 2, 1), (13, 3, 1), (10, 4, 2), (7, 2, 3), (3, 4, 1)])
def test_batches_hold_one_group_and_each_epoch_every_image_once(size, batch, world):
    groups = [int(v) for v in torch.randint(0, 2, (size,), generator=torch.Generator().manual_seed(size)).tolist()]
    epochs = 6
    for rank in range(world):
        plain = InfiniteShardedSampler(size, rank, world, seed=2)
        grouped = AspectGroupedSampler(groups, batch, size, rank, world, seed=2)
        length = plain.shard_length()
        items = stream(grouped, epochs * length)
        for e in range(epochs):       # the same images as the plain sampler's epoch, once each
            assert sorted(items[e * length:(e + 1) * length]) == sorted(plain.order(e))
        batches = [items[k:k + batch] for k in range(0, len(items) - batch + 1, batch)]
        mixed = sum(len({groups[i] for i in b}) > 1 for b in batches)
        # at most one batch across each epoch boundary and one of leftovers in each epoch
        assert mixed <= 2 * epochs
        if length >= 4 * batch:
            assert mixed < len(batches) / 2


def test_the_grouped_order_depends_on_seed_and_resumes_at_any_batch():
    groups = [0, 1] * 7 + [1]
    whole = stream(AspectGroupedSampler(groups, 2, 15, 0, 1, seed=5, positions=True), 80)
    assert whole == stream(AspectGroupedSampler(groups, 2, 15, 0, 1, seed=5, positions=True), 80)
    assert whole != stream(AspectGroupedSampler(groups, 2, 15, 0, 1, seed=6, positions=True), 80)
    for start in (2, 14, 16, 30, 46):
        late = AspectGroupedSampler(groups, 2, 15, 0, 1, seed=5, start=start, positions=True)
        assert stream(late, 80 - start) == whole[start:]
    assert [p for _, p in whole] == list(range(80))     # positions count what is handed out


def test_grouping_needs_the_per_batch_canvas():
    with pytest.raises(ConfigError, match="data.aspect_grouping=true needs data.canvas=batch"):
        DataConfig(aspect_grouping=True)
    with pytest.raises(ConfigError, match="data.canvas='auto' is not one of fixed, batch"):
        DataConfig(canvas="auto")
    assert DataConfig(aspect_grouping=True, canvas="batch").aspect_grouping


def padding_of(mixed_coco, grouping, batches=8):
    ann, images = mixed_coco
    cfg = DataConfig(source="coco", coco_json=ann, coco_images=images, input_size=(128, 128), canvas="batch",
                     aspect_grouping=grouping, images_per_device=2, workers=0)
    source = CocoBatches(cfg, 2, False, torch.device("cpu"), 0, 1, seed=0)
    shapes = [tuple(images.shape[-2:]) for images, _ in itertools.islice(iter(source), batches)]
    content, canvas = source.pixels
    return 1 - content / canvas, shapes


def test_grouping_pads_fewer_pixels_on_mixed_aspect_ratios(mixed_coco):
    plain, plain_shapes = padding_of(mixed_coco, False)
    grouped, grouped_shapes = padding_of(mixed_coco, True)
    assert grouped < plain
    assert all(h % 32 == 0 and w % 32 == 0 for h, w in plain_shapes + grouped_shapes)
    assert grouped_shapes.count((128, 128)) < plain_shapes.count((128, 128))


def summary_of(out):
    lines = [ln for ln in out.splitlines() if ln.startswith(engine.SUMMARY_PREFIX)]
    assert len(lines) == 1, out
    return json.loads(lines[0][len(engine.SUMMARY_PREFIX):])


def test_the_trainer_reports_the_padding_fraction(capsys, mixed_coco):
    from harness.trainer import train
    ann, images = mixed_coco
    base = ["retina_tiny", "data.source=coco", f"data.coco_json={ann}", f"data.coco_images={images}",
            "data.shuffle=false", "train.max_iter=4", "model.num_classes=2"]
    runs = {}
    for extra in ([], ["data.canvas=batch"], ["data.canvas=batch", "data.aspect_grouping=true"]):
        args = [config_path(base[0])] + [a for s in base[1:] + extra for a in ("--set", s)]
        capsys.readouterr()
        assert train.main(args) == 0
        runs[" ".join(extra)] = summary_of(capsys.readouterr().out)
    fixed, batch, grouped = (runs[k]["padding_fraction"] for k in runs)
    # the file alternates landscape and portrait images: every batch of two mixes them
    assert grouped < batch <= fixed
    scales = [fit_scale(h, w, (128, 128)) for h, w in MIXED_SHAPES]
    content = sum(round(h * s) * round(w * s) for (h, w), s in zip(MIXED_SHAPES, scales))
    assert fixed == pytest.approx(1 - content / (len(MIXED_SHAPES) * 128 * 128), abs=1e-4)
    assert 0 <= runs[""]["data_time_fraction"] < 1
