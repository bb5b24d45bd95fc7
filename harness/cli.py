"""The `detbench` command line: thin commands over the library.

Every command turns a UserError into one clear line on stderr and exit code 2.
"""
import functools
import json
import sys

import click

from harness import __version__
from harness.errors import UserError

RESULTS = click.option("--results", "results_dir", default="results", show_default=True,
                       type=click.Path(file_okay=False), help="results folder (SQLite store + trial folders)")


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
@click.option("--backend", type=click.Choice(["local"]), default=None,
              help="where trials run (default: the scenario's backend)")
@RESULTS
@click.option("--resume", "resume_id", metavar="RUN_ID", help="finish an interrupted run")
@click.option("--dry-run", is_flag=True, help="print the trials and their commands; run nothing")
@user_errors
def run(scenario_path, backend, results_dir, resume_id, dry_run):
    """Run a scenario's matrix of trials into the results store."""
    from harness import run as run_mod

    if bool(scenario_path) == bool(resume_id):
        raise UserError("give exactly one of --scenario FILE or --resume RUN_ID")
    try:
        if resume_id:
            run_mod.resume(resume_id, results_dir)
        else:
            run_mod.start(scenario_path, results_dir, backend=backend, dry_run=dry_run)
    except KeyboardInterrupt:
        sys.exit(130)


@main.command()
@click.option("--platform", "platform_name", required=True, help="platform name, e.g. P2 or local")
@RESULTS
@click.option("--run", "run_id", metavar="RUN_ID", help="only this run (default: newest run of each cell)")
@click.option("--published", metavar="NAME", help="also show published figures, e.g. simpledet-benchmark")
@user_errors
def report(platform_name, results_dir, run_id, published):
    """Print the SimpleDet-style Markdown tables for a platform."""
    from pathlib import Path

    from harness.report import markdown, measured
    from harness.report import published as published_mod
    from harness.store import DB_NAME, Store

    pub_tables = []
    if published:
        pub_tables = published_mod.tables(published_mod.load(published), platform_name)
    tables = []
    if (Path(results_dir) / DB_NAME).exists() or run_id:
        store = Store(results_dir, create=False)
        if run_id:
            run_id = store.run(run_id)["id"]
        tables = measured.tables(store, platform=platform_name, run_id=run_id)
    if not tables and not pub_tables:
        raise UserError("nothing to report for platform %r in %s" % (platform_name, results_dir))
    out = []
    if pub_tables:
        out.append(markdown.render(pub_tables, "Published: %s" % published))
    if tables:
        out.append(markdown.render(measured.with_published(tables, pub_tables) if pub_tables else tables,
                                   "Measured on %s" % platform_name))
    click.echo("\n".join(out), nl=False)


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@user_errors
def validate(files):
    """Check scenario files; print one line per file."""
    from harness import scenario

    for f in files:
        sc = scenario.load(f)
        planned = scenario.plan(sc)
        runnable = sum(1 for p in planned if p.excluded is None)
        click.echo("%s: ok: %d cells (%d excluded), %d trials" % (
            f, len(planned), len(planned) - runnable, runnable * sc.repeats))


@main.command()
@click.option("--framework", "framework_name", required=True, help="framework whose log format to read")
@click.argument("logfile", type=click.Path(exists=True, dir_okay=False))
@user_errors
def scrape(framework_name, logfile):
    """Print one JSON object per iteration record read from a log file."""
    from dataclasses import asdict

    from harness import frameworks, scrapers
    from harness.records import IterationRecord
    from harness.scrapers.common import read_lines

    fw = frameworks.get(framework_name)
    records, errors = scrapers.get(fw.scraper)(read_lines(logfile))
    write = sys.stdout.write
    for r in records:
        if isinstance(r, IterationRecord):
            write(json.dumps(asdict(r)) + "\n")
    for e in errors:
        click.echo("%s:%d: %s" % (logfile, e.line + 1, e.reason), err=True)


@main.command("frameworks")
def frameworks_cmd():
    """List the frameworks detbench can run and where they run."""
    from harness import frameworks

    rows = [(f.name, f.status, ", ".join(sorted(f.precisions)), f.why) for f in frameworks.FRAMEWORKS.values()]
    width = max(len(r[0]) for r in rows)
    for name, status, precs, why in rows:
        click.echo("%-*s  %-14s  %-20s  %s" % (width, name, status, precs, why))


@main.group()
def platform():
    """Platform specs and the host description."""


@platform.command("list")
@user_errors
def platform_list():
    """List known platforms."""
    from harness import platforms

    for name in platforms.known_names():
        click.echo(platforms.summary(platforms.load(name)))


if __name__ == "__main__":  # pragma: no cover
    main()
