"""Launchers run one trial's argv through runner.py somewhere; listed explicitly."""
from harness.launchers import local, slurm

LAUNCHERS = {
    "local": local.LocalLauncher,
    "slurm": slurm.SlurmLauncher,
}
