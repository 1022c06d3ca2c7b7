#!/usr/bin/env bash
# Make .venv usable: a virtualenv cached outside the repo, keyed on the Python version and the
# lock file, linked as .venv, with this checkout installed into it in editable mode.
# Also installs what is missing of the Debian packages the lab and the report need (HAProxy,
# ipmitool, Prometheus, Chromium: one apt-get, as apt takes one lock) and Allure (npm,
# scripts/install-report-tools.sh). The three are independent, so they run side by side: apt
# and npm in the background while pip fills the virtualenv; each says what it does, and how
# long that took on a cold machine of this project's kind (2 cores), before it starts.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d -t powercut-bootstrap.XXXXXX)
trap 'rm -rf "$logs"' EXIT
t0=$(date +%s)
say() { echo "bootstrap [$(( $(date +%s) - t0 ))s]: $*"; }

# -- the Debian packages, in the background ---------------------------------------------------
need=()
command -v haproxy >/dev/null || need+=(haproxy)
command -v ipmitool >/dev/null || need+=(ipmitool)
command -v prometheus >/dev/null || need+=(prometheus)
# the storage-network cut's integration test (a real sshfs mount from a real sshd) and the
# hardened IPMI's (OpenIPMI's ipmi_sim, a BMC powercut did not write)
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ipmi_sim >/dev/null || need+=(openipmi)
if [ "${POWERCUT_NO_CHROMIUM:-}" != 1 ] && ! command -v chromium >/dev/null; then
  need+=(chromium)
fi
apt_pid=
if [ "${#need[@]}" -gt 0 ]; then
  say "installing Debian packages in the background: ${need[*]} (cold: about 20 s for the lab's" \
    "three, 1-2 min with chromium)"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  # DPkg::Lock::Timeout: wait for another apt-get (a second checkout's bootstrap) to finish.
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      -o DPkg::Lock::Timeout=600 --no-install-recommends "${need[@]}"; } >"$logs/apt" 2>&1 &
  apt_pid=$!
fi
# -- Allure (npm), in the background: Chromium comes from the apt-get above ------------------
POWERCUT_NO_CHROMIUM=1 bash scripts/install-report-tools.sh >/dev/null 2>"$logs/npm" &
npm_pid=$!
cache="${POWERCUT_CACHE:-$HOME/.cache/powercut}"
py="${PYTHON:-python3}"
key=$( { "$py" -c 'import sys; print(sys.version)'; cat requirements/lock.txt; } | sha256sum | cut -c1-16)
# POWERCUT_VENV: a virtualenv of its own (several checkouts side by side: each editable
# install points at one checkout).
venv="${POWERCUT_VENV:-$cache/venv/$key}"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  # Only ever replace a half-made virtualenv or an empty directory: POWERCUT_VENV pointing at
  # the wrong place (the cache's venv/ itself) must not delete what is there.
  if [ -d "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ] && [ -n "$(ls -A "$venv")" ]; then
    echo "bootstrap: $venv exists and is not a virtualenv; refusing to replace it" \
      "(POWERCUT_VENV must name a virtualenv of its own)" >&2
    exit 2
  fi
  say "creating virtualenv $venv (pip from the lock file; cold: about 1-2 min)"
  rm -rf "$venv"
  mkdir -p "$cache/venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements/lock.txt
  touch "$venv/.complete"
  say "virtualenv ready"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
# Re-point the editable install at this checkout (a fresh clone lives elsewhere), unless it
# points here already with this pyproject.toml (the stages make runs side by side each call
# this script).
mark="$PWD $(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat "$venv/.editable" 2>/dev/null)" != "$mark" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e . \
    >/dev/null
  echo "$mark" >"$venv/.editable"
fi

# -- wait for the background installs ---------------------------------------------------------
status=0
if [ -n "$apt_pid" ]; then
  if wait "$apt_pid"; then
    say "Debian packages installed: ${need[*]}"
  else
    tail -n 40 "$logs/apt" >&2
    say "error: apt-get install ${need[*]} failed (above)" >&2
    status=1
  fi
fi
if ! wait "$npm_pid"; then
  grep -v "skipping chromium" "$logs/npm" >&2 || true
  say "error: installing Allure failed (above)" >&2
  status=1
elif grep -q "installed" "$logs/npm"; then
  say "Allure installed (npm)"
fi
exit "$status"
