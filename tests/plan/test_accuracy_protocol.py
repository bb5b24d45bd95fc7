"""The protocol an accuracy scenario declares before its run: target levels (one value, a list or
a range with a step), the reached rule, the subject and its claim, a sequential plan whose looks'
alphas add up to its overall error (one that cannot be met refused in one line at its field), and
the shuffled order of each seed's round of trials, drawn from a stored seed."""
import re

import pytest

from harness import launch
from harness.errors import UserError
from harness.plan import accuracy as plan_accuracy
from harness.plan.scenario import Cell
from tests.plan.test_accuracy_scenario import data, text  # noqa: F401  (the fixture)


@pytest.fixture(autouse=True)
def any_weights_file(monkeypatch):
    """A weights file's layout is not checked here (tests/plan/test_accuracy_scenario.py checks it)."""
    from harness.plan import weights

    monkeypatch.setattr(weights, "problem", lambda model, path: None)


def load(tmp_path, body):
    (tmp_path / "w.pt").write_bytes(b"")
    path = tmp_path / "s.yaml"
    path.write_text(body + "weights: {retinanet: %s}\n" % (tmp_path / "w.pt"), encoding="utf-8")
    return launch.load_scenario(path)


def refused(tmp_path, body):
    with pytest.raises(UserError) as info:
        load(tmp_path, body)
    message = str(info.value)
    assert "\n" not in message
    return message


TARGET = "    retinanet: {metric: bbox_AP50, value: 0.5}\n"


def with_target(data, target, more=""):  # noqa: F811
    return text(data).replace(TARGET, "    retinanet: %s\n" % target) + more


@pytest.mark.parametrize("target, levels", [
    ("{metric: bbox_AP50, value: 0.5}", [0.5]),
    ("{metric: bbox_AP, values: [0.3, 0.45, 0.6]}", [0.3, 0.45, 0.6]),
    ("{metric: bbox_AP, range: [0.60, 0.75], step: 0.05}", [0.6, 0.65, 0.7, 0.75]),
    ("{metric: bbox_AP, range: [0.60, 0.72], step: 0.05}", [0.6, 0.65, 0.7, 0.72]),   # the high end kept
    ("{metric: bbox_AP, range: [0.40, 0.50]}", [0.4, 0.45, 0.5]),                     # step 0.05 by default
])
def test_a_target_is_one_value_a_list_or_a_range_with_a_step(tmp_path, data, target, levels):  # noqa: F811
    sc = load(tmp_path, with_target(data, target))
    assert sc.accuracy.targets["retinanet"].levels() == pytest.approx(levels)


@pytest.mark.parametrize("target, words", [
    ("{metric: bbox_AP, value: 0.5, range: [0.4, 0.6]}", "give one of value, values or range (got value, range)"),
    ("{metric: bbox_AP}", "give one of value, values or range (got none)"),
    ("{metric: bbox_AP, range: [0.7, 0.6]}", "range is [low, high] with 0 < low < high <= 1"),
    ("{metric: bbox_AP, values: [0.6, 0.5]}", "values rise, each once"),
    ("{metric: bbox_AP, value: 0.5, step: 0.1}", "step goes with range"),
    ("{metric: bbox_AP, range: [0.01, 1.0], step: 0.01}", "range over step gives more than 50 levels"),
])
def test_a_target_of_no_clear_form_is_refused_at_its_line(tmp_path, data, target, words):  # noqa: F811
    message = refused(tmp_path, with_target(data, target))
    assert re.search(r"s\.yaml:18: accuracy\.targets\.retinanet: .*%s" % re.escape(words), message), message


def test_the_protocol_keys_default_to_the_strict_rule_and_the_declared_claim(tmp_path, data):  # noqa: F811
    a = load(tmp_path, text(data)).accuracy
    assert (a.reached, a.subject, a.speedup, a.sequential) == ("stays", None, 1.2, None)
    assert plan_accuracy.subject_of({}, ["torchvision", "detbench-trainer"]) == "detbench-trainer"
    assert plan_accuracy.subject_of({"subject": "torchvision"}, ["torchvision"]) == "torchvision"
    message = refused(tmp_path, text(data) + "  subject: mmdetection\n")
    assert message.endswith("accuracy.subject: framework 'mmdetection' is not in the matrix"), message


def test_an_accuracy_scenario_may_fix_its_order_seed(tmp_path, data):  # noqa: F811
    assert load(tmp_path, text(data) + "order: {seed: 11}\n").order.seed == 11


SEQUENTIAL = "  sequential:\n    looks: %s\n"


@pytest.mark.parametrize("looks, seeds, words", [
    ("[[2, 3]]", None, "accuracy.sequential.looks.0: seed 2 is already in an earlier look (or accuracy.seeds)"),
    ("[[3, 4], [4, 5]]", None, "accuracy.sequential.looks.1: seed 4 is already in an earlier look"),
    ("[[3, 3]]", None, "accuracy.sequential.looks.0: seed 3 is already in an earlier look"),
    ("[[]]", None, "accuracy.sequential.looks.0: a look adds one seed or more"),
    ("[[3, 4]]", "[0]", "accuracy.seeds: a sequential plan's first look needs two seeds or more"),
])
def test_a_sequential_plan_that_cannot_be_met_is_refused_in_one_line(tmp_path, data, looks, seeds, words):  # noqa: F811
    body = text(data) + SEQUENTIAL % looks
    if seeds:
        body = body.replace("seeds: [0, 1, 2]", "seeds: %s" % seeds)
    assert words in refused(tmp_path, body)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_the_looks_alphas_add_up_to_the_plan_s_and_the_first_look_spends_less(spending):
    plan = plan_accuracy.Sequential(looks=[[3, 4], [5, 6, 7]], alpha=0.05, spending=spending)
    spent = plan_accuracy.spent(plan, 3)
    assert [n for n, _ in spent] == [3, 5, 8]
    assert sum(a for _, a in spent) == pytest.approx(0.05)
    assert all(a > 0 for _, a in spent) and spent[0][1] < 0.05
    # O'Brien-Fleming keeps almost all of alpha for the last look; Pocock spreads it
    assert (spent[0][1] < 0.01) == (spending == "obrien_fleming")
    assert plan_accuracy.spent(None, 3) == [(3, 0.05)]


def test_the_seeds_of_each_look(tmp_path, data):  # noqa: F811
    a = load(tmp_path, text(data) + SEQUENTIAL % "[[3, 4], [5]]").accuracy
    assert [plan_accuracy.look_seeds(a, n) for n in (1, 2, 3)] == [[0, 1, 2], [3, 4], [5]]
    with pytest.raises(ValueError, match="look 4: the scenario declares 3 looks"):
        plan_accuracy.look_seeds(a, 4)


CELLS = [Cell(fw, "retinanet", p, "local", 1, 1) for fw in ("detbench-trainer", "torchvision", "mmdetection")
         for p in ("fp32", "bf16")]


def test_each_seed_s_round_holds_every_cell_once_in_its_own_shuffled_order_drawn_from_the_seed():
    order = plan_accuracy.trial_order(CELLS, [0, 1, 2, 3], 7)
    assert [(r, s) for r, _, s in order] == [(r, s) for r, s in ((1, 0), (2, 1), (3, 2), (4, 3)) for _ in CELLS]
    rounds = [[c.key for r, c, _ in order if r == n] for n in (1, 2, 3, 4)]
    assert all(sorted(x) == sorted(c.key for c in CELLS) for x in rounds)
    assert len({tuple(x) for x in rounds}) > 1            # shuffled per round, not one fixed order
    # the same seed gives the same order whatever order the cells are listed in; another seed another
    assert plan_accuracy.trial_order(list(reversed(CELLS)), [0, 1, 2, 3], 7) == order
    assert plan_accuracy.trial_order(CELLS, [0, 1, 2, 3], 8) != order
    places = plan_accuracy.trial_places([c.key for c in CELLS], [0, 1, 2, 3], 7)
    assert sorted(places.values()) == [(r, n) for n, (r, _, _) in enumerate(order, 1)]


DECLARED = sorted((__import__("pathlib").Path(__file__).resolve().parents[2] / "scenarios").glob("accuracy-*.yaml"))


@pytest.mark.parametrize("path", DECLARED, ids=lambda p: p.name)
def test_the_declared_accuracy_scenarios_load_as_they_are_once_their_inputs_are_made(tmp_path, monkeypatch, path):
    from harness.plan import learnable

    monkeypatch.chdir(tmp_path)     # their data and weights paths are relative to the folder run from
    for folder in ("data/shapes128", "data/shapes128-quick"):
        learnable.make_learnable(tmp_path / folder, images=2, val_images=1, size=(32, 32))
    (tmp_path / "data" / "weights").mkdir()
    for model in ("retinanet", "faster_rcnn", "mask_rcnn"):
        (tmp_path / "data" / "weights" / ("%s-r18.pt" % model)).write_bytes(b"")
    sc = launch.load_scenario(path)
    a = sc.accuracy
    assert sc.mode == "accuracy" and sc.order.seed is not None and a.reached == "stays"
    assert a.subject == "detbench-trainer" and a.speedup == 1.2
    [model] = sc.matrix.model
    levels = a.targets[model].levels()
    assert (len(levels) > 1) == (path.name != "accuracy-quick.yaml")       # a range but in the quick check
    assert (len(a.seeds), a.sequential is not None) == {"mask_rcnn": (5, False)}.get(model, (
        1 if path.name == "accuracy-quick.yaml" else 3, path.name != "accuracy-quick.yaml"))
