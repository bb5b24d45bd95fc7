#!/usr/bin/env bash
# Lint and type-check: `ruff check .` (rules in ruff.toml) and `mypy` (the typed core, mypy.ini).
#
#   bash .ci/lint.sh            # both; exit 1 on any finding
#   bash .ci/lint.sh ruff|mypy  # one of them
#
# The tools are the exact versions of .ci/requirements-lint.txt, in a venv of their own kept outside
# the clone under ${DETBENCH_CACHE:-~/.cache/detbench}/venvs/lint-<hash of that file and the
# interpreter>, made once and reused (as scripts/env.sh keeps detbench's). DETBENCH_PYTHON picks the
# interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${DETBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detbench}
python=${DETBENCH_PYTHON:-python3}
reqs=.ci/requirements-lint.txt
key=$( (cat "$reqs"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
venv="$cache/venvs/lint-$key"
if [ ! -f "$venv/.complete" ]; then
    echo "lint: creating the lint environment $venv (first time only)" >&2
    rm -rf "$venv" && mkdir -p "$cache/venvs"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q -r "$reqs"
    touch "$venv/.complete"
fi

# the typed core is also kept in ruff's format (the rest keeps its own hanging style)
FORMATTED=(harness/measure harness/results harness/report harness/plan)

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(ruff mypy)
failed=()
for tool in "${tools[@]}"; do
    case "$tool" in
        ruff) "$venv/bin/ruff" check . || failed+=("ruff check . (rules: ruff.toml)")
              "$venv/bin/ruff" format --check "${FORMATTED[@]}" \
                  || failed+=("ruff format --check ${FORMATTED[*]} (run ruff format on them)") ;;
        mypy) "$venv/bin/mypy" || failed+=("mypy (modules and strictness: mypy.ini)") ;;
        *) echo "lint: no tool '$tool' (ruff or mypy)" >&2; exit 2 ;;
    esac
done
if [ ${#failed[@]} -gt 0 ]; then
    for what in "${failed[@]}"; do
        echo "lint: FAILED: $what; its findings are listed above" >&2
    done
    exit 1
fi
echo "lint: ${tools[*]}: no findings"
