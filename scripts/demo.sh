#!/usr/bin/env bash
# `make demo`: the first report in minutes. Brings the lab up and runs the demo set (the
# built-in scenarios tagged @demo: one per failure kind and per way of choosing targets,
# together showing every kind of figure the report has), writes the HTML report and says
# where it is and how to run everything. The lab is stopped afterwards unless KEEP_LAB=1.
#
# Cold, the lab's binaries are built from the Go module proxy while the virtualenv, the Debian
# packages and Allure are installed beside them. Extra arguments go to `powercut run` after the demo selection
# (e.g. `bash scripts/demo.sh -k power`). POWERCUT_LAB_DIR: the lab's state directory;
# POWERCUT_DEMO_PORT: its first port (default 21000, `lab up`'s); POWERCUT_DEMO_BOOT_S: its
# nodes' boot time in seconds (default 8; `make features` boots them in the profile's 15).
set -euo pipefail
cd "$(dirname "$0")/.."
pc=.venv/bin/powercut
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))s"; }
say() { echo "demo [$(elapsed)]: $*"; }

# -- 1. the installs and the lab's binaries, side by side -----------------------------------
# The Go build needs only Python's standard library: it starts at once, beside the
# virtualenv (pip), the Debian packages (apt) and Allure (npm) that bootstrap installs.
say "1/3 the installs (scripts/bootstrap.sh) and, beside them, the lab's binaries (cached;" \
  "else built once from the Go module proxy, each group saying how long it takes cold)"
bash scripts/lab-build.sh 2>&1 | sed -u 's/^/  lab build: /' &
build=$!  # (pipefail: waiting for the pipeline gives the build's status)
bash scripts/bootstrap.sh
if ! wait "$build"; then
  say "building the lab's binaries failed (above)"
  exit 2
fi
say "installed and built"

# -- 2. the lab ------------------------------------------------------------------------------
started=0
stop_lab() {
  if [ "$started" = 1 ] && [ "${KEEP_LAB:-0}" != 1 ]; then $pc lab down >/dev/null; fi
}
trap stop_lab EXIT
if ! $pc lab status >/dev/null 2>&1; then
  # The demo's nodes boot in 8 s (POST to kubelet; the fast profile's 15 s elsewhere): still
  # past the 12 s node-monitor grace period for the reboot's 10 s off, and 7 s less of every
  # power-on's wait (the report's Ready-after-power-on figures are this lab's).
  say "2/3 the lab: 3 control planes and 9 workers in 3 racks, with BMCs (about 20 s;" \
    "its nodes boot in ${POWERCUT_DEMO_BOOT_S:-8} s)"
  $pc lab up --workloads --inventory-out inventories/lab.yaml \
    --base-port "${POWERCUT_DEMO_PORT:-21000}" --boot-seconds "${POWERCUT_DEMO_BOOT_S:-8}"
  started=1
else
  say "2/3 the lab: already up (powercut lab status), used as it is"
fi

# -- 3. the demo set -------------------------------------------------------------------------
out="reports/demo-$(date +%Y%m%d-%H%M%S)"
say "3/3 the demo set (the @demo scenarios, about 4 min warm: 4 min 26 s for all of make demo on 2026-11-28), then the HTML report"
set +e
$pc run --inventory inventories/lab.yaml --out "$out" \
  --title "The demo set: the built-in scenarios tagged @demo, one per failure kind and way of choosing targets (make features runs them all)" \
  -- -m demo "$@"
rc=$?
set -e
echo
say "done (exit $rc)"
echo "HTML report: $PWD/$out/index.html"
echo "Everything: \`make features\` runs every built-in scenario on a lab of its own (about 20 min);"
echo "  with a lab up (KEEP_LAB=1 make demo), \`$pc run -i inventories/lab.yaml\` runs them on it."
[ "${KEEP_LAB:-0}" = 1 ] && echo "The lab keeps running (KEEP_LAB=1): powercut lab status / powercut lab down"
exit $rc
