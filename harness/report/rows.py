"""The store's records a report is built from, read once (harness.report.build)."""

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Protocol, Tuple

from harness.results.records import StoredCell, StoredIteration, StoredRun, StoredTrial


class StoreReads(Protocol):
    """The typed reads of the results store (harness.results.store.Store) a report is built from."""

    renamed: bool

    def read_cells(self, platform: Optional[str] = None, run_id: Optional[str] = None) -> List[StoredCell]: ...

    def read_run(self, run_id: str) -> StoredRun: ...

    def read_trials(self, run_id: str, cell_key: Optional[str] = None) -> List[StoredTrial]: ...

    def read_iterations(self, trial_id: str) -> Tuple[StoredIteration, ...]: ...


@dataclass(frozen=True)
class Rows:
    """The records of harness.results.records: StoredCell, StoredRun, StoredTrial, StoredIteration."""

    cells: Tuple[StoredCell, ...] = ()  # the newest run of each cell (Store.cells order)
    runs: Dict[str, StoredRun] = field(default_factory=dict)  # run id -> its record
    # (run id, cell key) -> its trials by seq
    trials: Dict[Tuple[str, str], List[StoredTrial]] = field(default_factory=dict)
    # trial id -> its iterations (traced cells only)
    iterations: Dict[str, Tuple[StoredIteration, ...]] = field(default_factory=dict)
    renamed: bool = False  # some row named the bundled trainer by its old name

    def cell_trials(self, cell: StoredCell) -> List[StoredTrial]:
        """The trials of a cell of its run, by seq."""
        return self.trials.get((cell["run_id"], cell["cell_key"]), [])


def figure_order(cells: Iterable[StoredCell]) -> List[StoredCell]:
    """Cells in the order the HTML page's figures list them."""
    return sorted(cells, key=lambda c: (c["precision"], c["gpus"] * c["nodes"], c["model"], c["framework"]))


def read(store: StoreReads, platform: Optional[str] = None, run_id: Optional[str] = None, traced: int = 0) -> Rows:
    """The cells of one platform (or run), their runs and trials; the iterations of the first
    `traced` cells in figure order that have any."""
    cells = store.read_cells(platform=platform, run_id=run_id)
    runs: Dict[str, StoredRun] = {}
    trials: Dict[Tuple[str, str], List[StoredTrial]] = {}
    for cell in cells:
        rid = cell.run_id
        if rid not in runs:
            runs[rid] = store.read_run(rid)
            for t in store.read_trials(rid):
                trials.setdefault((rid, t.cell_key), []).append(t)
    iterations: Dict[str, Tuple[StoredIteration, ...]] = {}
    count = 0
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
