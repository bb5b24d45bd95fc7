"""Launchers run one trial's argv through runner.py somewhere; listed explicitly."""
from harness.launchers import local

LAUNCHERS = {
    "local": local.LocalLauncher,
}
