"""Time to accuracy: the bundled trainer against torchvision, mmdetection and detectron2 (where their envs are built).

It runs the declared accuracy scenarios of scenarios/ as they are (`accuracy-retinanet.yaml`,
`accuracy-faster_rcnn.yaml`, `accuracy-mask_rcnn.yaml`; `--quick`: `accuracy-quick.yaml`), the same
files `detbench accuracy run --scenario` runs, so what is judged is what a user runs: seeds, target
levels, the reached rule, the subject and its claimed speedup and any sequential plan were fixed in
them before the data. It makes the learnable set and the weights files they name where missing,
runs each scenario (a rival whose pinned env is not built here is NA with that reason), and prints
the report, whose headline is the tool's own overall verdict on every declared check, failing
checks named (harness/report/accuracy_verdict.py); the benchmark's own lines on the highest level
follow as detail:

  * time to target: the ratio of the trainer's time to target to each rival's (their geometric
    means over seeds) with its Welch 95% interval, taken on the logarithms: PASS where the whole
    interval is at or below 1/1.2, "parity" where it holds 1, "faster, but 1.2x is not shown" or
    "slower" otherwise; with one seed on a side, the means alone, said so (where a rival missed the
    target in some seed, its times count that seed at its whole training time, a lower bound; where
    the trainer missed it, FAIL; where either reached it by its first checkpoint, or trained on a
    shared machine before it reached the target, not judged);
  * final AP: the trainer's mean final target metric within one seed standard deviation of
    each rival's (not judged with one seed), with the Welch 95% interval of the difference beside;
  * bf16: the trainer's bf16 final metric within one fp32 seed standard deviation of its fp32
    one, and so its mean at every checkpoint both precisions scored.

    python -m benchmarks.time_to_accuracy                 # the three declared scenarios
    python -m benchmarks.time_to_accuracy --quick         # scenarios/accuracy-quick.yaml: retinanet, one seed
    python -m benchmarks.time_to_accuracy --scenario FILE # any accuracy scenario, as it is
    python -m benchmarks.time_to_accuracy --from DIR/results [--run ID] [--with ID2]   # judge a stored run again
    python -m benchmarks.time_to_accuracy --from RUN.json [--with RUN2.json]          # a run saved by `accuracy save`
    python -m benchmarks.time_to_accuracy --from DIR/results --run ID --add-bf16   # bf16 cells ID lacks (exploratory)

A run stored before the protocol (benchmarks/results/*.json) is judged as exploratory: its checks
are printed, never a verdict. Exit code 0 on PASS, 1 on FAIL or an exploratory reading, 2 where
nothing could be judged (nothing learned, no declared level reached, bad input).
"""
import argparse
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.launch import accuracy as accuracy_run  # noqa: E402
from harness.results.store import Store, new_run_id  # noqa: E402
from harness.plan import hostcpu  # noqa: E402
from harness.errors import UserError  # noqa: E402
from harness.measure import accuracy as acc  # noqa: E402
from harness.measure import welch  # noqa: E402
from harness.plan import learnable, weights  # noqa: E402
from harness.plan.scenario import Cell  # noqa: E402
from harness.report import accuracy as report  # noqa: E402
from harness.report import build as report_build  # noqa: E402

TRAINER = "detbench-trainer"
SPEEDUP = 1.2
SCENARIOS = os.path.join(ROOT, "scenarios")
QUICK_SCENARIO = os.path.join(SCENARIOS, "accuracy-quick.yaml")
MODELS = ("retinanet", "faster_rcnn", "mask_rcnn")
# the learnable sets the declared scenarios name, made where missing: folder -> (train images, val images)
DATA = {"data/shapes128": (600, 100), "data/shapes128-quick": (200, 40)}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.time_to_accuracy", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="run scenarios/accuracy-quick.yaml (one model, one seed)")
    p.add_argument("--models", help="comma-separated: run scenarios/accuracy-MODEL.yaml of these (default: all three)")
    p.add_argument("--scenario", action="append", default=[], metavar="FILE",
                   help="run this accuracy scenario as it is instead (repeatable)")
    p.add_argument("--work", help="folder for the results store (default: a temporary one)")
    p.add_argument("--from", dest="from_results", metavar="RESULTS",
                   help="train nothing: judge a finished (or resumed) accuracy run of this results folder, or the "
                        "run saved in this file (detbench accuracy save)")
    p.add_argument("--run", default="latest", help="with --from: the accuracy run (default: the newest)")
    p.add_argument("--with", dest="joined", action="append", default=[], metavar="RUN",
                   help="with --from: join this accuracy run's cells (a look of the run's sequential plan; any other "
                        "run is shown as exploratory); with --from FILE, a saved run's file; repeatable")
    p.add_argument("--add-bf16", action="store_true",
                   help="with --from: train the bundled trainer's bf16 cells of the run's models, with its recipe "
                        "and seeds, as a new run of the same store, then show them joined (exploratory)")
    return p.parse_args(argv)


def scenario_files(args):
    """The scenario files this invocation runs, as they are."""
    if args.scenario:
        return [os.path.abspath(f) for f in args.scenario]
    if args.quick:
        return [QUICK_SCENARIO]
    models = [m.strip() for m in args.models.split(",")] if args.models else list(MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise UserError("--models %s: no declared scenario (known: %s)" % (unknown[0], ", ".join(MODELS)))
    return [os.path.join(SCENARIOS, "accuracy-%s.yaml" % m) for m in models]


def make_inputs(path, out):
    """Make the learnable set and the weights files scenario `path` names, where they are missing
    (the commands its comments give): the scenario itself is not changed."""
    from harness.plan import yamlfile

    doc, _ = yamlfile.load(path)
    a = doc.get("accuracy") or {}
    size = tuple(int(v) for v in doc.get("input_size") or (128, 128))
    data = str(a.get("data") or "")
    if data and not os.path.isdir(data):
        images, val = DATA.get(os.path.normpath(data), (600, 100))
        out.write("# making %s: %d train and %d val images of %dx%d\n" % (data, images, val, size[0], size[1]))
        learnable.make_learnable(data, images=images, val_images=val, size=size, seed=0)
    for model, file in sorted((doc.get("weights") or {}).items()):
        if not os.path.isfile(file):
            os.makedirs(os.path.dirname(os.path.abspath(file)), exist_ok=True)
            out.write("# making %s: %s, ResNet-%d FPN, seed 0\n" % (file, model, int(a.get("depth") or 18)))
            weights.make(model, file, 0, int(a.get("depth") or 18))


def bf16_here():
    """(whether this CPU runs bf16 natively, why not)."""
    name, flags = hostcpu.cpu()
    if hostcpu.has_bf16_kernels(flags):
        return True, ""
    return False, "this CPU (%s) has no avx512_bf16: torch would emulate bf16, whose curve says nothing of the " \
                  "trainer" % (name or "unknown")


# how welch.verdict's words read for a ratio of times to target (the trainer's over a rival's)
TIME_WORDS = {welch.PARITY: "parity (the interval holds 1x)", "lower, the limit not shown":
              "faster, but 1.2x is not shown", "higher": "slower"}


def time_ratio_verdict(mine, theirs):
    """(passed, the words) of the trainer's times to target (a Spread over its seeds) against a
    rival's: the ratio of their geometric means with its Welch 95% interval (on the logarithms),
    PASS only where the whole interval is at or below 1/1.2, "parity" where it holds 1. With one
    seed on a side there is no interval, and the means alone are judged, as said."""
    limit = 1 / SPEEDUP
    r = welch.ratio(mine.values, theirs.values)
    if r is None:
        good = mine.mean <= theirs.mean * limit
        return good, "the trainer's / its %.2fx on the means (one seed on a side: no interval; limit %.2fx): %s" % (
            mine.mean / theirs.mean, limit, "PASS" if good else "FAIL")
    word = welch.verdict(r, limit)
    said = "the trainer's / its %.2fx [%.2f, %.2f] (ratio of geometric means, Welch %d%% over %d vs %d seeds; " \
           "limit %.2fx): " % (r.estimate, r.low, r.high, round(r.level * 100), r.n[0], r.n[1], limit)
    return word == "PASS", said + ("PASS" if word == "PASS" else "FAIL: " + TIME_WORDS[word])


def difference_said(a, b, what="the trainer's - its"):
    """The Welch 95% interval of mean(a) - mean(b) in words, "parity" where it holds 0."""
    d = welch.difference(a, b)
    if d is None:
        return "no interval (one seed on a side)"
    return "%s %+.3f [%+.3f, %+.3f] (Welch %d%%)%s" % (what, d.estimate, d.low, d.high, round(d.level * 100),
                                                      ": parity" if d.holds(0.0) else "")


def shared_before_target(series, metric, target, rule="first"):
    """The seeds of `series` with a checkpoint interval on a shared machine that its time to target
    holds: one that starts before the checkpoint the crossing is read at (anywhere, for a seed that
    never reached the target: its bound is its whole training time). An interval after the crossing
    lengthens the time to train, which the report's note names, not the time to target."""
    seeds = []
    for seed, spans in sorted(series.shared.items()):
        crossing = acc.time_to_target(series.curves.get(seed, []), metric, target, rule)
        if any(crossing is None or start < crossing.after for start, _, _ in spans):
            seeds.append(seed)
    return seeds


def verdicts(block, out):
    """PASS/FAIL lines of the trainer against each rival; True when none failed."""
    rows = {r.framework: r for r in report.rows(block) if r.precision == "fp32"}
    mine = rows.get(TRAINER)
    ok = True
    if mine is None:
        out.write("%s: the bundled trainer has no result\n" % block.model)
        return False
    finals = {s.framework: s.finals() for s in block.series if s.precision == "fp32"}
    if mine.time_to_target is None:
        series = next(s for s in block.series if s.framework == TRAINER and s.precision == "fp32")
        best = [b for b in (acc.best(c, block.metric) for c in series.curves.values()) if b is not None]
        out.write("%s: the bundled trainer did not reach %s %.3g in %d of %d seeds (best per seed: %s): FAIL\n"
                  % (block.model, block.metric, block.target, mine.seeds - mine.reached, mine.seeds,
                     ", ".join("%.3f" % b for b in best) or "none scored"))
        ok = False
    if len(rows) == 1:
        out.write("%s: no rival ran: the trainer is compared with nobody\n" % block.model)
    for name, theirs in rows.items():
        if name == TRAINER:
            continue
        early = ["%s in %d of %d seeds" % (n, r.from_start, r.seeds) for n, r in ((TRAINER, mine), (name, theirs))
                 if r.from_start]
        shared = ["%s seed %s" % (s.framework, ", ".join(map(str, seeds))) for s in block.series
                  if s.precision == "fp32" and s.framework in (TRAINER, name)
                  for seeds in [shared_before_target(s, block.metric, block.target, block.rule)] if seeds]
        if mine.time_to_target is None:
            out.write("%s vs %s: time to target: FAIL (the trainer missed it in %d of %d seeds)\n" % (
                block.model, name, mine.seeds - mine.reached, mine.seeds))
            ok = False
        elif shared:
            # a time lengthened by other work on the machine is no measurement to judge by
            out.write("%s vs %s: time to target: not judged (trained on a shared machine: %s; see the report's "
                      "note)\n" % (block.model, name, "; ".join(shared)))
        elif early:
            # a time read off the assumed line from the start is no measurement to judge by
            out.write("%s vs %s: time to target: not judged (reached by the first checkpoint: %s; that time is "
                      "read off the line from the start, not measured)\n" % (block.model, name, ", ".join(early)))
        elif theirs.time_to_target is None:
            # the rival missed the target in some seed: counted at its whole training time there,
            # its times are lower bounds, so the ratio read off them is at most the true one
            bound = theirs.time_bound
            if bound is None:
                out.write("%s vs %s: time to target: FAIL (%s has a seed with no curve)\n" % (block.model, name, name))
                ok = False
            else:
                good, said = time_ratio_verdict(mine.time_to_target, bound)
                ok &= good
                out.write("%s vs %s: time to target %.1f s vs >= %.1f s (%s missed it in %d of %d seeds, counted at "
                          "their training time, so the ratio is at most this; interpolated): %s\n" % (
                              block.model, name, mine.time_to_target.mean, bound.mean, name,
                              theirs.seeds - theirs.reached, theirs.seeds, said))
        else:
            good, said = time_ratio_verdict(mine.time_to_target, theirs.time_to_target)
            ok &= good
            out.write("%s vs %s: time to target %.1f s vs %.1f s (interpolated): %s\n" % (
                block.model, name, mine.time_to_target.mean, theirs.time_to_target.mean, said))
        a = acc.spread([p.metric(block.metric) for p in finals[TRAINER].values()])
        b = acc.spread([p.metric(block.metric) for p in finals[name].values()])
        if a is None or b is None:
            out.write("%s vs %s: final %s: FAIL (no final checkpoint scored)\n" % (block.model, name, block.metric))
            ok = False
        elif b.std is None:
            out.write("%s vs %s: final %s %.3f vs %.3f: not judged (one seed: no seed spread)\n" % (
                block.model, name, block.metric, a.mean, b.mean))
        else:
            good = abs(a.mean - b.mean) <= b.std
            ok &= good
            side = "" if good else " (the trainer's is %s by %.1f sd)" % (
                "higher" if a.mean > b.mean else "lower", abs(a.mean - b.mean) / b.std)
            out.write("%s vs %s: final %s %.3f vs %.3f +- %.3f (one seed sd): %s%s; %s\n" % (
                block.model, name, block.metric, a.mean, b.mean, b.std, "PASS" if good else "FAIL", side,
                difference_said(a.values, b.values)))
    return ok


def bf16_verdict(block, out):
    """The trainer's bf16 final metric, and its curve, within the seeds' spread of its fp32 ones;
    True when not failed."""
    series = {s.precision: s for s in block.series if s.framework == TRAINER}
    failed = ["%s seed %d" % (precision, seed) for precision, s in sorted(series.items())
              for seed in sorted(s.failed)]
    if failed:   # a seed that diverged leaves a spread that says nothing of the other precision
        out.write("%s: bf16 vs fp32: not judged: %s failed (%s)\n" % (
            block.model, ", ".join(failed), "; ".join(sorted({s.failed[k].split(" | ")[-1][:120]
                                                              for s in series.values() for k in s.failed}))))
        return True
    finals = {precision: s.finals() for precision, s in series.items()}
    a = acc.spread([p.metric(block.metric) for p in finals.get("fp32", {}).values()])
    b = acc.spread([p.metric(block.metric) for p in finals.get("bf16", {}).values()])
    if a is None or b is None:
        out.write("%s: bf16 vs fp32: FAIL (a precision has no scored final checkpoint)\n" % block.model)
        return False
    if a.std is None:
        out.write("%s: bf16 vs fp32 final %s %.3f vs %.3f: not judged (one seed: no seed spread)\n" % (
            block.model, block.metric, b.mean, a.mean))
        return True
    good = abs(a.mean - b.mean) <= a.std
    out.write("%s: bf16 vs fp32 final %s %.3f vs %.3f +- %.3f: %s; %s\n" % (
        block.model, block.metric, b.mean, a.mean, a.std, "PASS" if good else "FAIL",
        difference_said(b.values, a.values, "bf16 - fp32")))
    return curve_verdict(block, series, out) and good


def checkpoint_spreads(series, metric):
    """{iteration: Spread} of one series' metric at each checkpoint every seed of it scored."""
    by_seed = [{p.iteration: p.metric(metric) for p in curve} for curve in series.curves.values()]
    shared = set.intersection(*(set(k for k, v in d.items() if v is not None) for d in by_seed)) if by_seed else set()
    return {it: acc.spread([d[it] for d in by_seed]) for it in sorted(shared)}


def curve_verdict(block, series, out):
    """The bf16 curve against the fp32 one by iteration: at every checkpoint both precisions scored
    in every seed, the bf16 mean within one fp32 seed standard deviation of the fp32 mean (the
    final check's rule, at each point of the curve). True when not failed."""
    fp32, bf16 = checkpoint_spreads(series["fp32"], block.metric), checkpoint_spreads(series["bf16"], block.metric)
    points = [(it, bf16[it], fp32[it]) for it in sorted(set(fp32) & set(bf16)) if fp32[it].std is not None]
    if not points:
        out.write("%s: bf16 vs fp32 curves: not judged (no checkpoint scored in every seed of both, with a "
                  "spread)\n" % block.model)
        return True
    apart = [it for it, b, a in points if abs(b.mean - a.mean) > a.std]
    out.write("%s: bf16 vs fp32 %s by iteration (bf16 vs fp32 +- fp32 sd): %s: %s\n" % (
        block.model, block.metric, ", ".join("%d %.3f vs %.3f +- %.3f" % (it, b.mean, a.mean, a.std)
                                            for it, b, a in points),
        "PASS" if not apart else "FAIL (apart at iteration %s)" % ", ".join(str(it) for it in apart)))
    return not apart


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = sys.stdout
    if args.add_bf16 and not args.from_results:
        raise SystemExit("--add-bf16 adds to a stored run: give its results folder with --from")
    if args.from_results and args.add_bf16:
        return add_bf16(args.from_results, args.run, out)
    if args.from_results and os.path.isfile(args.from_results):
        return judge_saved(args.from_results, out, args.joined)
    if args.from_results:
        return judge_finished(args.from_results, args.run, out, args.joined)
    try:
        files = scenario_files(args)
    except UserError as exc:
        sys.stderr.write("time_to_accuracy: %s\n" % exc)
        return 2
    # without --work the run lives in a temporary folder, removed once it is judged; an
    # interrupted run's folder is kept, since its finished trials are what a resume goes on from
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="detbench-tta-"))
    try:
        status = train_and_judge(args, work, files, out)
    except KeyboardInterrupt:
        out.write("time_to_accuracy: interrupted; the run's trials so far stay in %s (after the resume above, "
                  "judge it with `python -m benchmarks.time_to_accuracy --from %s`)\n"
                  % (work, os.path.join(work, "results")))
        out.flush()
        return 130
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return status


def train_and_judge(args, work, files, out):
    """Run each declared scenario of `files` as it is into `work`'s results store and judge it; the
    worst exit status (2 where a scenario could not run or nothing of it could be judged)."""
    results = os.path.join(work, "results")
    status = 0
    for path in files:
        try:
            make_inputs(path, out)
            run_id = accuracy_run.start(path, Store(results), new_run_id(), out=out)
        except UserError as exc:
            out.flush()
            sys.stderr.write("time_to_accuracy: %s\n" % exc)
            status = 2
            continue
        rep = report_build.accuracy(results, run_id)
        bf16 = any(s.precision == "bf16" for b in rep.models for s in b.series)
        status = max(status, judge(rep, bf16, bf16_here()[1] or "the scenario has no bf16 cell that ran here",
                                   args.quick, out))
    return status


def judge(rep, bf16, why, quick, out):
    """Print the report (its headline the tool's own verdict on every declared check), the benchmark's
    detail lines on the main table's target, and the tool's verdict as the last line; the exit status:
    0 PASS, 1 FAIL or exploratory, 2 where nothing could be judged."""
    out.write("\n" + report.render_markdown(rep) + "\n")
    out.write("Detail, on the main table's target (the verdict above is the tool's on every declared check):\n")
    for block in rep.models:
        verdicts(block, out)
        if bf16:
            bf16_verdict(block, out)
    if not bf16:
        out.write("bf16 vs fp32 curves of the trainer: not checked: %s\n" % why)
    v = rep.verdict
    out.write("time to accuracy: %s%s\n" % (v.headline(), " (quick)" if quick else ""))
    if v.unjudgeable():
        sys.stderr.write("time_to_accuracy: %s\n" % v.unjudgeable())
        return 2
    return 0 if v.status == "PASS" and not v.exploratory else 1


def judge_finished(results, run_id, out, joined=()):
    """--from: the verdicts of a finished accuracy run, read against its own declared targets, with
    the cells of the runs `joined` (--with) beside its own."""
    try:
        store, run = stored_run(results, run_id)
        rep = report_build.accuracy(results, run.id, joined=joined)
    except UserError as exc:
        sys.stderr.write("time_to_accuracy: %s\n" % exc)
        return 2
    bf16 = any(s.precision == "bf16" for b in rep.models for s in b.series)
    return judge(rep, bf16, "the run has no bf16 cells (add them with --add-bf16)", False, out)


def judge_saved(path, out, joined=()):
    """--from FILE: the verdicts of an accuracy run saved by `detbench accuracy save`, loaded into a
    temporary store, with the runs saved in the files `joined` (--with FILE2) loaded beside it and
    joined (more seeds, a precision or a framework trained later with its recipe)."""
    from harness.results import accuracy_file

    folders = [j for j in joined if not os.path.isfile(j)]
    if folders:
        sys.stderr.write("time_to_accuracy: --with %s: with --from FILE, --with names a saved run's file too\n"
                         % folders[0])
        return 2
    work = tempfile.mkdtemp(prefix="detbench-tta-saved-")
    try:
        results = os.path.join(work, "results")
        store = Store(results)
        run_id = accuracy_file.load(store, path)
        others = [accuracy_file.load(store, j) for j in joined]
        return judge_finished(results, run_id, out, others)
    except UserError as exc:
        sys.stderr.write("time_to_accuracy: %s\n" % exc)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)


def stored_run(results, run_id):
    """The store at `results` and its accuracy run `run_id` (the newest where "latest")."""
    store = Store(results, create=False)
    ids = store.accuracy().runs()
    return store, store.read_run(ids[-1] if run_id == "latest" and ids else run_id)


def trained_cells(store, run_id):
    """The cells of the stored accuracy run `run_id` that have trials, read from the trials alone."""
    return {Cell.from_key(str(t["cell_key"])) for t in store.accuracy().trials(run_id)}


def bf16_scenario(run, path):
    """Write to `path` the scenario of the bundled trainer's bf16 cells of stored accuracy run `run`:
    its models, recipe and seeds (the keys plan.accuracy.recipe_differences compares), only the
    framework and precision changed, so the new run joins `run`'s report (--with)."""
    import yaml

    from harness.plan.scenario import Scenario

    doc = run.scenario.document
    matrix = dict(doc.get("matrix") or {}, framework=[TRAINER], precision=["bf16"])
    sc = {"name": "%s-bf16-of-%s" % (doc.get("name"), run.id), "mode": "accuracy", "matrix": matrix}
    # the stored document holds every key; a scenario sets only those away from their defaults (an
    # accuracy scenario may not set the speed or inference keys at all)
    for key in ("backend", "batch_per_gpu", "input_size", "env", "weights", "extra_args", "options", "accuracy"):
        default = Scenario.model_fields[key].get_default(call_default_factory=True)
        if key in doc and doc[key] != (default.model_dump() if hasattr(default, "model_dump") else default):
            sc[key] = doc[key]
    # the reference framework is the joined report's, and a scenario names one of its own matrix
    sc["accuracy"] = {k: v for k, v in sc["accuracy"].items() if k != "reference"}
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(sc, fh, sort_keys=False)


def add_bf16(results, run_id, out):
    """--add-bf16: train the trainer's bf16 cells of accuracy run `run_id` of `results` (the newest
    where "latest") as a new run of that store, then judge `run_id` with them joined."""
    here, why = bf16_here()
    if not here:
        sys.stderr.write("time_to_accuracy: --add-bf16: %s\n" % why)
        return 2
    try:
        store, run = stored_run(results, run_id)
        cells = {(c.framework, c.precision) for c in trained_cells(store, run.id)}
        if (TRAINER, "fp32") not in cells:
            raise UserError("run %s has no fp32 cell of the bundled trainer: a bf16 curve would have no fp32 one "
                            "to meet" % run.id)
        if (TRAINER, "bf16") in cells:
            raise UserError("run %s has the bundled trainer's bf16 cells already: judge it with --from alone"
                            % run.id)
        scenario = os.path.join(os.path.dirname(os.path.abspath(results)), "scenario-bf16-of-%s.yaml" % run.id)
        bf16_scenario(run, scenario)
        new = new_run_id()
        again = ("judge it with `python -m benchmarks.time_to_accuracy --from %s --run %s --with %s`"
                 % (results, run.id, new))
        try:
            accuracy_run.start(scenario, store, new, out=out)
        except KeyboardInterrupt:
            out.write("time_to_accuracy: interrupted; after the resume above, %s\n" % again)
            out.flush()
            return 130
    except UserError as exc:
        out.flush()
        sys.stderr.write("time_to_accuracy: %s\n" % exc)
        return 2
    out.write("bf16 cells trained as run %s; %s\n" % (new, again))
    return judge_finished(results, run.id, out, (new,))

if __name__ == "__main__":
    sys.exit(main())
