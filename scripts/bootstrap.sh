#!/usr/bin/env bash
# Make .venv usable: a virtualenv cached outside the repo, keyed on the Python version and the
# lock file, linked as .venv, with this checkout installed into it in editable mode.
# Also installs the Debian packages the lab needs when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
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
  echo "bootstrap: creating virtualenv $venv"
  rm -rf "$venv"
  mkdir -p "$cache/venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements/lock.txt
  touch "$venv/.complete"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
# Re-point the editable install at this checkout (a fresh clone lives elsewhere).
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation -e . >/dev/null

need=()
command -v haproxy >/dev/null || need+=(haproxy)
command -v ipmitool >/dev/null || need+=(ipmitool)
command -v prometheus >/dev/null || need+=(prometheus)
# The storage-network cut's integration test: a real sshfs mount from a real sshd.
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ "${#need[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
