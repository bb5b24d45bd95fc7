"""The store's records a report is built from, read once (harness.report.build)."""
from dataclasses import dataclass, field
from typing import Dict, List, Tuple


@dataclass(frozen=True)
class Rows:
    """The records of harness.results.records: StoredCell, StoredRun, StoredTrial, StoredIteration."""
    cells: Tuple[object, ...] = ()     # StoredCells: the newest run of each cell (Store.cells order)
    runs: Dict[str, object] = field(default_factory=dict)       # run id -> StoredRun
    # (run id, cell key) -> StoredTrials by seq
    trials: Dict[Tuple[str, str], List[object]] = field(default_factory=dict)
    iterations: Dict[str, Tuple[tuple, ...]] = field(default_factory=dict)      # trial id -> StoredIterations (traced)
    renamed: bool = False              # some row named the bundled trainer by its old name

    def cell_trials(self, cell):
        return self.trials.get((cell["run_id"], cell["cell_key"]), [])


def figure_order(cells):
    """Cells in the order the HTML page's figures list them."""
    return sorted(cells, key=lambda c: (c["precision"], c["gpus"] * c["nodes"], c["model"], c["framework"]))


def read(store, platform=None, run_id=None, traced=0):
    """The cells of one platform (or run), their runs and trials; the iterations of the first
    `traced` cells in figure order that have any."""
    cells = store.read_cells(platform=platform, run_id=run_id)
    runs, trials = {}, {}
    for cell in cells:
        rid = cell.run_id
        if rid not in runs:
            runs[rid] = store.read_run(rid)
            for t in store.read_trials(rid):
                trials.setdefault((rid, t.cell_key), []).append(t)
    iterations, count = {}, 0
    for cell in figure_order(cells):
        if count >= traced:
            break
        if cell.excluded:
            continue
        its = {t.id: store.read_iterations(t.id) for t in trials.get((cell.run_id, cell.cell_key), [])}
        if any(its.values()):
            iterations.update(its)
            count += 1
    return Rows(tuple(cells), runs, trials, iterations, store.renamed)
