"""The launch stage: where trials run. Every backend is a launcher (the interface is in
`base.py`), listed explicitly here under the name scenarios and `--backend` use."""
from harness.errors import UserError
from harness.launch import docker, local, slurm
from harness.plan import scenario as scenario_mod

LAUNCHERS = {
    "local": local.LocalLauncher,
    "docker": docker.DockerLauncher,
    "slurm": slurm.SlurmLauncher,
}


def launcher(name):
    """The launcher class of backend `name`; UserError naming the known ones otherwise."""
    if name not in LAUNCHERS:
        raise UserError("unknown backend %r (known: %s)" % (name, ", ".join(sorted(LAUNCHERS))))
    return LAUNCHERS[name]


def load_scenario(path):
    """A scenario file with its backend and every backend's section checked."""
    return scenario_mod.load(path, backends=LAUNCHERS)


def scenario_from_json(text):
    """A scenario as a run stored it (its sections typed by their launchers)."""
    return scenario_mod.model_for(LAUNCHERS).model_validate_json(text)


def loads_scenario_text(text, name="<scenario>"):
    """load_scenario for a scenario given as text (tests, generated scenarios)."""
    return scenario_mod.loads_text(text, name, backends=LAUNCHERS)
