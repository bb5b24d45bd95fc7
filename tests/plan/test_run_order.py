"""The order of the trials within each round: drawn from a seed, stored with the run, kept by --resume."""
import io
import json

import pytest

from harness import launch
from harness import run as run_mod
from harness.results.store import Store
from harness.plan import scenario as scenario_mod

CELLS = ["a", "b", "c", "d", "e", "f"]

THREE_CELLS = """\
name: order
matrix:
  framework: [calibrate]
  model: [retinanet, faster_rcnn, mask_rcnn]
  precision: [fp32]
  platform: [local]
batch_per_gpu: 2
warmup: 1
measure: 2
repeats: 3
timeout_s: 30
calibrate:
  iteration_ms: 5
  data_ms: 1
"""


def test_each_round_is_a_permutation_of_the_cells():
    for seed in range(20):
        orders = scenario_mod.round_orders(CELLS, 4, seed)
        assert len(orders) == 4
        assert all(sorted(order) == CELLS for order in orders)


def test_the_same_seed_gives_the_same_orders_and_another_seed_others():
    assert scenario_mod.round_orders(CELLS, 5, 7) == scenario_mod.round_orders(CELLS, 5, 7)
    drawn = {tuple(map(tuple, scenario_mod.round_orders(CELLS, 5, seed))) for seed in range(10)}
    assert len(drawn) == 10


def test_the_rounds_of_one_run_take_different_orders():
    for seed in range(20):
        orders = [tuple(o) for o in scenario_mod.round_orders(CELLS, 3, seed)]
        assert len(set(orders)) > 1, seed
    # over many seeds every cell takes every place: no cell keeps the first place
    firsts = {scenario_mod.round_orders(CELLS, 1, seed)[0][0] for seed in range(60)}
    assert firsts == set(CELLS)


def scenario(tmp_path, text=THREE_CELLS):
    path = tmp_path / "order.yaml"
    path.write_text(text)
    return launch.load_scenario(path)


def rounds_of(trials):
    out = {}
    for t in trials:
        out.setdefault(t.repeat, []).append(t.cell)
    return [out[r] for r in sorted(out)]


def test_schedule_runs_round_by_round_in_the_order_the_seed_draws(tmp_path):
    sc = scenario(tmp_path, THREE_CELLS + "order: {seed: 11}\n")
    planned = scenario_mod.plan(sc)
    trials = run_mod.schedule(sc, planned)
    cells = [p.cell for p in planned]
    assert [t.seq for t in trials] == list(range(1, 10))
    assert [t.repeat for t in trials] == [1] * 3 + [2] * 3 + [3] * 3
    assert rounds_of(trials) == scenario_mod.round_orders(cells, 3, 11)
    assert rounds_of(run_mod.schedule(sc, planned, seed=12)) == scenario_mod.round_orders(cells, 3, 12)


def test_a_scenario_without_a_seed_gets_a_fresh_one(tmp_path):
    sc = scenario(tmp_path)
    assert sc.order.seed is None
    seeds = {run_mod.order_seed(sc) for _ in range(5)}
    assert len(seeds) > 1 and all(0 <= s < run_mod.ORDER_SEEDS for s in seeds)
    assert run_mod.order_record(sc, 5) == {"seed": 5, "drawn": True}


@pytest.mark.parametrize("order, message", [
    ("order: {seed: -1}", "order.seed"),
    ("order: {seed: 1.5}", "order.seed"),
    ("order: {shuffle: false}", "order.shuffle"),
])
def test_a_bad_order_is_refused_at_its_line(tmp_path, order, message):
    from harness.errors import UserError
    with pytest.raises(UserError) as exc:
        scenario(tmp_path, THREE_CELLS + order + "\n")
    assert ":15:" in str(exc.value) and message in str(exc.value)


def test_the_dry_run_prints_the_seed_and_the_shuffled_trials(tmp_path):
    path = tmp_path / "order.yaml"
    path.write_text(THREE_CELLS + "order: {seed: 3}\n")
    out = io.StringIO()
    run_mod.start(path, tmp_path / "results", dry_run=True, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "# order: 3 cells, 9 trials, backend local, order seed 3"
    sc = launch.load_scenario(path)
    cells = [p.cell for p in scenario_mod.plan(sc)]
    expected = [c.key for order in scenario_mod.round_orders(cells, 3, 3) for c in order]
    assert [line.split()[1] for line in lines[1:10]] == expected


def test_the_run_stores_its_seed_and_resume_runs_the_stored_order(tmp_path, monkeypatch):
    path = tmp_path / "order.yaml"
    path.write_text(THREE_CELLS.replace("repeats: 3", "repeats: 2"))
    results = tmp_path / "results"
    monkeypatch.setattr(run_mod, "execute", lambda store, run_id, out: None)   # plan and store only
    run_id = run_mod.start(path, results, out=io.StringIO())
    monkeypatch.undo()
    store = Store(results, create=False)
    order = json.loads(store.run(run_id)["order_json"])
    assert order["drawn"] is True
    sc = launch.load_scenario(path)
    cells = [p.cell.key for p in scenario_mod.plan(sc)]
    stored = [t["cell_key"] for t in store.trials(run_id)]
    assert stored == [c for o in scenario_mod.round_orders(cells, 2, order["seed"]) for c in o]

    def no_new_order(*_args, **_kw):
        raise AssertionError("resume drew a new order")
    monkeypatch.setattr(scenario_mod, "round_orders", no_new_order)
    monkeypatch.setattr(run_mod, "order_seed", no_new_order)
    out = io.StringIO()
    run_mod.resume(run_id, results, out=out)
    trials = store.trials(run_id)
    assert [t["status"] for t in trials] == ["done"] * 6, out.getvalue()
    started = [t["started"] for t in trials]
    assert started == sorted(started)        # they ran in the stored order
    assert [t["cell_key"] for t in trials] == stored
    store.close()
