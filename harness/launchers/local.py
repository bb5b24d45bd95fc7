"""Run trials on this host, through runner.py, in the current Python environment."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the folder holding runner.py and harness/
RUNNER = ROOT / "runner.py"


def runner_argv(python, trial_dir, timeout_s, env_keys, argv):
    cmd = [python, str(RUNNER), "--trial-dir", str(trial_dir), "--timeout", "%g" % timeout_s]
    for key in sorted(env_keys):
        cmd += ["--env-key", key]
    return cmd + ["--"] + list(argv)


class LocalLauncher:
    name = "local"

    def __init__(self, python=sys.executable):
        self.python = python

    def prepare(self, scenario):
        """Nothing to build for the local backend."""

    def run(self, trial_dir, argv, env, timeout_s):
        """Run one trial to completion; runner.py writes everything into trial_dir."""
        trial_dir = Path(trial_dir)
        if trial_dir.exists():          # leftovers of an interrupted attempt
            shutil.rmtree(trial_dir)
        trial_dir.mkdir(parents=True)
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
        cmd = runner_argv(self.python, trial_dir, timeout_s, env, argv)
        with open(trial_dir / "runner.err", "wb") as err:
            proc = subprocess.Popen(cmd, env=full_env, cwd=str(ROOT), stdin=subprocess.DEVNULL,
                                    stdout=err, stderr=subprocess.STDOUT)
            try:
                return proc.wait()
            except BaseException:
                # interrupted: runner.py forwards the signal to the trial; wait for it briefly
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                raise

    def cleanup(self):
        """Nothing outlives a local trial: runner.py kills the trial's process group."""
