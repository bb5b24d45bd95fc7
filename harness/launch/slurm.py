"""Run each trial as a Slurm job: sbatch one script, follow it, read its end state.

The trial folder lives in the results folder, which must be on a filesystem every node
sees; runner.py writes log.txt, log.times and trial.json there exactly as it does for a
local trial. When Slurm ends a job badly (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED,
FAILED, ...) the launcher records Slurm's reason in trial.json's "error", which is the
failure reason ingest reports. Slurm commands run as argv lists, never through a shell.
"""
import contextlib
import getpass
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import atomic
from harness.plan import platforms
from harness.errors import BackendDown, BackendLost, UserError
from harness.launch import local, sbatch
from harness.plan import trialfiles
from harness.launch.local import ROOT, RUNNER

RENDEZVOUS = "static"      # see TrialContext.rendezvous: node ranks follow SLURM_NODEID
SCRIPT = "job.sbatch"
OUTPUT = trialfiles.RUNNER_ERR      # Slurm's output for the job: what ingest shows when runner.py wrote nothing
RECORD = "slurm.json"
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}
# end states that make a trial fail whatever runner.py recorded, with what they mean
BAD_ENDS = {
    "TIMEOUT": "hit its Slurm time limit",
    "OUT_OF_MEMORY": "ran out of memory",
    "NODE_FAIL": "lost a node",
    "CANCELLED": "was cancelled",
    "PREEMPTED": "was preempted",
    "BOOT_FAIL": "could not boot its nodes",
    "DEADLINE": "missed its deadline",
    "NOT_SUBMITTED": "was refused by sbatch",
}


def python_for(scenario):
    """The interpreter that starts runner.py and the trial on the nodes."""
    opts = getattr(scenario, "slurm", None)
    return "python3" if opts is not None and opts.container_image else sys.executable


def job_for(scenario, cell, trial_dir, argv, python=None):
    """The sbatch.Job of one trial of `cell` whose folder is `trial_dir`."""
    opts = getattr(scenario, "slurm", None) or sbatch.SlurmOptions()
    trial_dir = Path(trial_dir).absolute()
    defaults = _platform_defaults(cell.platform)
    python = python or python_for(scenario)
    mounts = list(opts.container_mounts)
    if opts.container_image:   # the harness (runner.py) read-only and the results folder, at their own paths
        mounts = ["%s:%s:ro" % (ROOT, ROOT), "%s:%s" % (trial_dir.parents[1], trial_dir.parents[1])] + mounts
    runner_args = ["--timeout", "%g" % scenario.timeout_s]
    for key in sorted(scenario.env):
        runner_args += ["--env-key", key]
    trial_id = trial_dir.name
    return sbatch.Job(
        name=sbatch.job_name(trial_id),
        comment="detbench:%s:%s" % (trial_id, cell.key.replace("/", ":")),
        nodes=cell.nodes,
        gpus_per_node=cell.gpus if opts.gpus_per_node is None else opts.gpus_per_node,
        time_limit=opts.time_limit or sbatch.default_time_limit(scenario.timeout_s),
        output=str(trial_dir / OUTPUT), workdir=str(ROOT),
        runner=(python, str(RUNNER)), trial_dir=str(trial_dir),
        runner_args=tuple(runner_args + ["--"] + list(argv)),
        pythonpath=str(ROOT), env=tuple(sorted(scenario.env.items())),
        partition=opts.partition or defaults.partition, account=opts.account or defaults.account,
        cpus_per_task=opts.cpus_per_task, container_image=opts.container_image,
        container_mounts=tuple(mounts), sbatch_options=tuple(opts.sbatch_options),
        header=("detbench trial %s: cell %s" % (trial_id, cell.key),))


def script_for(scenario, cell, trial_dir, argv, python=None):
    try:
        return sbatch.render(job_for(scenario, cell, trial_dir, argv, python))
    except ValueError as exc:   # a value that cannot go into a script safely
        raise UserError("cannot write the sbatch script of %s: %s" % (Path(trial_dir).name, exc)) from None


def _platform_defaults(name):
    try:
        found = getattr(platforms.load(name), "slurm", None)
    except UserError:
        found = None
    return found or platforms.SlurmDefaults()


# --- talking to Slurm ------------------------------------------------------------------

def available():
    return all(shutil.which(c) for c in ("sbatch", "squeue", "scancel", "scontrol"))


def _slurm(args, check=True, own_session=False):
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                              start_new_session=own_session)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if check:
            raise UserError("%s: %s" % (args[0], exc)) from None
        return None
    if check and proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError("%s failed: %s" % (" ".join(args[:2]), said[-1] if said else "exit %d" % proc.returncode))
    return proc


def submit(script_path):
    """sbatch the script; return the job id. sbatch runs in its own session, so a Ctrl-C at the
    terminal does not cut it short (see interrupts_held)."""
    proc = _slurm(["sbatch", "--parsable", str(script_path)], own_session=True)
    return proc.stdout.strip().split(";")[0]


@contextlib.contextmanager
def interrupts_held():
    """SIGINT and SIGTERM received inside the block act only once it has ended, as they would
    have. An sbatch killed mid-submission can leave a job that slurmctld queues after the
    launcher last looked for it; held, the submission ends and its job id is known to cleanup."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = {s: signal.signal(s, lambda signum, _frame: held.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])


def queue_state(job_id):
    """The job's state while squeue still lists it, else None."""
    proc = _slurm(["squeue", "--noheader", "--jobs=%s" % job_id, "--format=%T"], check=False)
    if proc is None or proc.returncode != 0:
        return None
    states = proc.stdout.split()
    return states[0] if states else None


def parse_sacct(text, job_id):
    """(state, exit code) of the job's own line in `sacct -n -P -X -o JobID,State,ExitCode`."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0] == job_id:
            return parts[1].split()[0] if parts[1].split() else "UNKNOWN", parts[2]
    return None


def parse_scontrol(text):
    """(state, exit code, reason) from one `scontrol show job -o` line."""
    fields = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    if "JobState" not in fields:
        return None
    return fields["JobState"], fields.get("ExitCode", ""), fields.get("Reason", "")


def end_state(job_id):
    """(state, exit code, reason) of a finished job: accounting first, then slurmctld's memory."""
    proc = _slurm(["sacct", "--noheader", "--parsable2", "--allocations", "--jobs=%s" % job_id,
                   "--format=JobID,State,ExitCode"], check=False)
    if proc is not None and proc.returncode == 0:
        found = parse_sacct(proc.stdout, job_id)
        if found:
            return found[0], found[1], ""
    proc = _slurm(["scontrol", "show", "job", "-o", job_id], check=False)
    if proc is not None and proc.returncode == 0:
        found = parse_scontrol(proc.stdout)
        if found:
            return found
    return "UNKNOWN", "", "neither sacct nor scontrol knows the job any more"


def job_info(job_id):
    """The job's `scontrol show job -o` fields (JobState, Restarts, Partition, NodeList, ...), or {}."""
    proc = _slurm(["scontrol", "show", "job", "-o", job_id], check=False)
    if proc is None or proc.returncode != 0:
        return {}
    fields = {}
    for word in proc.stdout.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


USABLE = ("idle", "mixed", "allocated", "completing", "planned")


def node_states(partition):
    """{node: state} of a partition's nodes as sinfo prints them ('idle', 'down*', 'drained', ...)."""
    proc = _slurm(["sinfo", "--noheader", "--Node", "--partition=%s" % partition, "--format=%N|%T"],
                  check=False)
    if proc is None or proc.returncode != 0:
        return {}
    out = {}
    for line in proc.stdout.split():
        node, sep, state = line.partition("|")
        if sep:
            out[node] = state
    return out


def usable(state):
    """A node that can run a job: up and answering (sinfo marks a node not responding with `*`)."""
    return "*" not in state and state.rstrip("~#!%$@^-+").lower() in USABLE


def down_nodes(partition, need=1):
    """'node: state, ...' when fewer than `need` nodes of the partition are usable (a job of
    that many nodes cannot start), else None."""
    states = node_states(partition)
    if not states or sum(1 for s in states.values() if usable(s)) >= need:
        return None
    return ", ".join("%s %s" % (n, s) for n, s in sorted(states.items()))


def nodes_needed(info):
    """The node count of a job from its `scontrol show job` fields (NumNodes=2 or 2-2); 1 if unknown."""
    m = re.match(r"\d+", info.get("NumNodes", ""))
    return max(1, int(m.group())) if m else 1


def jobs_named(prefix=sbatch.JOB_PREFIX, user=None):
    """[(job id, name, state)] of this user's queued or running jobs whose name starts with prefix."""
    proc = _slurm(["squeue", "--noheader", "--user=%s" % (user or getpass.getuser()),
                   "--format=%i|%j|%T"], check=False)
    if proc is None or proc.returncode != 0:
        return []
    out = []
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[1].startswith(prefix):
            out.append(tuple(parts))
    return out


def cancel(job_ids, wait_s=30.0, poll_s=0.2):
    """scancel the jobs and wait until squeue lists none of them; return those still listed."""
    job_ids = [j for j in job_ids if j]
    if not job_ids:
        return []
    _slurm(["scancel"] + job_ids, check=False)
    deadline = time.monotonic() + wait_s
    left = job_ids
    while left and time.monotonic() < deadline:
        left = [j for j in left if queue_state(j) is not None]
        if left:
            time.sleep(poll_s)
    return left


# --- end states into trial records ---------------------------------------------------------

def failure(state, exit_code, reason, runner_record):
    """The failure reason Slurm's end state implies for the trial, or None to keep runner.py's own."""
    head = "slurm job %s" % (BAD_ENDS.get(state) or "ended %s" % state)
    detail = ", ".join(p for p in (("exit %s" % exit_code) if exit_code not in ("", "0:0") else "",
                                   reason if reason not in ("", "None") else "") if p)
    head += " (%s)" % detail if detail else ""
    if state in BAD_ENDS:
        return head
    if state == "COMPLETED":
        return None if runner_record is not None else head + ": runner.py wrote no trial.json"
    if state == "FAILED" and runner_record is not None and (
            runner_record.get("exit_code") not in (0, None) or runner_record.get("error")):
        return None     # runner.py saw the trial fail and says why
    return head


# srun's line for a task that ended badly: "srun: error: NODE: task N: Exited with exit code 3"
SRUN_TASK_ERROR = re.compile(r"^srun: error: (\S+): task (\d+): (.+)$")


def node_failure(trial_dir):
    """What the job's output (OUTPUT) says failed on its nodes: srun's first line naming a node
    whose task ended badly, and runner.py's own first complaint. A multi-node trial needs it:
    node 0's record only says it was stopped, and a node whose trial folder could not be
    written says why nowhere else. '' when the output says neither."""
    try:
        with open(os.path.join(str(trial_dir), OUTPUT), errors="replace") as f:
            lines = [line.strip() for line in f]
    except OSError:
        return ""
    found = []
    task = next((m for m in map(SRUN_TASK_ERROR.match, lines) if m), None)
    if task:
        found.append("%s (task %s): %s" % task.groups())
    said = next((line for line in lines if line.startswith("runner.py: ")), None)
    if said:
        found.append(said)
    return "; ".join(part[:300] for part in found)


def record_end(trial_dir, job_id, state, exit_code, reason):
    """Write slurm.json and, when Slurm's end state fails the trial, trial.json's error.

    Returns True when the job completed and the trial may have succeeded."""
    from harness.plan.trialfiles import read_trial_json
    trial_dir = str(trial_dir)
    atomic.write_json(os.path.join(trial_dir, RECORD),
                      {"job_id": job_id, "state": state, "exit_code": exit_code, "reason": reason},
                      indent=1, sort_keys=True)
    record = read_trial_json(trial_dir)
    why = failure(state, exit_code, reason, record)
    if why is None:
        return state == "COMPLETED"
    if record is None:
        record = {"schema": 1, "exit_code": None, "signal": None}
    elif record.get("error"):
        why += "; runner: " + record["error"]
    on_nodes = node_failure(trial_dir)
    if on_nodes:
        why += "; " + on_nodes
    record["error"] = why
    record["slurm"] = {"job_id": job_id, "state": state, "exit_code": exit_code}
    atomic.write_json(os.path.join(trial_dir, trialfiles.RECORD), record, indent=1, sort_keys=True)
    return False


def pythons(scenario, framework_names):
    """In a container image, its python3; else each framework's pinned env, as on this host
    (the nodes share the checkout and the cache)."""
    return local.pythons(scenario, framework_names, python_for(scenario))


class SlurmLauncher:
    """Each trial is one sbatch job on the scenario's partition, one task per node."""

    name = "slurm"
    options = sbatch.SlurmOptions
    runs_here = False          # trials run on the nodes: their trial.json has the host facts
    rendezvous = RENDEZVOUS
    pythons = staticmethod(pythons)

    @staticmethod
    def check(scenario, fail):
        """SlurmOptions checks its own fields."""

    @staticmethod
    def preflight(scenario, cells):
        """Nothing to check before the run: prepare() finds out whether Slurm answers."""

    @staticmethod
    def dry_run(scenario, trials, results_dir, out):
        dry_run(scenario, trials, results_dir, "DRYRUN", out)

    def __init__(self, poll_s=1.0):
        self.poll_s = poll_s
        self.scenario = None
        self.active = set()
        # the job name of the trial being submitted: an interrupt while sbatch runs (or just
        # after it returns) leaves a queued job whose id never reached `active`
        self.submitting = None

    def prepare(self, scenario):
        if not available():
            raise UserError("backend slurm needs sbatch, squeue, scancel and scontrol on PATH")
        self.scenario = scenario
        left = jobs_named()
        if left:
            sys.stderr.write("detbench: note: %d detbench job(s) of an earlier run still in squeue (%s); "
                             "`scancel --name=NAME` ends one\n" % (
                                 len(left), ", ".join("%s %s" % (j, n) for j, n, _ in left[:5])))

    def run(self, trial_dir, argv, env, timeout_s, cell, files=None):
        """Submit one trial, wait for its job to end, record Slurm's verdict; return 0 if it completed."""
        trial_dir = Path(trial_dir)
        # a job of the same trial left by a killed run would write into the same folder
        cancel([j for j, n, _ in jobs_named(sbatch.job_name(trial_dir.name)) if n == sbatch.job_name(trial_dir.name)])
        if trial_dir.exists():
            shutil.rmtree(trial_dir)
        trial_dir.mkdir(parents=True)
        argv = trialfiles.prepare(trial_dir, argv, files)
        scenario = self.scenario.model_copy(update={"env": dict(env), "timeout_s": timeout_s})
        script = trial_dir / SCRIPT
        script.write_text(script_for(scenario, cell, trial_dir, argv), encoding="utf-8")
        self.submitting = sbatch.job_name(trial_dir.name)
        with interrupts_held():   # an interrupt acts once the job id is in `active`
            try:
                job_id = submit(script)
            except UserError as exc:
                self.submitting = None
                record_end(trial_dir, "", "NOT_SUBMITTED", "", str(exc))
                return 1
            self.active.add(job_id)
            self.submitting = None
        try:
            self._follow(job_id, trial_dir, scenario)
        except BaseException:
            # a job squeue still lists after the wait stays ours: cleanup cancels it again
            self.active.discard(job_id)
            self.active.update(cancel([job_id]))
            raise
        self.active.discard(job_id)
        state, exit_code, reason = end_state(job_id)
        return 0 if record_end(trial_dir, job_id, state, exit_code, reason) else 1

    def _follow(self, job_id, trial_dir, scenario):
        """Wait while the job is queued or running. A job Slurm requeued after losing its node
        fails the trial (BackendLost); a job queued while its partition has fewer nodes up than
        it needs stops the run after node_down_wait_s (BackendDown). Either way the job is cancelled."""
        opts = getattr(scenario, "slurm", None) or sbatch.SlurmOptions()
        down_since = None
        while True:
            state = queue_state(job_id)
            if state not in ACTIVE:
                return
            info = job_info(job_id)
            need = nodes_needed(info)
            if info.get("Restarts", "0") not in ("0", ""):
                down = down_nodes(info["Partition"], need) if info.get("Partition") else None
                why = "requeued by Slurm after its node failed" + ("; %s" % down if down else "")
                cancel([job_id])
                if not (trial_dir / trialfiles.LOG).exists():   # it never started: nothing to fail
                    raise BackendDown("slurm job %s %s before the trial started" % (job_id, why))
                record_end(trial_dir, job_id, "NODE_FAIL", "", why + "; cancelled by detbench")
                raise BackendLost("slurm job %s of trial %s lost its node (%s)" % (job_id, trial_dir.name, why))
            down = down_nodes(info["Partition"], need) if state == "PENDING" and info.get("Partition") else None
            if down is None:
                down_since = None
            elif down_since is None:
                down_since = time.monotonic()
            elif time.monotonic() - down_since >= opts.node_down_wait_s:
                cancel([job_id])
                which = "no node" if need == 1 else "fewer than %d nodes" % need
                raise BackendDown("%s of slurm partition %s %s up (%s) for %.0f s; cancelled job %s"
                                  % (which, info["Partition"], "is" if need == 1 else "are", down,
                                     opts.node_down_wait_s, job_id))
            time.sleep(self.poll_s)

    def cleanup(self):
        """scancel every job this launcher submitted that has not ended, and the job of a
        submission an interrupt cut short; wait until squeue drops them."""
        if self.submitting:
            self.active.update(j for j, n, _ in jobs_named(self.submitting) if n == self.submitting)
            self.submitting = None
        left = cancel(sorted(self.active))
        self.active = set(left)
        if left:
            sys.stderr.write("detbench: jobs %s still in squeue after scancel\n" % ", ".join(left))


def dry_run(scenario, trials, results_dir, run_id, out):
    """Write the sbatch script of every trial (as `detbench run --dry-run --backend slurm` shows them)."""
    from harness.plan.scenario import Cell
    for t in trials:
        cell = t.cell if isinstance(t.cell, Cell) else Cell.from_key(t.cell)
        trial_dir = Path(results_dir).absolute() / "trials" / ("%s-%04d" % (run_id, t.seq))
        out.write("# ---- trial %d: %s repeat %d -> %s\n" % (t.seq, cell.key, t.repeat, trial_dir / SCRIPT))
        out.write(script_for(scenario, cell, trial_dir, trialfiles.fill(t.argv, trial_dir)))
