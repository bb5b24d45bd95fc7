"""Launchers run one trial's argv through runner.py somewhere; listed explicitly."""
from harness.launch import docker, local, slurm

LAUNCHERS = {
    "local": local.LocalLauncher,
    "docker": docker.DockerLauncher,
    "slurm": slurm.SlurmLauncher,
}
