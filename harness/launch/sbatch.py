"""The `slurm:` section of a scenario and the sbatch script rendered for one trial.

Pure: no Slurm command runs here. Every value that reaches the script is either
validated against a narrow pattern (values on `#SBATCH` lines, which sbatch parses
itself) or passed through shlex.quote (everything the shell executes), so no text
from a scenario can change what the script does.
"""
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from pydantic import Field, field_validator

from harness.plan.strict import Strict

# one word of the kind Slurm uses for partitions, accounts, QOS names: no spaces, quotes or `$`
NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.,+-]*$"
# minutes | minutes:seconds | hours:minutes:seconds | days-hours[:minutes[:seconds]]
TIME_LIMIT = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}(:\d{1,2}){0,2})$")
# an extra sbatch option: --key or --key=value; values are sbatch-level words (constraints
# like "a100&ib", nodelists like "n[01-04]", QOS names, mail addresses), never shell text
EXTRA_OPTION = re.compile(r"^--([a-z][a-z0-9-]*)(=[A-Za-z0-9_.,:/@%+&|*!=\[\]()-]+)?$")
# options detbench sets itself from the matrix cell and the trial; a scenario may not override them
OWNED_OPTIONS = frozenset({
    "job-name", "comment", "nodes", "ntasks", "ntasks-per-node", "gpus", "gpus-per-node", "gres",
    "cpus-per-task", "time", "partition", "account", "output", "error", "chdir", "parsable",
    "wrap", "array", "export", "container-image", "container-mounts"})
MOUNT = re.compile(r"^/[A-Za-z0-9_./+@-]*:/[A-Za-z0-9_./+@-]*(:[a-z_+]+)?$")
IMAGE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./:@#+-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
JOB_PREFIX = "detbench-"
MASTER_PORT_BASE = 20000      # + job id mod 10000: two jobs sharing a node pick different ports


class SlurmOptions(Strict):
    """Scenario `slurm:` section; every field optional (platform defaults, then Slurm's own)."""
    partition: Optional[str] = Field(default=None, pattern=NAME)
    account: Optional[str] = Field(default=None, pattern=NAME)
    time_limit: Optional[str] = None          # Slurm --time; default: the scenario timeout + 5 min
    cpus_per_task: Optional[int] = Field(default=None, ge=1)   # one task (launcher) per node
    gpus_per_node: Optional[int] = Field(default=None, ge=0)   # default: the cell's gpus; 0: ask none
    container_image: Optional[str] = Field(default=None, pattern=IMAGE.pattern)
    container_mounts: List[str] = []          # SRC:DST[:FLAGS], absolute paths
    sbatch_options: List[str] = []            # extra `--key=value` lines, e.g. --exclusive, --qos=high
    # how long a queued trial waits while no node of its partition is up before the run stops
    # (the trial stays pending for --resume); a running trial whose node fails is failed at once
    node_down_wait_s: float = Field(default=120.0, ge=0)

    @field_validator("time_limit")
    @classmethod
    def _time(cls, value):
        if value is not None and not TIME_LIMIT.fullmatch(value):
            raise ValueError("not a Slurm time limit (MIN, MIN:SEC, H:MM:SS, D-H, D-H:MM or D-H:MM:SS)")
        return value

    @field_validator("container_mounts")
    @classmethod
    def _mounts(cls, values):
        for v in values:
            if not MOUNT.fullmatch(v):
                raise ValueError("mount %r is not SRC:DST[:FLAGS] with absolute paths" % v)
        return values

    @field_validator("sbatch_options")
    @classmethod
    def _extra(cls, values):
        for v in values:
            m = EXTRA_OPTION.fullmatch(v)
            if not m:
                raise ValueError("%r is not a --key or --key=value sbatch option "
                                 "(no spaces, quotes, `$` or backslashes)" % v)
            if m.group(1) in OWNED_OPTIONS:
                raise ValueError("--%s is set by detbench from the matrix; remove it" % m.group(1))
        return values


@dataclass(frozen=True)
class Job:
    """Everything one trial's sbatch script says."""
    name: str                       # detbench-<trial id>
    comment: str
    nodes: int
    gpus_per_node: int              # 0: no GPU request
    time_limit: str
    output: str                     # Slurm's own output (the job's stdout/stderr)
    workdir: str
    runner: Tuple[str, ...]         # python + runner.py, on every node
    trial_dir: str                  # node 0 writes here; node k writes trial_dir/node-k
    runner_args: Tuple[str, ...]    # --timeout ... -- ARGV (after --trial-dir)
    pythonpath: str
    env: Tuple[Tuple[str, str], ...] = ()
    partition: Optional[str] = None
    account: Optional[str] = None
    cpus_per_task: Optional[int] = None
    container_image: Optional[str] = None
    container_mounts: Tuple[str, ...] = ()
    sbatch_options: Tuple[str, ...] = ()
    master_port_base: int = MASTER_PORT_BASE
    header: Tuple[str, ...] = field(default=())   # comment lines (harness text, sanitized)


def default_time_limit(timeout_s):
    """Minutes for --time: the trial's own timeout plus 5 minutes to start and clean up."""
    return str(int(math.ceil(timeout_s / 60.0)) + 5)


# Runs once per node inside the job step: node 0 writes the trial folder itself, node k
# its own node-k subfolder; torchrun reads the node rank from PET_NODE_RANK. Fixed text:
# the trial folder, runner and command arrive as positional arguments, never spliced in.
NODE_SHIM = ('rank="${SLURM_NODEID:-0}"; dir="$1"; shift; '
             'if [ "$rank" != 0 ]; then dir="$dir/node-$rank"; fi; '
             'export PET_NODE_RANK="$rank"; py="$1"; runner="$2"; shift 2; '
             'exec "$py" "$runner" --trial-dir "$dir" "$@"')


SBATCH_WORD = re.compile(r"^--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:/@%+&|*!=\[\]()-]+)?$")


def _sbatch_line(option):
    # sbatch splits #SBATCH lines on blanks and reads quotes itself: every directive must be
    # one plain word (scenario values were validated against the same alphabet on load)
    if not SBATCH_WORD.fullmatch(option):
        raise ValueError("unsafe #SBATCH option %r (spaces, quotes, `$` or newlines)" % option)
    return "#SBATCH %s" % option


def job_name(trial_id):
    """The recognizable job name of a trial (orphans of a killed run are found by it)."""
    return JOB_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", trial_id)


def _comment(text):
    return "# " + re.sub(r"[^\x20-\x7e]", "?", text)


def render(job):
    """The sbatch script for one trial, as text."""
    q = shlex.quote
    lines = ["#!/bin/bash"]
    directives = ["--job-name=%s" % job.name, "--comment=%s" % job.comment,
                  "--nodes=%d" % job.nodes, "--ntasks-per-node=1"]
    if job.gpus_per_node:
        directives.append("--gpus-per-node=%d" % job.gpus_per_node)
    if job.cpus_per_task:
        directives.append("--cpus-per-task=%d" % job.cpus_per_task)
    directives.append("--time=%s" % job.time_limit)
    if job.partition:
        directives.append("--partition=%s" % job.partition)
    if job.account:
        directives.append("--account=%s" % job.account)
    directives += ["--output=%s" % job.output, "--open-mode=append"]
    directives += list(job.sbatch_options)
    lines += [_sbatch_line(d) for d in directives]
    lines += [_comment(h) for h in job.header]
    lines += [
        "set -euo pipefail",
        "cd %s" % q(job.workdir),
        "export PYTHONPATH=%s\"${PYTHONPATH:+:$PYTHONPATH}\"" % q(job.pythonpath),
    ]
    for key, value in job.env:
        if not ENV_NAME.fullmatch(key):
            raise ValueError("environment variable name %r is not NAME" % key)
        lines.append("export %s=%s" % (key, q(value)))
    lines += [
        # sed, unlike head, reads all of scontrol's output: an early-closed pipe would make
        # scontrol die of SIGPIPE, which pipefail turns into a failed job
        "# rendezvous: torchrun on every node meets on the first host of the allocation",
        "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | sed -n 1p)",
        "export MASTER_ADDR",
        "export MASTER_PORT=$((%d + SLURM_JOB_ID %% 10000))" % job.master_port_base,
        "export PET_MASTER_ADDR=\"$MASTER_ADDR\"",
        "export PET_MASTER_PORT=\"$MASTER_PORT\"",
    ]
    srun = ["srun", "--nodes=%d" % job.nodes, "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if job.container_image:
        srun.append("--container-image=%s" % job.container_image)
        if job.container_mounts:
            srun.append("--container-mounts=%s" % ",".join(job.container_mounts))
        srun.append("--container-workdir=%s" % job.workdir)
    args = list(job.runner_args)
    cut = args.index("--") if "--" in args else len(args)
    parts = [srun, ["bash", "-c", NODE_SHIM, "detbench-node", job.trial_dir],
             list(job.runner) + args[:cut], args[cut:]]
    lines.append(" \\\n    ".join(" ".join(q(a) for a in part) for part in parts if part))
    return "\n".join(lines) + "\n"
