#!/usr/bin/env bash
# `make wheel-test`: what a user gets from `pip install powercut`. Builds the wheel, installs
# it into a fresh virtualenv outside the repository (its dependencies from a local wheelhouse
# cached by Python version and lock file: no network after the first time), then, from an
# empty directory and with only that virtualenv's `powercut`, runs one built-in scenario and
# a user's feature (written by `powercut init`) against a lab, from a project directory with
# its own pyproject.toml pytest settings and the features in another tree; then the user's
# feature once more with plain pytest under a pytest.ini; and checks the reports (tests/wheel).
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
  "$repo/.venv/bin/powercut" lab down --state-dir "$state" >/dev/null 2>&1 || true
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
# A user's project as it often is: its own pytest configuration, the inventory beside it, the
# features in a directory shared between projects (another tree: not under the project, the
# virtualenv or the working directory of pytest's rootdir).
shared="$tmp/shared/features"
mkdir -p "$tmp/shared" && mv project/features "$shared"
cp "$inv" project/inventory.yaml
printf '[tool.pytest.ini_options]\naddopts = "-ra --strict-markers"\n' >project/pyproject.toml
printf 'from pytest_bdd import scenarios\n\nscenarios(%s)\n' "'$shared'" >project/test_features.py
# One built-in scenario and the project's own feature (-k: parts of their test names).
builtin="${POWERCUT_WHEEL_BUILTIN:-controlplane_node_loses_power}"
mine="stateful_pod_loses_power_and_comes_back"
status=0
(cd project && "$pc" run -i inventory.yaml --features "$shared" --out "$user/out" --fail-on-skip \
  --progress plain -- -k "$builtin or $mine") || status=$?
# The same feature with plain pytest from a project configured by a pytest.ini.
if [ "$status" -eq 0 ]; then
  mkdir -p "$user/plain"
  cp project/inventory.yaml project/test_features.py "$user/plain/"
  printf '[pytest]\naddopts = -ra --strict-markers\n' >"$user/plain/pytest.ini"
  (cd "$user/plain" && "$tmp/venv/bin/python" -m pytest --inventory inventory.yaml \
    --alluredir "$user/out-plain/allure-results" --junitxml "$user/out-plain/junit.xml" \
    -p no:cacheprovider -k "$mine" >"$user/out-plain.log" 2>&1) || status=$?
  if [ "$status" -ne 0 ]; then
    echo "wheel-test: plain pytest exited $status; the end of its output:"
    tail -40 "$user/out-plain.log" || true
    exit "$status"
  fi
fi
cd "$repo"
if [ "$status" -ne 0 ]; then
  echo "wheel-test: powercut run exited $status; the end of its log:"
  tail -40 "$user/out/run.log" || true
  exit "$status"
fi
POWERCUT_WHEEL_OUT="$user/out" POWERCUT_WHEEL_PLAIN="$user/out-plain" \
  POWERCUT_WHEEL_VENV="$tmp/venv" POWERCUT_WHEEL_BUILTIN="$builtin" "$py" -m pytest tests/wheel -q -p no:cacheprovider
echo "wheel-test: passed in $(( $(date +%s) - start ))s"
