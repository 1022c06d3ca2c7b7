# powercut: `make demo` and `make test` work on a fresh machine; each installs what it needs.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_FLAGS ?=
## The kind stage's storage: csi (the default: the attachable storage, with its three volume
## features, on the cluster the other kind tests share) or local-path (without them).
POWERCUT_TEST_KIND_STORAGE ?= csi
export POWERCUT_TEST_KIND_STORAGE

.PHONY: venv report-tools chart lint types layers unit integration check lab-bin lab-test heldout-test upstream-test kind-image kind-host kind-test mgmt-test kind-stages report-test features wheel-test fault-test test test-check test-prebuild test-lab-lane test-cluster-lane demo bench clean

venv:
	@bash scripts/bootstrap.sh

report-tools:
	@bash scripts/install-report-tools.sh >/dev/null

lint: venv
	$(PY) -m ruff check harness steps tests bench scripts examples
	$(PY) -m ruff format --check harness steps tests bench scripts examples

## chart: helm (built from the Go module proxy once, cached) lints deploy/chart and renders it;
## the tests that need helm (marked helm: what it renders, the alerts in a real Prometheus)
chart: venv
	@bash scripts/chart-check.sh
	$(PY) -m pytest tests/unit tests/integration -m helm -q $(PYTEST_FLAGS)

## types: harness/ under mypy strict; tests/ and bench/ type-checked too, with the
## relaxations pyproject.toml gives them (every body checked, annotations not required)
types: venv
	$(PY) -m mypy
	$(PY) -m mypy tests bench
	MYPYPATH=examples/powercut-driver-example/src $(PY) -m mypy --strict \
	  examples/powercut-driver-example/src/powercut_driver_example

layers: venv
	.venv/bin/lint-imports

## unit: no cluster, no network beyond loopback fakes, no real protocol peers
unit: venv
	$(PY) -m pytest tests/unit -m "not lab and not helm" -q $(PYTEST_FLAGS)

## integration: the harness against real protocol peers and tools it can run here (BMC
## simulators, Prometheus, a driver plugin installed as a package, the kind balancer)
integration: venv
	$(PY) -m pytest tests/integration -m "not lab and not helm" -q $(PYTEST_FLAGS)

## check: lint, the chart (helm lint and template), types, import layers, unit and
## integration tests; no lab, fast
check: lint chart types layers unit integration

lab-bin: venv
	.venv/bin/powercut lab build

## the lab tests: one lab per session, every protocol, HA control plane, recovery
lab-test: lab-bin
	$(PY) -m pytest tests/lab -m lab -v $(PYTEST_FLAGS)

## the held-out features (tests/lab/heldout: written by a new user from the docs alone) on a
## lab of their own; opt-in, not part of make test (about 7 minutes)
heldout-test: lab-bin
	POWERCUT_TEST_HELDOUT=1 $(PY) -m pytest tests/lab/test_heldout_features.py -m lab -v $(PYTEST_FLAGS)

## the model on a lab with upstream timings (issue #34: Kubernetes' defaults, 50 s grace, 300 s
## tolerations): a lab of its own, opt-in, not part of make test (about 5 minutes)
upstream-test: lab-bin
	POWERCUT_TEST_UPSTREAM=1 $(PY) -m pytest tests/lab/test_upstream_model_lab.py -m lab -v $(PYTEST_FLAGS)

## kind-image: the node image, and with the csi storage its CSI driver and sidecars
kind-image: venv
	.venv/bin/powercut kind build --storage $(POWERCUT_TEST_KIND_STORAGE)

## the real-kubelet tests: a kind cluster (1 control plane, 2 workers) from the node image
## built here with no registry; the kind driver's failures against real node containers, and
## the kind feature set (features/kind) through `powercut run` on the same cluster
## kind-host: the host's inotify limit raised for the kind nodes (scripts/kind-host.sh says why)
kind-host:
	@bash scripts/kind-host.sh

kind-test: kind-image kind-host
	$(PY) -m pytest tests/kind -m kind -v $(PYTEST_FLAGS)

## mgmt-test: the chart for real: a kind management cluster (one node, the kind stage's node
## image) on a Docker network of its own runs the runner image against a lab served on that
## network's gateway only: two scheduled runs land in the store with their history and the
## page lists them; a second runner is refused by the lock; a runner SIGKILLed mid-cut is
## recovered by the target's recover CronJob within 5 minutes and the chart's runner-died
## alert fires in a Prometheus scraping the page; the image holds the wheel's files and its
## SBOM; the runner holds no token in any Secret: a projected token of the management
## cluster's ServiceAccount, which the lab trusts (lab up --authentication-config), bound to
## the narrowest RBAC tiers its feature needs; two targets (a second lab) run at once, each
## with its own lock, history, page section and metrics, neither disturbing the other;
## docs/management.md's 10-command path runs as written (its block run by bash)
mgmt-test: kind-image kind-host lab-bin report-tools
	$(PY) -m pytest tests/mgmt -m mgmt -v -s $(PYTEST_FLAGS)

## the report pipeline end to end: allure-pytest-bdd -> Allure 3 single file -> Chromium
report-test: venv report-tools
	$(PY) -m pytest tests/report/test_report_render.py -q $(PYTEST_FLAGS)

## the feature library against a lab of its own, with the HTML report checked in Chromium
features: lab-bin report-tools
	bash scripts/features.sh

## fault-test: the fault-injection bench's short form (one of each fault against a lab of its
## own: SIGKILL + recover, SIGTERM, SIGINT, BMCs that stop answering, API servers restarted
## mid-watch, the controller-manager leader's node powered off); nothing may be left
fault-test: lab-bin
	$(PY) bench/fault_bench.py --short

## wheel-test: the built wheel in a fresh virtualenv outside the repo, run from an empty
## directory: one built-in scenario and a `powercut init` project's feature, from a project
## with its own pyproject.toml pytest settings and the features in another tree; the same
## feature with plain pytest under a pytest.ini; reports checked
wheel-test: lab-bin report-tools
	bash scripts/wheel-test.sh

## kind-stages: the two kind-based stages one after the other (they share the node image and
## the Docker engine; the management cluster is created after the real kubelets' is gone);
## both run, and it fails if either did (a failed kind-test once kept mgmt-test from running).
## The node image's build and the storage's (Go, on a cold machine only) run at the lowest CPU
## priority, so the lab stages beside them keep their timings.
kind-stages: venv
	nice -n 19 $(MAKE) --no-print-directory kind-image chart
	@rc=0; for stage in kind-test mgmt-test; do \
	  $(MAKE) --no-print-directory $$stage || { rc=1; echo "make $$stage failed"; }; done; exit $$rc

## test: everything the project checks. First the installs, the checks (but the chart's) and
## the report pipeline, with the lab's binaries, which every lab stage waits for, built beside
## them at the lowest CPU priority (on a warm machine: nothing to build). Then two lanes side
## by side, each bringing up one cluster at a time (own ports, state and journals): the lab
## lane (the features, then the lab tests) and the cluster lane (the kind stages: the node
## image, the storage and helm built first at the lowest CPU priority, the chart's checks, the
## real kubelets, the management cluster; then the wheel test and the fault bench). Three
## lanes (three clusters on two cores, load about 40) failed timing budgets on 2026-11-28;
## two lanes keep one cluster per core.
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target test-check test-prebuild
	$(MAKE) --no-print-directory -j2 --output-sync=target test-lab-lane test-cluster-lane

## (the lab lane: the features' lab, then the lab tests'; every stage runs, the lane fails
## if any did)
test-lab-lane:
	@rc=0; for stage in features lab-test; do \
	  $(MAKE) --no-print-directory $$stage || { rc=1; echo "make $$stage failed"; }; done; exit $$rc

## (the cluster lane: the kind stages, then the wheel test's lab and the fault bench's; likewise)
test-cluster-lane:
	@rc=0; for stage in kind-stages wheel-test fault-test; do \
	  $(MAKE) --no-print-directory $$stage || { rc=1; echo "make $$stage failed"; }; done; exit $$rc

## (one after the other: the jobserver would run a single make's goals side by side)
test-check: venv
	@for stage in lint types layers unit integration report-test; do \
	  $(MAKE) --no-print-directory $$stage || exit 1; done

## (without the virtualenv: the lab's build needs only Python's standard library and Go)
test-prebuild:
	nice -n 19 bash scripts/lab-build.sh

## demo: the first report in minutes: the lab's binaries (with Allure and Chromium installed
## beside them), the lab, the demo set (the @demo scenarios), the HTML report's path and how
## to run everything (`make features`)
demo:
	bash scripts/demo.sh

## bench: the lab benchmark (lab up/down, the largest lab) and the longevity ones (report of
## 10,000 cycles; memory over 200 cycles against the simulated cluster), the report's (one
## file at 29 and 200 scenarios and 10,000 cycles: size, Chromium's first render). Every
## benchmark runs and prints its figures against its target; the target fails if any missed.
bench: lab-bin report-tools
	@status=0; \
	$(PY) bench/report_bench.py || status=1; \
	$(PY) bench/lab_bench.py || status=1; \
	$(PY) bench/longevity_bench.py report || status=1; \
	$(PY) bench/longevity_bench.py rss --sim || status=1; \
	$(PY) bench/cut_bench.py || status=1; \
	exit $$status

clean:
	rm -rf reports .mypy_cache .ruff_cache .pytest_cache
