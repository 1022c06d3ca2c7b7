#!/usr/bin/env bash
# `make demo`: bring the lab up, run the feature suite against it, write the HTML report and
# say where it is. The lab is stopped afterwards unless KEEP_LAB=1.
set -euo pipefail
cd "$(dirname "$0")/.."
pc=.venv/bin/powercut
bash scripts/install-report-tools.sh >/dev/null
started=0
if ! $pc lab status >/dev/null 2>&1; then
  $pc lab up --workloads --inventory-out inventories/lab.yaml
  started=1
fi
stop_lab() {
  if [ "$started" = 1 ] && [ "${KEEP_LAB:-0}" != 1 ]; then $pc lab down; fi
}
trap stop_lab EXIT
out="reports/demo-$(date +%Y%m%d-%H%M%S)"
set +e
$pc run --inventory inventories/lab.yaml --out "$out" "$@"
rc=$?
set -e
echo
echo "HTML report: $PWD/$out/index.html"
[ "${KEEP_LAB:-0}" = 1 ] && echo "the lab keeps running (KEEP_LAB=1): powercut lab status / lab down"
exit $rc
