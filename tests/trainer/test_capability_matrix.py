"""The capability matrix: every model trains in every precision, with every lever off and on.

For each tiny config and each precision: one run with every lever at its plain value, one
run per lever with that lever alone switched on, and one with all of them on together. Each
run is two iterations through the trainer's own entry point, and each must give finite
losses and show, from the step itself, that its settings took effect: the code path each
lever selects ran and the one it replaces did not, the optimizer is the fused one or not,
the network ran in the precision asked for, and the META line says all of it.

bf16 runs on every CPU: on real kernels where the CPU has them; elsewhere through torch's
emulation, which only `train.allow_emulated_bf16=true` permits (tiny shapes make it cheap;
the META line says the run emulated, and no timed trial sets the option). CUDA's fp16 and
bf16 join the matrix where a GPU is visible.
"""
import collections
import math

import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")
pytest.importorskip("torchvision", reason="the trainer needs torchvision")

from harness.trainer import engine, retina, roi, rpn  # noqa: E402
from harness.trainer.peak import supported  # noqa: E402

# each lever of each model: (its plain value, its lever value)
LEVERS = {
    "retina_tiny": {"model.fused_focal_loss": (False, True), "model.retina_merge_first_convs": (False, True),
                    "train.fused_sgd": (False, True)},
    "faster_tiny": {"model.roi_align": ("torchvision", "sparse"), "model.sync_free": (False, True),
                    "train.fused_sgd": (False, True)},
    "mask_tiny": {"model.roi_align": ("torchvision", "sparse"), "model.sync_free": (False, True),
                  "model.mask_target_class_only": (False, True), "train.fused_sgd": (False, True)},
}
CPU_BF16_KERNELS = supported(torch, "bf16", torch.device("cpu"))
CUDA = torch.cuda.is_available()
# (device, precision)
PRECISIONS = [("cpu", "fp32"), ("cpu", "bf16"), ("cuda", "fp32"), ("cuda", "fp16"), ("cuda", "bf16")]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# the functions whose calls show which path a step took, as the trainer's modules name them
SPIED = [(retina, "focal_loss_sum"), (retina, "sigmoid_focal_loss"), (roi, "sampling_matrix"),
         (roi, "roi_align"), (roi, "atlas_of"), (rpn, "greedy_keep"), (rpn, "batched_nms")]


def cases():
    for config, levers in LEVERS.items():
        for device, precision in PRECISIONS:
            marks = [pytest.mark.skipif(not CUDA, reason="no CUDA device here")] if device == "cuda" else []
            for switched in ["plain"] + list(levers) + ["all"]:
                yield pytest.param(config, device, precision, switched, marks=marks,
                                   id="-".join((config, device, precision, switched)))


def lever_values(config, switched):
    levers = LEVERS[config]
    return {key: on if switched in (key, "all") else off for key, (off, on) in levers.items()}


def text(value):
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class Probe:
    """Watches one in-process training run: calls of the spied functions, the built model's
    hooks (the retina tower's first conv run as its own module, the mask head asked for the
    target class only, the pyramid's dtype) and the optimizer the loop made."""

    def __init__(self, monkeypatch):
        self.calls = collections.Counter()
        self.neck_dtypes = set()
        self.optimizer = None
        for module, name in SPIED:
            monkeypatch.setattr(module, name, self._counted(name, getattr(module, name)))
        real_prepare, real_optimizer = engine.prepare_model, engine.make_optimizer

        def prepare(model, cfg, device, world):
            model = real_prepare(model, cfg, device, world)
            self._hook(model)
            return model

        def make_optimizer(*args):
            out = real_optimizer(*args)
            self.optimizer = out[0]
            return out
        monkeypatch.setattr(engine, "prepare_model", prepare)
        monkeypatch.setattr(engine, "make_optimizer", make_optimizer)

    def _counted(self, name, real):
        def call(*args, **kwargs):
            self.calls[name] += 1
            return real(*args, **kwargs)
        return call

    def _count(self, name):
        def hook(*_):
            self.calls[name] += 1
        return hook

    def _hook(self, model):
        model.neck.register_forward_hook(lambda _m, _i, out: self.neck_dtypes.update(o.dtype for o in out))
        if hasattr(model, "head"):
            model.head.cls_tower[0].register_forward_hook(self._count("separate_first_cls_conv"))
        mask_head = getattr(getattr(model, "roi_heads", None), "mask_head", None)
        if mask_head is not None:
            mask_head.register_forward_pre_hook(
                lambda _m, args: self.calls.update(["mask_head_target_class" if len(args) > 1 and args[1] is not None
                                                    else "mask_head_all_classes"]))


def assert_paths(probe, config, values):
    """Each lever's path ran exactly where the lever was on, and the one it replaces where off."""
    ran = {name for name, n in probe.calls.items() if n}
    if config == "retina_tiny":
        fused = values["model.fused_focal_loss"]
        assert ("focal_loss_sum" in ran, "sigmoid_focal_loss" in ran) == (fused, not fused), ran
        merged = values["model.retina_merge_first_convs"]
        assert ("separate_first_cls_conv" in ran) is (not merged), ran
    else:
        sparse = values["model.roi_align"] == "sparse"
        assert ("sampling_matrix" in ran, "roi_align" in ran) == (sparse, not sparse), ran
        sync_free = values["model.sync_free"]
        assert ("greedy_keep" in ran, "batched_nms" in ran) == (sync_free, not sync_free), ran
        assert ("atlas_of" in ran) is (sync_free and not sparse), ran
    if config == "mask_tiny":
        only = values["model.mask_target_class_only"]
        assert ("mask_head_target_class" in ran, "mask_head_all_classes" in ran) == (only, not only), ran
    assert bool(probe.optimizer.defaults.get("fused")) is values["train.fused_sgd"]


@pytest.mark.parametrize("config,device,precision,switched", list(cases()))
def test_every_model_trains_in_every_precision_with_each_lever(train_inprocess, monkeypatch, config, device,
                                                                precision, switched):
    values = lever_values(config, switched)
    sets = ["train.max_iter=2", "train.device=" + device, "train.precision=" + precision]
    emulated = device == "cpu" and precision == "bf16" and not CPU_BF16_KERNELS
    if emulated:
        sets.append("train.allow_emulated_bf16=true")
    sets += ["%s=%s" % (key, text(value)) for key, value in values.items()]
    probe = Probe(monkeypatch)
    rc, iters, metas, err = train_inprocess(config, *sets)
    assert rc == 0, err
    assert [r["iteration"] for r in iters] == [1, 2]
    for record in iters:
        assert math.isfinite(record["loss"]) and all(math.isfinite(v) for v in record["losses"].values()), record
    meta = metas[0]
    assert (meta["device"], meta["precision"], meta["emulated_bf16"]) == (device, precision, emulated)
    for key, value in values.items():
        assert meta[key.split(".", 1)[1]] == value, key
    # the pyramid the heads read is in the precision asked for (autocast's dtype)
    assert probe.neck_dtypes == {DTYPES[precision]}
    assert_paths(probe, config, values)


def test_the_matrix_runs_each_lever_of_each_model_off_and_on_in_each_precision():
    runs = collections.defaultdict(set)
    for param in cases():
        config, device, precision, switched = param.values
        for key, value in lever_values(config, switched).items():
            runs[(config, device, precision, key)].add(value)
    assert len(runs) == sum(len(levers) for levers in LEVERS.values()) * len(PRECISIONS)
    assert all(values == set(LEVERS[config][key]) for (config, _, _, key), values in runs.items())
