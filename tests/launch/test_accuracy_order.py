"""An accuracy run trains seed by seed, every cell within a seed, whatever order its trials were
stored in: a run stopped part way has whole seeds of every framework, not every seed of a few."""
import io
import json

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
