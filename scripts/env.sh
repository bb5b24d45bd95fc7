# Source this file: it makes (once) and activates the Python environment detbench runs in.
#
# The environment lives outside the clone, in a folder keyed by a hash of pyproject.toml,
# the extras and the interpreter, so a fresh clone on the same machine reuses it and only
# the editable link is redone. DETBENCH_CACHE picks the cache folder (default
# ~/.cache/detbench), DETBENCH_EXTRAS the extras (default trainer,dev) and
# DETBENCH_PYTHON the interpreter (default python3).
_detbench_env() {
    local here cache extras python key venv
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || return 1
    cache=${DETBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/detbench}
    extras=${DETBENCH_EXTRAS:-trainer,dev}
    python=${DETBENCH_PYTHON:-python3}
    key=$( (cat "$here/pyproject.toml"; echo "$extras"; "$python" -c 'import sys; print(sys.version)') \
        | sha256sum | cut -c1-12) || return 1
    venv="$cache/venvs/detbench-$key"
    if [ ! -f "$venv/.complete" ]; then
        echo "detbench: creating the Python environment $venv (first time only)" >&2
        rm -rf "$venv" && mkdir -p "$cache/venvs" || return 1
        "$python" -m venv "$venv" || return 1
        # uv first (pinned in pyproject.toml): it fills the venv and keeps the unpacked wheels in
        # $cache/uv, from which the rival envs are then hardlinked (harness/launch/installer.py)
        uv_pin=$(grep -o '"uv==[^"]*"' "$here/pyproject.toml" | tr -d '"')
        "$venv/bin/python" -m pip install -q --upgrade pip "setuptools>=77" wheel $uv_pin || return 1
        "$venv/bin/python" "$here/harness/launch/installer.py" --python "$venv/bin/python" --cache "$cache" \
            -- -e "$here[$extras]" || return 1
        touch "$venv/.complete"
    else
        # same pins: only point the editable install at this clone (setuptools' notices about its
        # editable mode are silenced; pip's own errors still reach the terminal)
        PYTHONWARNINGS=ignore "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$here" \
            >/dev/null || return 1
    fi
    export DETBENCH_VENV="$venv"
    export PATH="$venv/bin:$PATH"
}
_detbench_env || { echo "detbench: could not set up the Python environment" >&2; return 1 2>/dev/null || exit 1; }
unset -f _detbench_env
