"""One list of flags: each name a cell can carry, with the text reports print and its rule."""
from harness.measure import flags

TEXTS = {
    "unstable": "unstable: repeats spread more than 7% ((max - min) / min)",
    "bimodal": "bimodal: the repeats fall into two groups, the gap between them wider than either group's own "
               "range (each group's median is in the notes)",
    "data-bound": "data-bound: data time is more than 10% of iteration time",
    "estimators-disagree": "the framework's own times and the log line timestamps disagree by more than 5%",
    "window-approximate": "approximate: the framework logs only window medians, running means that cannot "
                          "be differenced, or throughput",
    "unequal-work": "unequal work: the frameworks of this row differ by more than 5% (max - min over their "
                    "median) in a work count per iteration (proposals, RoIs, positives)",
    "unequal-data": "unequal data: the frameworks of this row differ by more than 5% (max - min over their "
                    "median) in what they drew from the data set (distinct image views, flips, draws, epochs "
                    "started, images per iteration; measured window or whole trial), flips and distinct views "
                    "also beyond chance",
    "gpu-thermal-throttle": "a GPU throttled its clocks for heat during a repeat (NVML thermal/hw slowdown)",
    "gpu-power-throttle": "a GPU throttled its clocks at its power limit during a repeat (NVML power cap/brake)",
    "gpu-telemetry-lost": "GPU telemetry lost: the host has GPUs, but pynvml did not import or start in the "
                          "trial's environment (no GPU use, clocks, throttling or device memory)",
    "cpu-oversubscribed": "CPU oversubscribed: the trial had more than 1.5 ready threads per core on "
                          "saturated cores",
    "memory-pressure": "memory pressure: the machine swapped or ran below 5% available memory during a repeat",
    "mixed-hosts": "the repeats ran on machines with different fingerprints",
    "place-effect": "place effect: where a trial ran within its round moved the figures of this run by more "
                    "than its cells' own spread, wider than 95% of reshuffled orders would (the run's place check)",
}


def test_every_flag_has_its_text_and_its_rule():
    assert {name: f.text for name, f in flags.FLAGS.items()} == TEXTS
    assert list(flags.FLAGS) == list(TEXTS)
    assert all(f.name == name and callable(f.rule) for name, f in flags.FLAGS.items())
    assert flags.text("data-bound") == TEXTS["data-bound"] and flags.text("no-such-flag") == "no-such-flag"


def test_repeat_rules():
    assert flags.unstable([100.0, 108.0]) and not flags.unstable([100.0, 106.0]) and not flags.unstable([1.0])
    assert flags.data_bound(12.0, 100.0) and not flags.data_bound(10.0, 100.0) and not flags.data_bound(None, 1.0)
    assert flags.estimators_disagree(106.0, 100.0) and not flags.estimators_disagree(104.0, 100.0)
    assert not flags.estimators_disagree(100.0, None)


def test_figure_work_and_host_rules():
    assert not flags.window_approximate([{"figure_kind": "exact-cumulative", "exact": 1}])
    assert flags.window_approximate([{"figure_kind": "exact", "exact": 1},
                                     {"figure_kind": "window-median", "exact": 1}])
    assert flags.window_approximate([{"figure_kind": None, "exact": 0}])
    assert flags.unequal_work([{"proposals": 100.0}, {"proposals": 106.0}, None, {"mask_rois": 3.0}]) == [
        True, True, False, False]
    assert flags.unequal_work([{"proposals": 100.0}, {"proposals": 104.0}]) == [False, False]
    assert flags.mixed_hosts(["a", "b"]) and not flags.mixed_hosts(["a", "a", None])


def test_a_place_effect_needs_three_rounds_a_span_past_the_cells_spread_and_a_rare_order():
    assert flags.place_effect(span=0.09, cell_spread=0.02, p=0.01, rounds=3)
    assert not flags.place_effect(span=0.09, cell_spread=0.02, p=0.01, rounds=2)      # too few rounds
    assert not flags.place_effect(span=0.02, cell_spread=0.03, p=0.01, rounds=5)      # within the cells' spread
    assert not flags.place_effect(span=0.09, cell_spread=0.02, p=0.05, rounds=5)      # as wide as chance gives


def test_the_telemetry_flags_are_judged_on_one_summary():
    assert [f.name for f in flags.TELEMETRY] == [
        "gpu-thermal-throttle", "gpu-power-throttle", "gpu-telemetry-lost", "cpu-oversubscribed", "memory-pressure"]
    hot = {"samples": 10, "gpus": [{"samples": 10, "throttle": {"hw_thermal": 1}}]}
    assert [f.name for f in flags.TELEMETRY if f.rule(hot)] == ["gpu-thermal-throttle"]
