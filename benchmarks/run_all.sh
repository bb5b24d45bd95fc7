#!/usr/bin/env bash
# Run every harness benchmark once, in order; each prints its figures and PASS/FAIL.
# Usage: bash benchmarks/run_all.sh [--quick]   (from anywhere; about 5 minutes in full)
set -u
cd "$(dirname "$0")/.."
quick=""
mb=200
if [ "${1:-}" = "--quick" ]; then quick="--quick"; mb=5; fi
status=0
python -m benchmarks.accuracy $quick || status=1
python -m benchmarks.overhead $quick || status=1
python benchmarks/scrape_speed.py --mb "$mb" || status=1
python -m benchmarks.scale $quick || status=1
if docker info >/dev/null 2>&1; then
    python -m benchmarks.docker_overhead $quick || status=1
else
    echo "docker_overhead: skipped (no Docker engine answers)"
fi
exit $status
