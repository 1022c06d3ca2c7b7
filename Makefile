# powercut: `make demo` and `make test` work on a fresh machine; each installs what it needs.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_FLAGS ?=

.PHONY: venv report-tools chart lint types layers unit integration check lab-bin lab-test heldout-test kind-image kind-host kind-test mgmt-test kind-stages report-test features wheel-test fault-test test demo bench clean

venv:
	@bash scripts/bootstrap.sh

report-tools:
	@bash scripts/install-report-tools.sh >/dev/null

lint: venv chart
	$(PY) -m ruff check harness steps tests bench scripts examples
	$(PY) -m ruff format --check harness steps tests bench scripts examples

## chart: helm (built from the Go module proxy once, cached) lints deploy/chart and renders it
chart: venv
	@bash scripts/chart-check.sh

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
	$(PY) -m pytest tests/unit -m "not lab" -q $(PYTEST_FLAGS)

## integration: the harness against real protocol peers and tools it can run here (BMC
## simulators, Prometheus, a driver plugin installed as a package, the kind balancer)
integration: venv
	$(PY) -m pytest tests/integration -m "not lab" -q $(PYTEST_FLAGS)

## check: lint, types, import layers, unit and integration tests; no lab, fast
check: lint types layers unit integration

lab-bin: venv
	.venv/bin/powercut lab build

## the lab tests: one lab per session, every protocol, HA control plane, recovery
lab-test: lab-bin
	$(PY) -m pytest tests/lab -m lab -v $(PYTEST_FLAGS)

## the held-out features (tests/lab/heldout: written by a new user from the docs alone) on a
## lab of their own; opt-in, not part of make test (about 7 minutes)
heldout-test: lab-bin
	POWERCUT_TEST_HELDOUT=1 $(PY) -m pytest tests/lab/test_heldout_features.py -m lab -v $(PYTEST_FLAGS)

kind-image: venv
	.venv/bin/powercut kind build

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
## recovered by the target's recover CronJob within 5 minutes and the chart's dead-holder
## alert fires in a Prometheus scraping the page; the image holds the wheel's files and its
## SBOM; the runner holds only a ServiceAccount token bound to the target role
mgmt-test: kind-image kind-host lab-bin report-tools chart
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
## the Docker engine; the management cluster is created after the real kubelets' is gone).
## The node image's build (Go, on a cold machine only) runs at the lowest CPU priority, so the
## lab stages beside it keep their timings.
kind-stages: venv
	nice -n 19 $(MAKE) --no-print-directory kind-image
	$(MAKE) --no-print-directory kind-test
	$(MAKE) --no-print-directory mgmt-test

## test: everything the project checks. The four lab stages each bring up a lab of their own
## (own ports, state and journals) and the kind stages a cluster of their own; they mostly
## wait on their clusters, so three run side by side (each stage's output is printed when it
## ends): the features, the kind stages, and the lab tests, wheel test and fault bench.
test: check report-test
	$(MAKE) --no-print-directory -j3 --output-sync=target \
	  features kind-stages lab-test wheel-test fault-test

## demo: bring the lab up, run the features against it, write the HTML report
demo: lab-bin report-tools
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
