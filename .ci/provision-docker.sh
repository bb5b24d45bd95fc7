#!/usr/bin/env bash
# Bring up a Docker engine and the images the docker-backend tests run.
#
#   bash .ci/provision-docker.sh     # as root; idempotent
#
# Installs Debian's docker.io and debootstrap, starts dockerd when no engine answers, makes
# the local base image (debootstrap bookworm minbase with python3, then docker import; the
# root filesystem tarball is cached under $DETBENCH_CACHE/images) and builds the calibration
# and bundled-trainer images and those of torchvision and effdet with `detbench image build`
# (their wheels are cached under $DETBENCH_CACHE/wheels; images stay in the engine between runs
# on the same machine). The mmdetection image is built by provision-rivals.sh, once its env has compiled
# the mmcv wheel that image installs.
set -euo pipefail

log() { echo "provision-docker: $*"; }

if [ "$(id -u)" != 0 ]; then
    echo "provision-docker: must run as root" >&2
    exit 1
fi

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
    log "installing docker.io and debootstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io debootstrap tini >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    log "starting dockerd"
    mkdir -p /var/log
    nohup dockerd >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { tail -20 /var/log/dockerd.log >&2; exit 1; }
fi
log "engine $(docker version --format '{{.Server.Version}}') up"

detbench image base
detbench image build calibrate --quiet
detbench image build detbench-trainer --quiet
# the rivals that run on the CPU: torchvision's image is the trainer's (the same closure), effdet's adds
# the effdet library's packages on it
detbench image build torchvision --quiet
detbench image build effdet --quiet
log "images ready"
