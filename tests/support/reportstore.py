"""A results store holding one finished run, its figures given: for report tests that need cells
with repeats and no trials to run."""
import json

from harness.measure.result import TrialResult
from harness.results.store import Store


def store_run(root, figures, scenario):
    """Run "run-1": a cell per key of `figures` (cell keys framework/model/precision/platform/
    gpus/nodes, 2 images per iteration), round r holding every cell's repeat r, and each trial
    done at figures[key][r - 1] images/s, its figure exact over iterations 3 to 8."""
    cells = []
    for key in figures:
        framework, model, precision, platform, gpus, nodes = key.split("/")
        cells.append(dict(cell_key=key, framework=framework, model=model, precision=precision, platform=platform,
                          gpus=int(gpus), nodes=int(nodes), batch_per_gpu=2, images_per_iteration=2, excluded=None))
    rounds = max(len(values) for values in figures.values())
    order = [(repeat, key) for repeat in range(1, rounds + 1) for key in figures]
    trials = [(seq, key, repeat, ["true"]) for seq, (repeat, key) in enumerate(order, 1)]
    store = Store(root)
    store.create_run("run-1", scenario["name"], "s.yaml", json.dumps(scenario), "local", {}, cells, trials)
    for t in store.trials("run-1"):
        value = figures[t["cell_key"]][t["repeat"] - 1]
        store.finish_trial(t["id"], TrialResult(status="done", throughput=value, observed=value,
                                                iteration_time_s=2 / value, data_time_s=0.0001, exact=True,
                                                figure_kind="exact", window=(3, 8), records=8))
    return store
