"""An accuracy run trains seed by seed, every cell within a seed, whatever order its trials were
stored in: a run stopped part way has whole seeds of every framework, not every seed of a few;
and it goes on only on the machine it started on, with the inputs it started with."""
import io
import json

import pytest

from harness.errors import UserError
from harness.launch import accuracy as accuracy_run
from harness.results.accuracy_store import trial_key
from harness.results.store import Store

CELLS = ["detbench-trainer/retinanet/fp32/local/1/1", "torchvision/retinanet/fp32/local/1/1"]


def test_trials_run_seed_by_seed_and_a_resume_keeps_that_order(tmp_path, monkeypatch):
    store = Store(tmp_path)
    store.create_run("r1", "tta", "s.yaml", json.dumps({"name": "tta"}), "local", {}, [], [])
    tables = store.accuracy()
    # stored cell by cell (the order trial keys sort in)
    tables.add_trials("r1", [dict(trial_key=trial_key(c, s), cell_key=c, seed=s, folder="f", argv=[])
                             for c in CELLS for s in (0, 1, 2)])
    ran = []

    def run_trial(tables, run_id, sc, cell, trial, out):
        ran.append((cell.framework, int(trial["seed"])))
        if len(ran) == 3:
            raise accuracy_run.TrialFailed("diverged")

    monkeypatch.setattr(accuracy_run, "run_trial", run_trial)
    accuracy_run.execute(store, "r1", None, io.StringIO())
    assert ran == [("detbench-trainer", 0), ("torchvision", 0), ("detbench-trainer", 1), ("torchvision", 1),
                   ("detbench-trainer", 2), ("torchvision", 2)]
    statuses = {t["trial_key"]: t["status"] for t in tables.trials("r1")}
    assert statuses.pop(trial_key(CELLS[0], 1)) == "failed" and set(statuses.values()) == {"done"}

    ran.clear()     # a resume runs only what is not done, in the same order
    accuracy_run.execute(store, "r1", None, io.StringIO())
    assert ran == [("detbench-trainer", 1)]


def facts(*isa, kernel="6.1.0"):
    return {"cpu": {"model": "AMD EPYC", "vendor": "AuthenticAMD", "family": 25, "model_number": 17, "stepping": 1,
                    "sockets": 1, "cores": 2, "threads": 2, "isa": ["sse4_2", "avx", "avx2", "fma"] + list(isa)},
            "memory_mb": 24576, "os": {"kernel": kernel, "machine": "x86_64"}}


def started_on(tmp_path, host_facts):
    store = Store(tmp_path)
    store.create_run("r1", "tta", "s.yaml", json.dumps({"name": "tta"}), "local", {"facts": host_facts}, [], [])
    return store.read_run("r1")


def test_a_resume_on_another_machine_is_refused_naming_what_differs(tmp_path):
    run = started_on(tmp_path, facts("avx512f", "avx512_bf16"))
    with pytest.raises(UserError) as err:
        accuracy_run.same_machine(run, facts())
    said = str(err.value)
    assert "\n" not in said and said.startswith("run r1 was started on another machine (")
    assert "avx512_bf16: started on yes, here no" in said and "avx512f: started on yes, here no" in said
    with pytest.raises(UserError, match="kernel '6.1.0' -> '6.2.0'"):
        accuracy_run.same_machine(run, facts("avx512f", "avx512_bf16", kernel="6.2.0"))


def test_a_resume_on_the_same_machine_or_of_a_run_without_facts_goes_on(tmp_path):
    accuracy_run.same_machine(started_on(tmp_path / "a", facts("avx512f")), facts("avx512f"))
    accuracy_run.same_machine(started_on(tmp_path / "b", None), facts())


def test_a_resume_with_other_weights_or_data_is_refused_naming_each(tmp_path):
    weights, images = tmp_path / "r18.pt", tmp_path / "images"
    weights.write_bytes(b"weights")
    images.mkdir()
    (images / "0.png").write_bytes(b"image 0")
    digests = {str(weights): accuracy_run._digest(str(weights)), str(images): accuracy_run._digest(str(images))}
    accuracy_run.same_inputs("r1", digests)          # made again as they were: goes on
    accuracy_run.same_inputs("r1", {})               # a run stored without digests has nothing to compare
    (images / "0.png").write_bytes(b"image 1")
    weights.unlink()
    with pytest.raises(UserError) as err:
        accuracy_run.same_inputs("r1", digests)
    said = str(err.value)
    assert "\n" not in said and said.startswith("run r1: its inputs are not those it started with (")
    assert "%s is missing" % weights in said and "%s has other content" % images in said


def test_a_run_with_a_stored_order_runs_each_seed_s_round_in_the_order_drawn_from_its_seed(tmp_path, monkeypatch):
    import types

    from harness.plan import accuracy as plan_accuracy

    cells = CELLS + ["mmdetection/retinanet/fp32/local/1/1", "detbench-trainer/retinanet/bf16/local/1/1"]
    store = Store(tmp_path)
    store.create_run("r1", "tta", "s.yaml", json.dumps({"name": "tta"}), "local", {}, [], [],
                     order={"seed": 3, "drawn": False, "look": 1})
    store.accuracy().add_trials("r1", [dict(trial_key=trial_key(c, s), cell_key=c, seed=s, folder="f", argv=[])
                                       for c in cells for s in (0, 1, 2)])
    ran = []

    def run_trial(tables, run_id, sc, cell, trial, out):
        ran.append(trial_key(cell.key, int(trial["seed"])))
        if len(ran) == 5:
            raise KeyboardInterrupt   # stopped within the second seed's round

    monkeypatch.setattr(accuracy_run, "run_trial", run_trial)
    sc = types.SimpleNamespace(accuracy={"seeds": [0, 1, 2]})
    with pytest.raises(KeyboardInterrupt):
        accuracy_run.execute(store, "r1", sc, io.StringIO())
    places = plan_accuracy.trial_places(cells, [0, 1, 2], 3)
    drawn = sorted(places, key=places.get)
    assert ran == drawn[:5]
    assert [k.rsplit("/", 1)[1] for k in drawn] == ["s0"] * 4 + ["s1"] * 4 + ["s2"] * 4
    assert len({tuple(k.rsplit("/", 1)[0] for k in drawn[i:i + 4]) for i in (0, 4, 8)}) > 1   # shuffled per round
    ran.clear()       # a resume goes on in the same order with what is not done (the interrupted trial too)
    monkeypatch.setattr(accuracy_run, "run_trial", lambda tables, run_id, sc, cell, trial, out: ran.append(
        trial_key(cell.key, int(trial["seed"]))))
    accuracy_run.execute(store, "r1", sc, io.StringIO())
    assert ran == drawn[4:]


def floor_scenario(target):
    import types

    from harness.plan.accuracy import AccuracyOptions

    a = AccuracyOptions(data="learnable", iterations=10, eval_every=5, lr_per_image=0.01,
                        targets={"retinanet": target})
    return types.SimpleNamespace(accuracy=a, weights={"retinanet": "w.pt"}, env={}, batch_per_gpu=2,
                                 input_size=[64, 64])


def untrained_scores(monkeypatch, figures):
    """The dump and the shared COCOeval of the untrained weights, answering `figures`."""
    calls = []

    def run(argv, env, what):
        calls.append(what)
        return figures if "scoring" in what else {}

    monkeypatch.setattr(accuracy_run, "_run", run)
    return calls


def test_a_target_at_or_below_what_the_untrained_weights_score_is_refused_before_anything_trains(monkeypatch):
    calls = untrained_scores(monkeypatch, {"bbox": {"AP": 0.01, "AP50": 0.031, "AP75": 0.0}})
    sc = floor_scenario({"metric": "bbox_AP50", "range": [0.02, 0.2], "step": 0.02})
    with pytest.raises(UserError) as info:
        accuracy_run.noise_floors("s.yaml", sc, ["retinanet"], io.StringIO())
    assert str(info.value) == ("s.yaml: accuracy.targets.retinanet: bbox_AP50 0.02 is at or below what the untrained "
                               "weights score on the val split (0.031): reaching it would not show learning; set "
                               "targets above it")
    assert calls == ["the untrained weights' dump", "the untrained weights' scoring"]
    out = io.StringIO()
    sc = floor_scenario({"metric": "bbox_AP50", "range": [0.04, 0.2], "step": 0.02})
    assert accuracy_run.noise_floors("s.yaml", sc, ["retinanet"], out) == {
        "retinanet": {"bbox_AP": 0.01, "bbox_AP50": 0.031}}
    assert out.getvalue() == "# noise floor of retinanet (untrained weights, val split): bbox_AP50 0.031\n"


def test_a_look_the_scenario_does_not_declare_is_refused_in_one_line_before_anything_trains(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from harness.cli import main
    from harness.plan import learnable, weights
    from tests.plan.test_accuracy_scenario import text

    monkeypatch.setattr(weights, "problem", lambda model, path: None)
    learnable.make_learnable(tmp_path / "data", images=2, val_images=1, size=(32, 32))
    (tmp_path / "w.pt").write_bytes(b"")
    path = tmp_path / "s.yaml"
    path.write_text(text(tmp_path / "data") + "weights: {retinanet: %s}\n" % (tmp_path / "w.pt"), encoding="utf-8")
    result = CliRunner().invoke(main, ["accuracy", "run", "--scenario", str(path), "--look", "2", "--results",
                                       str(tmp_path / "results")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "detbench: error: %s: --look: look 2: the scenario declares 1 look (accuracy.seeds)" % path)
    assert not Store(tmp_path / "results", create=False).accuracy().runs()
