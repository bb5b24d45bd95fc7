"""`detbench import`: logs of runs made elsewhere become one run of the results store.

One cell, one trial per log. Every log is read and its window figure computed before
anything is written, so a bad log leaves the store as it was. Each trial folder then gets
the log as log.txt and a trial.json that says it was imported (no log.times: a log made
elsewhere has no arrival times, so the observed estimator stays empty), and ingest.analyse
turns it into the TrialResult a measured trial of that log would get, from the same run of
the log (`--run`, else the last that covers the window) and with the same epoch length
(`--iters-per-epoch`, where the log does not print it). The run is marked origin
"imported"; its settings are unknown, so none are stored. What was chosen for the user
(a detected format, another window than asked, a run of several) is said only once every
log has passed.
"""

import dataclasses
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from pydantic import ValidationError

from harness import atomic
from harness.vocab import catalog
from harness.plan import platforms
from harness import frameworks
from harness.plan import trialfiles
from harness.measure import divergence, ingest, logfigure, scrapers
from harness.measure.records import IterationRecord
from harness.measure.result import TrialResult
from harness.plan import scenario as scenario_mod
from harness.errors import UserError
from harness.frameworks.base import Framework
from harness.results.store import DB_NAME, ResultsWriteError, Store, new_run_id

BACKEND = "imported"  # runs.backend of an imported run: it ran on no launcher of this harness

# The run length some formats print on every line (iteration-based loops): the number after
# the slash. Epoch-based lines print only an epoch's length, which says nothing of the run's.
TOTAL_RES = (
    re.compile(r"Iter\(train\) *\[ *\d+/(\d+)\]"),  # mmengine (mmdetection 3.x)
    re.compile(r"Iter \[\d+/(\d+)\]\t"),  # mmcv IterBasedRunner (mmdetection 2.x)
    re.compile(r"\tIter: \d+/(\d+)\t"),  # SimpleDet's Speedometer
)


Log = Union[str, Path]


def import_logs(
    logs: Sequence[Log],
    framework: Optional[str],
    model: str,
    precision: str,
    platform: str,
    batch_per_gpu: int,
    gpus: int,
    nodes: int = 1,
    scenario_name: Optional[str] = None,
    warmup: Optional[int] = None,
    measure: Optional[int] = None,
    fmt: Optional[str] = None,
    results_dir: Union[str, Path] = "results",
    note: Callable[[str], Any] = print,
    run: Optional[int] = None,
    iters_per_epoch: Optional[int] = None,
    max_error: Optional[float] = None,
    approximate: bool = False,
) -> Tuple[str, str]:
    """Store `logs` as one imported run; return (run id, cell key). UserError, with nothing
    written, on bad input; `note` hears what was chosen for the user (format, window, run),
    once every log has passed."""
    if not logs:
        raise UserError("give at least one LOG to import")
    fw = frameworks.get(framework) if framework is not None else None
    readings = [logfigure.reading(log, framework, fmt, iters_per_epoch=iters_per_epoch) for log in logs]
    notes = [
        "detbench: reading %s as %s (detected)" % (log, how.scraper)
        for log, how in zip(logs, readings)
        if how.how == "detected"
    ]
    if fw is None:
        fw = _framework_of(readings)
    _check_cell(fw, model, precision, platform, batch_per_gpu, gpus, nodes)
    warmup, measure = _window(warmup, measure, scenario_name, results_dir, notes.append)
    images = batch_per_gpu * gpus * nodes
    checked: List[logfigure.Reading] = []
    for log, how in zip(logs, readings):
        fig = _check_log(
            log, how, fw.name, warmup, measure, images, batch_per_gpu, gpus, nodes, run, max_error, approximate
        )
        notes += ["detbench: " + n for n in fig.notes]
        # ingest reads the same run of the log as the figure checked here
        checked.append(how if fig.runs == 1 else dataclasses.replace(how, options=dict(how.options, run=fig.run)))
    sc = _scenario(
        scenario_name, fw.name, model, precision, platform, gpus, nodes, batch_per_gpu, warmup, measure, len(logs)
    )
    cell = scenario_mod.Cell(fw.name, model, precision, platform, gpus, nodes)
    for line in notes:
        note(line)
    return _store(logs, checked, sc, cell, images, results_dir), cell.key


# Formats that code besides the one framework reading them writes, so that a log of one says
# nothing of the column it belongs to: detectron2 prints the same lines on any device (detbench
# runs it on a CPU as detectron2, through its own lines, and on a GPU as detectron2-cuda), and
# DeepLearningExamples' EfficientDet prints dllogger lines in PyTorch as in TF2.
OTHER_WRITERS = {
    "detectron2": "detectron2 on any device (detbench's detectron2 on a CPU, detectron2-cuda on a GPU)",
    "dllogger": "NVIDIA's EfficientDet in PyTorch as in TF2 (detbench's nvidia-efficientdet-tf2)",
}


def _framework_of(readings: Sequence[logfigure.Reading]) -> Framework:
    """The framework whose scraper every log's format is, when exactly one framework has it
    and no other code writes the format (OTHER_WRITERS)."""
    formats = sorted({how.scraper for how in readings})
    owners = sorted({fw.name for fw in frameworks.FRAMEWORKS.values() if fw.scraper in formats})
    if len(formats) == 1 and formats[0] in OTHER_WRITERS:
        raise UserError(
            "give --framework: the table column these logs belong to (%s logs are written by %s; "
            "the log does not tell which)" % (formats[0], OTHER_WRITERS[formats[0]])
        )
    if len(formats) != 1 or len(owners) != 1:
        raise UserError(
            "give --framework: the table column these logs belong to (%s logs are written by %s)"
            % (" and ".join(formats), ", ".join(owners) or "no framework detbench runs")
        )
    return frameworks.FRAMEWORKS[owners[0]]


def _check_cell(
    fw: Framework, model: str, precision: str, platform: str, batch_per_gpu: int, gpus: int, nodes: int
) -> None:
    if model not in catalog.MODELS:
        raise UserError("--model: unknown model %r (known: %s)" % (model, ", ".join(sorted(catalog.MODELS))))
    if precision not in catalog.PRECISIONS:
        raise UserError(
            "--precision: unknown precision %r (known: %s)" % (precision, ", ".join(sorted(catalog.PRECISIONS)))
        )
    if not fw.supports(model, precision):
        raise UserError(
            "%s does not train %s in %s (it trains %s in %s)"
            % (fw.name, model, precision, ", ".join(sorted(fw.models)), ", ".join(sorted(fw.precisions)))
        )
    known = platforms.known_names()
    if platform not in known:
        raise UserError("--platform: unknown platform %r (known: %s)" % (platform, ", ".join(known)))
    for flag, value in (("--batch-per-gpu", batch_per_gpu), ("--gpus", gpus), ("--nodes", nodes)):
        if not 1 <= value <= scenario_mod.MAX_COUNT:
            raise UserError("%s must lie between 1 and %d, got %d" % (flag, scenario_mod.MAX_COUNT, value))


def _window(
    warmup: Optional[int],
    measure: Optional[int],
    scenario_name: Optional[str],
    results_dir: Union[str, Path],
    note: Callable[[str], Any],
) -> Tuple[int, int]:
    """--warmup/--measure, or what the newest run of the same scenario in the store used."""
    if warmup is not None and measure is not None:
        logfigure.check_window(warmup, measure)
        return warmup, measure
    used = _scenario_window(scenario_name, results_dir)
    if used is None:
        raise UserError(
            "give --warmup and --measure: the results store holds no run of scenario %r "
            "to take them from" % scenario_name
        )
    warmup = used[0] if warmup is None else warmup
    measure = used[1] if measure is None else measure
    logfigure.check_window(warmup, measure)
    note("detbench: window after %d warmup iterations, %d measured (as scenario %s)" % (warmup, measure, scenario_name))
    return warmup, measure


def _scenario_window(scenario_name: Optional[str], results_dir: Union[str, Path]) -> Optional[Tuple[int, int]]:
    if not scenario_name or not (Path(results_dir) / DB_NAME).exists():
        return None  # no store yet: do not create one only to look
    store = Store(results_dir, create=False)
    try:
        runs = [r for r in store.read_runs() if r.scenario_name == scenario_name]
    finally:
        store.close()
    if not runs:
        return None
    sc = runs[-1].scenario
    if sc.warmup is None or sc.measure is None:
        return None  # a stored scenario that does not say
    return sc.warmup, sc.measure


def _check_log(
    log: Log,
    how: logfigure.Reading,
    framework: str,
    warmup: int,
    measure: int,
    images: int,
    batch_per_gpu: int,
    gpus: int,
    nodes: int,
    run: Optional[int] = None,
    max_error: Optional[float] = None,
    approximate: bool = False,
) -> logfigure.Figure:
    """The log's window figure (logfigure.Figure); UserError when the log cannot give the
    cell's figure or contradicts the flags."""
    total = declared_total(log)
    if total is not None and total < warmup + measure:
        raise UserError(
            "%s: the log trains %d iterations, fewer than --warmup %d + --measure %d" % (log, total, warmup, measure)
        )
    records, _ = logfigure.read(log, how, window=(warmup + 1, warmup + measure))
    logfigure.require_records(log, how, records)
    watch, stop = _losses(log, how)
    given = "--batch-per-gpu %d x --gpus %d%s" % (batch_per_gpu, gpus, " x --nodes %d" % nodes if nodes > 1 else "")
    try:
        # a coverage problem is the more telling refusal: ask for the figure unbounded, then check it
        fig = logfigure.figure(
            log, records, warmup, measure, images, run=run, max_error=max_error, approximate=True, images_given=given
        )
        problem = logfigure.coverage_problem(records, fig)
        if problem:
            hint = (
                ""
                if how.how != "framework %s" % framework
                else "; a log of %s's own scripts is read with --format %s" % (framework, how.scraper)
            )
            raise UserError("%s: %s%s" % (log, problem, hint))
    except UserError:
        _refuse_diverged(log, divergence.judge(watch, run, warmup + measure, stop))  # the reason it has none
        raise
    _refuse_diverged(log, divergence.judge(watch, fig.run, max(warmup + measure, fig.window[1]), stop))
    for rec, shown in logfigure.images_in_log(records, fig):
        if shown != images:
            raise UserError(
                "%s:%d: iteration %d has %d images; %s gives %d"
                % (log, rec.line + 1, rec.iteration, shown, given, images)
            )
    if not approximate and fig.error_bound_s is None:  # refused the way scrape refuses it
        logfigure.figure(log, records, warmup, measure, images, run=run, max_error=max_error)
    return fig


def _losses(log: Log, how: logfigure.Reading) -> Tuple[divergence.Watch, Optional[divergence.Divergence]]:
    """Every record's loss of the log, and the message its framework printed where it stopped
    itself at a non-finite loss (read as ingest reads a trial's)."""
    watch = divergence.Watch()
    for item in scrapers.iter_path(how.scraper, log, **how.options):
        if isinstance(item, IterationRecord):
            watch.add(item)
    return watch, divergence.stop_in(divergence.tail(log), watch.recent)


def _refuse_diverged(log: Log, found: Optional[divergence.Divergence]) -> None:
    """UserError where the log's training diverged at or before its window's end: its figure
    would time a training that no longer learns."""
    if found is not None:
        raise UserError("%s:%d: %s" % (log, found.line + 1, found.what))


def declared_total(log: Log) -> Optional[int]:
    """The number of iterations the log says its run trains, where its lines print it; else None."""
    for line in scrapers.common.read_lines(log):
        for pattern in TOTAL_RES:
            m = pattern.search(line)
            if m:
                return int(m.group(1))
    return None


def _scenario(
    name: Optional[str],
    framework: str,
    model: str,
    precision: str,
    platform: str,
    gpus: int,
    nodes: int,
    batch_per_gpu: int,
    warmup: int,
    measure: int,
    repeats: int,
) -> scenario_mod.Scenario:
    name = name or "imported"
    data: Dict[str, Any] = {
        "name": name,
        "description": "imported from logs",
        "matrix": {
            "framework": [framework],
            "model": [model],
            "precision": [precision],
            "platform": [platform],
            "gpus": [gpus],
            "nodes": [nodes],
        },
        "batch_per_gpu": batch_per_gpu,
        "warmup": warmup,
        "measure": measure,
        "repeats": repeats,
    }
    try:
        return scenario_mod.Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = {"name": "--scenario-name", "repeats": "LOG..."}.get(str(err["loc"][0]), str(err["loc"][0]))
        raise UserError("%s: %s" % (where, err["msg"])) from None


def _store(
    logs: Sequence[Log],
    readings: Sequence[logfigure.Reading],
    sc: scenario_mod.Scenario,
    cell: scenario_mod.Cell,
    images: int,
    results_dir: Union[str, Path],
) -> str:
    store = Store(results_dir)
    run_id = new_run_id()
    key = cell.key
    cells = [
        dict(
            cell_key=key,
            framework=cell.framework,
            model=cell.model,
            precision=cell.precision,
            platform=cell.platform,
            gpus=cell.gpus,
            nodes=cell.nodes,
            batch_per_gpu=sc.batch_per_gpu,
            images_per_iteration=images,
            excluded=None,
        )
    ]
    # no argv ran here: each trial's argv names the log it came from
    trials = [(i + 1, key, i + 1, ["imported", os.path.abspath(log)]) for i, log in enumerate(logs)]
    store.create_run(
        run_id, sc.name, None, sc.model_dump_json(), BACKEND, _host(cell.platform), cells, trials, origin="imported"
    )
    done = 0
    try:
        for seq, (log, how) in enumerate(zip(logs, readings), 1):
            trial_id = "%s-%04d" % (run_id, seq)
            trial_dir = store.trial_dir(trial_id)
            _trial_folder(trial_dir, log)
            # settings=None: what the run was configured with is not known
            store.finish_trial(
                trial_id,
                ingest.analyse(str(trial_dir), how.scraper, sc.warmup, sc.measure, images, how.options, settings=None),
            )
            done += 1
    except (OSError, ResultsWriteError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _fail_rest(store, run_id, done, "import stopped: %s" % reason)
        raise UserError("%s: import stopped after %d of %d logs: %s" % (store.root, done, len(logs), reason)) from None
    finally:
        store.close()
    return run_id


def _trial_folder(trial_dir: Path, log: Log) -> None:
    trial_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, str(trial_dir / trialfiles.LOG))
    record = {"imported": True, "source": os.path.abspath(log), "exit_code": 0, "end_wall": os.stat(log).st_mtime}
    atomic.write_json(trial_dir / trialfiles.RECORD, record, sort_keys=True)


def _fail_rest(store: Store, run_id: str, done: int, reason: str) -> None:
    """Mark the trials an interrupted import did not finish as failed, so no run is left pending."""
    try:
        for t in store.trials(run_id)[done:]:
            store.finish_trial(t["id"], TrialResult(status="failed", reason=reason))
    except ResultsWriteError:
        pass


def _host(platform: str) -> Dict[str, Any]:
    """The run's host record: the platform the logs were made on, as its spec describes it."""
    host = platforms.load(platform).model_dump()
    host["imported"] = True
    return host
