#!/usr/bin/env bash
# Install the tools that turn allure-results into the signed HTML report:
#   - Allure Report 3 (npm package `allure`, exact version below) into a cache outside the
#     repo, keyed on the version: $POWERCUT_CACHE/node/allure-<version>/node_modules
#   - Debian `chromium` (headless screenshots and DOM checks of the report), via apt-get
#     only when it is missing; POWERCUT_NO_CHROMIUM=1 skips it.
# Idempotent: a warm run only checks two files and prints the path of the `allure` binary
# (the only thing written to stdout; messages go to stderr).
#
# Keep ALLURE_VERSION in step with harness/report/html.py (ALLURE_VERSION).
set -euo pipefail

ALLURE_VERSION="3.18.0"
cache="${POWERCUT_CACHE:-$HOME/.cache/powercut}"
dest="$cache/node/allure-$ALLURE_VERSION"
bin="$dest/node_modules/.bin/allure"

say() { echo "install-report-tools: $*" >&2; }
die() { say "error: $*"; exit 1; }

# -- Allure Report 3 -------------------------------------------------------------------------
if [ ! -f "$dest/.complete" ] || [ ! -x "$bin" ]; then
  command -v node >/dev/null || die "node is not installed (Allure Report 3 needs Node.js >= 20)"
  command -v npm >/dev/null || die "npm is not installed (Allure Report 3 is installed from npm)"
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$node_major" -ge 20 ] || die "Node.js $(node --version) is too old; Allure Report 3 needs >= 20"

  say "installing allure@$ALLURE_VERSION into $dest"
  mkdir -p "$cache/node"
  tmp=$(mktemp -d "$cache/node/.allure-$ALLURE_VERSION.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cat >"$tmp/package.json" <<EOF
{"name": "powercut-report-tools", "private": true, "dependencies": {"allure": "$ALLURE_VERSION"}}
EOF
  if ! (cd "$tmp" && npm install --omit=dev --no-audit --no-fund --loglevel=error \
          --save-exact >"$tmp/npm.log" 2>&1); then
    cat "$tmp/npm.log" >&2
    die "npm install allure@$ALLURE_VERSION failed (is the npm registry reachable?)"
  fi
  [ -x "$tmp/node_modules/.bin/allure" ] || die "npm installed allure but no node_modules/.bin/allure"
  got=$("$tmp/node_modules/.bin/allure" --version 2>/dev/null | tr -d '[:space:]') \
    || die "the installed allure does not run: $tmp/node_modules/.bin/allure --version"
  [ "$got" = "$ALLURE_VERSION" ] || die "expected allure $ALLURE_VERSION, the binary says '$got'"
  rm -f "$tmp/npm.log"
  touch "$tmp/.complete"
  if [ -f "$dest/.complete" ] && [ -x "$bin" ]; then
    rm -rf "$tmp"  # a concurrent run finished first: keep its copy
  else
    rm -rf "$dest"
    mv -T "$tmp" "$dest"
  fi
  trap - EXIT
  say "allure $ALLURE_VERSION installed"
fi

# -- Chromium --------------------------------------------------------------------------------
if [ "${POWERCUT_NO_CHROMIUM:-}" = "1" ]; then
  say "POWERCUT_NO_CHROMIUM=1: skipping chromium (no report screenshots or DOM checks)"
elif ! command -v chromium >/dev/null; then
  command -v apt-get >/dev/null \
    || die "chromium is missing and apt-get is not available; install chromium, or set POWERCUT_NO_CHROMIUM=1"
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "chromium is missing; run as root or install sudo (apt-get install chromium)"
    sudo=sudo
  else
    sudo=
  fi
  say "installing Debian package chromium (apt-get)"
  aptlog=$(mktemp)
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           $sudo apt-get install -y -qq --no-install-recommends chromium; } >"$aptlog" 2>&1; then
    tail -n 40 "$aptlog" >&2
    rm -f "$aptlog"
    die "apt-get install chromium failed (set POWERCUT_NO_CHROMIUM=1 to go without it)"
  fi
  rm -f "$aptlog"
  command -v chromium >/dev/null || die "apt-get installed chromium but it is not on PATH"
fi

echo "$bin"
