# Source this file: it makes (once) and activates the Python environment detbench runs in.
#
# The environment lives outside the clone, in a folder keyed by a hash of pyproject.toml,
# so a fresh clone on the same machine reuses it; only the editable link is redone.
# DETBENCH_CACHE picks the cache folder; DETBENCH_EXTRAS the extras (default trainer,dev).
set -e
_here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_cache=${DETBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detbench}
_extras=${DETBENCH_EXTRAS:-trainer,dev}
_python=${DETBENCH_PYTHON:-python3}
_key=$( (cat "$_here/pyproject.toml"; echo "$_extras"; "$_python" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
DETBENCH_VENV="$_cache/venvs/detbench-$_key"
if [ ! -f "$DETBENCH_VENV/.complete" ]; then
    echo "detbench: creating Python environment $DETBENCH_VENV (first time only)" >&2
    rm -rf "$DETBENCH_VENV"
    mkdir -p "$_cache/venvs"
    "$_python" -m venv "$DETBENCH_VENV"
    "$DETBENCH_VENV/bin/python" -m pip install -q --upgrade pip
    "$DETBENCH_VENV/bin/python" -m pip install -q -e "$_here[$_extras]"
    touch "$DETBENCH_VENV/.complete"
else
    # same pins: only point the editable install at this clone
    "$DETBENCH_VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$_here" >/dev/null
fi
export DETBENCH_VENV
export PATH="$DETBENCH_VENV/bin:$PATH"
unset _here _cache _extras _python _key
set +e
