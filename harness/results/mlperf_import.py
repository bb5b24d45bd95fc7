"""`detbench import` of MLPerf Training results: a round, a submitter, a system or one result file.

A round's folder holds `<submitter>/results/<system>/<benchmark>/result_N.txt` and
`<submitter>/systems/<system>.json`. Each system's folder of a detection benchmark becomes one
run of the store's MLPerf tables (harness.results.mlperf_store), each of its result files one
trial, read by harness.measure.mllog. The run's score follows the round's rule as
mlperf_logging's result summarizer applies it: a file the rules refuse (or that cannot be read)
is dropped, the olympic mean of the rest (fastest and slowest left out, a dropped file standing
for the slowest) through the summarizer's own function, times the review's `scaling.json`
factor where the folder has one; more than one dropped file leaves no score.

A file or system that cannot be imported is named in one line (`note`) and the rest is
imported; where nothing can be, UserError.
"""

import dataclasses
import glob
import importlib
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from harness.errors import UserError, located
from harness.measure import mllog
from harness.results.mlperf_store import MlperfTables
from harness.results.store import Store, new_run_id

# the benchmarks detbench reads: Mask R-CNN, and RetinaNet under its folder name "ssd" (from
# round 2.0; before, SSD ResNet-34) or "retinanet"; "mask" is the summarizer's old alias
DETECTION = {"maskrcnn": "maskrcnn", "mask": "maskrcnn", "ssd": "ssd", "retinanet": "ssd"}
MAX_DROPPED = 1  # the summarizer's for these benchmarks (unet3d's is 4)
RESULT_GLOB = "result_*.txt"


@dataclasses.dataclass(frozen=True)
class Folder:
    """One system's results of one benchmark: where they are and which files to read."""

    submitter_dir: str
    system: str
    benchmark: str  # the folder's name
    path: str
    files: Tuple[str, ...]
    whole: bool  # every result file of the folder (a score is computed) or one given file


@dataclasses.dataclass(frozen=True)
class Imported:
    run_id: str
    submitter: str
    system: str
    benchmark: str
    results: int
    score_minutes: Optional[float]
    score_note: Optional[str]


def round_of(path: str, given: Optional[str]) -> str:
    """The ruleset of the round: --round, else the `training_results_vX.Y` (or `vX.Y`) folder the path lies in."""
    if given:
        return mllog.ruleset(given)
    for part in reversed(os.path.abspath(path).split(os.sep)):
        m = re.fullmatch(r"(?:training_results_)?v(\d+\.\d+(?:\.\d+)?)", part)
        if m:
            return mllog.ruleset(m.group(1))
    raise UserError("%s: give --round X.Y: the path names no training_results_vX.Y folder" % path)


def folders(path: str) -> List[Folder]:
    """The benchmark folders under `path` (a round, a submitter, a system, a benchmark folder or one file)."""
    path = os.path.normpath(path)
    if os.path.isfile(path):
        bench_dir = os.path.dirname(os.path.abspath(path))
        return [_folder(bench_dir, (path,), whole=False)]
    if not os.path.isdir(path):
        raise UserError("%s: no such file or folder" % path)
    if glob.glob(os.path.join(path, RESULT_GLOB)):
        return [_folder(os.path.abspath(path), None, whole=True)]
    if os.path.basename(os.path.dirname(os.path.abspath(path))) == "results":
        return _system_folders(os.path.abspath(path))
    if os.path.isdir(os.path.join(path, "results")):
        return _submitter_folders(path)
    found = [
        f
        for sub in sorted(os.listdir(path))
        if os.path.isdir(os.path.join(path, sub, "results"))
        for f in _submitter_folders(os.path.join(path, sub))
    ]
    if not found:
        raise UserError(
            "%s: no MLPerf results here (no <submitter>/results/<system>/<benchmark>/%s)" % (path, RESULT_GLOB)
        )
    return found


def _submitter_folders(submitter: str) -> List[Folder]:
    results = os.path.join(submitter, "results")
    return [
        f
        for system in sorted(os.listdir(results))
        if os.path.isdir(os.path.join(results, system))
        for f in _system_folders(os.path.abspath(os.path.join(results, system)))
    ]


def _system_folders(system: str) -> List[Folder]:
    return [
        _folder(os.path.join(system, b), None, whole=True)
        for b in sorted(os.listdir(system))
        if b in DETECTION and os.path.isdir(os.path.join(system, b))
    ]


def _folder(bench_dir: str, files: Optional[Tuple[str, ...]], whole: bool) -> Folder:
    system_dir = os.path.dirname(bench_dir)
    submitter_dir = os.path.dirname(os.path.dirname(system_dir))
    found = files if files is not None else tuple(sorted(glob.glob(os.path.join(bench_dir, RESULT_GLOB))))
    return Folder(submitter_dir, os.path.basename(system_dir), os.path.basename(bench_dir), bench_dir, found, whole)


def platform(system_json: str) -> Dict[str, Any]:
    """A system's JSON as a platform description; UserError where it is missing or not JSON."""
    try:
        with open(system_json, encoding="utf-8") as f:
            desc = json.load(f)
    except FileNotFoundError:
        raise UserError(
            located(system_json, None, None, "missing: the system's description, so its results are not imported")
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(
            located(system_json, getattr(exc, "lineno", None), None, "not a system JSON: %s" % exc)
        ) from None
    if not isinstance(desc, dict):
        raise UserError(located(system_json, 1, None, "not a system JSON: not an object"))
    nodes = _count(desc.get("number_of_nodes")) or 1
    per_node = _count(desc.get("accelerators_per_node")) or 0
    sockets = _count(desc.get("host_processors_per_node")) or 0
    accelerator = str(desc.get("accelerator_model_name") or "").strip()
    cpu_only = per_node == 0 or accelerator.lower() in ("", "n/a", "none")
    return {
        "system": str(desc.get("system_name") or ""),
        "submitter": str(desc.get("submitter") or ""),
        "division": str(desc.get("division") or ""),
        "status": str(desc.get("status") or ""),
        "nodes": nodes,
        "device": str(desc.get("host_processor_model_name") or "CPU") if cpu_only else accelerator,
        "devices_per_node": sockets if cpu_only else per_node,
        "devices": nodes * (sockets if cpu_only else per_node),
        "cpu_only": cpu_only,
        "host_cpu": str(desc.get("host_processor_model_name") or ""),
        "host_cpus_per_node": sockets,
        "framework": str(desc.get("framework") or ""),
        "software": desc.get("other_software_stack") if isinstance(desc.get("other_software_stack"), dict) else {},
        "os": str(desc.get("operating_system") or ""),
    }


def _count(value: Any) -> Optional[int]:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def score(minutes: List[float], dropped: int, folder: str) -> Tuple[Optional[float], Optional[str], float]:
    """(score, why there is none, scaling factor) by the summarizer's own rule and functions."""
    result_summarizer = importlib.import_module("mlperf_logging.result_summarizer.result_summarizer")
    factor = float(result_summarizer._get_scaling_factor(folder))
    if dropped > MAX_DROPPED:
        return None, "%d results dropped (the rule allows %d)" % (dropped, MAX_DROPPED), factor
    mean = result_summarizer._compute_olympic_average(sorted(minutes), dropped, MAX_DROPPED)
    if mean is None:
        return None, "too few results for the olympic mean", factor
    return mean * factor, None, factor


def import_mlperf(
    path: str,
    round_name: Optional[str] = None,
    results_dir: str = "results",
    note: Callable[[str], Any] = print,
    progress: Optional[Callable[[int, int], Any]] = None,
) -> List[Imported]:
    """Import every detection benchmark folder under `path`; one `note` line per file or system not imported.
    Each folder is stored once read, so memory holds one folder's results and one file's records."""
    rules = round_of(path, round_name)
    found = folders(path)
    total = sum(len(f.files) for f in found)
    if not total:
        raise UserError("%s: no %s of %s here" % (path, RESULT_GLOB, " or ".join(sorted(set(DETECTION.values())))))
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress is not None:
            progress(done[0], total)

    imported: List[Imported] = []
    refused = 0
    store: Optional[Store] = None
    try:
        for folder in found:
            run, read, bad = _read_folder(folder, rules, note, tick)
            refused += bad
            if run is None:
                continue
            if store is None:  # the store is made by the first folder that imports
                store = Store(results_dir)
            MlperfTables(store).put_run(run, read)
            imported.append(
                Imported(
                    run["run_id"],
                    run["submitter"],
                    run["system"],
                    run["benchmark"],
                    len(read),
                    run["score_minutes"],
                    run["score_note"],
                )
            )
    finally:
        if store is not None:
            store.close()
    if not imported:
        raise UserError(
            "%s: nothing imported: every one of %d result file%s was refused"
            % (path, refused, "" if refused == 1 else "s")
        )
    return imported


def _read_folder(
    folder: Folder, rules: str, note: Callable[[str], Any], tick: Callable[[], None]
) -> Tuple[Optional[Dict[str, Any]], List[mllog.Result], int]:
    """(the run to store or None, its results, how many files were refused) of one benchmark folder."""
    system_json = os.path.join(folder.submitter_dir, "systems", folder.system + ".json")
    try:
        desc = platform(system_json)
    except UserError as exc:
        note(str(exc))
        for _ in folder.files:
            tick()
        return None, [], len(folder.files)
    read: List[mllog.Result] = []
    dropped = refused = 0
    for file in folder.files:
        try:
            result = mllog.read_result(file, rules)
            _same_benchmark(result, folder)
            read.append(result)
            dropped += result.compliance is not None
        except UserError as exc:
            note(str(exc))
            dropped += 1
            refused += 1
        tick()
    if not read:
        return None, [], refused
    minutes = [r.minutes for r in read if r.compliance is None]
    if folder.whole:
        value, why, factor = score(minutes, dropped, folder.path)
    else:
        value, why, factor = None, "one result file imported: the score is of the folder's results", 1.0
    run = {
        "run_id": new_run_id(),
        "round": rules.rsplit(".", 1)[0],
        "ruleset": rules,
        "submitter": os.path.basename(folder.submitter_dir),
        "system": folder.system,
        "benchmark": DETECTION.get(folder.benchmark, read[0].benchmark),
        "division": read[0].division or desc["division"],
        "platform": desc,
        "score_minutes": value,
        "score_note": why,
        "scaling_factor": factor,
        "folder": folder.path,
    }
    return run, read, refused


def _same_benchmark(result: mllog.Result, folder: Folder) -> None:
    logged = DETECTION.get(result.benchmark, result.benchmark)
    if logged != DETECTION.get(folder.benchmark, logged):
        raise UserError(
            located(
                result.path,
                result.benchmark_line,
                "submission_benchmark",
                "%s in the %s folder: results of two benchmarks in one folder" % (result.benchmark, folder.benchmark),
            )
        )
