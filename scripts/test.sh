#!/usr/bin/env bash
# Set up detbench with its test tools and run the whole test suite.
# Tests that need a service this machine lacks (Docker, Slurm, Chromium, built rival
# environments) skip with their reason; with DETBENCH_REQUIRE_SERVICES=1 they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# The suite runs on DETBENCH_TEST_WORKERS pytest-xdist workers (default: 2 where there are 2 or
# more cores; 0: one process): each test file is one unit, and the files that use the shared Docker
# engine or Slurm cluster are one unit, handed out first and run in turn on one worker
# (tests/conftest.py). The tests marked `timing` (figures that hold only on an otherwise idle
# CPU, such as the calibration workload's 1% truths) run afterwards, alone, one at a time.
cores=$(nproc 2>/dev/null || echo 1)
workers=${DETBENCH_TEST_WORKERS:-$([ "$cores" -ge 2 ] && echo 2 || echo 0)}
if [ "$workers" = 0 ]; then
    exec python -m pytest -q -ra "$@"
fi
parallel=0
# the slowest tests are listed at the end: what to look at when the suite grows too long
python -m pytest -q -ra -n "$workers" --dist loadgroup -m "not timing" --durations=25 "$@" || parallel=$?
alone=0
python -m pytest -q -ra -m timing "$@" || alone=$?
[ "$alone" = 5 ] && alone=0      # 5: the selection held no timing test
[ "$parallel" = 5 ] && parallel=0
echo "test.sh: workers' phase exit $parallel, timing phase exit $alone"
[ "$parallel" = 0 ] && [ "$alone" = 0 ]
