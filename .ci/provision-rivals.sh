#!/usr/bin/env bash
# Build the pinned envs of the rival frameworks that run on this host (torchvision, mmdetection, effdet,
# detectron2), then the mmdetection and detectron2 images (which need the wheels the env builds compile).
# Idempotent: an env whose pins are unchanged is reused; mmcv 2.1.0 is compiled from its sdist
# (C++20) once and its wheel cached under ${DETBENCH_CACHE:-/var/cache/detbench}/wheels, keyed by
# its pins; detectron2, which has no sdist on PyPI, is compiled the same way from a `git archive` of
# its pinned commit, kept under $DETBENCH_CACHE/sources. That archive comes from
# DETBENCH_DETECTRON2_SOURCE (a tarball of the commit or a git clone holding it) where set, else from
# GitHub's archive of the commit (curl; the one download outside the package index). Needs detbench
# installed (pip install -e .) and the package index pip is set up for.
# Cold, on 2 cores: mmdetection's env about 11 min (mmcv's compile nearly all of it); torchvision's and
# effdet's about 10 s each, their files hardlinked from the uv cache scripts/env.sh filled
# (harness/launch/installer.py); plus detectron2's env and compile where its source is at hand;
# warm: seconds.
# Usage: provision-rivals.sh [envs|images]: the envs alone, the images alone (after the envs and
# provision-docker.sh), or both in turn (no argument).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:-all}
case $stage in
    envs|images|all) ;;
    *) echo "provision-rivals: unknown stage $stage (envs, images, or none for both)" >&2; exit 2 ;;
esac
export DETBENCH_CACHE="${DETBENCH_CACHE:-/var/cache/detbench}"
mkdir -p "$DETBENCH_CACHE/logs"

# detectron2's source: the pinned commit's archive, fetched once into the cache when nothing names one
d2_commit=$(python -c "from harness.frameworks.detectron2 import COMMIT; print(COMMIT)")
d2_archive="$DETBENCH_CACHE/sources/detectron2-$d2_commit.tar"
# a copy of the pinned archive beside the clone (../shared/sources/, as CI lays it out) is taken
# before the network: a machine that reaches no GitHub still builds and tests every rival
shared_sources="$(cd .. && pwd)/shared/sources"
if [ "$stage" != images ] && [ -z "${DETBENCH_DETECTRON2_SOURCE:-}" ] && [ ! -f "$d2_archive" ]; then
    for candidate in "$shared_sources/detectron2-$d2_commit.tar.gz" "$shared_sources/detectron2-$d2_commit.tar"; do
        if [ -f "$candidate" ]; then
            echo "provision-rivals: detectron2 $d2_commit from $candidate"
            export DETBENCH_DETECTRON2_SOURCE="$candidate"    # env build checks the commit ID in it
            break
        fi
    done
fi
if [ "$stage" != images ] && [ -z "${DETBENCH_DETECTRON2_SOURCE:-}" ] && [ ! -f "$d2_archive" ]; then
    mkdir -p "$DETBENCH_CACHE/sources"
    d2_download="$DETBENCH_CACHE/sources/detectron2-$d2_commit.download.tar.gz"
    if curl -fsSL --retry 3 -o "$d2_download" \
            "https://github.com/facebookresearch/detectron2/archive/$d2_commit.tar.gz"; then
        export DETBENCH_DETECTRON2_SOURCE="$d2_download"    # env build checks the commit ID in it
    else
        rm -f "$d2_download"
        echo "provision-rivals: GitHub's archive of detectron2 $d2_commit could not be fetched;" \
             "set DETBENCH_DETECTRON2_SOURCE to a tarball of it (git archive $d2_commit) or a clone holding it" >&2
    fi
fi

# torchvision's recipe (references/detection of its release tag): the env build keeps its scripts when an
# archive of the tag is named; fetched once into the cache where nothing names one. Without it (no network)
# the torchvision row runs detbench's replica, which the report names.
tv_tag=$(python -c "from harness.drivers.torchvision_reference import TAG; print(TAG)")
tv_archive="$DETBENCH_CACHE/sources/torchvision-$tv_tag.download.tar.gz"
if [ "$stage" != images ] && [ -z "${DETBENCH_TORCHVISION_SOURCE:-}" ]; then
    for candidate in "$shared_sources/vision-$tv_tag.tar.gz" "$shared_sources/torchvision-$tv_tag.tar.gz" "$tv_archive"; do
        if [ -f "$candidate" ]; then export DETBENCH_TORCHVISION_SOURCE="$candidate"; break; fi
    done
fi
if [ "$stage" != images ] && [ -z "${DETBENCH_TORCHVISION_SOURCE:-}" ]; then
    mkdir -p "$DETBENCH_CACHE/sources"
    tv_url=$(python -c "from harness.drivers.torchvision_reference import URL; print(URL)")
    if curl -fsSL --retry 3 -o "$tv_archive.part" "$tv_url"; then
        mv "$tv_archive.part" "$tv_archive"
        export DETBENCH_TORCHVISION_SOURCE="$tv_archive"    # env build checks its version and scripts
    else
        rm -f "$tv_archive.part"
        echo "provision-rivals: torchvision's $tv_tag archive could not be fetched; its row runs detbench's replica" >&2
    fi
fi

# a machine that reaches neither GitHub nor a named archive cannot build detectron2: say so and go on
# (its tests skip naming the same reason; nothing on the package index holds that source)
d2_missing=$(python -c "from harness.frameworks import FRAMEWORKS; from harness.launch import envs
spec = FRAMEWORKS['detectron2'].env; print('' if envs.is_built(spec) else envs.source_missing(spec) or '')")
frameworks="torchvision mmdetection effdet detectron2"
images="mmdetection detectron2"
if [ -n "$d2_missing" ]; then
    echo "provision-rivals: not building detectron2's env or image: $d2_missing" >&2
    frameworks="torchvision mmdetection effdet"
    images="mmdetection"
fi

build_env() {
    local fw=$1 start said ready old
    start=$(date +%s)
    if ! detbench env build "$fw" > "$DETBENCH_CACHE/logs/env-$fw.log" 2>&1; then
        tail -n 40 "$DETBENCH_CACHE/logs/env-$fw.log" >&2
        echo "provision-rivals: building the $fw env failed (log: $DETBENCH_CACHE/logs/env-$fw.log)" >&2
        return 1
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
}

[ "$stage" = images ] && frameworks=""
# mmdetection's env is the long one (mmcv's compile keeps both cores busy for minutes); the others
# take seconds, so they build beside it
mm_job=""
rest=""
for fw in $frameworks; do
    if [ "$fw" = mmdetection ]; then
        build_env mmdetection &
        mm_job=$!
    else
        rest="$rest $fw"
    fi
done
failed=0
for fw in $rest; do
    build_env "$fw" || failed=1
done
if [ -n "$mm_job" ]; then
    wait "$mm_job" || failed=1
fi
[ "$failed" = 0 ] || exit 1

rm -f "$DETBENCH_CACHE/sources/detectron2-$d2_commit.download.tar.gz"   # kept checked as $d2_archive

# mmdetection's and detectron2's images install the wheels their envs just compiled (mmcv, detectron2;
# served from the wheel cache), on the torchvision image .ci/provision-docker.sh built
if [ "$stage" = envs ]; then
    exit 0
fi
if docker info >/dev/null 2>&1; then
    for image in $images; do
        start=$(date +%s)
        detbench image build "$image" --quiet
        echo "provision-rivals: $image image ready in $(( $(date +%s) - start )) s"
    done
else
    echo "provision-rivals: no Docker engine answers; the mmdetection and detectron2 images are not built"
fi
