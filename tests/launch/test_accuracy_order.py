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
