#!/usr/bin/env bash
# `make wheel-test`: what a user gets from `pip install powercut`. Builds the wheel, installs
# it into a fresh virtualenv outside the repository (its dependencies from a local wheelhouse
# cached by Python version and lock file: no network after the first time), then, from an
# empty directory and with only that virtualenv's `powercut`, runs one built-in scenario and
# a user's feature directory (written by `powercut init`) against a lab, and checks the
# report (tests/wheel).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=.venv/bin/python
cache="${POWERCUT_CACHE:-$HOME/.cache/powercut}"
key=$( { "$py" -c 'import sys; print(sys.version)'; cat requirements/lock.txt; } | sha256sum | cut -c1-16)
wheelhouse="$cache/wheelhouse/$key"
if [ ! -f "$wheelhouse/.complete" ]; then
  echo "wheel-test: filling the wheelhouse $wheelhouse (once per lock file)"
  rm -rf "$wheelhouse" && mkdir -p "$wheelhouse"
  "$py" -m pip wheel -q --disable-pip-version-check -r requirements/lock.txt -w "$wheelhouse"
  touch "$wheelhouse/.complete"
fi
tmp=$(mktemp -d -t powercut-wheel.XXXXXX)
state="$tmp/lab"
inv="$tmp/lab.yaml"
export POWERCUT_STATE_DIR="$tmp/state"   # journals and locks of its own
cleanup() {
  .venv/bin/powercut lab down --state-dir "$state" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
start=$(date +%s)
# Built from a copy of the checkout (tracked and new files): setuptools writes build/ and
# powercut.egg-info beside the sources, and an egg-info in the working directory changes
# which distribution Python finds first.
mkdir -p "$tmp/src"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$tmp/src"
(cd "$tmp/src" && "$repo/$py" -m pip wheel -q --disable-pip-version-check --no-deps \
  --no-build-isolation -w "$tmp/dist" .)
wheel=$(ls "$tmp"/dist/powercut-*.whl)
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check --no-index \
  --find-links "$wheelhouse" "$wheel"
echo "wheel-test: $(basename "$wheel") installed into $tmp/venv in $(( $(date +%s) - start ))s"
# The lab comes from this checkout (a consumer of the library, like any cluster).
.venv/bin/powercut lab up --workloads --base-port "${POWERCUT_WHEEL_PORT:-29000}" \
  --state-dir "$state" --inventory-out "$inv" >/dev/null
user="$tmp/user"     # an empty directory: no checkout, no features, no steps
mkdir -p "$user"
cd "$user"
pc="$tmp/venv/bin/powercut"
"$pc" init project
# One built-in scenario and the project's own feature (-k: parts of their test names).
builtin="${POWERCUT_WHEEL_BUILTIN:-controlplane_node_loses_power}"
mine="stateful_pod_loses_power_and_comes_back"
status=0
"$pc" run -i "$inv" --features project/features --out "$user/out" --fail-on-skip \
  --progress plain -- -k "$builtin or $mine" || status=$?
cd "$repo"
if [ "$status" -ne 0 ]; then
  echo "wheel-test: powercut run exited $status; the end of its log:"
  tail -40 "$user/out/run.log" || true
  exit "$status"
fi
POWERCUT_WHEEL_OUT="$user/out" POWERCUT_WHEEL_VENV="$tmp/venv" POWERCUT_WHEEL_BUILTIN="$builtin" \
  "$py" -m pytest tests/wheel -q -p no:cacheprovider
echo "wheel-test: passed in $(( $(date +%s) - start ))s"
