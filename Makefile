# Gatehouse. `make demo` and `make test` work on a fresh machine with only Python 3.11+ installed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp
LLM_STAMP := $(VENV)/.litellm-stamp

.PHONY: demo test check crds lint render e2e-llm bench bench-quick soak postgres-bin chromium cluster-bin cluster-up cluster-down node-deps e2e-node screenshots clean

# `make soak` counts (each overridable: `make soak GATEHOUSE_SOAK_CYCLES=20`)
GATEHOUSE_SOAK_CYCLES ?= 100
GATEHOUSE_SOAK_CONVERSATIONS ?= 60
GATEHOUSE_SOAK_RACES ?= 500
GATEHOUSE_FUZZ_EXAMPLES ?= 10000

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

## test: ruff, the package layers (lint-imports), mypy, the docs site (mkdocs --strict), then every test
test: $(STAMP) postgres-bin chromium cluster-bin check
	$(PY) -m pytest -q

## check: the fast checks alone (the chart's CRDs are crds/, ruff, import-linter contracts, mypy, docs build with broken links failing)
check: $(STAMP)
	@diff -r crds charts/gatehouse/crds >/dev/null \
	|| { echo "charts/gatehouse/crds/ differs from crds/ (the one copy): run 'make crds'"; diff -r crds charts/gatehouse/crds; exit 1; }
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(VENV)/site

## crds: copy crds/ (the one place the CRDs are written) into the chart; `make check` fails while they differ
crds:
	rm -f charts/gatehouse/crds/*.yaml
	cp crds/*.yaml charts/gatehouse/crds/

## postgres-bin: Debian's PostgreSQL server binaries for the replica tests (tests/support/postgres.py), only when missing
postgres-bin:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	|| [ -n "$$GATEHOUSE_TEST_POSTGRES_URL" ] \
	|| if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's postgresql package for the replica tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's postgresql package for the replica tests (sudo)"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	else \
		echo "NOTE: no PostgreSQL binaries (initdb) and no way to install them here (not root, no apt-get or sudo)."; \
		echo "      Install Debian's 'postgresql' package, or set GATEHOUSE_TEST_POSTGRES_URL; under CI=true the"; \
		echo "      replica tests then fail instead of being skipped."; \
	fi

## chromium: Debian's Chromium for the inbox's browser tests (tests/ui), only when missing. Playwright drives it
## (its own browser download is not reachable); under CI=true the browser tests fail instead of skipping without it.
chromium:
	@command -v chromium >/dev/null 2>&1 || [ -n "$$GATEHOUSE_CHROMIUM" ] \
	|| if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium package for the inbox's browser tests"; \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
		 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)); \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium package for the inbox's browser tests (sudo)"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "NOTE: no chromium and no way to install it here (not root, no apt-get or sudo). Install Debian's"; \
		echo "      'chromium' package or set GATEHOUSE_CHROMIUM to a Chromium binary; under CI=true the browser"; \
		echo "      tests then fail instead of being skipped."; \
	fi

## cluster-bin: etcd, kube-apiserver, kube-controller-manager, kube-scheduler built from their Go modules (hack/cluster/)
## into .cache/cluster/<stamp of the inputs>/bin, once per machine (cold: see docs/cluster.md); without Go a NOTE
## (the real-cluster tests then skip, or fail under CI=true)
cluster-bin: $(STAMP)
	$(PY) -m tests.support.cluster build

## cluster-up: a real control plane on 127.0.0.1 (prints its admin kubeconfig and users); cluster-down stops it
cluster-up: $(STAMP) cluster-bin
	$(PY) -m tests.support.cluster up

cluster-down: $(STAMP)
	$(PY) -m tests.support.cluster down

## node-deps: Debian's containerd, runc, crun, CNI plugins, ipset, busybox-static, umoci, debootstrap and buildah for the
## real node (tests/node), only when one is missing; needs root (or sudo) and apt-get
NODE_PACKAGES := containerd runc crun containernetworking-plugins iptables ipset busybox-static umoci debootstrap buildah
node-deps:
	@if command -v containerd >/dev/null && command -v runc >/dev/null && command -v crun >/dev/null \
		&& [ -x /usr/lib/cni/bridge ] && [ -x /bin/busybox ] && command -v umoci >/dev/null \
		&& command -v debootstrap >/dev/null && command -v buildah >/dev/null && command -v ipset >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's packages for the real node: $(NODE_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NODE_PACKAGES) >/dev/null; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's packages for the real node (sudo): $(NODE_PACKAGES)"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NODE_PACKAGES) >/dev/null; \
	else \
		echo "NOTE: the real node needs Debian's $(NODE_PACKAGES) and root"; \
	fi

## e2e-node: pods under the real kubelet (built with the control plane) with containerd and runc/crun, images made
## here without a registry (docs/control-plane.md "The real node"; root; not part of `make test`)
e2e-node: $(STAMP) cluster-bin node-deps
	GATEHOUSE_E2E_NODE=1 $(PY) -m pytest -m e2e_node -rs -v --durations=0 tests/node

## screenshots: docs/images/{inbox,detail,chat}.png from a real runtime in Debian's Chromium, with a fixed browser clock
screenshots: $(STAMP) chromium
	$(PY) -m tests.support.screenshots

## soak: the reliability tests with large counts (kill -9 cycles, concurrent conversations, cancel-vs-approve races), 10000 fuzz examples, then the long tests `make test` leaves out (markers bench_cp, long)
soak: $(STAMP)
	GATEHOUSE_SOAK_CYCLES=$(GATEHOUSE_SOAK_CYCLES) GATEHOUSE_SOAK_CONVERSATIONS=$(GATEHOUSE_SOAK_CONVERSATIONS) \
	GATEHOUSE_SOAK_RACES=$(GATEHOUSE_SOAK_RACES) GATEHOUSE_FUZZ_EXAMPLES=$(GATEHOUSE_FUZZ_EXAMPLES) \
		$(PY) -m pytest -q --timeout=7200 tests/reliability tests/contract/test_fuzz.py
	$(PY) -m pytest -q -m 'bench_cp or long' tests

$(LLM_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,litellm]'
	touch $(LLM_STAMP)

## e2e-llm: a real model behind the gate: verifies a local open model (~1.1 GB) and builds llama-server (~7 min) into .cache/llm/ once, then runs tests/e2e_llm against it (not part of `make test`)
e2e-llm: $(LLM_STAMP)
	$(PY) -m tests.e2e_llm.prepare
	GATEHOUSE_E2E_LLM=1 $(PY) -m pytest -m e2e_llm -rs -v --durations=0 tests/e2e_llm

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

## bench: Gatehouse as configured by default vs plain ADK (to_a2a + tool confirmation), interleaved; the table, the bars (ratios to the same run's library floors; a section is `noisy`, not judged, when other processes use > 1/4 core) + bench/results/latest{.json,.png,-backlog.png} (~30 min, on a quiet machine); BENCH_ARGS=--real-model adds the real-model row (after `make e2e-llm`)
bench: $(BENCH_STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)

## bench-quick: the same with small counts (backlog up to 1,000, 50 Agents; ~4 min)
bench-quick: $(BENCH_STAMP)
	$(PY) -m bench.run --quick $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .gatehouse .pytest_cache .cache
