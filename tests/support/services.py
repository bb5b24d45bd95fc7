"""Tests that need what this host may lack (a rival's pinned env, a Docker engine, a built image)
skip saying what is missing and how to get it, or fail where CI requires every service
(DETBENCH_REQUIRE_SERVICES=1: .ci/run provisions them all)."""
import os

import pytest

REQUIRE_SERVICES = os.environ.get("DETBENCH_REQUIRE_SERVICES") == "1"


def need_service(available, reason):
    """Skip with a reason when a service is missing, or fail when CI requires it."""
    if available:
        return
    if REQUIRE_SERVICES:
        pytest.fail("DETBENCH_REQUIRE_SERVICES=1 but %s" % reason)
    pytest.skip(reason)


def need_env(framework):
    """The framework's pinned env must be built here (`detbench env build NAME`, .ci/provision-rivals.sh)."""
    from harness.frameworks import FRAMEWORKS
    from harness.launch import envs

    spec = FRAMEWORKS[framework].env
    missing = _source_missing(framework)
    if missing:
        # CI provisions every rival it names (.ci/provision-rivals.sh takes the source from ../shared/sources/
        # or the network): a rival whose source cannot be had fails there, and skips elsewhere
        need_service(False, "the %s env cannot be built here: %s" % (framework, missing))
    need_service(envs.is_built(spec),
                 "the %s env is not built (run `detbench env build %s`)" % (framework, framework))


def need_docker():
    """A client of the Docker engine here (closed by the caller), else skip or fail naming where it looked."""
    from harness.launch import engine

    need_service(engine.available(), "no Docker engine answers at %s (run .ci/provision-docker.sh)" % engine.where())
    return engine.connect()


def need_image(client, framework):
    """The framework's image must be built and current on that engine (`detbench image build NAME`)."""
    from harness.errors import UserError
    from harness.launch import images

    try:
        images.resolve(client, framework)
    except UserError as exc:
        missing = _source_missing(framework)
        if missing:
            need_service(False, "the %s image cannot be built here: %s" % (framework, missing))
        need_service(False, str(exc))


def _source_missing(framework):
    from harness.frameworks import FRAMEWORKS
    from harness.launch import envs

    spec = FRAMEWORKS[framework].env
    return None if spec is None or envs.is_built(spec) else envs.source_missing(spec)
