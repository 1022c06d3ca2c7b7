#!/usr/bin/env bash
# `make features`: the feature library against a lab of its own (its own ports and state),
# through `powercut run`, then the HTML report checked in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
pc=.venv/bin/powercut
tmp=$(mktemp -d -t powercut-features.XXXXXX)
state="$tmp/lab"
inv="$tmp/lab.yaml"
export POWERCUT_STATE_DIR="$tmp/state"
cleanup() {
  $pc lab down --state-dir "$state" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
$pc lab up --workloads --base-port "${POWERCUT_FEATURES_PORT:-22000}" --state-dir "$state" \
  --inventory-out "$inv"
out="reports/features-$(date +%Y%m%d-%H%M%S)"
$pc run --inventory "$inv" --out "$out" "$@"
POWERCUT_REPORT_DIR="$out" .venv/bin/python -m pytest tests/report -q -p no:cacheprovider
