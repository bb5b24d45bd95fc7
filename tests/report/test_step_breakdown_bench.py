"""benchmarks/step_breakdown.py: the two settings' scenarios differ only in `breakdown:`, every
round runs both in a seeded order, and the overhead and the step gap are read from the stored trials."""
import pytest
import yaml

from benchmarks import step_breakdown as sb
from harness import launch


def test_the_two_scenarios_load_and_differ_only_in_breakdown(tmp_path):
    data = tmp_path / "coco"
    (data / "annotations").mkdir(parents=True)
    (data / "images").mkdir()
    (data / "annotations" / "instances_train.json").write_text("{}")
    docs = {}
    for on in (False, True):
        doc = sb.scenario(["detbench-trainer", "torchvision"], "faster_rcnn", "128x128", 1, 3, str(data), on)
        path = tmp_path / ("s-%s.yaml" % on)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        sc = launch.load_scenario(path)
        assert sc.breakdown is on and sc.repeats == 1 and list(sc.input_size) == [128, 128]
        docs[on] = {k: v for k, v in doc.items() if k not in ("name", "description", "breakdown")}
    assert docs[False] == docs[True]


def test_every_round_runs_both_settings_in_an_order_drawn_from_the_seed():
    order = sb.rounds_order(20, seed=3)
    assert order == sb.rounds_order(20, seed=3)
    assert [r for r, _ in order] == [r for r in range(1, 21) for _ in range(2)]
    firsts = [s for i, (_, s) in enumerate(order) if i % 2 == 0]
    assert set(firsts) == {"off", "on"}     # not always the same one first


def test_the_overhead_is_one_less_the_ratio_of_the_medians_and_the_gap_the_largest():
    trials = {"off": [{"framework": "torchvision", "status": "done", "throughput": v} for v in (2.0, 2.0, 2.0)],
              "on": [{"framework": "torchvision", "status": "done", "throughput": v} for v in (1.9, 1.9, 1.9)]
              + [{"framework": "torchvision", "status": "failed", "throughput": None}]}
    parts = [{"framework": "torchvision", "hooked_step_ms": h, "step_ms": 1000.0} for h in (1010.0, 990.0, 1025.0)]
    got = sb.summary(trials, parts)["torchvision"]
    assert got["overhead"] == pytest.approx((0.05, 0.05, 0.05))
    assert got["gap"] == pytest.approx(0.025)
    text = sb.render({"torchvision": got}, ["Breakdown, x: y."], "scope")
    assert "+5.0% [+5.0%, +5.0%]" in text and "2.5%" in text and text.endswith("Breakdown, x: y.")


def test_a_framework_without_a_breakdown_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(sb, "built_envs", lambda: {"torchvision"})
    assert sb.main(["--frameworks", "detbench-trainer,effdet"]) == 2
    assert "'effdet' has no breakdown here" in capsys.readouterr().err
