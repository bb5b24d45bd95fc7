"""The bisect itself: trials of the revisions, narrowed by binary search, and the answer with
its certainty.

A commit runs as itself: each of its trials is one `python -m harness.cli run` of that commit's
own checkout (its harness, adapters, trainer configs and drivers plan and launch the trial), in
its own Python (envaxis.revision_python), with its checkout as working directory and alone on
PYTHONPATH, into a results store of its own (`bisects/<id>/<revision>/` in the results folder,
for `detbench report --results`). What the user fixed is held fixed: the scenario file (cut to
the one cell and one repeat, data and weights paths made absolute), the data, the weights and
the machine. A commit that cannot read that scenario, whose environment does not build or whose
trial fails is skipped with its reason, as `git bisect skip` does. An env axis's revisions are
environments of one checkout: their trials run here, into a run of the results store each
(scenario `NAME@REVISION`).

`bisects/<id>.json` in the results folder names a bisect's runs, which `--resume` reads back:
their finished trials count as evidence already taken. The first step measures the endpoints
against each other; each later step measures a candidate in rounds of one trial each of the
good end, the candidate and the bad end, in an order drawn per round, so that drift over the
bisect lands on all three alike. The culprit is then checked against its parent, its parent
against the good end and it against the bad end; a further step found by a check is bisected
in its own range. decide.py holds the tests and the alpha they share.
"""
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from harness import atomic, frameworks, launch
from harness.bisect import decide, envaxis
from harness.bisect import git as gitmod
from harness.errors import UserError
from harness.plan import hostcpu
from harness.plan import platforms, yamlfile
from harness.plan import scenario as scenario_mod
from harness.results import baseline, compare
from harness.results.store import Store, new_run_id

STATE_DIR = "bisects"
UNDECIDED_EXIT = 3          # the exit status of a bisect that ends undecided at the cap
RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit): ")   # a traceback's last word
MAX_STEPS = 4               # the most separate steps of one slowdown a search looks for


@dataclass
class Options:
    scenario: str
    good: Optional[str] = None
    bad: Optional[str] = None
    env_axis: Optional[str] = None
    cell: Optional[str] = None
    repo: Optional[str] = None
    metric: str = compare.THROUGHPUT
    resume: bool = False
    results_dir: str = "results"
    judge: decide.Judge = decide.Judge()
    seed: Optional[int] = None        # the rounds' order; drawn when None


@dataclass
class Arm:
    """One revision: a commit, or one environment of an env axis."""
    label: str                 # full sha, or "package==version"
    short: str
    subject: str
    axis_env: Optional[envaxis.AxisEnv] = None
    code_root: Optional[Path] = None
    python: Optional[str] = None
    sc: Any = None
    run_id: Optional[str] = None         # env axis: its run in the store; a commit: its own store's folder
    values: List[float] = field(default_factory=list)
    skipped: Optional[str] = None        # why it could not be measured


@dataclass
class Step:
    number: int
    arm: Arm
    trials: str
    ratio: Optional[decide.Ratio]
    verdict: str


@dataclass
class Found:
    """One step of a slowdown: `arm` is the first revision after it, `parent` the last one before
    it that was measured (the commit before `arm`, unless revisions between were skipped)."""
    arm: Arm
    parent: Arm
    effect: decide.Ratio                 # arm against parent
    share: float = 1.0                   # its part of the whole slowdown (on a log scale)
    between: List[Arm] = field(default_factory=list)    # skipped revisions between parent and arm
    confirmed: bool = True               # its effect against its parent shown to be a regression

    @property
    def isolated(self):
        return not self.between


@dataclass
class Outcome:
    culprit: Optional[Arm]               # the first step's first bad revision; None: no regression or undecided
    steps: List[Step]
    effect: Optional[decide.Ratio]       # the culprit against its parent (the endpoints when none)
    bisect_id: str
    found: List[Found] = field(default_factory=list)
    undecided: Optional[int] = None      # trials at the cap where a test stayed undecided
    unsettled: Optional[Tuple[Arm, Arm]] = None     # the range an undecided search left (good side, bad side)
    notes: List[str] = field(default_factory=list)
    skipped: List[Arm] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        return UNDECIDED_EXIT if self.undecided is not None else 0


class Skip(Exception):
    """A revision that cannot be measured; its reason (and `arm`, once a round knows which)."""
    arm: Optional[Arm] = None


class Undecided(Exception):
    """A test reached the cap without a verdict: what it tested, and the two revisions it left apart."""

    def __init__(self, trials: int, what: str, ends: Tuple[Arm, Arm]):
        super().__init__(what)
        self.trials = trials
        self.what = what
        self.ends = ends


class Bisect:
    def __init__(self, opts: Options, out):
        self.opts = opts
        self.out = out
        self.rng = random.Random(opts.seed if opts.seed is not None else random.SystemRandom().randrange(2 ** 31))
        self.store: Optional[Store] = None
        self.worktrees: Optional[gitmod.Worktrees] = None
        self.state: Dict[str, Any] = {}
        self.state_path: Optional[Path] = None
        self.cell: Optional[scenario_mod.Cell] = None
        self.host: Optional[dict] = None
        self.repo: Path = Path(".")
        self.code_root: Path = envaxis.ROOT
        self.scenario_rel = str(opts.scenario)
        self.scenario_file: Optional[Path] = None
        self.one_cell: Optional[Path] = None
        self.ledger: Optional[decide.Ledger] = None
        self.steps: List[Step] = []
        self.notes: List[str] = []

    # ------------------------------------------------------------ revisions
    def arms(self) -> List[Arm]:
        opts = self.opts
        if opts.env_axis:
            if opts.good or opts.bad:
                raise UserError("give either --good and --bad (commits) or --env-axis (environments), not both")
            root = gitmod.toplevel(opts.repo) if opts.repo else envaxis.ROOT
            self.code_root = Path(root)
            package, versions = envaxis.parse_axis(opts.env_axis)
            sc = self.load_scenario(self.code_root)
            fw = frameworks.FRAMEWORKS[self.pick_cell(sc).framework]
            arms = []
            for env in envaxis.axis_envs(package, versions, fw.env):
                arms.append(Arm(env.label, env.label, "", axis_env=env, code_root=self.code_root, sc=sc))
            for arm in arms:          # every pin installs, or nothing is measured
                arm.python = envaxis.build(arm.axis_env)
            return arms
        if not (opts.good and opts.bad):
            raise UserError("give --good REV and --bad REV (or --env-axis PACKAGE=V1,V2,...)")
        self.repo = gitmod.toplevel(opts.repo or ".")
        gitmod.check_clean(self.repo)
        good = gitmod.resolve(self.repo, opts.good, "--good")
        bad = gitmod.resolve(self.repo, opts.bad, "--bad")
        revs = gitmod.between(self.repo, good, bad)
        sc = self.load_scenario(self.repo)
        self.pick_cell(sc)
        arms = [Arm(r.sha, r.short, r.subject, sc=sc) for r in revs]
        self.worktrees = gitmod.Worktrees(self.repo)
        self.one_cell = self.worktrees.root / "scenario.yaml"
        atomic.write_text(self.one_cell, json.dumps(one_cell_scenario(self.scenario_file, self.cell), indent=1))
        for arm, flag in ((arms[0], "--good"), (arms[-1], "--bad")):   # their environments, before anything is stored
            try:
                self.prepare(arm)
            except Skip as exc:
                raise UserError("%s %s: %s; bisect from a revision where the cell runs"
                                % (flag, arm.short, exc)) from None
        return arms

    def load_scenario(self, root: Path):
        """The user's scenario file, read once and held fixed: the path as given (from the current
        directory), else, when relative, the copy checked out in the repository `root`."""
        path = Path(self.opts.scenario)
        if not path.is_file() and not path.is_absolute() and (Path(root) / path).is_file():
            path = Path(root) / path
        if not path.is_file():
            raise UserError("%s: no such scenario file" % self.opts.scenario)
        self.scenario_file = path.resolve()
        return launch.load_scenario(path)

    def pick_cell(self, sc) -> scenario_mod.Cell:
        planned = hostcpu.exclude_unmeasurable(scenario_mod.plan(sc))
        keys = [p.cell.key for p in planned if p.excluded is None]
        if self.opts.cell:
            if self.opts.cell not in keys:
                raise UserError("%s: cell %s is not a measurable cell of this scenario (its cells: %s)"
                                % (self.scenario_rel, self.opts.cell, ", ".join(keys) or "none"))
            key = self.opts.cell
        elif len(keys) != 1:
            raise UserError("%s: --cell KEY names the cell to bisect (its cells: %s)"
                            % (self.scenario_rel, ", ".join(keys) or "none"))
        else:
            key = keys[0]
        self.cell = scenario_mod.Cell.from_key(key)
        return self.cell

    def prepare(self, arm: Arm):
        """A commit's checkout and Python; Skip with the reason where it has neither."""
        if arm.axis_env is not None or arm.python is not None:
            return
        assert self.worktrees is not None
        try:
            arm.code_root = self.worktrees.get(arm.label)
        except UserError as exc:
            raise Skip("its checkout failed: %s" % exc) from None
        if not (arm.code_root / "harness" / "cli.py").is_file():
            raise Skip("it has no detbench command line (harness/cli.py) to run the scenario with")
        try:
            arm.python = envaxis.revision_python(arm.code_root, arm.short)
        except UserError as exc:
            raise Skip(str(exc)) from None

    # ------------------------------------------------------------ store and state
    def key(self, arms: List[Arm]) -> Dict[str, Any]:
        assert self.cell is not None
        return {"revisions": [a.label for a in arms], "scenario": self.scenario_rel, "cell": self.cell.key,
                "metric": self.opts.metric, "estimator": self.opts.judge.rule.estimator}

    def open_state(self, arms: List[Arm]):
        folder = Path(self.opts.results_dir) / STATE_DIR
        key = self.key(arms)
        self.store = Store(self.opts.results_dir, create=not self.opts.resume)
        if self.opts.resume:
            found = []
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                try:
                    doc = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if isinstance(doc, dict) and doc.get("key") == key:
                    found.append((doc.get("created", 0), path, doc))
            if not found:
                raise UserError("%s: no stored bisect of these revisions, scenario, cell and metric to resume"
                                % folder)
            _, self.state_path, self.state = max(found, key=lambda f: (f[0], str(f[1])))
            for arm in arms:
                arm.run_id = self.state.get("runs", {}).get(arm.label)
                if arm.run_id and arm.axis_env is not None:
                    arm.values = [self.value(t) for t in self.store.read_trials(arm.run_id) if t.done]
                elif arm.run_id:
                    arm.values = [v for v, _ in self.own_trials(Path(arm.run_id))]
        else:
            bisect_id = new_run_id()
            self.state = {"id": bisect_id, "created": time.time(), "key": key, "runs": {}}
            self.state_path = folder / ("%s.json" % bisect_id)
            self.save_state()

    def save_state(self):
        assert self.state_path is not None
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.state_path, self.state, indent=1, sort_keys=True)

    def value(self, trial) -> float:
        rule = self.opts.judge.rule
        if rule.latency:
            figures = baseline.latency_lists([trial]).get(rule.metric)
            if not figures:
                raise UserError("trial %s has no %s figure (--metric mean|pNN judges inference cells)"
                                % (trial.id, rule.metric))
            return float(figures[0])
        return float(getattr(trial, compare.ESTIMATORS[rule.estimator]))

    # ------------------------------------------------------------ trials
    def measure(self, arm: Arm):
        """One more trial of `arm`, its figure appended to arm.values; Skip where it cannot run."""
        if arm.axis_env is not None:
            self.measure_here(arm)
        else:
            self.measure_commit(arm)

    def measure_commit(self, arm: Arm):
        """One trial by the commit's own detbench: `python -m harness.cli run` of the one-cell
        scenario in its checkout, into its own results folder."""
        self.prepare(arm)
        assert arm.code_root is not None and arm.python is not None and self.one_cell is not None
        if arm.run_id is None:
            arm.run_id = str(Path(self.opts.results_dir).resolve() / STATE_DIR / self.state["id"] / arm.short)
            self.state["runs"][arm.label] = arm.run_id
            self.save_state()
        folder = Path(arm.run_id)
        before = {t for _, t in self.own_trials(folder, done_only=False)}
        env = dict(os.environ, PYTHONPATH=str(arm.code_root))
        argv = [arm.python, "-m", "harness.cli", "run", "--scenario", str(self.one_cell), "--results", str(folder)]
        with tempfile.TemporaryFile("w+") as log:
            proc = subprocess.Popen(argv, cwd=str(arm.code_root), env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            try:
                code = proc.wait()
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
            log.seek(0)
            lines = [ln.strip() for ln in log.read().splitlines() if ln.strip()]
        new = [(v, t) for v, t in self.own_trials(folder, done_only=False) if t not in before]
        done = [v for v, t in new if v is not None]
        if code != 0 or not done:
            errors = [ln for ln in lines if ln.startswith("detbench: error:")]
            raised = [ln for ln in lines if RAISED.match(ln)]
            reason = (errors or raised or [ln for ln in lines if "failed" in ln] or lines or ["no output"])[-1]
            what = ("its detbench could not run today's scenario" if code == 2 else
                    "its trial failed" if new else "its detbench failed")
            raise Skip("%s: %s" % (what, reason[:300]))
        arm.values.append(done[-1])

    def own_trials(self, folder: Path, done_only: bool = True) -> List[Tuple[Optional[float], str]]:
        """(figure or None, trial id) of every trial a commit's own detbench stored in `folder`."""
        if not (folder / "detbench.sqlite").is_file():
            return []
        try:
            store = Store(folder, create=False)
        except Exception as exc:      # a schema this detbench cannot read
            raise Skip("its results store cannot be read here: %s" % exc) from None
        try:
            out = []
            for run in store.read_runs():
                for t in store.read_trials(run.id):
                    if t.done:
                        out.append((self.value(t), t.id))
                    elif not done_only:
                        out.append((None, t.id))
            return out
        finally:
            store.close()

    def measure_here(self, arm: Arm):
        """One trial of an env axis's environment, run by this detbench into the results store."""
        from harness.measure import ingest

        assert self.store is not None and self.cell is not None
        sc, cell = arm.sc, self.cell
        fw = frameworks.FRAMEWORKS[cell.framework]
        ctx = scenario_mod.context(sc, cell, arm.python)
        argv = fw.argv(ctx)
        if arm.run_id is None:
            if self.host is None:
                self.host = platforms.host_record([cell.platform])
            arm.run_id = new_run_id()
            planned = [scenario_mod.PlannedCell(cell)]
            from harness import run as run_mod
            self.store.create_run(arm.run_id, "%s@%s" % (sc.name, arm.short),
                                  "%s:%s" % (arm.short, self.scenario_rel), sc.model_dump_json(), "local",
                                  self.host, run_mod.cell_rows(sc, planned), [])
            self.state["runs"][arm.label] = arm.run_id
            self.save_state()
        trials = self.store.read_trials(arm.run_id)
        waiting = [t for t in trials if t.status in ("pending", "running")]
        if waiting:
            trial_id = waiting[0].id
        else:
            seq = max([t.seq for t in trials], default=0) + 1
            self.store.add_trials(arm.run_id, [(seq, cell.key, seq, argv)])
            trial_id = "%s-%04d" % (arm.run_id, seq)
        trial_dir = self.store.trial_dir(trial_id)
        self.store.mark_running(trial_id)
        try:
            runner = launch.launcher("local")(code_root=arm.code_root)
            runner.run(trial_dir, argv, ctx.env, sc.timeout_s, cell, files=fw.trial_files(ctx))
        except BaseException:
            self.store.mark_pending(trial_id)
            raise
        scraper, scrape_options = fw.reading(ctx)
        result = ingest.analyse(str(trial_dir), scraper, sc.warmup, sc.measure,
                                scenario_mod.images_per_iteration(sc, cell), scrape_options,
                                settings=fw.trial_settings(ctx),
                                percentiles=sc.percentiles if sc.inference else None)
        self.store.finish_trial(trial_id, result)
        stored = next(t for t in self.store.read_trials(arm.run_id) if t.id == trial_id)
        if not stored.done:
            raise Skip("its trial %s failed: %s" % (trial_id, stored.reason or "no reason given"))
        arm.values.append(self.value(stored))

    def round(self, arms: List[Arm], skippable: Optional[Arm] = None):
        """One trial of each arm, in a drawn order. Skip where `skippable` cannot run; any other arm
        that cannot (an end of the range, measured before) stops the search."""
        order = list(arms)
        self.rng.shuffle(order)
        for arm in order:
            try:
                self.measure(arm)
            except Skip as exc:
                if arm is skippable:
                    raise
                raise UserError("revision %s: %s; it bounds the search, so the bisect stops here (finished "
                                "trials are kept: --resume)" % (arm.short, exc)) from None

    # ------------------------------------------------------------ the search
    def pair_test(self, base: Arm, other: Arm, what: str, settle: bool = True) -> Tuple[str, decide.Ratio]:
        """`other` against `base` (decide.pair), in rounds of both until decided; at the cap Undecided,
        or (settle False: a search for a further step) UNDECIDED returned."""
        judge = self.opts.judge
        assert self.ledger is not None
        test = decide.Test(self.ledger.take(), judge.looks)
        while True:
            if decide.ready(judge, base.values, other.values):
                final = min(len(base.values), len(other.values)) >= judge.max_trials
                verdict, r = decide.pair(judge, base.values, other.values, test.next(final))
                if verdict != decide.UNDECIDED:
                    return verdict, r
                if final and not settle:
                    return verdict, r
                if final:
                    raise Undecided(judge.max_trials, what, (base, other))
            self.round([base, other])

    def candidate_test(self, good: Arm, cand: Arm, bad: Arm) -> Tuple[str, decide.Ratio]:
        judge = self.opts.judge
        assert self.ledger is not None
        test = decide.Test(self.ledger.take(), judge.looks)
        while True:
            if decide.ready(judge, good.values, cand.values, bad.values):
                final = len(cand.values) >= judge.max_trials
                verdict, r, odd = decide.candidate(judge, good.values, cand.values, bad.values, test.next(final))
                if odd:
                    self.note("non-monotone: %s %s is %s (%s)" % (cand.short, cand.subject, odd,
                                                                  decide.ratio(good.values, cand.values).text()))
                if verdict != decide.UNDECIDED:
                    return verdict, r
                if final:
                    raise Undecided(judge.max_trials, "candidate %s" % cand.short, (good, bad))
            self.round([good, cand, bad], skippable=cand)

    def note(self, text: str):
        if text not in self.notes:
            self.notes.append(text)
            self.out.write("  %s\n" % text)
            self.out.flush()

    def record(self, arm: Arm, trials: str, r: Optional[decide.Ratio], verdict: str):
        self.steps.append(Step(len(self.steps) + 1, arm, trials, r, verdict))
        self.say(self.steps[-1])

    def pick(self, arms: List[Arm], lo: int, hi: int) -> Optional[int]:
        """The revision strictly between lo and hi nearest the middle that is not skipped."""
        inside = [i for i in range(lo + 1, hi) if arms[i].skipped is None]
        if not inside:
            return None
        mid = (lo + hi) / 2.0
        return min(inside, key=lambda i: (abs(i - mid), i))

    def narrow(self, arms: List[Arm], lo: int, hi: int) -> Tuple[int, int]:
        """Binary search of arms[lo..hi] (lo good, hi bad): the last good and first bad measured."""
        while True:
            i = self.pick(arms, lo, hi)
            if i is None:
                return lo, hi
            cand = arms[i]
            try:
                if self.opts.env_axis is None:
                    self.prepare(cand)
                verdict, r = self.candidate_test(arms[lo], cand, arms[hi])
            except Skip as exc:
                cand.skipped = str(exc)
                self.record(cand, "%d" % len(cand.values), None, "skipped: %s" % exc)
                continue
            self.record(cand, "%d" % len(cand.values), r, verdict)
            if verdict == decide.BAD:
                hi = i
            else:
                lo = i

    def found_step(self, arms: List[Arm], lo: int, hi: int) -> Found:
        between = [a for a in arms[lo + 1:hi]]
        return Found(arms[hi], arms[lo], decide.ratio(arms[lo].values, arms[hi].values), between=between)

    def search(self, arms: List[Arm]) -> Outcome:
        judge = self.opts.judge
        self.ledger = decide.Ledger(judge.rule.alpha, decide.planned_tests(len(arms)))
        good, bad = arms[0], arms[-1]
        try:
            verdict, r = self.pair_test(good, bad, "the endpoints")
        except Undecided as exc:
            r = decide.ratio(good.values, bad.values)
            self.record(bad, "%d/%d" % (len(good.values), len(bad.values)), r, "undecided at the cap")
            return self.outcome(arms, [], r, undecided=exc.trials, what=exc.what, unsettled=exc.ends)
        text = verdict if verdict != decide.IMPROVEMENT else "no regression (faster)"
        self.record(bad, "%d/%d" % (len(good.values), len(bad.values)), r,
                    text + (" (parity)" if verdict == decide.NONE and r.parity else ""))
        if verdict != decide.REGRESSION:
            if verdict == decide.IMPROVEMENT:
                self.note("the bad end is faster than the good end: %s" % r.text())
            return self.outcome(arms, [], r)
        found: List[Found] = []
        ranges = [(0, len(arms) - 1)]          # ranges known to hold a regression: (good end, bad end)
        checked = set()
        try:
            while ranges and len(found) < MAX_STEPS:
                start, end = ranges.pop(0)
                lo, hi = self.narrow(arms, start, end)
                if any(f.arm is arms[hi] for f in found):
                    continue
                step = self.found_step(arms, lo, hi)
                found.append(step)
                ranges.extend(self.check(arms, (start, end), lo, hi, step, checked))
        except Undecided as exc:
            return self.outcome(arms, found, None, undecided=exc.trials, what=exc.what, unsettled=exc.ends)
        if ranges:
            self.note("more than %d steps: the search stopped at %d" % (MAX_STEPS, MAX_STEPS))
        return self.outcome(arms, found, None)

    def check(self, arms: List[Arm], ends: Tuple[int, int], lo: int, hi: int, step: Found, checked
              ) -> List[Tuple[int, int]]:
        """The culprit against its parent (the step's effect), the parent against the good end of the
        range searched and the culprit against its bad end: a part found slower than its start holds
        another step, searched next."""
        more = []
        verdict, r = self.pair_test(step.parent, step.arm, "%s against its parent %s"
                                    % (step.arm.short, step.parent.short))
        step.effect = r
        self.record(step.arm, "%d/%d" % (len(step.parent.values), len(step.arm.values)), r,
                    "%s vs parent %s" % (verdict, step.parent.short))
        step.confirmed = verdict == decide.REGRESSION
        if not step.confirmed:
            self.note("%s against %s is %s: no one commit makes the slowdown (a gradual one, or steps below "
                      "the %g%% threshold)" % (step.arm.short, step.parent.short, verdict,
                                                self.opts.judge.rule.threshold * 100))
            return more          # no step to measure the rest of the range against
        parts = [(ends[0], lo, "parent %s vs good end %s" % (arms[lo].short, arms[ends[0]].short)),
                 (hi, ends[1], "bad end %s vs %s" % (arms[ends[1]].short, arms[hi].short))]
        for a, b, what in parts:
            if a == b or (a, b) in checked:
                continue
            checked.add((a, b))
            verdict, r = self.pair_test(arms[a], arms[b], what, settle=False)
            self.record(arms[b], "%d/%d" % (len(arms[a].values), len(arms[b].values)), r, "%s: %s" % (
                what, verdict if verdict != decide.UNDECIDED else "no step shown at the cap"))
            if verdict == decide.UNDECIDED:
                self.note("%s: no further step shown in %d trials (%s), none ruled out" % (
                    what, self.opts.judge.max_trials, r.text()))
            if verdict == decide.REGRESSION:
                more.append((a, b))
            elif verdict == decide.IMPROVEMENT:
                self.note("non-monotone: %s is faster than %s (%s)" % (arms[b].short, arms[a].short, r.text()))
        return more

    def outcome(self, arms, found: List[Found], r, undecided=None, what=None, unsettled=None) -> Outcome:
        found = sorted(found, key=lambda f: arms.index(f.arm))
        total = decide.ratio(arms[0].values, arms[-1].values) if arms[0].values and arms[-1].values else None
        if total is not None and found:
            whole = math.log(total.ratio)
            for f in found:
                f.share = math.log(f.effect.ratio) / whole if whole else 1.0
        culprit = found[0].arm if found and undecided is None and all(f.confirmed for f in found) else None
        effect = found[0].effect if found and undecided is None else r
        notes = list(self.notes)
        if undecided is not None and what:
            notes.append("undecided: %s at %d trials" % (what, undecided))
        return Outcome(culprit, self.steps, effect, self.state.get("id", ""), found=found, undecided=undecided,
                       unsettled=unsettled, notes=notes, skipped=[a for a in arms if a.skipped])

    def say(self, step: Step):
        self.out.write("step %d: %s %s: %s\n" % (step.number, step.arm.short, step.verdict,
                                                 step.ratio.text() if step.ratio else "-"))
        self.out.flush()

    def run(self) -> Outcome:
        previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            arms = self.arms()
            self.open_state(arms)
            assert self.cell is not None
            sc = arms[0].sc
            self.out.write("bisect %s: %d revisions, cell %s, %s, input %dx%d, batch %d per device, error "
                           "rate at most %g over the whole search; results in %s\n" % (
                               self.state["id"], len(arms), self.cell.key, self.opts.judge.rule.metric_text(),
                               sc.input_size[0], sc.input_size[1], scenario_mod.batch_per_device(sc, self.cell),
                               self.opts.judge.rule.alpha, self.opts.results_dir))
            outcome = self.search(arms)
            if self.host is None:
                self.host = platforms.host_record([])
            self.out.write(render(outcome, arms, self.opts, self.host, self.cell.key))
            return outcome
        except KeyboardInterrupt:
            if self.state_path is not None:
                self.out.write("\ninterrupted; finished trials are kept. Continue with the same command "
                               "and --resume\n")
            raise
        finally:
            if self.worktrees is not None:
                self.worktrees.close()
            if self.store is not None:
                self.store.close()
            for s, handler in previous.items():
                signal.signal(s, handler)


def _commits(first: Arm, last: Arm, arms: List[Arm]) -> List[Arm]:
    return arms[arms.index(first):arms.index(last) + 1]


def answer(outcome: Outcome, arms: List[Arm], opts: Options) -> List[str]:
    """The answer's lines, the verdict last: the first bad revision (or the steps, or the range
    it lies in), "no regression", or "undecided at N trials"."""
    rule = opts.judge.rule
    kind = "commit" if opts.env_axis is None else "environment"
    lines = []
    for i, f in enumerate(outcome.found, 1):
        where = f.arm.label if f.isolated else "one of %s..%s" % (f.between[0].short, f.arm.short)
        lines.append("%s %d of %d: %s %s: %s ratio %s vs %s %s, over %d and %d trials; %.0f%% of the slowdown" % (
            "step" if len(outcome.found) > 1 else "slowdown", i, len(outcome.found), where, f.arm.subject,
            rule.metric_text(), f.effect.text(), "its parent" if f.isolated else "the last good", f.parent.short,
            len(f.parent.values), len(f.arm.values), 100 * f.share))
        if not f.isolated:
            lines.append("  skipped in between: %s" % ", ".join(a.short for a in f.between))
    if outcome.undecided is not None:
        where = ""
        if outcome.unsettled:
            inside = _commits(outcome.unsettled[0], outcome.unsettled[1], arms)[1:]
            where = "; the first bad %s lies in %s..%s (%d %ss)" % (kind, inside[0].short, inside[-1].short,
                                                                     len(inside), kind)
            if len(inside) == 1:
                where = "; %s %s is not confirmed against %s" % (kind, inside[0].short, outcome.unsettled[0].short)
            if outcome.unsettled == (arms[0], arms[-1]) and not outcome.found:
                where = "; the endpoints neither differ by %g%% nor are shown alike" % (rule.threshold * 100)
        lines.append("undecided at %d trials%s" % (outcome.undecided, where))
    elif not outcome.found:
        r = outcome.effect
        lines.append("no regression between these revisions: bad/good %s%s" % (
            r.text() if r else "-", " (parity)" if r and r.parity else ""))
    elif not all(f.confirmed for f in outcome.found):
        f = next(f for f in outcome.found if not f.confirmed)
        lines.append("no single first bad %s: the slowdown is gradual or in steps below the %g%% threshold "
                     "(%s against %s: %s)" % (kind, rule.threshold * 100, f.arm.short, f.parent.short, f.effect.text()))
    elif len(outcome.found) > 1:
        lines.append("first bad %ss (a slowdown in %d steps): %s" % (kind, len(outcome.found), ", ".join(
            "%s (%.0f%%)" % (f.arm.short if f.isolated else "%s..%s" % (f.between[0].short, f.arm.short),
                             100 * f.share) for f in outcome.found)))
    elif not outcome.found[0].isolated:
        f = outcome.found[0]
        inside = f.between + [f.arm]
        lines.append("first bad %s: one of %s..%s (%d %ss; %d could not be measured)" % (
            kind, inside[0].short, f.arm.short, len(inside), kind, len(f.between)))
    else:
        c = outcome.found[0].arm
        lines.append("first bad %s: %s %s" % (kind, c.label, c.subject))
    return lines


def render(outcome: Outcome, arms: List[Arm], opts: Options, host: Optional[dict], cell_key: str) -> str:
    rule = opts.judge.rule
    lines = ["", "%-4s  %-16s  %-36s  %-7s  %-24s  %s" % ("step", "revision", "subject", "trials",
                                                          "ratio [lo, hi]", "verdict")]
    for s in outcome.steps:
        subject = s.arm.subject if len(s.arm.subject) <= 36 else s.arm.subject[:33] + "..."
        lines.append("%-4d  %-16s  %-36s  %-7s  %-24s  %s" % (
            s.number, s.arm.short, subject, s.trials, s.ratio.text() if s.ratio else "-", s.verdict))
    lines.append("")
    for a in outcome.skipped:
        lines.append("skipped %s %s: %s" % (a.short, a.subject, a.skipped))
    lines.extend(outcome.notes)
    cpu = ((host or {}).get("cpu") or {}).get("model", "this host")
    good, sc = arms[0], arms[0].sc
    cell = scenario_mod.Cell.from_key(cell_key)
    lines.append("scope: cell %s (input %dx%d, batch %d per device), %s on %s; good %s: %d trials; ratio: median "
                 "over median (a candidate's against the good end of its range, a check's as named), 95%% "
                 "bootstrap interval; alpha %g over the whole search" % (
                     cell_key, sc.input_size[0], sc.input_size[1], scenario_mod.batch_per_device(sc, cell),
                     rule.metric_text(), cpu, good.short, len(good.values), rule.alpha))
    measured = [a for a in arms if a.run_id]
    if opts.env_axis is None:
        lines.append("each revision's own store (detbench report --results DIR): " + ", ".join(
            "%s %s" % (a.short, a.run_id) for a in measured))
    else:
        lines.append("runs in the store (detbench report --run ID): " + ", ".join(
            "%s %s" % (a.short, a.run_id) for a in measured))
    lines.extend(answer(outcome, arms, opts))
    return "\n".join(lines) + "\n"


def bisect(opts: Options, out=None) -> Outcome:
    out = out or sys.stdout
    if opts.metric != opts.judge.rule.metric:
        opts.judge = replace(opts.judge, rule=replace(opts.judge.rule, metric=opts.metric))
    try:
        opts.judge.check()
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return Bisect(opts, out).run()


def one_cell_scenario(path: Path, cell: scenario_mod.Cell) -> Dict[str, Any]:
    """The user's scenario cut to `cell` and one repeat, with its data and weights paths made
    absolute (they are read from each revision's checkout): what each revision's detbench runs."""
    data, _ = yamlfile.load(path)
    doc = dict(data)
    matrix = dict(doc.get("matrix") or {})
    for axis in scenario_mod.MATRIX_AXES:
        if axis in matrix:
            matrix[axis] = [getattr(cell, axis)]
    doc["matrix"] = matrix
    doc.pop("exclude", None)
    doc["repeats"] = 1
    if cell.batch:
        doc["batch_sizes"] = [cell.batch]
    if isinstance(doc.get("data"), dict):
        doc["data"] = {k: os.path.abspath(v) if k in ("annotations", "images") and isinstance(v, str) else v
                       for k, v in doc["data"].items()}
    if isinstance(doc.get("weights"), dict):
        doc["weights"] = {k: os.path.abspath(v) if isinstance(v, str) else v for k, v in doc["weights"].items()}
    return doc


def _interrupt(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)
