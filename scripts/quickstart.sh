#!/usr/bin/env bash
# Set up detbench on this machine and run the CPU quickstart: the bundled trainer's
# RetinaNet and Faster R-CNN, fp32 and bf16, on the local backend; then print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
results=${DETBENCH_RESULTS:-results}
detbench run --scenario scenarios/quickstart.yaml --results "$results"
detbench report --platform local --results "$results"
