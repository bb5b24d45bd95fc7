#!/usr/bin/env bash
# Set up detbench with its test tools and run the whole test suite.
# Tests that need a service this machine lacks (Docker, Slurm, Chromium, built rival
# environments) skip with their reason; with DETBENCH_REQUIRE_SERVICES=1 they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
exec python -m pytest -q -ra "$@"
