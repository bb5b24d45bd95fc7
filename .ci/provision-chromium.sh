#!/usr/bin/env bash
# Install Debian's headless-capable chromium for the HTML report test (tests/report/test_report_html_browser.py).
# Idempotent: does nothing when a chromium binary is already on PATH. Runs `apt-get update` at most once.
set -euo pipefail

for bin in chromium chromium-browser; do
    if command -v "$bin" >/dev/null 2>&1; then
        echo "provision-chromium: $("$bin" --version 2>/dev/null || echo "$bin") already installed"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "provision-chromium: no apt-get here; install chromium by hand" >&2
    exit 1
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
if ! $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; then
    # a stale package list: refresh once and try again
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
echo "provision-chromium: installed $(chromium --version)"
