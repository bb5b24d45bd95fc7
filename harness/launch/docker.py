"""Run each trial in a fresh container of its framework's pinned image (Docker SDK for Python).

The detbench checkout (runner.py and harness/) is mounted read-only at its own path and the
trial's folder read-write at its own path, so argv, PYTHONPATH and trial folder mean the same
inside and out; a COCO dataset and the scenario's weights files are mounted read-only the
same way. Nothing else of the host is
mounted, the container runs as the invoking user with every capability dropped and
no-new-privileges, and it has no network unless the scenario asks for one. GPUs are passed
through with a device request when the host has them.

Every container carries labels: ``detbench=1``, the owner (one id per launcher), the owner's
host and pid, and the trial. An interrupted run removes its containers; a reaper process
removes them if `detbench run` itself is killed; and every new docker run removes containers
whose owner is gone (orphans of a run killed while its reaper was down too).
"""
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict, Literal, Optional, Union

from pydantic import Field, field_validator

from harness import atomic, frameworks
from harness.errors import BackendDown, BackendLost, UserError
from harness.launch import engine, image_lock, images
from harness.plan import hostcpu, trialfiles
from harness.launch.docker_reaper import alive
from harness.launch.local import ROOT, runner_argv
from harness.vocab import names
from harness.plan.scenario import CocoData
from harness.plan.strict import Strict

RECORD = "container.json"
GRACE_S = 60.0           # runner.py enforces the timeout inside; the launcher kills after this much more
STOP_S = 10              # SIGTERM -> SIGKILL when an interrupted run stops its container
OWNER = engine.LABEL + ".owner"
HOST = engine.LABEL + ".host"
PID = engine.LABEL + ".pid"
TRIAL = engine.LABEL + ".trial"


SIZE = r"^[0-9]+[bkmgBKMG]?$"     # Docker's sizes: bytes, or a number with b, k, m or g


class DockerOptions(Strict):
    """Scenario `docker:` section."""
    images: Dict[str, str] = {}      # framework -> recipe under dockerfiles/ (default: its own)
    gpus: Union[int, str, None] = None   # "all", a count, or None: the cell's count if the host has GPUs
    shm_size: str = Field(default="8g", pattern=SIZE)    # /dev/shm for data-loader workers
    ipc_host: bool = False           # share the host's IPC namespace instead of a private /dev/shm
    memory: Optional[str] = Field(default=None, pattern=SIZE)   # memory limit of each container
    network: Literal["none", "bridge", "host"] = "none"

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value):
        if isinstance(value, str) and value != "all" or isinstance(value, int) and value < 0:
            raise ValueError("gpus is 'all' or a count of at least 0, got %r" % value)
        return value


def check(scenario, fail):
    """The `docker:` section's image choices name known frameworks and recipes."""
    opts = getattr(scenario, "docker", None)
    for name, recipe in (opts.images.items() if opts is not None else ()):
        if name not in frameworks.FRAMEWORKS:
            fail(("docker", "images", name), "unknown framework %r%s" % (name, names.hint(name)))
        if recipe not in images.RECIPES:
            fail(("docker", "images", name), "unknown image recipe %r (known: %s)"
                 % (recipe, ", ".join(sorted(images.RECIPES))))


def container_name(trial_id):
    return "detbench-" + trial_id


def recipe_for(scenario, framework):
    opts = getattr(scenario, "docker", None)
    chosen = (opts.images.get(framework) if opts is not None else None) or images.default_recipe(framework)
    if chosen is None:
        raise UserError("framework %s has no container image recipe" % framework)
    return chosen


def python_for(scenario, framework):
    return images.recipe(recipe_for(scenario, framework)).python


def owner_alive(labels):
    """False when the container's owner is a process of this host that is gone."""
    if labels.get(HOST) != socket.gethostname():
        return True            # another host's: not ours to judge
    try:
        pid = int(labels.get(PID, ""))
    except ValueError:
        return False
    return alive(pid) and _is_detbench(pid)


def _is_detbench(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return b"detbench" in cmdline or b"harness" in cmdline


def remove_containers(client, filters, keep=None):
    """Force-remove the containers matching label filters (but those `keep` says to keep); their names."""
    import docker
    gone = []
    for c in client.containers.list(all=True, filters={"label": filters}, ignore_removed=True):
        if keep is not None and keep(c):
            continue
        try:
            c.remove(force=True)
            gone.append(c.name)
        except docker.errors.NotFound:
            pass
    return gone


def remove_orphans(client, out=sys.stderr):
    """Remove detbench containers whose owning process on this host is gone."""
    removed = remove_containers(client, [engine.LABEL + "=1"], keep=lambda c: owner_alive(c.labels))
    if removed:
        out.write("detbench: removed %d container(s) left by an earlier run: %s\n"
                  % (len(removed), ", ".join(sorted(removed))))
    return removed


def pythons(scenario, framework_names):
    """Each image has its own interpreter."""
    return {name: python_for(scenario, name) for name in framework_names}


def preflight(scenario, cells=()):
    """UserError unless the engine answers and has the image of every framework the scenario runs."""
    client = engine.connect(timeout=60)
    try:
        for fw in sorted(set(scenario.matrix.framework)):
            images.resolve(client, recipe_for(scenario, fw))
    finally:
        client.close()


def dry_run(scenario, out):
    """Say which image each framework's trials would run in (from the record of the images built
    here; no engine needed)."""
    lock = image_lock.read_built()
    for fw in sorted(set(scenario.matrix.framework)):
        name = recipe_for(scenario, fw)
        entry = lock.get(name)
        out.write("# %s runs in image %s: %s\n" % (fw, name, "%s (%s)" % (entry["image"], entry["id"])
                                                    if entry else "not built (detbench image build %s)" % name))


class DockerLauncher:
    """Each trial runs in a fresh container of its framework's pinned image."""

    name = "docker"
    options = DockerOptions
    runs_here = True
    rendezvous = None
    check = staticmethod(check)
    pythons = staticmethod(pythons)
    preflight = staticmethod(preflight)

    @staticmethod
    def dry_run(scenario, trials, results_dir, out):
        dry_run(scenario, out)

    def __init__(self):
        self.client = None
        self.scenario = None
        self.owner = uuid.uuid4().hex[:12]
        self.images = {}        # recipe -> (tag, id)
        self.reaper = None

    # ------------------------------------------------------------ set-up and clean-up
    def prepare(self, scenario):
        self.client = engine.connect(timeout=None)
        self.scenario = scenario
        remove_orphans(self.client)
        for fw in sorted({c for c in scenario.matrix.framework}):
            name = recipe_for(scenario, fw)
            if name not in self.images:
                self.images[name] = images.resolve(self.client, name)
        self.reaper = subprocess.Popen(
            [sys.executable, "-m", "harness.launch.docker_reaper", str(os.getpid()), self.owner],
            cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def cleanup(self):
        """Remove every container this launcher started; stop the reaper."""
        if self.client is not None:
            try:
                remove_containers(self.client, [OWNER + "=" + self.owner])
            except Exception:     # the engine may be the thing that failed: the reaper waits for it
                sys.stderr.write("detbench: the Docker engine is not answering; this run's containers are "
                                 "removed once it is back\n")
                self.reaper = None
                return
        if self.reaper is not None and self.reaper.poll() is None:
            self.reaper.send_signal(signal.SIGTERM)
            try:
                self.reaper.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.reaper.kill()
        self.reaper = None

    # ------------------------------------------------------------ one trial
    def run(self, trial_dir, argv, env, timeout_s, cell, files=None):
        """Run one trial in a fresh container; return its exit code (0 when it may have succeeded)."""
        import docker
        import requests
        trial_dir = Path(trial_dir).absolute()
        if trial_dir.exists():
            shutil.rmtree(trial_dir)
        trial_dir.mkdir(parents=True)
        argv = trialfiles.prepare(trial_dir, argv, files)
        name = recipe_for(self.scenario, cell.framework)
        tag, image_id = self.images[name]
        facts = {"recipe": name, "image": tag, "image_id": image_id}
        try:
            container = self._start(trial_dir, tag, argv, env, timeout_s, cell)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self._check_engine()     # gone: BackendDown, the trial stays pending
            return self._fail(trial_dir, facts, "container could not start: %s" % _short(exc))
        facts["container_id"] = container.id
        try:
            try:
                result = container.wait(timeout=timeout_s + GRACE_S)
            except requests.exceptions.ReadTimeout:
                container.kill()
                return self._fail(trial_dir, facts, "container still running %.0f s after the trial's timeout; "
                                  "killed" % GRACE_S)
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                self._fail(trial_dir, facts, "the Docker engine went away while the trial ran (%s)" % _short(exc))
                raise BackendLost("the Docker engine went away during trial %s" % trial_dir.name) from None
            try:
                container.reload()
                state = container.attrs.get("State", {})
                (trial_dir / trialfiles.RUNNER_ERR).write_bytes(container.logs(stdout=True, stderr=True))
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                self._fail(trial_dir, facts, "the Docker engine went away as the trial ended (%s)" % _short(exc))
                raise BackendLost("the Docker engine went away during trial %s" % trial_dir.name) from None
            facts.update(exit_code=result.get("StatusCode"), oom_killed=bool(state.get("OOMKilled")))
            if state.get("OOMKilled"):
                opts = getattr(self.scenario, "docker", None)
                limit = opts.memory if opts is not None else None
                return self._fail(trial_dir, facts, "killed for memory: the container hit its memory limit"
                                  + (" (%s)" % limit if limit else ""))
            if result.get("StatusCode") not in (0, None):
                return self._fail(trial_dir, facts, None, code=result.get("StatusCode"))
            self._note(trial_dir, facts, None)
            return 0
        except BaseException:
            _stop(container)
            raise
        finally:
            try:
                container.remove(force=True)
            except Exception:
                pass     # the reaper or the next run's orphan sweep removes it

    def _start(self, trial_dir, tag, argv, env, timeout_s, cell):
        import docker
        opts = getattr(self.scenario, "docker", None)
        mounts = [docker.types.Mount(str(ROOT), str(ROOT), type="bind", read_only=True),
                  docker.types.Mount(str(trial_dir), str(trial_dir), type="bind")]
        for path in _data_paths(self.scenario):
            mounts.append(docker.types.Mount(path, path, type="bind", read_only=True))
        requests_ = []
        gpus = opts.gpus if opts is not None else None
        if gpus is None and hostcpu.host_has_gpus():
            gpus = cell.gpus
        if gpus:
            count = -1 if gpus == "all" else int(gpus)
            requests_.append(docker.types.DeviceRequest(count=count, capabilities=[["gpu"]]))
        full_env = dict(env, PYTHONPATH=str(ROOT), HOME="/tmp", USER=getpass.getuser())
        python = images.recipe(recipe_for(self.scenario, cell.framework)).python
        command = runner_argv(python, trial_dir, timeout_s, env, argv)
        name = container_name(trial_dir.name)
        remove_containers(self.client, ["%s=%s" % (TRIAL, trial_dir.name)])   # a killed run's leftover
        return self.client.containers.run(
            tag, command=command, detach=True, name=name, working_dir=str(ROOT), environment=full_env,
            user="%d:%d" % (os.getuid(), os.getgid()), mounts=mounts, device_requests=requests_ or None,
            init=True, cap_drop=["ALL"], security_opt=["no-new-privileges"], privileged=False,
            network_mode=opts.network if opts is not None else "none",
            ipc_mode="host" if opts is not None and opts.ipc_host else None,
            shm_size=None if opts is not None and opts.ipc_host else (opts.shm_size if opts else "8g"),
            mem_limit=opts.memory if opts is not None else None,
            labels={engine.LABEL: "1", OWNER: self.owner, HOST: socket.gethostname(),
                    PID: str(os.getpid()), TRIAL: trial_dir.name})

    def _check_engine(self):
        try:
            self.client.ping()
        except Exception as exc:
            raise BackendDown("cannot reach the Docker engine (%s)" % _short(exc)) from None

    def _fail(self, trial_dir, facts, why, code=None):
        self._note(trial_dir, facts, why)
        return code if code not in (None, 0) else 1

    @staticmethod
    def _note(trial_dir, facts, why):
        """container.json always; trial.json's "container" (and "error" when `why`) too."""
        from harness.plan.trialfiles import read_trial_json
        atomic.write_json(trial_dir / RECORD, dict(facts, error=why), indent=1, sort_keys=True)
        record = read_trial_json(str(trial_dir))
        if record is None:
            if why is None:
                return
            record = {"schema": 1, "exit_code": None, "signal": None}
        if why:
            record["error"] = why + ("; runner: " + record["error"] if record.get("error") else "")
        record["container"] = facts
        atomic.write_json(trial_dir / trialfiles.RECORD, record, indent=1, sort_keys=True)


def _data_paths(scenario):
    paths = {os.path.abspath(path) for path in scenario.weights.values()}   # files, bound one by one
    if isinstance(scenario.data, CocoData):
        paths |= {os.path.abspath(scenario.data.images), os.path.dirname(os.path.abspath(scenario.data.annotations))}
    return sorted(paths)


def _stop(container):
    try:
        container.stop(timeout=STOP_S)
    except Exception:
        pass


def _short(exc):
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:200]

