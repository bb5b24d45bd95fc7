"""The bisect itself: trials of the revisions into the results store, narrowed by binary search.

Each revision measured gets a run of its own in the store (scenario `NAME@REVISION`, one cell),
so `detbench report --run ID` shows it; `bisects/<id>.json` in the results folder names the runs
of one bisect, which `--resume` reads back: their finished trials count as evidence already
taken, a trial left pending or running by an interruption runs first, and the search goes on.
The first step measures the endpoints against each other; each later step measures the middle
candidate in rounds of one trial each of the good endpoint, the candidate and the bad endpoint,
in an order drawn per round, so that drift over the bisect lands on all three alike.
"""
import json
import random
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from harness import atomic, frameworks, launch
from harness.bisect import decide, envaxis
from harness.bisect import git as gitmod
from harness.errors import UserError
from harness.launch import hostcpu
from harness.plan import platforms
from harness.plan import scenario as scenario_mod
from harness.results import baseline, compare
from harness.results.store import Store, new_run_id

STATE_DIR = "bisects"


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
    run_id: Optional[str] = None
    values: List[float] = field(default_factory=list)


@dataclass
class Step:
    number: int
    arm: Arm
    trials: str
    ratio: Optional[decide.Ratio]
    verdict: str


@dataclass
class Outcome:
    culprit: Optional[Arm]               # None: no regression between the endpoints
    steps: List[Step]
    effect: Optional[decide.Ratio]
    bisect_id: str


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

    # ------------------------------------------------------------ revisions
    def arms(self) -> List[Arm]:
        opts = self.opts
        if opts.env_axis:
            if opts.good or opts.bad:
                raise UserError("give either --good and --bad (commits) or --env-axis (environments), not both")
            root = gitmod.toplevel(opts.repo) if opts.repo else envaxis.ROOT
            self.code_root = Path(root)
            package, versions = envaxis.parse_axis(opts.env_axis)
            sc = self.scenario_at(self.code_root, "this checkout")
            fw = frameworks.FRAMEWORKS[self.pick_cell([(sc, "this checkout")]).framework]
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
        self.worktrees = gitmod.Worktrees(self.repo)
        arms = [Arm(r.sha, r.short, r.subject) for r in revs]
        for arm, flag in ((arms[0], "--good"), (arms[-1], "--bad")):
            self.checkout(arm, "%s %s" % (flag, arm.short))
        self.pick_cell([(arms[0].sc, "--good %s" % arms[0].short), (arms[-1].sc, "--bad %s" % arms[-1].short)])
        for arm in (arms[0], arms[-1]):     # their environments, before anything is stored
            arm.python = self.python(arm)
        return arms

    def checkout(self, arm: Arm, where: str):
        if arm.sc is not None:
            return
        assert self.worktrees is not None
        arm.code_root = self.worktrees.get(arm.label)
        arm.sc = self.scenario_at(arm.code_root, where)
        if self.cell is not None:
            self.runnable(arm.sc, where)

    def python(self, arm: Arm) -> str:
        """The python of a commit's trials: a framework with its own pinned env runs in it (as
        `detbench run` runs it); one that runs in detbench's environment, in the commit's."""
        assert self.cell is not None and arm.code_root is not None
        name = self.cell.framework
        if frameworks.FRAMEWORKS[name].env is not None:
            local = launch.launcher("local")
            local.preflight(arm.sc, [self.cell])
            return local.pythons(arm.sc, [name])[name]
        return envaxis.revision_python(arm.code_root, arm.short)

    def scenario_relative(self, root: Path) -> Path:
        path = Path(self.opts.scenario)
        if path.is_absolute():
            try:
                return path.resolve().relative_to(Path(root).resolve())
            except ValueError:
                raise UserError("%s: the scenario must lie inside the repository (%s), where each revision "
                                "has its own copy" % (path, root)) from None
        return path

    def scenario_at(self, code_root: Path, where: str):
        base = self.repo if self.opts.env_axis is None else code_root
        rel = self.scenario_relative(base)
        path = Path(code_root) / rel
        if not path.is_file():
            raise UserError("%s: no such scenario at %s" % (rel, where))
        self.scenario_rel = str(rel)
        return launch.load_scenario(path)

    def runnable(self, sc, where) -> List[str]:
        planned = hostcpu.exclude_unmeasurable(scenario_mod.plan(sc))
        keys = [p.cell.key for p in planned if p.excluded is None]
        if self.cell is not None and self.cell.key not in keys:
            raise UserError("%s: cell %s is not a measurable cell of the scenario at %s (its cells: %s)"
                            % (self.scenario_rel, self.cell.key, where, ", ".join(keys) or "none"))
        return keys

    def pick_cell(self, scenarios) -> scenario_mod.Cell:
        sets = [(self.runnable(sc, where), where) for sc, where in scenarios]
        if self.opts.cell:
            for keys, where in sets:
                if self.opts.cell not in keys:
                    raise UserError("%s: cell %s is not a measurable cell of the scenario at %s (its cells: %s)"
                                    % (self.scenario_rel, self.opts.cell, where, ", ".join(keys) or "none"))
            key = self.opts.cell
        else:
            common = [k for k in sets[0][0] if all(k in keys for keys, _ in sets)]
            if len(common) != 1:
                raise UserError("%s: --cell KEY names the cell to bisect (cells at both ends: %s)"
                                % (self.scenario_rel, ", ".join(common) or "none"))
            key = common[0]
        self.cell = scenario_mod.Cell.from_key(key)
        return self.cell

    # ------------------------------------------------------------ store and state
    def key(self, arms: List[Arm]) -> Dict[str, Any]:
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
                if arm.run_id:
                    arm.values = [self.value(t) for t in self.store.read_trials(arm.run_id) if t.done]
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
        """One more trial of `arm`, stored, its figure appended to arm.values."""
        from harness.measure import ingest

        assert self.store is not None and self.cell is not None
        sc, cell = arm.sc, self.cell
        if arm.python is None:
            arm.python = self.python(arm)
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
            raise UserError("%s %s: trial %s failed: %s; fix it, or bisect a range where the cell runs "
                            "(finished trials are kept: --resume)" % (
                                "revision" if arm.axis_env is None else "environment", arm.short, trial_id,
                                stored.reason or "no reason given"))
        arm.values.append(self.value(stored))

    def round(self, arms: List[Arm]):
        order = list(arms)
        self.rng.shuffle(order)
        for arm in order:
            self.measure(arm)

    # ------------------------------------------------------------ the search
    def search(self, arms: List[Arm]) -> Outcome:
        judge = self.opts.judge
        good, bad = arms[0], arms[-1]
        steps = []
        while True:      # step 1: do the endpoints differ?
            final = min(len(good.values), len(bad.values)) >= judge.max_trials
            verdict, r = decide.endpoints(judge, good.values, bad.values, final=final)
            if verdict != decide.UNDECIDED:
                break
            self.round([good, bad])
        steps.append(Step(1, bad, "%d/%d" % (len(good.values), len(bad.values)), r,
                          verdict + (" (parity)" if verdict == decide.NONE and r and r.parity else "")))
        self.say(steps[-1])
        if verdict == decide.NONE:
            return Outcome(None, steps, r, self.state["id"])
        lo, hi = 0, len(arms) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            cand = arms[mid]
            if self.opts.env_axis is None:
                self.checkout(cand, "revision %s" % cand.short)
            while True:
                final = len(cand.values) >= judge.max_trials
                verdict, r, forced = decide.candidate(judge, good.values, cand.values, bad.values, final=final)
                if verdict != decide.UNDECIDED:
                    break
                self.round([good, cand, bad])
            text = verdict + (" (at the cap, nearer the %s end)" % verdict if forced else "")
            steps.append(Step(len(steps) + 1, cand, "%d" % len(cand.values), r, text))
            self.say(steps[-1])
            if self.worktrees is not None:
                self.worktrees.drop(cand.label)
            if verdict == decide.BAD:
                hi = mid
            else:
                lo = mid
        culprit = arms[hi]
        return Outcome(culprit, steps, decide.ratio(good.values, culprit.values), self.state["id"])

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
            self.out.write("bisect %s: %d revisions, cell %s, %s, input %dx%d, batch %d per device; "
                           "results in %s\n" % (self.state["id"], len(arms), self.cell.key,
                                                self.opts.judge.rule.metric_text(), sc.input_size[0],
                                                sc.input_size[1], scenario_mod.batch_per_device(sc, self.cell),
                                                self.opts.results_dir))
            outcome = self.search(arms)
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


def _interrupt(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


def render(outcome: Outcome, arms: List[Arm], opts: Options, host: Optional[dict], cell_key: str) -> str:
    rule = opts.judge.rule
    lines = ["", "%-4s  %-16s  %-36s  %-7s  %-24s  %s" % ("step", "revision", "subject", "trials",
                                                          "ratio vs good [lo, hi]", "verdict")]
    for s in outcome.steps:
        subject = s.arm.subject if len(s.arm.subject) <= 36 else s.arm.subject[:33] + "..."
        lines.append("%-4d  %-16s  %-36s  %-7s  %-24s  %s" % (
            s.number, s.arm.short, subject, s.trials, s.ratio.text() if s.ratio else "-", s.verdict))
    cpu = ((host or {}).get("cpu") or {}).get("model", "this host")
    good, sc = arms[0], arms[0].sc
    cell = scenario_mod.Cell.from_key(cell_key)
    scope = ("cell %s (input %dx%d, batch %d per device), %s on %s; good %s: %d trials; ratio: median "
             "over median, 95%% bootstrap interval" % (
                 cell_key, sc.input_size[0], sc.input_size[1], scenario_mod.batch_per_device(sc, cell),
                 rule.metric_text(), cpu, good.short, len(good.values)))
    lines.append("")
    if outcome.culprit is None:
        r = outcome.effect
        lines.append("no regression between these revisions: bad/good %s%s" % (
            r.text() if r else "-", " (parity)" if r and r.parity else ""))
    else:
        c, r = outcome.culprit, outcome.effect
        kind = "commit" if opts.env_axis is None else "environment"
        lines.append("first bad %s: %s %s" % (kind, c.label, c.subject))
        lines.append("effect: %s ratio %s vs good, over %d trials" % (
            rule.metric_text(), r.text() if r else "-", len(c.values)))
    lines.append("scope: " + scope)
    measured = [a for a in arms if a.run_id]
    lines.append("runs in the store (detbench report --run ID): " + ", ".join(
        "%s %s" % (a.short, a.run_id) for a in measured))
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
