"""repeats: a fixed count, or {min, max, half_width}: rounds added until every cell's median is known well enough."""
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from harness import launch
from harness import run as run_mod
from harness.cli import main
from harness.errors import UserError
from harness.plan import scenario as scenario_mod
from tests.conftest import GOOD_SCENARIO

ADAPTIVE = GOOD_SCENARIO.replace("repeats: 2\n", "repeats:\n  min: 6\n  max: 9\n  half_width: 0.02\n")
TWO_CELLS = ADAPTIVE.replace("model: [retinanet]", "model: [retinanet, faster_rcnn]")


def load(write_scenario, text):
    return launch.load_scenario(write_scenario(text))


def error_of(write_scenario, text):
    path = write_scenario(text)
    with pytest.raises(UserError) as info:
        launch.load_scenario(path)
    message = str(info.value)
    assert "\n" not in message
    return message[len(str(path)):]


def test_a_count_works_as_before_and_the_mapping_is_adaptive(write_scenario):
    fixed = load(write_scenario, GOOD_SCENARIO)
    assert fixed.repeats == 2
    assert scenario_mod.first_rounds(fixed.repeats) == scenario_mod.max_rounds(fixed.repeats) == 2
    adaptive = load(write_scenario, ADAPTIVE)
    assert isinstance(adaptive.repeats, scenario_mod.AdaptiveRepeats)
    assert (adaptive.repeats.min, adaptive.repeats.max, adaptive.repeats.half_width) == (6, 9, 0.02)
    assert scenario_mod.first_rounds(adaptive.repeats) == 6 and scenario_mod.max_rounds(adaptive.repeats) == 9
    # stored as JSON with the run and read back the same way (--resume validates it again)
    again = launch.scenario_from_json(adaptive.model_dump_json())
    assert again.repeats == adaptive.repeats


@pytest.mark.parametrize("repeats, line, field, words", [
    ("repeats: 0\n", 12, "repeats", "greater than or equal to 1"),
    ("repeats: many\n", 12, "repeats", "valid integer"),
    ("repeats:\n  min: 3\n  max: 9\n  half_width: 0.02\n", 13, "repeats.min",
     "must be at least 6, the fewest repeats that give a 95% interval of the median"),
    ("repeats:\n  min: 8\n  max: 7\n  half_width: 0.02\n", 14, "repeats.max", "at least min (8)"),
    ("repeats:\n  min: 6\n  max: 2000\n  half_width: 0.02\n", 14, "repeats.max", "less than or equal to 1000"),
    ("repeats:\n  min: 6\n  max: 9\n  half_width: 0\n", 15, "repeats.half_width", "greater than 0"),
    ("repeats:\n  min: 6\n  max: 9\n  half_width: 1.0\n", 15, "repeats.half_width", "less than 1"),
    ("repeats:\n  min: 6\n  max: 9\n", 12, "repeats.half_width", "Field required"),
    ("repeats:\n  min: 6\n  max: 9\n  half_width: 0.1\n  step: 2\n", 16, "repeats.step", "unknown key"),
])
def test_bad_repeats_name_file_line_and_field(write_scenario, repeats, line, field, words):
    message = error_of(write_scenario, GOOD_SCENARIO.replace("repeats: 2\n", repeats))
    assert message.startswith(":%d: %s: " % (line, field)), message
    assert words in message, message


def test_too_many_trials_point_at_max(write_scenario):
    text = ADAPTIVE.replace("max: 9", "max: 1000").replace("model: [retinanet]", "model: [%s]" % ", ".join(
        ["retinanet", "faster_rcnn", "mask_rcnn"])).replace("precision: [fp32]", "precision: [fp32, fp16, bf16]")
    many = text.replace("gpus: [1]", "gpus: [%s]" % ", ".join(str(g) for g in range(1, 13)))
    message = error_of(write_scenario, many)
    assert message.startswith(":14: repeats.max: ") and "more than 100000 trials" in message, message


def test_validate_counts_the_rounds_an_adaptive_run_can_take(write_scenario):
    out = CliRunner().invoke(main, ["validate", str(write_scenario(TWO_CELLS))])
    assert out.exit_code == 0, out.output
    assert "12 to 18 trials" in out.output, out.output


def trial(seq, key, repeat, throughput=None, status="done"):
    return SimpleNamespace(seq=seq, cell_key=key, repeat=repeat, status=status, throughput=throughput,
                           argv=("python", key))


def stored(sc, rounds, figures, seed=5):
    """Trials of `rounds` finished rounds in the order the seed draws; figures[key](repeat) -> images/s."""
    cells = [p.cell for p in scenario_mod.plan(sc)]
    out = []
    for r, order in enumerate(scenario_mod.round_orders(cells, rounds, seed), 1):
        for cell in order:
            out.append(trial(len(out) + 1, cell.key, r, figures[cell.key](r)))
    return out


def test_a_round_is_added_while_a_cell_is_not_known_to_its_half_width(write_scenario):
    sc = load(write_scenario, TWO_CELLS)
    keys = [p.cell.key for p in scenario_mod.plan(sc)]
    quiet = {keys[0]: lambda r: 100.0 + 0.01 * r, keys[1]: lambda r: 100.0 + 0.01 * r}
    noisy = dict(quiet, **{keys[1]: lambda r: 100.0 + (10.0 if r % 2 else -10.0)})
    assert run_mod.next_round(sc, stored(sc, 6, quiet), 5) == []          # both within +-2%
    assert run_mod.unsettled(sc, stored(sc, 6, noisy)) == [keys[1]]
    rows = run_mod.next_round(sc, stored(sc, 6, noisy), 5)
    # a whole round of every cell, in the order the run's seed draws for round 7, seq going on
    cells = [p.cell for p in scenario_mod.plan(sc)]
    order = scenario_mod.round_orders(cells, 7, 5)[6]
    assert rows == [(13 + i, c.key, 7, ["python", c.key]) for i, c in enumerate(order)]
    assert run_mod.next_round(sc, stored(sc, 9, noisy), 5) == []          # max rounds done


def test_no_round_is_added_while_trials_are_unfinished_or_for_a_fixed_count(write_scenario):
    sc = load(write_scenario, TWO_CELLS)
    keys = [p.cell.key for p in scenario_mod.plan(sc)]
    noisy = {k: (lambda r: 100.0 + (10.0 if r % 2 else -10.0)) for k in keys}
    trials = stored(sc, 6, noisy)
    trials[-1] = trial(trials[-1].seq, trials[-1].cell_key, 6, status="pending")
    assert run_mod.next_round(sc, trials, 5) == []
    fixed = load(write_scenario, GOOD_SCENARIO)
    assert run_mod.next_round(fixed, stored(fixed, 2, {keys[0]: lambda r: 100.0 * r}), 5) == []


def test_failed_repeats_leave_a_cell_without_an_interval_until_it_has_six(write_scenario):
    sc = load(write_scenario, ADAPTIVE)
    key = scenario_mod.plan(sc)[0].cell.key
    trials = stored(sc, 6, {key: lambda r: 100.0})
    trials[0] = trial(1, key, 1, status="failed")
    assert run_mod.unsettled(sc, trials) == [key]
    assert [r[2] for r in run_mod.next_round(sc, trials, 5)] == [7]


def test_the_first_rounds_of_an_adaptive_run_are_min_rounds_in_the_seeds_order(write_scenario):
    sc = load(write_scenario, TWO_CELLS + "order: {seed: 3}\n")
    planned = scenario_mod.plan(sc)
    trials = run_mod.schedule(sc, planned)
    assert [t.repeat for t in trials] == [r for r in range(1, 7) for _ in range(2)]
    by_round = [[t.cell for t in trials if t.repeat == r] for r in range(1, 7)]
    assert by_round == scenario_mod.round_orders([p.cell for p in planned], 6, 3)


def test_a_dry_run_says_it_plans_the_first_rounds_of_an_adaptive_run(write_scenario, tmp_path):
    out = CliRunner().invoke(main, ["run", "--dry-run", "--scenario", str(write_scenario(ADAPTIVE)),
                                    "--results", str(tmp_path / "results")])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("# tiny: 1 cells, 6 trials, backend local")
    assert lines[1] == ("# adaptive repeats: the first 6 rounds; then up to 9 in all, a round at a time while a "
                        "cell's median is not known to +-2%")
