"""The connection to the Docker engine, through the Docker SDK for Python.

Everything that talks to Docker (image builds, the docker launcher, its reaper) gets
its client here, so "Docker is not reachable" is one clear line wherever it happens.
"""
import os

from harness.errors import UserError

LABEL = "detbench"                 # every container detbench starts carries LABEL=1
HOW_TO_START = ("start it with `sudo systemctl start docker` (or `sudo dockerd &`) and make sure "
                "you may use its socket")


def where():
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def connect(timeout=120):
    """A docker.DockerClient that answered a ping, or UserError saying how to get one."""
    try:
        import docker
    except ImportError:
        raise UserError("backend docker needs the Docker SDK for Python: pip install docker") from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:   # the SDK raises DockerException, requests' and socket errors alike
        raise UserError("cannot reach the Docker engine at %s (%s); %s"
                        % (where(), _first_line(exc), HOW_TO_START)) from None
    return client


def local_image(client, ref):
    """The engine's image of `ref` (a tag or an ID), or None when it has none."""
    import docker
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def available():
    """True when an engine answers; for tests and `doctor`-style checks."""
    try:
        connect(timeout=10).close()
    except UserError:
        return False
    return True


def _first_line(exc):
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:200]
