"""Baseline files: one run's per-repeat throughputs, cell settings and host, as JSON.

The file is meant to be committed (e.g. baselines/nightly.json) and read in review, so
it is small, keys are sorted, numbers are rounded to 6 significant digits and each
list of repeats sits on one line. A run in a results store and a baseline file read
into the same plain dict ("a side"), so `detbench compare` takes either.

    {"schema": "detbench-baseline", "schema_version": 1,
     "run": {"id", "scenario", "backend", "created"},
     "host": {... runs.host_json ...},
     "cells": {"<cell key>": {"settings": {...}, "images_per_iteration": 2,
                              "throughput": [...], "observed": [...], "failed": 0}}}

The host record keeps the facts its fingerprint was made from, so a file saved before the
fingerprint recorded the instruction set (an "fp1-" one) still loads, and `compare` says that
it cannot be shown to be the candidate's machine instead of judging its speeds.

An inference cell also carries "latency_ms": {"mean": [...], "p50": [...], "p95": [...], ...}:
each repeat's latency average and percentiles in ms, what `detbench compare --metric p95` judges.
"""

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Union

from harness import atomic
from harness.results.records import StoredCell, StoredScenario, StoredTrial

if TYPE_CHECKING:
    from harness.results.store import Store

from harness.vocab import names
from harness.errors import UserError

SCHEMA = "detbench-baseline"
SCHEMA_VERSION = 1
ESTIMATORS = ("throughput", "observed")  # reported by the framework, observed from line times
DIGITS = 6


# ------------------------------------------------------------------ from a results store

Side = Dict[str, Any]  # one side of a comparison: a baseline file's object


def from_store(store: "Store", run_id: str) -> Side:
    """The side of a run in a results store ("latest" for the newest run)."""
    run = store.read_run(run_id)
    trials = store.read_trials(run.id)
    cells: Dict[str, Dict[str, Any]] = {}
    for cell in store.read_cells(run_id=run.id):
        if cell.excluded:
            continue
        rows = [t for t in trials if t.cell_key == cell.cell_key]
        done = [t for t in rows if t.done]
        cells[cell.cell_key] = {
            "settings": cell_settings(run.scenario, cell, done),
            "images_per_iteration": cell.images_per_iteration,
            "throughput": [_round(t.throughput) for t in done if t.throughput is not None],
            "observed": [_round(t.observed) for t in done if t.observed is not None],
            "failed": sum(1 for t in rows if t.failed),
            "unfinished": sum(1 for t in rows if t.status in ("pending", "running")),
        }
        latency = latency_lists(done)
        if latency:
            cells[cell.cell_key]["latency_ms"] = latency
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run": {
            "id": run.id,
            "scenario": run.scenario_name,
            "backend": run.backend,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.created)),
        },
        "host": dict(run.host or {}),
        "cells": cells,
    }


def latency_lists(done_trials: Iterable[StoredTrial]) -> Dict[str, List[float]]:
    """{"mean": [ms per repeat], "p95": [...], ...} of the finished inference trials (StoredTrials;
    a figure only where every repeat has it), or {} for training trials."""
    figures = [t.latency for t in done_trials if t.latency is not None]
    if not figures:
        return {}
    out: Dict[str, List[float]] = {}
    for name in sorted({k for f in figures for k in f if k == "mean_s" or re.fullmatch(r"p[0-9.]+_s", k)}):
        values = [f.get(name) for f in figures]
        if all(isinstance(v, (int, float)) and v > 0 for v in values):
            out[name[:-2]] = [_round(float(v) * 1000.0) for v in values if v is not None]
    return out


def cell_settings(scenario: StoredScenario, cell: StoredCell, done_trials: Iterable[StoredTrial]) -> Dict[str, Any]:
    """Everything that must match for two measurements of a cell to be comparable (scenario: the
    run's StoredScenario; cell and done_trials: its StoredCell and finished StoredTrials)."""
    settings: Dict[str, Any] = {}
    for t in done_trials:
        if t.settings is not None:
            # where the settings came from and how the framework implements its parts are not
            # settings: a changed implementation is the speed-up or slow-down the gate is for
            from harness.measure.ingest import NOT_SETTINGS

            settings = {k: v for k, v in t.settings.items() if k not in NOT_SETTINGS}
            break
    framework = cell.framework
    settings.update(
        {
            "framework": framework,
            "model": cell.model,
            "precision": cell.precision,
            "platform": cell.platform,
            "gpus": cell.gpus,
            "nodes": cell.nodes,
            "batch_per_gpu": cell.batch_per_gpu,
            "images_per_iteration": cell.images_per_iteration,
            "warmup": scenario.warmup,
            "measure": scenario.measure,
            "env": scenario.env,
            "extra_args": scenario.extra_args.get(framework, []),
        }
    )
    return settings


def _round(value: float) -> float:
    return float("%.*g" % (DIGITS, value))


# ------------------------------------------------------------------ file io


def dumps(side: Mapping[str, Any]) -> str:
    """Stable, human-diffable JSON: sorted keys, two-space indent, number lists on one line."""
    text = json.dumps(side, indent=2, sort_keys=True)
    return (
        re.sub(
            r"\[\s*([-0-9.eE+,\s]*?)\s*\]",
            lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",") if v.strip()) + "]",
            text,
        )
        + "\n"
    )


def save(side: Mapping[str, Any], path: Union[str, Path]) -> None:
    """Write atomically (temp file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, dumps(side))


def load(path: Union[str, Path]) -> Side:
    """Read and check a baseline file; UserError naming the file and field when it is wrong."""
    path = Path(path)
    try:
        side = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError("%s: cannot read baseline: %s" % (path, exc.strerror)) from None
    except ValueError as exc:
        raise UserError(
            "%s:%d: not valid JSON: %s" % (path, getattr(exc, "lineno", 0), getattr(exc, "msg", exc))
        ) from None
    if not isinstance(side, dict) or side.get("schema") != SCHEMA:
        raise UserError("%s: not a detbench baseline file (schema is not %r)" % (path, SCHEMA))
    if side.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            "%s: baseline schema_version %r, this detbench reads %d"
            % (path, side.get("schema_version"), SCHEMA_VERSION)
        )
    cells = side.get("cells")
    if not isinstance(cells, dict):
        raise UserError("%s: cells: must be a mapping of cell key to cell" % path)
    for key, cell in cells.items():
        _check_cell(path, key, cell)
    renamed = {key: names.cell_key(key) for key in cells if names.cell_key(key) != key}
    if renamed:
        side["cells"] = {names.cell_key(key): cell for key, cell in cells.items()}
        side["notes"] = [
            "%s: cell %s read as %s (the framework's new name)" % (path, old, new)
            for old, new in sorted(renamed.items())
        ]
    if not isinstance(side.get("host", {}), dict):
        raise UserError("%s: host: must be a mapping" % path)
    side.setdefault("run", {})
    side.setdefault("host", {})
    return side


def _check_cell(path: Path, key: str, cell: object) -> None:
    where = "%s: cells.%s" % (path, key)
    if not isinstance(cell, dict):
        raise UserError("%s: must be a mapping" % where)
    if not isinstance(cell.get("settings", {}), dict):
        raise UserError("%s.settings: must be a mapping" % where)
    for name in ESTIMATORS:
        values = cell.get(name, [])
        if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values
        ):
            raise UserError("%s.%s: must be a list of positive numbers" % (where, name))
    latency = cell.get("latency_ms", {})
    if not isinstance(latency, dict):
        raise UserError("%s.latency_ms: must be a mapping of figure to a list of ms" % where)
    for name, values in latency.items():
        if not isinstance(values, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values
        ):
            raise UserError("%s.latency_ms.%s: must be a list of positive numbers" % (where, name))
    cell.setdefault("settings", {})
    cell.setdefault("failed", 0)


# ------------------------------------------------------------------ either kind of side


def accuracy_run(ref: str, results_dir: Union[str, Path]) -> Optional[str]:
    """The id of the accuracy run (`detbench accuracy run`) that `ref` names in the store at
    `results_dir`, or None: a file, a speed run, no such run or no store (resolve() says which)."""
    from harness.errors import UserError
    from harness.results.store import DB_NAME, Store

    if Path(ref).is_file() or ref.endswith(".json") or os.sep in ref or not (Path(results_dir) / DB_NAME).exists():
        return None
    store = Store(results_dir, create=False)
    try:
        run_id = store.read_run(ref).id
        return run_id if store.accuracy().trials(run_id) else None
    except UserError:
        return None
    finally:
        store.close()


def resolve(ref: str, results_dir: Union[str, Path]) -> Side:
    """A side from an existing file path, else from a run id (or "latest") in the store."""
    from harness.results.store import DB_NAME, Store

    if Path(ref).is_file():
        return load(ref)
    if ref.endswith(".json") or os.sep in ref:
        raise UserError("%s: no such baseline file" % ref)
    if not (Path(results_dir) / DB_NAME).exists():
        raise UserError("%r is neither a baseline file nor a run: no results store in %s" % (ref, results_dir))
    store = Store(results_dir, create=False)
    try:
        return from_store(store, ref)
    finally:
        store.close()
