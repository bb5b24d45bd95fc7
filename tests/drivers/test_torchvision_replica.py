"""The torchvision replica of references/detection, where the scripts are not on the machine: a flip
drawn at every draw with p=0.5, every epoch a new permutation without replacement, batches grouped
by aspect ratio as GroupedBatchSampler groups them (factor 3), and the reference's warmup and
MultiStepLR through torch's own schedulers; each iteration's DATA line says what it drew."""
import collections
import json

import pytest

pytest.importorskip("torchvision")

import torch  # noqa: E402

from harness import jsonlog  # noqa: E402
from harness.drivers import torchvision_driver as tv  # noqa: E402
from harness.frameworks import accuracy  # noqa: E402
from harness.plan import learnable  # noqa: E402


class Sized(torch.utils.data.Dataset):
    """Tiny images of the given width/height ratios, one box each."""

    def __init__(self, ratios):
        self.ratios = list(ratios)

    def __len__(self):
        return len(self.ratios)

    def image_id(self, i):
        return 100 + i

    def aspect_ratio(self, i):
        return self.ratios[i]

    def __getitem__(self, i):
        return torch.zeros(3, 4, 4), {"boxes": torch.tensor([[0.0, 0.0, 1.0, 2.0]]), "labels": torch.tensor([1])}


def draws(ratios, batch, batches, shuffle=True, flip=True, seed=0, start=0):
    """The (index, draw, epoch) keys and the VIEW of each image of the first `batches` batches."""
    args = tv.parse_args(["--model", "retinanet", "--iterations", "1", "--batch-size", str(batch),
                          "--input-size", "4x4", "--seed", str(seed)] + ([] if shuffle else ["--no-shuffle"])
                         + ([] if flip else ["--no-flip"]))
    loader = tv.build_loader(args, Sized(ratios), first=start)
    out = []
    for _, (_, targets) in zip(range(batches), loader):
        out.append([tuple(t[tv.VIEW].tolist()) for t in targets])
    return loader, out


def test_the_flip_is_drawn_at_every_draw_with_p_one_half():
    _, batches = draws([1.0] * 10, 2, 400)              # 80 epochs of 10 images
    views = [v for b in batches for v in b]
    per_image = collections.defaultdict(set)
    for image, mirrored, _ in views:
        per_image[image].add(mirrored)
    assert all(seen == {0, 1} for seen in per_image.values())   # each image mirrored in some draws, not in others
    share = sum(m for _, m, _ in views) / len(views)
    assert 0.45 < share < 0.55                                  # 800 draws of p=0.5


def test_no_flip_never_mirrors():
    _, batches = draws([1.0] * 6, 2, 9, flip=False)
    assert all(m == 0 for b in batches for _, m, _ in b)


def test_each_epoch_draws_every_image_once_in_a_new_order():
    loader, batches = draws([1.0] * 8, 2, 12)           # 3 epochs of 4 batches
    assert len(loader) == 4
    epochs = [[image for b in batches[k:k + 4] for image, _, _ in b] for k in (0, 4, 8)]
    assert [sorted(e) for e in epochs] == [list(range(100, 108))] * 3      # without replacement
    assert len({tuple(e) for e in epochs}) == 3                           # a new permutation each epoch
    assert [{epoch for _, _, epoch in b} for b in batches] == [{0}] * 4 + [{1}] * 4 + [{2}] * 4


def test_without_shuffle_each_epoch_is_the_files_order():
    _, batches = draws([1.0] * 6, 2, 6, shuffle=False)
    assert [image for b in batches for image, _, _ in b] == list(range(100, 106)) * 2


def test_a_resumed_loader_draws_what_the_whole_run_drew():
    _, whole = draws([1.0] * 6, 2, 7)
    _, resumed = draws([1.0] * 6, 2, 3, start=4)
    assert resumed == whole[4:]


def test_aspect_groups_use_the_references_bins_for_factor_3():
    # edges 2**(-1, -2/3, -1/3, 0, 1/3, 2/3, 1) = 0.5, 0.63, 0.79, 1, 1.26, 1.59, 2; bisect_right
    assert tv.aspect_groups([0.4, 0.5, 0.75, 1.0, 1.333, 1.5, 2.0, 3.0]) == [0, 1, 2, 4, 5, 5, 7, 7]
    assert tv.aspect_groups([0.9, 1.1], k=0) == [0, 1]


def test_batches_hold_one_aspect_group_and_leftovers_are_filled_from_their_own_group():
    # portrait (0.75: group 2) and landscape (1.333: group 5) images, walked in this order
    groups = [2, 5, 2, 5, 5, 2, 5]
    order = [0, 1, 2, 3, 4, 5, 6]
    # full batches as their group completes them: (0, 2), (1, 3), (4, 6); then image 5's group is
    # the fullest leftover and is topped up with the first of its group this epoch (0)
    assert tv.grouped_batches(order, groups, 2, 3) == [[0, 2], [1, 3], [4, 6]]
    assert tv.grouped_batches(order, groups, 3, 2) == [[1, 3, 4], [0, 2, 5]]
    # a leftover in each of three groups, one batch short: the fullest leftover (ties: the group that
    # began its batch first) topped up from the start of its own group, repeating an image
    assert tv.grouped_batches([0, 1, 2, 3], [0, 1, 2, 0], 2, 2) == [[0, 3], [1, 1]]
    assert tv.grouped_batches([0, 1, 2, 3, 4, 5], [0, 1, 1, 0, 1, 2], 3, 2) == [[1, 2, 4], [0, 3, 0]]


def test_the_loader_groups_by_aspect_ratio():
    ratios = [0.75, 1.333] * 6
    _, batches = draws(ratios, 2, 12)
    groups = tv.aspect_groups(ratios)
    assert all(len({groups[image - 100] for image, _, _ in b}) == 1 for b in batches)


def test_the_reference_schedule_warms_up_in_epoch_0_and_steps_at_epochs_16_and_22():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1, momentum=0.9, weight_decay=1e-4)
    schedule = tv.ReferenceSchedule(optimizer, per_epoch=5)     # warmup over min(1000, 5 - 1) iterations
    rates = []
    for i in range(5 * 23):
        schedule.begin(i)
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.end()
    f = 1.0 / 1000
    assert rates[:5] == pytest.approx([0.1 * (f + (1 - f) * j / 4) for j in range(4)] + [0.1])
    assert rates[5:80] == pytest.approx([0.1] * 75)
    assert rates[80:110] == pytest.approx([0.01] * 30) and rates[110:] == pytest.approx([0.001] * 5)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tvreplica")
    (ann, images), _ = learnable.make_learnable(root, images=4, val_images=1, size=(64, 64))
    return str(ann), str(images)


def run(data, capsys, *extra):
    ann, images = data
    code = tv.main(["--model", "retinanet", "--depth", "18", "--iterations", "5", "--batch-size", "2",
                    "--input-size", "64x64", "--trainable-layers", "5", "--lr", "0.002",
                    "--data", ann, "--images", images, "--device", "cpu"] + list(extra))
    assert code == 0
    return capsys.readouterr().out.splitlines()


def test_the_driver_logs_each_iterations_draws_by_epoch(data, capsys, tmp_path):
    lines = run(data, capsys, "--checkpoint-every", "3", "--checkpoint-dir", str(tmp_path))
    data_lines = [jsonlog.read_data(line[len(jsonlog.DATA_PREFIX):]) for line in lines
                  if line.startswith(jsonlog.DATA_PREFIX)]
    assert [(it, epoch) for it, epoch, _ in data_lines] == [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2)]
    ids = sorted(json.load(open(data[0]))["images"], key=lambda im: im["id"])
    for epoch in (0, 1):      # 4 images, batch 2: each epoch draws every image once
        assert sorted(i for _, e, views in data_lines if e == epoch for i, _ in views) == [im["id"] for im in ids]
    # the reference's line: the batch within its epoch of 2, which the loss reader turns back to the iteration
    epochs = [line for line in lines if line.startswith("Epoch: [") and "] Total time" not in line]
    assert [line.split("  eta")[0] for line in epochs] == [
        "Epoch: [0]  [0/2]", "Epoch: [0]  [1/2]", "Epoch: [1]  [0/2]", "Epoch: [1]  [1/2]", "Epoch: [2]  [0/2]"]
    assert [accuracy.loss_of_line(line)[0] for line in epochs] == [1, 2, 3, 4, 5]
    settings = json.loads(next(line for line in lines if line.startswith(jsonlog.SETTINGS_PREFIX))
                          [len(jsonlog.SETTINGS_PREFIX):])["settings"]
    # the reference's warmup over min(1000, 2 - 1) iterations, and its epochs 16 and 22 in iterations
    assert settings["warmup"] == "linear from 0.001 over 1 iterations" and settings["lr_decay"] == "x0.1 at 32, 44"
    assert settings["shuffle"] is True and settings["flip"] is True
    resumed = run(data, capsys, "--checkpoint-every", "3", "--checkpoint-dir", str(tmp_path / "b"),
                  "--resume", str(tmp_path / "iter_3.pth"))
    assert [line for line in resumed if line.startswith(jsonlog.DATA_PREFIX)] == \
        [line for line in lines if line.startswith(jsonlog.DATA_PREFIX)][3:]
    rates = [line.split("lr: ")[1].split()[0] for line in epochs]
    assert [line.split("lr: ")[1].split()[0] for line in resumed if line.startswith("Epoch: [") and "lr: " in line] \
        == rates[3:]


@pytest.mark.parametrize("extra, words", [
    ((), "its scripts read COCO files only"),
    (("--data", "a.json", "--no-flip"), "no option to switch the flip off"),
    (("--data", "a.json", "--schedule", "declared"), "the cell sets a schedule of its own"),
    (("--data", "a.json", "--depth", "18"), "ResNet-50 FPN"),
    (("--data", "a.json", "--precision", "bf16"), "CUDA fp16, the cell is bf16 on cpu"),
])
def test_where_the_reference_scripts_cannot_take_a_cell_the_replica_says_why(extra, words):
    from harness.drivers import torchvision_reference as reference
    args = tv.parse_args(["--model", "faster_rcnn", "--iterations", "3", "--device", "cpu"] + list(extra))
    assert words in reference.refusal(args)
    args.replica_because = reference.refusal(args)
    assert "(torchvision 0.29.1; %s" % args.replica_because in tv.recipe_differences(args, (64, 64))


def test_a_coco_cell_as_the_recipe_trains_it_goes_to_the_reference_scripts():
    from harness.drivers import torchvision_reference as reference
    args = tv.parse_args(["--model", "mask_rcnn", "--iterations", "3", "--device", "cpu", "--data", "a.json",
                          "--images", "imgs", "--batch-size", "2", "--workers", "1"])
    assert reference.refusal(args) is None
    argv = reference.train_argv(args, "coco", tv.MODELS["mask_rcnn"])
    assert argv[:6] == ["--data-path", "coco", "--dataset", "coco", "--model", "maskrcnn_resnet50_fpn"]
    assert "--amp" not in argv and argv[argv.index("--print-freq") + 1] == "1"
