# Gatehouse. `make demo` and `make test` work on a fresh machine with only Python 3.11+ installed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp

.PHONY: demo test lint render e2e-kind bench bench-quick soak clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## demo: run the example agent locally and walk through approve, deny, an argument rule and a batch decision
demo: $(STAMP)
	$(VENV)/bin/gatehouse demo

## render: print the AgentConfig the runtime runs for the example Agent
render: $(STAMP)
	$(VENV)/bin/gatehouse render -f examples/file-manager/agent.yaml \
		-f examples/file-manager/modelconfig.yaml -f examples/file-manager/mcp-server.yaml

## test: lint, then every test (unit, golden, end-to-end on 127.0.0.1)
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

## e2e-kind: the chart and image on a real kind cluster (needs a Docker engine and kind; skipped, with why, without)
e2e-kind: $(STAMP)
	$(PY) -m pytest -m e2e_kind -rs tests/e2e_kind

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

## bench: Gatehouse vs plain ADK (to_a2a + tool confirmation), interleaved; table + bench/results/latest.{json,png} (~20 min)
bench: $(BENCH_STAMP)
	$(PY) -m bench.run

## bench-quick: the same with small counts (~5 min)
bench-quick: $(BENCH_STAMP)
	$(PY) -m bench.run --quick

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .gatehouse .pytest_cache .cache
