#!/usr/bin/env bash
# `make lint`'s chart part: helm (built from the Go module proxy once, cached in
# ~/.cache/powercut/bin/helm-<version>/) lints deploy/chart and renders it with its CI values
# and with 50 targets; the unit tests (tests/unit/test_chart.py) check what it renders.
set -euo pipefail
cd "$(dirname "$0")/.."
helm=$(PYTHONPATH=$PWD .venv/bin/python -c '
import sys
from harness.kindlab.binaries import obtain_helm
print(obtain_helm(lambda m: print(m, file=sys.stderr, flush=True)))')
"$helm" lint --strict deploy/chart -f deploy/chart/ci/two-targets.yaml
for values in deploy/chart/ci/*.yaml; do
  "$helm" template powercut deploy/chart -f "$values" >/dev/null
done
fifty=$(mktemp)
trap 'rm -f "$fifty"' EXIT
{ echo "targets:"; for i in $(seq -w 1 50); do
    echo "  - {name: t$i, inventory: {configMap: t$i-inv}, kubeconfigSecret: t$i-kube}"; done; } >"$fifty"
n=$("$helm" template powercut deploy/chart -f "$fifty" | grep -c '^kind: CronJob$')
[ "$n" -eq 50 ] || { echo "chart: 50 targets rendered $n CronJobs" >&2; exit 1; }
echo "chart: helm lint and template passed (50 targets: 50 CronJobs)"
