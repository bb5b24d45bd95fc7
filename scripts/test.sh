#!/usr/bin/env bash
# Set up detbench with its test tools and run the whole test suite.
# Tests that need a service this machine lacks (Docker, Slurm, Chromium, built rival
# environments) skip with their reason; with DETBENCH_REQUIRE_SERVICES=1 they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# DETBENCH_TEST_WORKERS=N runs the suite on N pytest-xdist workers: each test file is one unit,
# and the files that use the shared Docker engine or Slurm cluster run in turn on one worker
# (tests/conftest.py). The tests marked `timing` (figures that hold only on an otherwise idle
# CPU, such as the calibration workload's 1% truths) run afterwards, alone, one at a time.
workers=${DETBENCH_TEST_WORKERS:-0}
if [ "$workers" = 0 ]; then
    exec python -m pytest -q -ra "$@"
fi
parallel=0
python -m pytest -q -ra -n "$workers" --dist loadgroup -m "not timing" "$@" || parallel=$?
alone=0
python -m pytest -q -ra -m timing "$@" || alone=$?
[ "$alone" = 5 ] && alone=0      # 5: the selection held no timing test
[ "$parallel" = 5 ] && parallel=0
echo "test.sh: workers' phase exit $parallel, timing phase exit $alone"
[ "$parallel" = 0 ] && [ "$alone" = 0 ]
