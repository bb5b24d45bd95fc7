"""harness/drivers/breakdown.py on plain torch: each phase's forward and backward, nested parts
charged to the innermost, the optimizer step, the step's end; a mapping that cannot attach."""
import json

import pytest

torch = pytest.importorskip("torch", reason="the breakdown hooks need torch")

from harness import jsonlog  # noqa: E402
from harness.drivers import breakdown  # noqa: E402


class Clock:
    """A clock that moves only when the model's parts say they spent time."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def spend(self, seconds):
        self.now += seconds


class Spend(torch.autograd.Function):
    """Identity whose forward and backward each spend a fixed time on the clock."""

    @staticmethod
    def forward(ctx, x, clock, forward_s, backward_s):
        clock.spend(forward_s)
        ctx.clock, ctx.backward_s = clock, backward_s
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.clock.spend(ctx.backward_s)
        return grad, None, None, None


class Part(torch.nn.Module):
    def __init__(self, clock, forward_s, backward_s, inner=None, inner_first=False):
        super().__init__()
        self.clock, self.forward_s, self.backward_s = clock, forward_s, backward_s
        self.linear = torch.nn.Linear(4, 4)
        self.inner, self.inner_first = inner, inner_first

    def forward(self, x):
        if self.inner is not None and self.inner_first:
            x = self.inner(x)
        x = Spend.apply(self.linear(x), self.clock, self.forward_s, self.backward_s)
        return self.inner(x) if self.inner is not None and not self.inner_first else x


class Detector(torch.nn.Module):
    """body inside neck (as detectron2's FPN holds its ResNet: run first, or last), then a head;
    the loss is its own."""

    def __init__(self, clock, inner_first=False):
        super().__init__()
        self.neck = Part(clock, 2.0, 20.0, inner=Part(clock, 1.0, 10.0), inner_first=inner_first)
        self.head = Part(clock, 4.0, 40.0)
        self.clock = clock

    def forward(self, x):
        return {"loss": Spend.apply(self.head(self.neck(x)), self.clock, 0.5, 5.0).pow(2).mean()}


class TimedSGD(torch.optim.SGD):
    def __init__(self, params, clock):
        super().__init__(params, lr=0.1)
        self.clock = clock

    def step(self, closure=None):
        self.clock.spend(3.0)
        return super().step(closure)


PHASES = [("body", ["neck.inner"]), ("neck", ["neck"]), ("head", ["head"]), (breakdown.MODEL_REST, [""])]


def steps(n, clock, model, optimizer, data_s=7.0):
    for _ in range(n):
        clock.spend(data_s)     # waiting for the batch: no hook sees it
        loss = model(torch.ones(2, 4))["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def read(lines):
    return [jsonlog.read_breakdown(line[len(jsonlog.BREAKDOWN_PREFIX):]) for line in lines]


@pytest.mark.parametrize("inner_first", [True, False])
def test_each_phase_gets_its_own_forward_and_backward_and_the_step_closes_the_iteration(inner_first):
    clock = Clock()
    model = Detector(clock, inner_first)
    optimizer = TimedSGD(model.parameters(), clock)
    lines = []
    breakdown.Breakdown(model, optimizer, PHASES, emit=lines.append, clock=clock)
    steps(2, clock, model, optimizer)
    got = read(lines)
    assert [g[0] for g in got] == [1, 2]
    for _iteration, step, phases in got:
        assert step == 7.0 + 7.5 + 75.0 + 3.0     # data, forward, backward, optimizer
        assert phases == {
            "body forward": 1.0, "body backward": 10.0,
            "neck forward": 2.0, "neck backward": 20.0,     # its own part, the body's left out
            "head forward": 4.0, "head backward": 40.0,
            "model rest forward": 0.5, "model rest backward": 5.0,
            "optimizer": 3.0,
        }
        assert step - sum(phases.values()) == 7.0  # what no hook sees is the data wait


def test_a_wrapped_model_is_looked_through_and_closing_removes_every_hook():
    clock = Clock()
    model = Detector(clock)
    wrapper = torch.nn.Module()
    wrapper.module = model
    optimizer = TimedSGD(model.parameters(), clock)
    lines = []
    hooks = breakdown.Breakdown(wrapper, optimizer, PHASES[:3], emit=lines.append, clock=clock)
    hooks.close()
    steps(1, clock, model, optimizer)
    assert lines == []


def test_a_missing_submodule_is_one_error_line_and_training_goes_on(capsys):
    clock = Clock()
    model = Detector(clock)
    optimizer = TimedSGD(model.parameters(), clock)
    env = {jsonlog.BREAKDOWN_ENV: "torchvision/faster_rcnn"}
    assert breakdown.attach_from_env(model, optimizer, env) is None
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(jsonlog.BREAKDOWN_PREFIX)
    error = json.loads(line[len(jsonlog.BREAKDOWN_PREFIX):])["error"]
    assert error == "torchvision faster_rcnn: no submodule 'transform' in the Detector model"
    steps(1, clock, model, optimizer)
    assert capsys.readouterr().out == ""


def test_without_the_variable_nothing_is_attached(capsys):
    clock = Clock()
    model = Detector(clock)
    optimizer = TimedSGD(model.parameters(), clock)
    assert breakdown.attach_from_env(model, optimizer, {}) is None
    steps(1, clock, model, optimizer)
    assert capsys.readouterr().out == ""
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_a_program_that_cannot_run_hooks_says_why_in_one_line(capsys):
    model = torch.nn.Linear(2, 2)
    assert breakdown.attach_from_env(model, torch.optim.SGD(model.parameters(), lr=0.1),
                                     {jsonlog.BREAKDOWN_ENV: "detbench-trainer/mask_rcnn"},
                                     unable="train.cuda_graph's replays run no hooks") is None
    (line,) = capsys.readouterr().out.splitlines()
    assert jsonlog.read_breakdown(line[len(jsonlog.BREAKDOWN_PREFIX):]) == (
        None, None, "detbench-trainer mask_rcnn: train.cuda_graph's replays run no hooks")
    assert not model._forward_hooks


@pytest.mark.parametrize("value, why", [
    ("effdet/retinanet", "no breakdown mapping for framework 'effdet'"),
    ("torchvision/ssd", "no torchvision breakdown mapping for model 'ssd'"),
])
def test_an_unmapped_framework_or_model_is_named(value, why, capsys):
    model = torch.nn.Linear(2, 2)
    assert breakdown.attach_from_env(model, torch.optim.SGD(model.parameters(), lr=0.1),
                                     {jsonlog.BREAKDOWN_ENV: value}) is None
    assert why in capsys.readouterr().out


def test_every_mapping_names_a_forward_and_the_model_rest():
    for framework, models in breakdown.MAPPINGS.items():
        assert set(models) == {"retinanet", "faster_rcnn", "mask_rcnn"}, framework
        for model, phases in models.items():
            names = [name for name, _paths in phases]
            assert "backbone" in names and breakdown.MODEL_REST in names, (framework, model)
            assert ("mask head" in names) == (model == "mask_rcnn"), (framework, model)
