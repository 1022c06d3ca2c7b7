#!/usr/bin/env bash
# `make lint`'s chart part, with the tools built from the Go module proxy once and cached in
# ~/.cache/powercut/bin/ (helm, kubeconform; the Kubernetes API's schemas made from the
# Kubernetes source's OpenAPI document) and Debian's promtool:
#   - helm lint --strict (values.schema.json checks the values), against the Kubernetes
#     version the kind stage runs (the chart's kubeVersion: >= 1.27);
#   - helm template with each deploy/chart/ci/*.yaml and with 50 targets, every rendered
#     manifest checked by kubeconform -strict against that version's API (the
#     prometheus-operator and Gateway API kinds are skipped: no schema of theirs here);
#   - the PrometheusRule's groups: promtool check rules and promtool test rules
#     (tests/chart/alerts-test.yaml);
#   - deploy/chart/README.md's values table is what scripts/gen_chart_readme.py makes.
# The unit tests (tests/unit/test_chart.py) check what it renders.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(PYTHONPATH=$PWD .venv/bin/python -c '
import shlex, sys
from harness.kindlab import kubeschemas
from harness.kindlab.binaries import obtain_helm, obtain_kubeconform
from harness.kindlab.versions import KUBERNETES
say = lambda m: print(m, file=sys.stderr, flush=True)
print(f"helm={shlex.quote(str(obtain_helm(say)))}")
print(f"kubeconform={shlex.quote(str(obtain_kubeconform(say)))}")
print(f"schemas={shlex.quote(str(kubeschemas.obtain(KUBERNETES, say)))}")
print(f"kube={KUBERNETES.lstrip(chr(118))}")')"
command -v promtool >/dev/null || { echo "chart: promtool is missing (Debian package prometheus)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$helm" lint --strict --kube-version "$kube" deploy/chart -f deploy/chart/ci/two-targets.yaml
"$helm" lint --strict --kube-version "$kube" deploy/chart -f deploy/chart/ci/all-options.yaml

conform() {
  "$kubeconform" -strict -summary -kubernetes-version "$kube" \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
    -skip ServiceMonitor,PrometheusRule,HTTPRoute "$1"
}
for values in deploy/chart/ci/*.yaml; do
  out="$work/$(basename "$values")"
  "$helm" template powercut deploy/chart -n powercut --kube-version "$kube" -f "$values" >"$out"
  conform "$out"
done

{ echo "targets:"; for i in $(seq -w 1 50); do
    echo "  - {name: t$i, inventory: {configMap: t$i-inv}, kubeconfigSecret: t$i-kube}"; done; } >"$work/fifty-values.yaml"
"$helm" template powercut deploy/chart --kube-version "$kube" -f "$work/fifty-values.yaml" >"$work/fifty.yaml"
n=$(grep -c '^kind: CronJob$' "$work/fifty.yaml")
[ "$n" -eq 100 ] || { echo "chart: 50 targets rendered $n CronJobs, not 50 runners + 50 recovers" >&2; exit 1; }
conform "$work/fifty.yaml"

# The alerts as the chart renders them, checked and unit-tested by promtool.
"$helm" template powercut deploy/chart --kube-version "$kube" -f deploy/chart/ci/all-options.yaml \
  --show-only templates/monitoring.yaml >"$work/monitoring.yaml"
.venv/bin/python - "$work/monitoring.yaml" "$work/rules.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "PrometheusRule"]
assert len(docs) == 1, f"{len(docs)} PrometheusRules rendered"
yaml.safe_dump({"groups": docs[0]["spec"]["groups"]}, open(sys.argv[2], "w"))
PY
promtool check rules "$work/rules.yaml"
cp tests/chart/alerts-test.yaml "$work/alerts-test.yaml"
promtool test rules "$work/alerts-test.yaml"

.venv/bin/python scripts/gen_chart_readme.py --check
echo "chart: helm lint --strict, kubeconform (Kubernetes $kube) and promtool passed" \
  "(50 targets: 50 runner + 50 recover CronJobs)"
