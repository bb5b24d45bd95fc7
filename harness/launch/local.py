"""Run trials on this host, through runner.py, in the current Python environment."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness import frameworks
from harness.errors import ResultsWriteError
from harness.launch import envs
from harness.plan import trialfiles

ROOT = Path(__file__).resolve().parents[2]   # the folder holding runner.py and harness/
RUNNER = ROOT / "runner.py"


def runner_argv(python, trial_dir, timeout_s, env_keys, argv):
    cmd = [python, str(RUNNER), "--trial-dir", str(trial_dir), "--timeout", "%g" % timeout_s]
    for key in sorted(env_keys):
        cmd += ["--env-key", key]
    return cmd + ["--"] + list(argv)


def framework_python(name, default=sys.executable, require=False):
    """The python a trial of framework `name` uses here: its pinned env's when it has one."""
    fw = frameworks.FRAMEWORKS[name]
    if fw.env is None or default != sys.executable:
        return default
    return envs.python_for(fw.env, require=require)


def pythons(scenario, framework_names, default=sys.executable):
    return {name: framework_python(name, default) for name in framework_names}


def check_envs(cells):
    """UserError naming the first framework whose pinned env is not built yet."""
    for name in sorted({c.framework for c in cells}):
        framework_python(name, require=True)


class LocalLauncher:
    """Trials run on this host, in the framework's pinned environment where it has one."""

    name = "local"
    options = None             # no scenario section
    runs_here = True
    rendezvous = None

    @staticmethod
    def check(scenario, fail):
        """The local backend takes no options."""

    @staticmethod
    def pythons(scenario, framework_names):
        return pythons(scenario, framework_names)

    @staticmethod
    def dry_run(scenario, trials, results_dir, out):
        """The commands run.py prints are all there is."""

    @staticmethod
    def preflight(scenario, cells):
        check_envs(cells)

    def __init__(self, python=sys.executable, code_root=None):
        self.python = python
        # the checkout whose modules a trial runs: first on its PYTHONPATH and its working directory
        # (this one by default; `detbench bisect` runs another revision's worktree)
        self.code_root = Path(code_root) if code_root is not None else ROOT

    def prepare(self, scenario):
        """Nothing to build for the local backend."""

    def run(self, trial_dir, argv, env, timeout_s, cell=None, files=None):
        """Run one trial to completion; runner.py writes everything into trial_dir (`files`:
        the adapter's derived files, written there first)."""
        trial_dir = Path(trial_dir)
        try:
            if trial_dir.exists():          # leftovers of an interrupted attempt
                shutil.rmtree(trial_dir)
            trial_dir.mkdir(parents=True)
        except OSError as exc:
            raise ResultsWriteError("%s: cannot write the trial folder: %s" % (trial_dir, exc.strerror)) from None
        argv = trialfiles.prepare(trial_dir, argv, files)
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(self.code_root)] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
        cmd = runner_argv(self.python, trial_dir, timeout_s, env, argv)
        with open(trial_dir / trialfiles.RUNNER_ERR, "wb") as err:
            proc = subprocess.Popen(cmd, env=full_env, cwd=str(self.code_root), stdin=subprocess.DEVNULL,
                                    stdout=err, stderr=subprocess.STDOUT)
            try:
                code = proc.wait()
                if not (trial_dir / trialfiles.RECORD).exists():
                    end_orphans(trial_dir, code)
                return code
            except BaseException:
                # interrupted: runner.py forwards the signal to the trial; wait for it briefly
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                raise

    def cleanup(self):
        """Nothing outlives a local trial: runner.py kills the trial's process group (or, when
        runner.py itself was killed, end_orphans does)."""


def end_orphans(trial_dir, code):
    """runner.py ended without its record (killed, or no room to write): kill the trial's
    process group it left behind (trial.pid) and say in runner.err how runner.py ended."""
    import signal
    try:
        pgid = int((trial_dir / trialfiles.PIDFILE).read_text().split()[0])
        os.killpg(pgid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass   # no pid written, or the group is gone already
    how = ("killed by signal %d" % -code) if code < 0 else "exit code %d" % code
    try:
        with open(trial_dir / trialfiles.RUNNER_ERR, "a") as f:
            f.write("runner.py ended without writing trial.json (%s)\n" % how)
    except OSError:
        pass
