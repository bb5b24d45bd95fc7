#!/usr/bin/env bash
# Build the pinned envs of the rival frameworks that run on this host (torchvision, mmdetection, effdet),
# then the mmdetection image (which needs the mmcv wheel the env build compiles).
# Idempotent: an env whose pins are unchanged is reused; mmcv 2.1.0 is compiled from its sdist
# (C++20) once and its wheel cached under ${DETBENCH_CACHE:-/var/cache/detbench}/wheels, keyed by
# its pins. Needs detbench installed (pip install -e .) and the package index pip is set up for.
# Cold: ~10-15 min of which mmcv's compile is most (2 cores); warm: seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export DETBENCH_CACHE="${DETBENCH_CACHE:-/var/cache/detbench}"
mkdir -p "$DETBENCH_CACHE/logs"
for fw in torchvision mmdetection effdet; do
    start=$(date +%s)
    if ! detbench env build "$fw" > "$DETBENCH_CACHE/logs/env-$fw.log" 2>&1; then
        tail -n 40 "$DETBENCH_CACHE/logs/env-$fw.log" >&2
        echo "provision-rivals: building the $fw env failed (log: $DETBENCH_CACHE/logs/env-$fw.log)" >&2
        exit 1
    fi
    said=$(tail -n 1 "$DETBENCH_CACHE/logs/env-$fw.log")
    echo "provision-rivals: $fw env ready in $(( $(date +%s) - start )) s: $said"
    # envs of this framework's earlier pins are never used again: free their disk (several GB each)
    ready=${said##*: }
    for old in "$DETBENCH_CACHE/envs/$fw"-*; do
        if [ -d "$old" ] && [ "$old" != "$ready" ] && [ -d "$ready" ]; then
            echo "provision-rivals: removing $old (earlier pins)"
            rm -rf "$old"
        fi
    done
done

# mmdetection's image installs the mmcv wheel its env just compiled (served from the wheel cache), on
# the torchvision image .ci/provision-docker.sh built
if docker info >/dev/null 2>&1; then
    start=$(date +%s)
    detbench image build mmdetection --quiet
    echo "provision-rivals: mmdetection image ready in $(( $(date +%s) - start )) s"
else
    echo "provision-rivals: no Docker engine answers; the mmdetection image is not built"
fi
