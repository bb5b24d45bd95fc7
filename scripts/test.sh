#!/usr/bin/env bash
# Set up detbench with its test tools and run the whole test suite.
# Tests that need a service this machine lacks (Docker, Slurm, Chromium, built rival
# environments) skip with their reason; with DETBENCH_REQUIRE_SERVICES=1 they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# Two workers by default (DETBENCH_TEST_WORKERS; 0 runs in this process): each test file runs on one
# of them, and the files that use the shared Docker engine or Slurm cluster run in turn on one
# (tests/conftest.py). Much of the suite waits on subprocesses that start Python and torch.
exec python -m pytest -q -ra -n "${DETBENCH_TEST_WORKERS:-2}" --dist loadgroup "$@"
