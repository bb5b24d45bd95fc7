"""The `detbench` command line: thin commands over the library.

Every command turns a UserError into one clear line on stderr and exit code 2.
"""
import functools
import json
import os
import sys

import click

from harness import __version__
from harness.errors import UserError

RESULTS = click.option("--results", "results_dir", default="results", show_default=True,
                       type=click.Path(file_okay=False), help="results folder (SQLite store + trial folders)")

SAVED_RUN = click.argument("run_id", metavar="RUN_ID|latest")


def saved_to(what):
    return click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
                        help="%s to write (JSON, meant to be committed)" % what)


def user_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            click.echo("detbench: error: %s" % exc, err=True)
            sys.exit(exc.exit_code)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="detbench")
def main():
    """Benchmark how fast detection frameworks train, and catch regressions."""


@main.command()
@click.option("--scenario", "scenario_path", type=click.Path(dir_okay=False),
              help="scenario YAML file")
@click.option("--backend", metavar="NAME", default=None,
              help="where trials run: a backend of `detbench backends` (default: the scenario's)")
@RESULTS
@click.option("--resume", "resume_id", metavar="RUN_ID", help="finish an interrupted run")
@click.option("--dry-run", is_flag=True, help="print the trials and their commands; run nothing")
@click.option("--force", is_flag=True, help="run cells of a platform this host does not match (marked forced)")
@user_errors
def run(scenario_path, backend, results_dir, resume_id, dry_run, force):
    """Run a scenario's matrix of trials into the results store."""
    from harness import run as run_mod

    if bool(scenario_path) == bool(resume_id):
        raise UserError("give exactly one of --scenario FILE or --resume RUN_ID")
    try:
        if resume_id:
            run_mod.resume(resume_id, results_dir)
        else:
            run_mod.start(scenario_path, results_dir, backend=backend, dry_run=dry_run, force=force)
    except KeyboardInterrupt:
        sys.exit(130)


# --format -> (module of harness.report, its renderer); each renderer takes the Report alone
REPORT_RENDERERS = {
    "md": ("markdown", "render"),
    "html": ("html", "render"),
    "csv": ("export", "render_csv"),
    "json": ("export", "render_json"),
}


@main.command()
@click.option("--platform", "platform_name", help="platform name, e.g. P2 or local")
@click.option("--mlperf", is_flag=True, help="the imported MLPerf Training runs instead (md or html)")
@click.option("--benchmark", metavar="NAME", help="with --mlperf: only this benchmark (maskrcnn, ssd)")
@RESULTS
@click.option("--run", "run_id", metavar="RUN_ID", help="only this run (default: newest run of each cell)")
@click.option("--published", metavar="NAME", help="also show published figures, e.g. simpledet-benchmark")
@click.option("--format", "fmt", type=click.Choice(list(REPORT_RENDERERS)), default="md",
              show_default=True, help="Markdown tables, a self-contained HTML page with figures, or an export")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="write here instead of stdout")
@click.option("--rows", type=click.Choice(["cells", "trials"]), default="cells", show_default=True,
              help="which rows --format csv writes (json carries both)")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="inference: the batch size frameworks are compared at (default: the largest all measured)")
@click.option("--details", is_flag=True,
              help="in the terminal, also each table's scope, implementation, work and place-check lines "
                   "(a file written with --out always has them)")
@user_errors
def report(platform_name, mlperf, benchmark, results_dir, run_id, published, fmt, out_path, rows, batch, details):
    """Report a platform's results: SimpleDet-style tables, HTML with figures, CSV or JSON."""
    import importlib

    from harness.report import build

    if mlperf:
        _emit(_mlperf_report(results_dir, benchmark, fmt), out_path)
        return
    if not platform_name:
        raise UserError("give --platform NAME (or --mlperf for imported MLPerf Training runs)")

    # the Markdown tables show no confidence interval and only the page draws traces:
    # skip the bootstrap (and numpy) and the iterations where they are not shown
    report_value = build.report(results_dir, platform_name, run_id=run_id, published=published,
                                ci=fmt != "md", traces=fmt == "html", rows=rows, batch=batch)
    module, name = REPORT_RENDERERS[fmt]
    renderer = getattr(importlib.import_module("harness.report." + module), name)
    if fmt == "md" and not out_path and not details:
        _emit(renderer(report_value, details=False), out_path)   # the terminal leads with the tables
    else:
        _emit(renderer(report_value), out_path)


def _mlperf_report(results_dir, benchmark, fmt):
    from harness.report import build, mlperf as mlperf_report

    if fmt not in ("md", "html"):
        raise UserError("--mlperf: --format md or html")
    if not os.path.isfile(os.path.join(results_dir, "detbench.sqlite")):
        raise UserError("%s: no results store here" % results_dir)
    runs = build.mlperf_runs(results_dir, benchmark)
    if not runs:
        raise UserError("%s: no imported MLPerf runs%s (detbench import ROUND_FOLDER)"
                        % (results_dir, " of %s" % benchmark if benchmark else ""))
    return mlperf_report.render_markdown(runs) if fmt == "md" else mlperf_report.render_html(runs)


def _emit(text, out_path):
    """Write a report to a file (atomically) or to stdout."""
    if not out_path:
        click.echo(text, nl=False)
        return
    import os

    from harness import atomic

    target = os.path.abspath(out_path)
    if not os.path.isdir(os.path.dirname(target)):
        raise UserError("--out %s: no such folder" % out_path)
    atomic.write_text(target, text)
    click.echo("wrote %s" % out_path, err=True)


@main.group()
def accuracy():
    """Time to accuracy: scenarios of mode: accuracy, trained to a target and scored on a val split."""


@accuracy.command("run")
@click.option("--scenario", "scenario_path", type=click.Path(dir_okay=False), help="scenario YAML file")
@RESULTS
@click.option("--resume", "resume_id", metavar="RUN_ID", help="go on with an interrupted accuracy run")
@click.option("--redo", "redo", metavar="TRIAL", multiple=True,
              help="with --resume: train this trial (its key, e.g. detbench-trainer/mask_rcnn/fp32/local/1/1/s0) "
                   "again from the start; its earlier files are kept beside, and the report names the redo")
@click.option("--look", type=click.IntRange(1, 11), default=1, show_default=True,
              help="with --scenario: train the seeds of this look of the scenario's sequential plan "
                   "(accuracy.sequential.looks) as a run of its own, joined to the first look's with "
                   "`accuracy report --with`")
@user_errors
def accuracy_run(scenario_path, results_dir, resume_id, redo, look):
    """Train every cell of an accuracy scenario once per seed, scoring each checkpoint."""
    from harness.launch import accuracy as accuracy_mod
    from harness.results.store import Store, new_run_id

    if bool(scenario_path) == bool(resume_id):
        raise UserError("give exactly one of --scenario FILE or --resume RUN_ID")
    if redo and not resume_id:
        raise UserError("--redo names a trial of a stored run: give it with --resume RUN_ID")
    try:
        if resume_id:
            accuracy_mod.resume(resume_id, Store(results_dir, create=False), redo=redo)
        else:
            from harness import launch

            launch.load_scenario(scenario_path)     # a bad scenario makes no results folder
            accuracy_mod.start(scenario_path, Store(results_dir), new_run_id(), look=look)
    except KeyboardInterrupt:
        sys.exit(130)


@accuracy.command("report")
@RESULTS
@click.option("--run", "run_id", default="latest", show_default=True, help="the accuracy run to report")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), default="md", show_default=True)
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="write to FILE instead of stdout")
@click.option("--target", "targets", multiple=True, metavar="MODEL=METRIC:VALUE",
              help="read the curves against this target instead of the scenario's, e.g. faster_rcnn=bbox_AP:0.5 "
                   "(the report names the run's own); repeat for more models")
@click.option("--published", "published", default="nvidia-efficientdet", show_default=True, metavar="NAME",
              help="print the accuracy, time-to-train and stability tables of these published figures "
                   "(reports/published/NAME.yaml) beside the run's; 'none' leaves them out")
@click.option("--with", "joined", multiple=True, metavar="RUN_ID",
              help="join this accuracy run's cells (a precision, framework or more seeds of a cell trained later "
                   "with the same recipe and inputs on the same machine) to the report, read against its targets; "
                   "repeatable")
@user_errors
def accuracy_report(results_dir, run_id, fmt, out_path, targets, published, joined):
    """The time-to-accuracy tables (and, as html, the curves) of one accuracy run."""
    from harness.report import accuracy as accuracy_report_mod
    from harness.report import build as report_build

    try:
        given = dict(accuracy_report_mod.parse_target(t) for t in targets)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    report = report_build.accuracy(results_dir, run_id, given, None if published == "none" else published, joined)
    text = accuracy_report_mod.render_html(report) if fmt == "html" else accuracy_report_mod.render_markdown(report)
    _emit(text, out_path)
    unjudged = report.verdict.unjudgeable() if report.verdict is not None else None
    if unjudged:        # the report is written; nothing in it could be judged
        raise UserError(unjudged)


@accuracy.command("save")
@SAVED_RUN
@RESULTS
@saved_to("file")
@user_errors
def accuracy_save(run_id, results_dir, out_path):
    """Write an accuracy run (its finished trials' curves, losses and settings) to one JSON file."""
    from harness.results import accuracy_file
    from harness.results.store import Store

    counts = accuracy_file.save(Store(results_dir, create=False), run_id, out_path)
    click.echo("%s: %d finished trials, %d pending" % (out_path, counts["finished"], counts["pending"]))


@accuracy.command("load")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@RESULTS
@user_errors
def accuracy_load(path, results_dir):
    """Put a saved accuracy run into a results store, to report it or go on with it (--resume)."""
    from harness.results import accuracy_file
    from harness.results.store import Store

    accuracy_file.read(path)     # a bad file makes no results folder
    run_id = accuracy_file.load(Store(results_dir), path)
    click.echo("run %s loaded into %s" % (run_id, results_dir))


@accuracy.command("compare")
@click.argument("baseline_run")
@click.argument("candidate_run")
@RESULTS
@click.option("--threshold", default=0.05, show_default=True, type=float,
              help="relative slowdown in time to target that counts as an effect")
@user_errors
def accuracy_compare(baseline_run, candidate_run, results_dir, threshold):
    """Judge a candidate accuracy run against a baseline one: time to target and final AP; exit 1 on a regression."""
    _judge_accuracy(results_dir, baseline_run, candidate_run, threshold)


def _judge_accuracy(results_dir, baseline_run, candidate_run, threshold):
    """Print one verdict line per cell of two accuracy runs and exit 1 on a regression."""
    from harness.report import build as report_build
    from harness.results import compare as compare_mod

    verdicts = report_build.accuracy_comparison(results_dir, baseline_run, candidate_run, threshold)
    for v in verdicts:
        click.echo("%-45s %-20s %s" % (v.cell, v.verdict, v.why))
    sys.exit(1 if any(v.verdict == compare_mod.REGRESSION for v in verdicts) else 0)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@user_errors
def validate(files):
    """Check scenario files; print one line per file."""
    from harness import launch
    from harness.plan import scenario

    for f in files:
        sc = launch.load_scenario(f)
        planned = scenario.plan(sc)
        runnable = sum(1 for p in planned if p.excluded is None)
        first, most = scenario.first_rounds(sc.repeats), scenario.max_rounds(sc.repeats)
        if sc.accuracy is not None and sc.mode == "accuracy":     # one trial per seed
            first = most = len(sc.accuracy.seeds)
        click.echo("%s: ok: %d cells (%d excluded), %s trials" % (
            f, len(planned), len(planned) - runnable, runnable * most if first == most
            else "%d to %d" % (runnable * first, runnable * most)))


@main.command()
@click.option("--framework", "framework_name", help="read the log as detbench runs this framework")
@click.option("--format", "fmt", metavar="NAME", help="read the log in this format, with its defaults")
@click.option("--list-formats", is_flag=True, help="list the log formats and exit")
@click.option("--warmup", type=int, help="iterations before the measured window")
@click.option("--measure", type=int, help="iterations in the measured window")
@click.option("--images-per-iteration", type=click.IntRange(min=1),
              help="images per iteration, all devices (for throughput where the log does not count them)")
@click.option("--run", "run", type=int, metavar="N",
              help="the run of the log to read (a restarted process begins the next; default: the last "
                   "that covers the window)")
@click.option("--iters-per-epoch", type=int, metavar="N", help="iterations per epoch, where the log does not print it")
@click.option("--max-error", type=float, metavar="F",
              help="refuse a window whose figure the printed digits bound less tightly than this share of it "
                   "(0.001: 0.1%%)")
@click.option("--approximate", is_flag=True,
              help="give a window's figure even where the printed digits bound it not at all (window medians, "
                   "means since an unknown start); it says so, with no bound")
@click.argument("logfile", required=False, type=click.Path(exists=True, dir_okay=False))
@user_errors
def scrape(framework_name, fmt, list_formats, warmup, measure, images_per_iteration, run, iters_per_epoch,
           max_error, approximate, logfile):
    """Print one JSON object per iteration record read from a log file.

    With --warmup and --measure, a last line holds the measured window's figure: the one a
    trial of this log gets, with its run, the window it covers and its error bound. With
    neither --framework nor --format, the format is detected. Notes (another window than
    asked, several runs, lines that did not parse) go to stderr; an error is one line, exit 2.
    """
    from harness.measure import logfigure, scrapers
    from harness.measure.records import IterationRecord

    if list_formats:
        width = max(map(len, scrapers.FORMATS))
        for name, text in scrapers.FORMATS.items():
            click.echo("%-*s  %s" % (width, name, text))
        return
    if logfile is None:
        raise UserError("give the LOG file to read (or --list-formats)")
    if framework_name and fmt:
        raise UserError("give --framework or --format, not both")
    if (warmup is None) != (measure is None):
        logfigure.check_window(warmup, measure)
    if max_error is not None and warmup is None:
        raise UserError("--max-error judges a window's figure: give --warmup and --measure too")
    how = logfigure.reading(logfile, framework_name, fmt, iters_per_epoch=iters_per_epoch)
    # first the figure, from the records its window needs (memory bounded by the window, not
    # the log), then every record streamed to stdout: an error leaves stdout empty
    window = (warmup + 1, warmup + measure) if warmup is not None else (0, 0)
    records, errors = logfigure.read(logfile, how, window=window)
    logfigure.require_records(logfile, how, records)
    figure = None
    if warmup is not None:
        figure = logfigure.figure(logfile, records, warmup, measure, images_per_iteration, run=run,
                                  max_error=max_error, approximate=approximate)
        notes = list(figure.notes)
    else:
        notes = list(how.notes)
        runs = max(max(r.run for r in records), errors.last_run)
        if run is not None and not 1 <= run <= runs:
            raise UserError("%s: the log holds %d run%s; there is no run %d" % (logfile, runs, "" if runs == 1 else "s",
                                                                               run))
        if how.how == "detected":
            notes.insert(0, "reading %s as %s (detected)" % (logfile, how.scraper))
        if errors:
            notes.append("%s: %s" % (logfile, logfigure.noise_text(errors)))
    shown = (item for item in scrapers.iter_path(how.scraper, logfile, **how.options)
             if item.__class__ is IterationRecord and (run is None or item.run == run))
    write = sys.stdout.write
    batch = []
    for line in logfigure.record_lines(shown):
        batch.append(line)
        if len(batch) >= 4096:
            batch.append("")
            write("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        write("\n".join(batch))
    if figure is not None:
        write(json.dumps(figure.as_dict()) + "\n")
    for note in notes:
        click.echo("detbench: " + note, err=True)


@main.command("import")
@click.option("--framework", "framework_name", help="the framework (table column) the logs belong to")
@click.option("--format", "fmt", metavar="NAME", help="read the logs in this format, with its defaults")
@click.argument("logs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--round", "round_name", metavar="X.Y",
              help="MLPerf Training results: the round whose rules they follow (default: the "
                   "training_results_vX.Y folder they lie in)")
@click.option("--scenario-name", help="scenario the imported run is filed under")
@click.option("--model", help="model the logs trained, e.g. faster_rcnn")
@click.option("--precision", help="precision, e.g. fp32")
@click.option("--platform", "platform_name", help="platform the logs were made on, e.g. P2")
@click.option("--batch-per-gpu", type=int, help="images per device per iteration")
@click.option("--gpus", type=int, help="devices per node")
@click.option("--nodes", default=1, show_default=True, type=int)
@click.option("--warmup", type=int, help="iterations before the measured window (default: the scenario's)")
@click.option("--measure", type=int, help="iterations in the measured window (default: the scenario's)")
@click.option("--run", "run", type=int, metavar="N",
              help="the run of each log to import (a restarted process begins the next; default: the last "
                   "that covers the window)")
@click.option("--iters-per-epoch", type=int, metavar="N", help="iterations per epoch, where the logs do not print it")
@click.option("--max-error", type=float, metavar="F",
              help="refuse a log whose figure the printed digits bound less tightly than this share of it")
@click.option("--approximate", is_flag=True,
              help="import a log whose window figure the printed digits do not bound (window medians, means since "
                   "an unknown start); the report marks its figure kind")
@RESULTS
@user_errors
def import_cmd(framework_name, fmt, logs, round_name, scenario_name, model, precision, platform_name,
               batch_per_gpu, gpus, nodes, warmup, measure, run, iters_per_epoch, max_error, approximate,
               results_dir):
    """Store logs of runs made elsewhere as one run, one trial per log, marked imported; or MLPerf Training
    results (a round, submitter, system or result file folder), one run per system and benchmark."""
    from harness.results import importer

    if round_name or any(_is_mlperf(path) for path in logs):
        _import_mlperf(logs, round_name, results_dir)
        return
    given = {"--scenario-name": scenario_name, "--model": model, "--precision": precision,
             "--platform": platform_name, "--batch-per-gpu": batch_per_gpu, "--gpus": gpus}
    missing = [name for name, value in given.items() if value is None]
    if missing:
        raise UserError("import of training logs: give %s" % ", ".join(missing))
    folders = [path for path in logs if not os.path.isfile(path)]
    if folders:
        raise UserError("%s: a folder; give the log files (or MLPerf results: --round X.Y)" % folders[0])
    run_id, key = importer.import_logs(
        list(logs), framework_name, model, precision, platform_name, batch_per_gpu, gpus, nodes=nodes,
        scenario_name=scenario_name, warmup=warmup, measure=measure, fmt=fmt, results_dir=results_dir,
        note=lambda line: click.echo(line, err=True), run=run, iters_per_epoch=iters_per_epoch,
        max_error=max_error, approximate=approximate)
    click.echo("run %s: imported %d log%s as %s -> %s" % (run_id, len(logs), "" if len(logs) == 1 else "s",
                                                          key, results_dir))


def _is_mlperf(path):
    """A folder (of MLPerf results), or a file whose first lines hold an MLLOG record."""
    from harness.measure.mllog import TOKEN

    if os.path.isdir(path):
        return True
    with open(path, "rb") as f:
        return TOKEN.encode() in f.read(65536)


def _import_mlperf(paths, round_name, results_dir):
    from harness.results import mlperf_import

    imported, failed = [], []
    with click.progressbar(length=1, label="reading result files", file=sys.stderr) as bar:
        shown = [0]

        def progress(done, total):
            bar.length = total
            bar.update(done - shown[0])
            shown[0] = done

        for path in paths:
            shown[0] = 0
            bar.pos = 0
            try:
                imported += mlperf_import.import_mlperf(path, round_name, results_dir,
                                                        note=lambda line: click.echo(line, err=True),
                                                        progress=progress)
            except UserError as exc:
                failed.append(str(exc))
    for run in imported:
        figure = ("score %.3f min" % run.score_minutes if run.score_minutes is not None else
                  "no score: %s" % run.score_note)
        click.echo("run %s: %s %s %s: %d result%s, %s" % (run.run_id, run.submitter, run.system, run.benchmark,
                                                         run.results, "" if run.results == 1 else "s", figure))
    if failed:
        if not imported:
            raise UserError("; ".join(failed))
        for line in failed:
            click.echo("detbench: error: %s" % line, err=True)


@main.command("bisect")
@click.option("--good", metavar="REV", help="a revision where the cell is fast")
@click.option("--bad", metavar="REV", help="a later revision where it is slow (--good must be its ancestor)")
@click.option("--env-axis", metavar="PACKAGE=V1,V2,...",
              help="search environments that pin PACKAGE to each version, oldest first, instead of commits")
@click.option("--scenario", "scenario_path", required=True, type=click.Path(dir_okay=False),
              help="scenario YAML file, held fixed for every revision (a relative path not found here is read "
                   "from the --repo checkout)")
@click.option("--cell", "cell_key", metavar="KEY", help="the cell to bisect (default: the scenario's only one)")
@click.option("--repo", type=click.Path(file_okay=False), default=None,
              help="the git checkout whose commits are searched (default: the current directory)")
@click.option("--metric", default="throughput", show_default=True,
              help="throughput, or an inference cell's latency: mean or pNN")
@click.option("--max-trials", type=click.IntRange(min=5), default=15, show_default=True,
              help="trials of a revision in one test; a test still undecided then ends the bisect undecided (exit 3)")
@click.option("--alpha", default=0.05, show_default=True, type=float,
              help="the chance of a wrong verdict anywhere in the whole search, at most")
@click.option("--threshold", default=0.05, show_default=True, type=float,
              help="the smallest slowdown (a fraction) a step counts as a regression")
@click.option("--resume", is_flag=True, help="go on with the stored bisect of the same revisions")
@RESULTS
@user_errors
def bisect_cmd(good, bad, env_axis, scenario_path, cell_key, repo, metric, max_trials, alpha, threshold, resume,
               results_dir):
    """Find the first revision at which a scenario cell got slower (exit 3: undecided at the cap)."""
    from harness.bisect import decide, search
    from harness.results import compare

    opts = search.Options(scenario=scenario_path, good=good, bad=bad, env_axis=env_axis, cell=cell_key,
                          repo=repo, metric=metric, resume=resume, results_dir=results_dir,
                          judge=decide.Judge(rule=compare.Rule(threshold=threshold, alpha=alpha),
                                             max_trials=max_trials))
    try:
        outcome = search.bisect(opts)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(outcome.exit_status)


@main.command("backends")
def backends_cmd():
    """List the backends trials can run on (a scenario's `backend:`, or --backend)."""
    from harness import launch

    for name, launcher in launch.LAUNCHERS.items():
        click.echo("%-8s %s" % (name, (launcher.__doc__ or "").strip().splitlines()[0]))


@main.command("frameworks")
def frameworks_cmd():
    """List the frameworks detbench can run and where they run."""
    from harness import frameworks

    rows = [(f.name, f.status, ", ".join(sorted(f.precisions)), f.why) for f in frameworks.FRAMEWORKS.values()]
    width = max(len(r[0]) for r in rows)
    for name, status, precs, why in rows:
        click.echo("%-*s  %-14s  %-20s  %s" % (width, name, status, precs, why))
        fw = frameworks.FRAMEWORKS[name]
        if fw.infer is not None:
            click.echo("%-*s  %-14s  %-20s  inference: %s" % (width, "", "", ", ".join(sorted(fw.infer_precisions)),
                                                             fw.infer_why))


@main.group()
def platform():
    """Platform specs and the host description."""


@platform.command("list")
@user_errors
def platform_list():
    """List known platforms."""
    from harness.plan import platforms

    for name in platforms.known_names():
        click.echo(platforms.summary(platforms.load(name)))


@platform.command("detect")
@click.option("--json", "as_json", is_flag=True, help="print the facts, fingerprint and matches as JSON")
@user_errors
def platform_detect(as_json):
    """Describe this host, its fingerprint, and which platforms/*.yaml it matches."""
    from harness.plan import hostreport

    click.echo(hostreport.render_json() if as_json else hostreport.render_text(), nl=False)


@platform.command("peak")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="intra-op threads to measure with (default: OMP_NUM_THREADS, else torch's own)")
@click.option("--refresh", is_flag=True, help="measure again instead of reading the cached figure")
@click.option("--json", "as_json", is_flag=True, help="print the whole measurement as JSON")
@user_errors
def platform_peak(threads, refresh, as_json):
    """Measure (once per machine, then cached) this host's dense compute peak per precision."""
    import json as json_mod

    from harness.errors import UserError
    from harness.measure import compute
    from harness.plan import fingerprint, platforms

    facts = platforms.host_facts()
    env = {"OMP_NUM_THREADS": str(threads)} if threads else None
    result = compute.peak(fingerprint.fingerprint(facts), env, refresh=refresh)
    if "error" in result:
        raise UserError("cannot measure this host's peak: %s" % result["error"])
    if as_json:
        click.echo(json_mod.dumps(result, indent=2, sort_keys=True))
        return
    isa = ", %s%s" % (result["isa"], " with AMX tiles" if result.get("amx") else "") if result.get("isa") else ""
    click.echo("%s (%s threads, torch %s%s): peak GFLOP/s per precision, the best of its shapes; per shape "
               "the best, median and worst of its timed calls"
               % (result["name"], result["threads"], result["torch"], isa))
    for precision, figures in sorted(result["precisions"].items()):
        if "skipped" in figures:
            click.echo("  %-5s %s" % (precision, figures["skipped"]))
            continue
        spread = figures.get("spread")
        if not isinstance(spread, dict):      # cached by the older method: one figure per shape
            shapes = ", ".join("%s %.0f" % kv for kv in sorted(figures["shapes_gflops"].items()))
            click.echo("  %-5s %8.1f  (%s)" % (precision, figures["peak_gflops"], shapes))
            continue
        click.echo("  %-5s %8.1f  (%s)" % (precision, figures["peak_gflops"], figures.get("peak_shape", "")))
        for name, f in spread.items():
            click.echo("    %-34s %8.1f %8.1f %8.1f  (%d calls)"
                       % (name, f["best"], f["median"], f["worst"], f["calls"]))


@main.group()
def baseline():
    """Baseline files for the regression gate."""


@baseline.command("save")
@SAVED_RUN
@RESULTS
@saved_to("baseline file")
@user_errors
def baseline_save(run_id, results_dir, out_path):
    """Save a run's per-repeat throughputs, settings and host to a baseline file."""
    from harness.results import baseline as baseline_mod
    from harness.results.store import Store

    store = Store(results_dir, create=False)
    side = baseline_mod.from_store(store, run_id)
    if not side["cells"]:
        raise UserError("run %s has no runnable cells to save" % side["run"]["id"])
    baseline_mod.save(side, out_path)
    click.echo("%s: baseline of run %s, %d cells" % (out_path, side["run"]["id"], len(side["cells"])))


@main.command()
@click.option("--baseline", "baseline_ref", required=True, metavar="RUN_ID|FILE",
              help="a baseline file, or a run id (or latest) in --results")
@click.option("--candidate", "candidate_ref", required=True, metavar="RUN_ID|FILE",
              help="a baseline file, or a run id (or latest) in --results")
@RESULTS
@click.option("--threshold", default=0.05, show_default=True, type=float,
              help="median throughput drop (fraction) that counts as a regression")
@click.option("--alpha", default=0.01, show_default=True, type=float,
              help="one-sided Mann-Whitney U p-value below which a change is significant")
@click.option("--estimator", type=click.Choice(["reported", "observed"]), default="reported",
              show_default=True, help="which per-repeat throughput to judge")
@click.option("--metric", default="throughput", show_default=True, metavar="throughput|mean|pNN",
              help="what to judge: throughput, or an inference cell's mean or percentile latency (e.g. p95)")
@click.option("--ignore-setting", "ignore_settings", multiple=True, metavar="KEY",
              help="a cell setting allowed to differ (repeatable), e.g. iteration_ms")
@click.option("--strict", is_flag=True, help="also exit 1 when a cell is missing or not comparable")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="write JUnit XML here")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False), help="write a Markdown summary here")
@click.option("--sequential", "sequential_max", type=click.IntRange(1, 1000), metavar="MAX_TRIALS",
              help="judge the candidate's repeats in the order they ran, stopping where the answer is clear "
                   "(at most MAX_TRIALS of them); undecided cells say so")
@user_errors
def compare(baseline_ref, candidate_ref, results_dir, threshold, alpha, estimator, metric, ignore_settings,
            strict, junit_path, markdown_path, sequential_max):
    """Judge a candidate run against a baseline: exit 1 when a cell regressed.

    Two accuracy runs of the store are judged on time to target and final AP (as `detbench
    accuracy compare`, --threshold the relative slowdown in time to target)."""
    from pathlib import Path

    from harness.results import baseline as baseline_mod
    from harness.report import compare_render
    from harness.results import compare as compare_mod

    accuracy_runs = [baseline_mod.accuracy_run(ref, results_dir) for ref in (baseline_ref, candidate_ref)]
    if any(accuracy_runs):
        if not all(accuracy_runs):
            which, other = ((baseline_ref, candidate_ref) if accuracy_runs[0] else (candidate_ref, baseline_ref))
            raise UserError("%s is an accuracy run and %s is not: an accuracy run is judged against another "
                            "accuracy run (time to target, final AP)" % (which, other))
        _judge_accuracy(results_dir, accuracy_runs[0], accuracy_runs[1], threshold)
    rule = compare_mod.Rule(threshold, alpha, estimator, tuple(ignore_settings), strict, metric)
    rule.check()
    if sequential_max:
        from harness.results import sequential

        cells = sequential.gate(baseline_mod.resolve(baseline_ref, results_dir),
                                baseline_mod.resolve(candidate_ref, results_dir), rule, sequential_max)
        click.echo(sequential.gate_text(cells, rule), nl=False)
        sys.exit(1 if any(c.verdict == compare_mod.REGRESSION for c in cells) else 0)
    result = compare_mod.compare(baseline_mod.resolve(baseline_ref, results_dir),
                                 baseline_mod.resolve(candidate_ref, results_dir), rule)
    click.echo(compare_render.text(result), nl=False)
    for path, render in ((junit_path, compare_render.junit), (markdown_path, compare_render.markdown)):
        if path:
            Path(path).write_text(render(result), encoding="utf-8")
    sys.exit(result.exit_code())


@main.group()
def env():
    """Pinned virtual environments of the frameworks that run on this host."""


@env.command("build")
@click.argument("framework_name")
@click.option("--force", is_flag=True, help="rebuild even when an env with these pins exists")
@user_errors
def env_build(framework_name, force):
    """Build (or reuse) FRAMEWORK's pinned env under $DETBENCH_CACHE/envs."""
    from harness.launch import envs
    from harness import frameworks

    fw = frameworks.get(framework_name)
    if fw.env is None:
        raise UserError("framework %s has no local env to build (%s)" % (fw.name, fw.why))
    path = envs.build(fw.env, force=force)
    click.echo("env %s ready: %s" % (fw.name, path))


@env.command("list")
def env_list():
    """List the frameworks with pinned envs and whether each is built."""
    from harness.launch import envs
    from harness import frameworks

    for fw in frameworks.FRAMEWORKS.values():
        if fw.env is not None:
            click.echo(envs.describe(fw.env))


@main.group()
def weights():
    """Initial weights every framework of a cell starts from (scenario key `weights`)."""


@weights.command("make")
@click.argument("model")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="file to write")
@click.option("--seed", default=0, show_default=True, type=int, help="seed of the initial state")
@click.option("--depth", default=50, show_default=True, type=click.Choice(["50", "18"]),
              help="ResNet depth of the FPN backbone (18: the small scale of accuracy scenarios)")
@user_errors
def weights_make(model, out_path, seed, depth):
    """Write one seeded initial state of MODEL (retinanet, faster_rcnn, mask_rcnn) in torchvision's layout."""
    from harness.plan import weights as weights_mod

    click.echo(weights_mod.make(model, out_path, seed, int(depth)))


@main.group()
def image():
    """Container images of the frameworks (backend docker)."""


@image.command("base")
@click.option("--mirror", default=None, help="Debian mirror for debootstrap (default: deb.debian.org)")
@user_errors
def image_base(mirror):
    """Make the local base image without a registry: debootstrap bookworm, then docker import."""
    from harness.launch.image_base import BASE_MIRROR, make_base

    make_base(mirror or BASE_MIRROR, out=_Echo())


@image.command("build")
@click.argument("recipe")
@click.option("--base-image", default=None, metavar="REF", help="build FROM this image instead of the default base")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              help="a Docker build argument (repeatable)")
@click.option("--force", is_flag=True, help="build even when an image of this recipe and these arguments exists")
@click.option("--quiet", "-q", is_flag=True, help="print only the result, not the build's own output")
@user_errors
def image_build(recipe, base_image, build_args, force, quiet):
    """Build dockerfiles/RECIPE and record its image ID among the images built on this machine."""
    from harness.launch import images

    args = {}
    for item in build_args:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError("--build-arg %r: expected NAME=VALUE" % item)
        args[name] = value
    entry = images.build(recipe, base_image=base_image, build_args=args, force=force,
                         out=_Echo(quiet=quiet))
    if quiet:
        click.echo("image %s %s" % (entry["image"], entry["id"]))


@image.command("lock")
@click.option("--check", is_flag=True, help="write nothing; exit 1 naming each recipe whose entry is not current")
@user_errors
def image_lock(check):
    """Write dockerfiles/images.lock from the recipes as they are: each one's inputs and their digests."""
    from harness.launch import image_lock as lock_mod
    from harness.launch import images

    if check:
        stale = images.stale_lock_entries()
        if stale:
            click.echo("dockerfiles/images.lock is not current for: %s (run `detbench image lock`)"
                       % ", ".join(stale), err=True)
            sys.exit(1)
        return
    lock_mod.write_lock(images.lock_entries())


@image.command("list")
def image_list():
    """The recipes, the images built on this machine, and whether this engine has them."""
    from harness.launch import images

    rows = images.status()
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for name, tag, image_id, here in rows:
        click.echo("%-*s  %-*s  %-71s  %s" % (widths[0], name, widths[1], tag, image_id, here))


class _Echo:
    """A file-like writer onto click.echo (optionally silent)."""

    def __init__(self, quiet=False):
        self.quiet = quiet

    def write(self, text):
        if not self.quiet:
            click.echo(text, nl=False)


@main.group()
def dataset():
    """Small generated datasets."""


@dataset.command("make-coco")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--images", default=16, show_default=True, help="number of images")
@click.option("--size", default="320x320", show_default=True, help="HEIGHTxWIDTH of every image")
@click.option("--seed", default=0, show_default=True)
@click.option("--learnable", is_flag=True,
              help="objects whose shape and colour follow their class (4 classes), with a held-out val split")
@click.option("--val-images", type=int, default=None, help="--learnable: images of the val split [default: 8]")
@user_errors
def dataset_make_coco(directory, images, size, seed, learnable, val_images):
    """Write a deterministic COCO-format dataset (PNG images + instances JSON)."""
    from harness.plan import datasets

    if not learnable:
        if val_images is not None:
            raise UserError("--val-images needs --learnable")
        ann, imgs = datasets.make_coco(directory, images=images, size=datasets.parse_size(size), seed=seed)
        click.echo("annotations: %s\nimages: %s" % (ann, imgs))
        return
    from harness.plan import learnable as learnable_set

    (ann, imgs), (val_ann, val_imgs) = learnable_set.make_learnable(
        directory, images=images, val_images=8 if val_images is None else val_images,
        size=datasets.parse_size(size), seed=seed)
    click.echo("annotations: %s\nimages: %s\nval annotations: %s\nval images: %s" % (ann, imgs, val_ann, val_imgs))


if __name__ == "__main__":  # pragma: no cover
    main()
