"""Runs an accuracy scenario (`mode: accuracy`): `detbench accuracy run --scenario FILE | --resume RUN`.

Each runnable cell trains once per seed (one trial) of the look asked for (`--look`: 1, the
scenario's seeds, or a later look of its sequential plan), each seed a round of every cell in the
order drawn from the order seed (the scenario's, else one drawn here; stored with the run). Before
anything is stored, each model's shared weights file is scored untrained on the val split (the
noise floor, kept in `accuracy_floor`), and a declared target at or below it is refused. A
framework whose pinned env is not built here is NA with that reason. A trial's training runs in its framework's
environment with a checkpoint every `eval_every` iterations; every `checkpoint PATH` line is
stored on arrival with the training wall seconds since the process started (plus, after a
resume, the seconds the checkpoint it went on from stood for), and every logged loss is kept.
When training ends, each checkpoint's val-split detections are written by the framework's own
dump command and scored by the one shared COCOeval (`python -m harness.trainer.cocometrics`),
so evaluation never counts as training time. A scored checkpoint file is removed, except the
last one of the trial.

The results store arrives as an argument (the command line opens it): this stage writes through
its `create_run` and `accuracy()` tables and imports nothing of the results stage.

`--resume RUN` goes on with the trials of RUN that are not done: a trial with a stored
checkpoint whose file is still there trains on from it (the bundled trainer's `--resume`, the
torchvision and mmdetection drivers' `--resume`), one without starts again from the shared weights file.
`--redo TRIAL` (with `--resume`, repeatable) trains a done, failed or interrupted trial again
from the start: its earlier files move to `<folder>.replaced-N`, its stored figures leave the
tables but for one `accuracy_redos` row (when, where the files went, that training's last
scored checkpoint), which the report names.
Each training program a trial starts (from the start or a checkpoint) stores the detbench code
it ran (`accuracy_code`), and the report names a run whose trainings ran more than one.
A resume goes on only on the machine the run started on (the same fingerprint facts: CPU and
its instruction set, cores, memory, kernel, GPUs), and only with the inputs it started with (the
SHA-256 of each shared weights file and of the data's splits, stored at the start); otherwise it
is refused in one line.
An interrupt (SIGINT, even where the run started with it ignored, or SIGTERM) stops the training
program in flight too, with every process it started (its own process group: progroup.py), and says
how to resume: at most that trial's iterations since its last checkpoint are lost.
"""
import dataclasses
import datetime
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence

from harness import frameworks, jsonlog
from harness.errors import UserError
from harness.frameworks import accuracy as recipes
from harness.frameworks.accuracy import trial_key
from harness.launch import envs, mllog_write, progroup
from harness.plan import hostcpu, machine_load
from harness.plan import accuracy as plan_accuracy
from harness.plan import coderev, fingerprint, platforms, scenario as scenario_mod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUMP_TIMEOUT_S = 3600
STOP_S = 10   # an interrupted run: SIGTERM to the program's process group, then SIGKILL after this long


def _env(sc) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(sc.env)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _python(name: str) -> str:
    fw = frameworks.FRAMEWORKS[name]
    return sys.executable if fw.env is None else envs.python_for(fw.env, require=False)


def start(scenario_path: str, store, run_id: str, out=None, look: int = 1) -> str:
    """Plan, store and run an accuracy scenario into `store` (a results Store) as run `run_id`:
    the seeds of its look `look` (1: accuracy.seeds; later: a look of its sequential plan)."""
    from harness import launch
    out = out or sys.stdout
    results_dir = str(store.root)
    sc = launch.load_scenario(scenario_path)
    if sc.mode != plan_accuracy.ACCURACY:
        raise UserError("%s: mode is %s: `detbench accuracy` runs mode: accuracy scenarios (use `detbench run`)"
                        % (scenario_path, sc.mode))
    try:
        seeds = plan_accuracy.look_seeds(sc.accuracy, look)
    except ValueError as exc:
        raise UserError("%s: --look: %s" % (scenario_path, exc)) from None
    planned = [dataclasses.replace(p, excluded=unbuilt(p.cell.framework)) if p.excluded is None
               and unbuilt(p.cell.framework) else p for p in hostcpu.exclude_unmeasurable(scenario_mod.plan(sc))]
    runnable = [p.cell for p in planned if p.excluded is None]
    if not runnable:
        raise UserError("%s: no cell of this scenario can be measured on this host (%s)"
                        % (scenario_path, next(p.excluded for p in planned if p.excluded)))
    host = platforms.host_record([c.platform for c in runnable], force=False)
    rows = [dict(cell_key=p.cell.key, framework=p.cell.framework, model=p.cell.model, precision=p.cell.precision,
                 platform=p.cell.platform, gpus=p.cell.gpus, nodes=p.cell.nodes, batch_per_gpu=sc.batch_per_gpu,
                 images_per_iteration=sc.batch_per_gpu, excluded=p.excluded) for p in planned]
    digests = input_digests(sc)
    floors = noise_floors(scenario_path, sc, sorted({c.model for c in runnable}), out)
    seed = order_seed(sc)
    store.create_run(run_id, sc.name, str(scenario_path), sc.model_dump_json(), "local", host, rows, [],
                     order={"seed": seed, "drawn": sc.order.seed is None, "look": look})
    tables = store.accuracy()
    tables.add_inputs(run_id, digests)
    for model, figures in floors.items():
        tables.add_floor(run_id, model, figures)
    trials = []
    for _, cell, s in plan_accuracy.trial_order(runnable, seeds, seed):
        key = trial_key(cell.key, s)
        folder = tables.folder(run_id, key)
        trials.append(dict(trial_key=key, cell_key=cell.key, seed=s, folder=folder,
                           argv=_train_argv(sc, cell, s, folder, None)))
    tables.add_trials(run_id, trials)
    out.write("accuracy run %s: %d trials (%d cells x %d seeds%s) of %s, each seed's round in the order drawn "
              "from seed %d -> %s\n" % (run_id, len(trials), len(runnable), len(seeds),
                                        ", look %d" % look if look > 1 else "", sc.name, seed, results_dir))
    for p in planned:
        if p.excluded:
            out.write("# NA %s: %s\n" % (p.cell.key, p.excluded))
    execute(store, run_id, sc, out)
    return run_id


def order_seed(sc) -> int:
    """The seed of the trials' order: the scenario's `order: {seed: N}`, else one drawn now (stored)."""
    if sc.order.seed is not None:
        return int(sc.order.seed)
    return random.SystemRandom().randrange(2 ** 31)


def unbuilt(framework: str):
    """Why `framework` cannot train here (its pinned env is not built), or None."""
    fw = frameworks.FRAMEWORKS.get(framework)
    if fw is None or fw.env is None or envs.is_built(fw.env):
        return None
    return "its pinned env is not built here (detbench env build %s)" % framework


def noise_floors(scenario_path: str, sc, models: List[str], out) -> Dict[str, Dict[str, float]]:
    """{model: {metric: value}}: what each model's shared initial weights score on the val split
    untrained, through one dump and the shared COCOeval (iteration 0). A declared target at or below
    it is refused in one line, before anything trains: reaching it would say nothing was learned."""
    val = plan_accuracy.split(sc.accuracy, "val")
    floors: Dict[str, Dict[str, float]] = {}
    for model in models:
        weights = sc.weights.get(model)
        if not weights:
            continue
        cell = scenario_mod.Cell("detbench-trainer", model, "fp32", "local", 1, 1)
        schedule = plan_accuracy.schedule(sc, cell, 0)
        with tempfile.TemporaryDirectory(prefix="detbench-floor-") as tmp:
            dets = os.path.join(tmp, "detections.json")
            try:
                _run(recipes.floor_dump_argv(model, schedule, os.path.abspath(weights), val, dets), _env(sc),
                     "the untrained weights' dump")
                figures = _run(recipes.score_argv(model, val[0], dets), _env(sc), "the untrained weights' scoring")
            except TrialFailed as exc:
                raise UserError("%s: weights.%s: its noise floor could not be measured: %s"
                                % (scenario_path, model, exc)) from None
        floors[model] = {"%s_%s" % (kind, k): float(v or 0.0) for kind in ("bbox", "segm")
                         for k, v in (figures.get(kind) or {}).items() if k in ("AP", "AP50")}
        target = sc.accuracy.targets[model]
        floor = floors[model].get(target.metric, 0.0)
        out.write("# noise floor of %s (untrained weights, val split): %s %.3f\n" % (model, target.metric, floor))
        low = [v for v in target.levels() if v <= floor]
        if low:
            raise UserError("%s: accuracy.targets.%s: %s %g is at or below what the untrained weights score "
                            "on the val split (%.3f): reaching it would not show learning; set targets above it"
                            % (scenario_path, model, target.metric, low[-1], floor))
    return floors


def resume(run_id: str, store, out=None, redo: Sequence[str] = ()) -> str:
    """Go on with the trials of accuracy run `run_id` of `store` that are not done, after making
    the trials named in `redo` (trial keys) pending again from the start."""
    from harness import launch
    out = out or sys.stdout
    run = store.read_run(run_id)
    run_id = run.id
    sc = run.scenario.validated(launch.LAUNCHERS)
    if sc.mode != plan_accuracy.ACCURACY or not store.accuracy().trials(run_id):
        raise UserError("run %s is not an accuracy run: resume it with `detbench run --resume`" % run_id)
    same_machine(run)
    same_inputs(run.id, store.accuracy().inputs(run.id))
    redo_trials(store.accuracy(), run_id, redo, out)
    execute(store, run_id, sc, out)
    return run_id


def redo_trials(tables, run_id: str, keys: Sequence[str], out) -> None:
    """Make each trial of `keys` pending with nothing of its earlier training stored but its
    `accuracy_redos` row; its folder is moved aside (`<folder>.replaced-N`), not removed. Every key
    is checked before any trial is touched."""
    trials = {str(t["trial_key"]): t for t in tables.trials(run_id)}
    for key in keys:
        if key not in trials:
            raise UserError("--redo %s: run %s has no such trial (its trials: %s)"
                            % (key, run_id, ", ".join(sorted(trials))))
    for key in dict.fromkeys(keys):
        folder, kept = str(trials[key]["folder"]), None
        if os.path.isdir(folder):
            n = 1
            while os.path.exists("%s.replaced-%d" % (folder, n)):
                n += 1
            kept = "%s.replaced-%d" % (folder, n)
            os.rename(folder, kept)
        # to the microsecond: the same trial redone twice within a second keeps both rows
        tables.redo(run_id, key, datetime.datetime.now().astimezone().strftime("%Y-%m-%dT%H:%M:%S.%f%z"), kept)
        out.write("%s: trained again from the start%s\n" % (key, "; its earlier files are in %s" % kept if kept
                                                              else ""))
    out.flush()


def same_machine(run, facts=None) -> None:
    """Refuse to go on with `run` on a machine whose fingerprint facts differ from those it was
    started on (one line naming each difference): its times to target would mix two machines,
    and a framework whose seeds trained here would be compared with one whose seeds trained
    there. A run stored without the facts has nothing to compare and goes on."""
    started = (run.host or {}).get("facts")
    if not started:
        return
    diffs = fingerprint.differences(started, platforms.host_facts() if facts is None else facts,
                                    ("started on", "here"))
    if diffs:
        raise UserError("run %s was started on another machine (%s): its trials' training times would not "
                        "compare with times taken here; resume it on the machine it started on, or start a "
                        "new run here" % (run.id, "; ".join(diffs)))


def input_digests(sc) -> Dict[str, str]:
    """{path: SHA-256 of its content} of the scenario's shared weights files and its data's splits
    (annotations and image folders), absolute paths."""
    paths = {os.path.abspath(p) for p in sc.weights.values()}
    for name in ("train", "val"):
        paths.update(plan_accuracy.split(sc.accuracy, name))
    return {p: _digest(p) for p in sorted(paths)}


def _digest(path: str) -> str:
    """SHA-256 of a file's bytes; of a folder, over each file's name relative to it and digest,
    in name order ("missing" where nothing is there)."""
    if os.path.isfile(path):
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    if not os.path.isdir(path):
        return "missing"
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(folder, name)
            h.update(("%s %s\n" % (os.path.relpath(full, path), _digest(full))).encode())
    return h.hexdigest()


def same_inputs(run_id: str, started: Dict[str, str]) -> None:
    """Refuse to go on with a run whose weights or data are not what it started with (one line
    naming each): a resumed trial would train another detector on other data. A run stored
    without digests has nothing to compare and goes on."""
    changed = []
    for path, digest in sorted(started.items()):
        now = _digest(path)
        if now != digest:
            changed.append("%s %s" % (path, "is missing" if now == "missing" else "has other content"))
    if changed:
        raise UserError("run %s: its inputs are not those it started with (%s): make them again as they were "
                        "(the same data and weights commands and seeds), or start a new run"
                        % (run_id, "; ".join(changed)))


def _train_argv(sc, cell, seed, folder, resume_from):
    python = _python(cell.framework)
    return recipes.train_argv(cell.framework, cell.model, plan_accuracy.schedule(sc, cell, seed),
                              plan_accuracy.split(sc.accuracy, "train"), sc.weights.get(cell.model) and
                              os.path.abspath(sc.weights[cell.model]), os.path.join(folder, "checkpoints"),
                              resume=resume_from, python=python)


def _interrupt(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


def execute(store, run_id: str, sc, out) -> None:
    tables = store.accuracy()
    # in the stored order (a seed's round, shuffled within it): an interrupted run has whole seeds of
    # every cell; a run stored before shuffled orders seed by seed
    pending = [t for t in tables.trials(run_id) if t["status"] != "done"]
    order = store.read_run(run_id).order
    places = {} if order is None else plan_accuracy.trial_places(
        [str(t["cell_key"]) for t in tables.trials(run_id)], plan_accuracy.look_seeds(sc.accuracy, order.look),
        order.seed)
    pending.sort(key=lambda t: places.get(str(t["trial_key"]), (int(t["seed"]), 0)))
    # SIGTERM as an interrupt, and SIGINT even where it started ignored (a script's background
    # job): either stops the trial in flight, whose checkpoints a resume goes on from
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for n, trial in enumerate(pending, 1):
            cell = scenario_mod.Cell.from_key(str(trial["cell_key"]))
            out.write("[%d/%d] %s seed %d\n" % (n, len(pending), cell.key, trial["seed"]))
            out.flush()
            try:
                run_trial(tables, run_id, sc, cell, trial, out)
            except TrialFailed as exc:
                tables.set_status(run_id, str(trial["trial_key"]), "failed", str(exc))
                out.write("  failed: %s\n" % exc)
                continue
            tables.set_status(run_id, str(trial["trial_key"]), "done")
    except KeyboardInterrupt:
        out.write("\ninterrupted; go on with `detbench accuracy run --resume %s --results %s`\n"
                  % (run_id, store.root))
        out.flush()
        raise
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class TrialFailed(Exception):
    pass


def _resume_point(tables, run_id, key):
    """(iteration, train seconds, checkpoint path) of the trial's last stored checkpoint whose file
    is there, or None."""
    for row in reversed(tables.checkpoints(run_id, key)):
        if row["checkpoint"] and os.path.isfile(str(row["checkpoint"])):
            return int(row["iteration"]), float(row["train_seconds"]), str(row["checkpoint"])
    return None


def run_trial(tables, run_id, sc, cell, trial, out) -> None:
    key, folder, seed = str(trial["trial_key"]), str(trial["folder"]), int(trial["seed"])
    schedule = plan_accuracy.schedule(sc, cell, seed)
    os.makedirs(folder, exist_ok=True)
    last = _resume_point(tables, run_id, key)
    if last is None or last[0] < schedule.iterations:
        offset = 0.0 if last is None else last[1]
        argv = _train_argv(sc, cell, seed, folder, None if last is None else last[2])
        if last is not None:
            out.write("  resuming after iteration %d (%.1f s of training)\n" % (last[0], last[1]))
        tables.set_status(run_id, key, "running")
        tables.add_code(run_id, key, 0 if last is None else last[0], coderev.revision())
        _train(tables, run_id, key, argv, folder, offset, _env(sc), None if last is None else last[0], out)
    _score(tables, run_id, sc, cell, key, schedule, folder, out)
    write_mllog(tables.checkpoints(run_id, key), sc, cell, schedule, folder)


def write_mllog(rows, sc, cell, schedule, folder) -> None:
    """The trial's MLLOG (launch/mllog_write.py) beside its files, from its scored checkpoint rows."""
    target = sc.accuracy.targets[cell.model]
    column = target.metric.lower()
    points, reached = [], []
    for row in rows:
        if row["bbox_ap"] is None:
            continue
        figures = ({"BBOX": row["bbox_ap"], "SEGM": row["segm_ap"]} if cell.model == "mask_rcnn" and
                   row["segm_ap"] is not None else {"": row["bbox_ap"]})
        points.append((int(row["iteration"]), float(row["train_seconds"]), figures))
        reached.append(row[column] is not None and row[column] >= target.value)
    counts = []
    for name in ("train", "val"):
        with open(plan_accuracy.split(sc.accuracy, name)[0], encoding="utf-8") as f:
            counts.append(len(json.load(f)["images"]))
    mllog_write.write(os.path.join(folder, mllog_write.FILE), cell.model, schedule, points, reached, counts[0],
                      counts[1], "%s: %s, %d cores" % (cell.platform, hostcpu.cpu()[0] or "CPU", os.cpu_count() or 0))


def _train(tables, run_id, key, argv, folder, offset, env, resumed_after=None, out=None) -> None:
    losses: List[tuple] = []
    tail: List[str] = []
    started = time.perf_counter()
    with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8", buffering=1) as log, \
            progroup.start(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace") as proc:
        assert proc.stdout is not None
        try:
            _follow(tables, run_id, key, proc, log, losses, tail, offset, started, resumed_after, out)
        except KeyboardInterrupt:   # the training program and all it started go too: nothing trains unwatched
            progroup.stop(proc, STOP_S)
            tables.add_losses(run_id, key, losses)
            raise
    tables.add_losses(run_id, key, losses)
    if proc.returncode != 0:
        raise TrialFailed("training exited with %d: %s" % (proc.returncode, " | ".join(t for t in tail if t)[-400:]))


def _follow(tables, run_id, key, proc, log, losses, tail, offset, started, resumed_after=None, out=None) -> None:
    """Log and store what the training program prints until it exits: losses, its settings line,
    each checkpoint with the training seconds to it (`losses` and `tail` are filled in place),
    and with it what else used the machine since the last one (machine_load: other processes' CPU,
    steal), said on `out` where that was more than a small share of a core.
    A program resumed after checkpoint `resumed_after` has its start-up stored with its first loss:
    its later checkpoints' seconds hold a second start that an uninterrupted trial has not."""
    meter = machine_load.LoadMeter(proc.pid)
    since = resumed_after or 0
    for line in proc.stdout:
        now = time.perf_counter()
        log.write(line)
        tail[:] = (tail + [line.rstrip()])[-5:]
        point = recipes.loss_of_line(line)
        if point is not None:
            if resumed_after is not None:
                tables.add_resume(run_id, key, resumed_after, point[0], round(now - started, 3))
                resumed_after = None
            losses.append(point)
            continue
        said = jsonlog.parse_settings_line(line)
        if said is not None:       # stored once per trial: a resume's line does not replace the first
            tables.add_settings(run_id, key, *said)
            continue
        ck = recipes.checkpoint_of_line(line)
        if ck is not None:
            tables.add_losses(run_id, key, losses)
            del losses[:]
            tables.add_checkpoint(run_id, key, ck[0], round(offset + now - started, 3), ck[1])
            load = meter.mark()
            if load is not None:
                tables.add_load(run_id, key, since, ck[0], load)
                if load.shared and out is not None:
                    out.write("  the machine was shared from iteration %d to %d: %s; these times are not a quiet "
                              "machine's\n" % (since, ck[0], load.describe()))
                    out.flush()
            since = ck[0]


def _run(argv, env, what) -> Dict[str, object]:
    try:
        proc = progroup.run(argv, DUMP_TIMEOUT_S, STOP_S, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        raise TrialFailed("%s did not finish within %d s" % (what, DUMP_TIMEOUT_S)) from None
    if proc.returncode != 0:
        said = [x for x in proc.stderr.splitlines() if x.strip()]
        raise TrialFailed("%s exited with %d: %s" % (what, proc.returncode, said[-1] if said else ""))
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _score(tables, run_id, sc, cell, key, schedule, folder, out) -> None:
    python = _python(cell.framework)
    val = plan_accuracy.split(sc.accuracy, "val")
    env = _env(sc)
    rows = tables.checkpoints(run_id, key)
    if not rows or int(rows[-1]["iteration"]) != schedule.iterations:
        raise TrialFailed("training ended without its last checkpoint (iteration %d)" % schedule.iterations)
    for row in rows:
        if row["bbox_ap"] is not None:
            continue
        path = str(row["checkpoint"])
        if not os.path.isfile(path):
            raise TrialFailed("checkpoint of iteration %d is gone (%s)" % (row["iteration"], path))
        began = time.perf_counter()
        dets = os.path.join(folder, "detections_%d.json" % row["iteration"])
        _run(recipes.dump_argv(cell.framework, cell.model, schedule, path, val, dets, python=python), env,
             "the detections dump")
        figures = _run(recipes.score_argv(cell.model, val[0], dets), env, "the scoring")
        point = tables.add_figures(run_id, key, int(row["iteration"]), float(row["train_seconds"]), figures,
                                   round(time.perf_counter() - began, 2))
        out.write("  iter %6d  train %8.1f s  bbox AP %.3f  AP50 %.3f%s\n" % (
            point.iteration, point.train_seconds, point.bbox_AP, point.bbox_AP50,
            "  segm AP %.3f  AP50 %.3f" % (point.segm_AP or 0, point.segm_AP50 or 0) if figures.get("segm") else ""))
        out.flush()
        if point.iteration != schedule.iterations:
            os.unlink(path)

