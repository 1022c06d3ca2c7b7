# powercut: `make demo` and `make test` work on a fresh machine; each installs what it needs.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_FLAGS ?=

.PHONY: venv check lint types layers unit lab-bin lab-test test demo bench clean

venv:
	@bash scripts/bootstrap.sh

lint: venv
	$(PY) -m ruff check harness tests bench
	$(PY) -m ruff format --check harness tests bench

types: venv
	$(PY) -m mypy

layers: venv
	.venv/bin/lint-imports

unit: venv
	$(PY) -m pytest tests/unit tests/integration -m "not lab" -q $(PYTEST_FLAGS)

## check: lint, types, import layers, unit tests; no lab
check: lint types layers unit

lab-bin: venv
	.venv/bin/powercut lab build

lab-test: venv lab-bin
	$(PY) -m pytest tests/lab -m lab -v $(PYTEST_FLAGS)

## test: everything the project checks
test: check lab-test

## demo: bring the lab up, run the features against it, write the HTML report
demo: venv lab-bin
	bash scripts/demo.sh

bench: venv lab-bin
	$(PY) bench/lab_bench.py

clean:
	rm -rf reports .mypy_cache .ruff_cache .pytest_cache
