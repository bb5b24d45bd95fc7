"""Time to accuracy: the bundled trainer against torchvision, mmdetection and detectron2 (where their envs are built).

Every framework trains the same ResNet-18 FPN detector from one `detbench weights make --depth 18`
file on the train split of a generated learnable set, with one schedule, and each checkpoint's
val-split detections are scored by the one shared COCOeval (an accuracy scenario run by
`detbench accuracy run`; this script writes that scenario, runs it and reads the store). It
prints the report's tables and PASS/FAIL for:

  * time to target: the ratio of the trainer's time to target to each rival's (their geometric
    means over seeds) with its Welch 95% interval, taken on the logarithms: PASS where the whole
    interval is at or below 1/1.2, "parity" where it holds 1 (a few seeds give wide intervals:
    more seeds narrow them), "faster, but 1.2x is not shown" or "slower" otherwise; with one seed
    on a side, the means alone, said so (where a rival missed the target in some seed, its times
    count that seed at its whole training time, a lower bound; where the trainer missed it, FAIL;
    where either reached it by its first checkpoint, or trained on a shared machine before it
    reached the target, not judged: that time is read off the line from the start, or longer than
    a quiet machine's);
  * final AP: the trainer's mean final target metric within one seed standard deviation of
    each rival's (not judged with one seed: there is no spread), with the Welch 95% interval of the
    difference beside it ("parity" where it holds 0);
  * bf16: the trainer's bf16 final metric within one fp32 seed standard deviation of its fp32
    one, and so its mean at every checkpoint both precisions scored (the curves by iteration),
    only on a CPU with avx512_bf16 kernels (or a GPU); otherwise it says it was not checked, and why.

    python -m benchmarks.time_to_accuracy                 # retinanet, faster_rcnn, mask_rcnn; 3 seeds
    python -m benchmarks.time_to_accuracy --quick         # retinanet, one seed, a few hundred iterations
    python -m benchmarks.time_to_accuracy --from DIR/results [--run ID]   # judge a finished run again
    python -m benchmarks.time_to_accuracy --from RUN.json             # judge a run saved by `detbench accuracy save`
    python -m benchmarks.time_to_accuracy --from DIR/results --run ID --with ID2   # with ID2's cells joined
    python -m benchmarks.time_to_accuracy --from RUN.json --with RUN2.json     # the same, of two saved runs
    python -m benchmarks.time_to_accuracy --from DIR/results --run ID --add-bf16   # train the bf16 cells ID lacks

Rivals run in their pinned envs: `source scripts/env.sh; export DETBENCH_CACHE=...` first where
those were built elsewhere. --threads sets OMP_NUM_THREADS for every framework (default 1: one
intra-op thread plus one loader worker, two cores). Exit code 1 when a judged check fails.
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
from harness.frameworks import accuracy as recipes  # noqa: E402
from harness.launch import envs  # noqa: E402
from harness.plan import hostcpu  # noqa: E402
from harness import frameworks  # noqa: E402
from harness.errors import UserError  # noqa: E402
from harness.measure import accuracy as acc  # noqa: E402
from harness.measure import welch  # noqa: E402
from harness.plan import learnable, weights  # noqa: E402
from harness.plan.scenario import Cell  # noqa: E402
from harness.report import accuracy as report  # noqa: E402
from harness.report import build as report_build  # noqa: E402

TRAINER = "detbench-trainer"
SPEEDUP = 1.2
# per model: (target metric, value), as MLPerf sets its quality targets: a little below what the reference
# framework (torchvision) reaches at the end of the schedule, so that reaching it means having trained,
# and never a figure a framework passes by its first checkpoint (there the time would be read off the
# line from the start). Faster R-CNN with 128 sampled RoIs per image was past bbox AP50 0.9 at the first
# checkpoint (iteration 200) in every framework and torchvision past bbox AP 0.5 (0.586); torchvision's
# final bbox AP was 0.778 (seed 0), so its target is bbox AP (COCO's AP over IoU 0.5:0.95) 0.7. Mask R-CNN
# the same way: every framework's segm AP50 was past 0.94 at iteration 200, and torchvision's seed 0 ended
# at segm AP 0.747 (0.623 at 200, 0.662 at 400). 0.65 was set from that alone, and on the Intel AMX CPU
# the trainer (0.689) and mmdetection (0.695) passed it at iteration 200 in seed 0, so it judged nothing;
# the next multiple of 0.05, segm AP 0.7, is 0.94 of torchvision's final and no framework's first checkpoint
TARGETS = {"retinanet": ("bbox_AP50", 0.5), "faster_rcnn": ("bbox_AP", 0.7), "mask_rcnn": ("segm_AP", 0.7)}
# lr per image 0.0025 with the clip: RetinaNet's loss leaves focal loss's plateau at about 400 iterations
# (AP50 0.44 at 800 at a constant rate, seed 0) where at 0.00125 unclipped it took 750-1000
FULL = dict(iterations=1000, eval_every=200, warmup_iters=100, lr_steps=[800], images=600, val_images=100,
            seeds=[0, 1, 2], models=["retinanet", "faster_rcnn", "mask_rcnn"], lr_per_image=0.0025)
QUICK = dict(iterations=200, eval_every=50, warmup_iters=50, lr_steps=[], images=200, val_images=40,
             seeds=[0], models=["retinanet"], lr_per_image=0.00125)
# RetinaNet from a random ResNet-18 at lr 0.005 for 4 images: the gradients' total norm runs at 1-5 with
# spikes of 20-250, and without a clip one seed in three diverged to NaN by iteration 200 in either
# precision; 35 (mmdetection's usual bound for its detectors) cuts only the spikes
CLIP_GRAD_NORM = 35.0
# Faster and Mask R-CNN: the box head's sampled RoIs per image. COCO's 512 on 4 images of 128x128 with a
# few objects each is almost all negatives, and its box head (about 170 GFLOP an iteration with the
# backward) made the trainer's step 1.6 s; every framework samples this many with its own sampler
ROI_BATCH_PER_IMAGE = 128
QUICK_TARGET = 0.05    # a few hundred iterations from scratch: AP50 clearly above a random detector's 0


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.time_to_accuracy", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one model, one seed, a few hundred iterations")
    p.add_argument("--models", help="comma-separated (default: retinanet,faster_rcnn; --quick: retinanet)")
    p.add_argument("--frameworks", default="detbench-trainer,torchvision,mmdetection,detectron2")
    p.add_argument("--iterations", type=int)
    p.add_argument("--eval-every", type=int, help="a checkpoint every N iterations (default: 200; with --iterations, "
                   "a quarter of them)")
    p.add_argument("--seeds", type=int, help="how many seeds (0, 1, ...)")
    p.add_argument("--size", type=int, default=128, help="input side (square), also the images' size")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr-per-image", type=float, help="default: 0.0025 (--quick: 0.00125)")
    p.add_argument("--clip-grad-norm", type=float, default=CLIP_GRAD_NORM,
                   help="every framework clips the gradients' total L2 norm to this (0: no clipping)")
    p.add_argument("--roi-batch-per-image", type=int, default=ROI_BATCH_PER_IMAGE,
                   help="Faster and Mask R-CNN: the box head's sampled RoIs per image, in every framework")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-bf16", action="store_true", help="leave out the trainer's bf16 cells (and the bf16 "
                   "curve check) even where the CPU has bf16 kernels")
    p.add_argument("--work", help="folder for data, weights, scenario and results (default: a temporary one)")
    p.add_argument("--from", dest="from_results", metavar="RESULTS",
                   help="train nothing: judge a finished (or resumed) accuracy run of this results folder, or the "
                        "run saved in this file (detbench accuracy save), against this benchmark's targets")
    p.add_argument("--run", default="latest", help="with --from: the accuracy run (default: the newest)")
    p.add_argument("--with", dest="joined", action="append", default=[], metavar="RUN",
                   help="with --from: join this accuracy run's cells (trained later with the run's recipe on the "
                        "same machine: more seeds, or cells made by --add-bf16) to the judged run; with --from FILE, "
                        "a saved run's file; repeatable")
    p.add_argument("--add-bf16", action="store_true",
                   help="with --from: train the bundled trainer's bf16 cells of the run's models, with its recipe "
                        "and seeds, as a new run of the same store, then judge the run with them joined")
    return p.parse_args(argv)


def reshaped(settings, iterations):
    """`settings` on a schedule of `iterations`, with its shape kept: the rate steps at the same
    fractions of it, warmup at most half of it, a checkpoint every quarter."""
    scale = iterations / float(settings["iterations"])
    return dict(settings, iterations=iterations, eval_every=max(1, iterations // 4),
                warmup_iters=min(settings["warmup_iters"], iterations // 2),
                lr_steps=sorted({max(1, int(round(s * scale))) for s in settings["lr_steps"]} - {iterations}))


def usable(name, out):
    """Whether `name` can run an accuracy trial here: a recipe and, for a rival, its pinned env."""
    if name not in recipes.RECIPES:
        out.write("# %s: not run: %s\n" % (name, recipes.why_not(name)))
        return False
    fw = frameworks.FRAMEWORKS[name]
    if fw.env is not None and not envs.is_built(fw.env):
        out.write("# %s: not run: its pinned env is not built here (detbench env build %s)\n" % (name, name))
        return False
    return True


def bf16_here():
    """(whether this CPU runs bf16 natively, why not)."""
    name, flags = hostcpu.cpu()
    if hostcpu.has_bf16_kernels(flags):
        return True, ""
    return False, "this CPU (%s) has no avx512_bf16: torch would emulate bf16, whose curve says nothing of the " \
                  "trainer" % (name or "unknown")


def write_scenario(path, names, models, settings, args, data, weight_files, target_value, bf16=False):
    lines = ["name: time-to-accuracy%s" % ("-quick" if args.quick else ""), "mode: accuracy",
             "matrix:", "  framework: [%s]" % ", ".join(names), "  model: [%s]" % ", ".join(models),
             "  precision: [%s]" % ("fp32, bf16" if bf16 else "fp32"), "batch_per_gpu: %d" % args.batch,
             "input_size: [%d, %d]" % (args.size, args.size),
             "env: {OMP_NUM_THREADS: \"%d\"}" % args.threads, "weights:"]
    lines += ["  %s: %s" % (m, weight_files[m]) for m in models]
    lines += ["accuracy:", "  data: %s" % data, "  iterations: %d" % settings["iterations"],
              "  eval_every: %d" % settings["eval_every"], "  lr_per_image: %r" % settings["lr_per_image"],
              "  clip_grad_norm: %r" % args.clip_grad_norm, "  roi_batch_per_image: %d" % args.roi_batch_per_image,
              "  warmup_iters: %d" % settings["warmup_iters"], "  lr_steps: %s" % settings["lr_steps"],
              "  depth: 18", "  seeds: %s" % settings["seeds"], "  reference: torchvision" if "torchvision" in names
              else "  reference: %s" % names[0], "  targets:"]
    for m in models:
        metric, value = TARGETS[m]
        lines.append("    %s: {metric: %s, value: %r}" % (m, metric, target_value if target_value else value))
    rivals = [n for n in names if n != TRAINER]
    if bf16 and rivals:
        lines.append("exclude:")
        lines += ["  - {framework: %s, precision: bf16, reason: only the trainer's bf16 curve is compared}" % n
                  for n in rivals]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


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


def shared_before_target(series, metric, target):
    """The seeds of `series` with a checkpoint interval on a shared machine that its time to target
    holds: one that starts before the checkpoint the crossing is read at (anywhere, for a seed that
    never reached the target: its bound is its whole training time). An interval after the crossing
    lengthens the time to train, which the report's note names, not the time to target."""
    seeds = []
    for seed, spans in sorted(series.shared.items()):
        crossing = acc.time_to_target(series.curves.get(seed, []), metric, target)
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
                  for seeds in [shared_before_target(s, block.metric, block.target)] if seeds]
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
    settings = dict(QUICK if args.quick else FULL)
    if args.iterations:
        settings = reshaped(settings, args.iterations)
    if args.eval_every:
        settings["eval_every"] = args.eval_every
    if args.seeds:
        settings["seeds"] = list(range(args.seeds))
    if args.lr_per_image:
        settings["lr_per_image"] = args.lr_per_image
    models = [m.strip() for m in args.models.split(",")] if args.models else settings["models"]
    names = [n for n in (x.strip() for x in args.frameworks.split(",")) if n and usable(n, out)]
    if TRAINER not in names:
        raise SystemExit("the bundled trainer must be among --frameworks")
    # without --work the run lives in a temporary folder, removed once it is judged; an
    # interrupted run's folder is kept, since its finished trials are what a resume goes on from
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="detbench-tta-"))
    try:
        status = train_and_judge(args, work, names, models, settings, out)
    except KeyboardInterrupt:
        out.write("time_to_accuracy: interrupted; the run's trials so far stay in %s (after the resume above, "
                  "judge it with `python -m benchmarks.time_to_accuracy --from %s`)\n"
                  % (work, os.path.join(work, "results")))
        out.flush()
        return 130
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return status


def train_and_judge(args, work, names, models, settings, out):
    """Make the data and the shared weights in `work`, run the accuracy scenario there and judge it."""
    data = os.path.join(work, "data")
    learnable.make_learnable(data, images=settings["images"], val_images=settings["val_images"],
                             size=(args.size, args.size), seed=0)
    files = {}
    for m in models:
        files[m] = os.path.join(work, "%s-r18.pt" % m)
        if not os.path.isfile(files[m]):
            weights.make(m, files[m], 0, 18)
    scenario = os.path.join(work, "scenario.yaml")
    bf16, why = bf16_here()
    if args.no_bf16:
        bf16, why = False, "left out (--no-bf16)"
    write_scenario(scenario, names, models, settings, args, data, files, QUICK_TARGET if args.quick else None,
                   bf16=bf16)
    results = os.path.join(work, "results")
    try:
        run_id = accuracy_run.start(scenario, Store(results), new_run_id(), out=out)
    except UserError as exc:
        out.flush()
        sys.stderr.write("time_to_accuracy: %s\n" % exc)
        return 2
    return judge(report_build.accuracy(results, run_id), bf16, why, args.quick, out)


def judge(rep, bf16, why, quick, out):
    """Print the report's tables and every verdict; the exit status (1 when a judged check failed)."""
    out.write("\n" + report.render_markdown(rep) + "\n")
    status = 0
    for block in rep.models:
        status |= not verdicts(block, out)
        if bf16:
            status |= not bf16_verdict(block, out)
    if not bf16:
        out.write("bf16 vs fp32 curves of the trainer: not checked: %s\n" % why)
    out.write("time to accuracy: %s%s\n" % ("PASS" if not status else "FAIL", " (quick)" if quick else ""))
    return status


def judge_finished(results, run_id, out, joined=()):
    """--from: the verdicts of a finished accuracy run, its curves read against TARGETS, with the
    cells of the runs `joined` (--with) beside its own."""
    try:
        store, run = stored_run(results, run_id)
        models = {c.model for c in trained_cells(store, run.id)}
        rep = report_build.accuracy(results, run.id, {m: TARGETS[m] for m in models if m in TARGETS},
                                    joined=joined)
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
