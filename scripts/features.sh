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
status=0
# The lab is built to run every scenario: one that skips (nothing fits it) is a failure.
$pc run --inventory "$inv" --out "$out" --fail-on-skip "$@" || status=$?
if [ "$status" -ne 0 ]; then
  # Keep what the lab saw, and show the lab's side of the story in the CI log.
  mkdir -p "$out" && cp -r "$state/logs" "$out/lab-logs" 2>/dev/null || true
  echo "features failed (exit $status); lab logs kept in $out/lab-logs"
  echo "the end of pytest's output ($out/run.log):"
  tail -60 "$out/run.log" 2>/dev/null || true
  $pc lab status --state-dir "$state" || true
  grep -h "nudging\|power o\|ERROR" "$state/logs/supervisor.log" 2>/dev/null | tail -40 || true
  exit "$status"
fi
# Extra arguments (-k ...) select some scenarios: then the report holds only those.
POWERCUT_REPORT_DIR="$out" POWERCUT_FEATURES_SELECTED="$*" \
  .venv/bin/python -m pytest tests/report/test_feature_report.py -q -p no:cacheprovider
