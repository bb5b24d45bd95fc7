"""What every launcher answers: the one interface run.py drives a backend through.

A launcher is a class listed in `harness.launch.LAUNCHERS` under its backend's name. The
class itself answers what a run needs before anything is written (its scenario section,
the checks of that section, the interpreters, the dry run, the preflight); an instance
runs the trials of one run, one at a time, between `prepare` and `cleanup`. Nothing
outside this stage branches on a backend's name: it asks the launcher.
"""
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence

Fail = Callable[[tuple, str], None]     # fail(where, message): a UserError at that scenario field's line


class Launcher(Protocol):
    name: str                  # the backend's name in a scenario's `backend:` and `--backend`
    options: Optional[type]    # the Strict model of the scenario section named after the backend, or None
    runs_here: bool            # trials run on this host, so its facts and fingerprint are the run's
    rendezvous: Optional[str]  # how multi-node trials find each other (TrialContext.rendezvous)

    @staticmethod
    def check(scenario, fail: Fail) -> None:
        """Cross-field checks of the backend's section that its model cannot do alone."""

    @staticmethod
    def pythons(scenario, frameworks: Iterable[str]) -> Dict[str, str]:
        """The interpreter each framework's trials start runner.py and the trial with."""

    @staticmethod
    def dry_run(scenario, trials: Sequence, results_dir, out) -> None:
        """What `detbench run --dry-run` adds for this backend (scripts, images); may write nothing."""

    @staticmethod
    def preflight(scenario, cells: Sequence) -> None:
        """UserError, before anything is written, when the cells cannot run on this backend."""

    def prepare(self, scenario) -> None:
        """Set up for the trials of one run (connect, resolve images, start helpers)."""

    def run(self, trial_dir, argv: List[str], env: Dict[str, str], timeout_s: float, cell,
            files: Optional[Dict[str, str]] = None) -> int:
        """Run one trial to its end; runner.py writes its folder. BackendLost when the engine went
        away mid-trial, BackendDown when the trial could not start at all."""

    def cleanup(self) -> None:
        """End whatever of this run still runs (containers, jobs); called however the run ends."""


METHODS = ("check", "pythons", "dry_run", "preflight", "prepare", "run", "cleanup")
ATTRIBUTES = ("name", "options", "runs_here", "rendezvous")
