# Two commands do all the set-up: `make demo` runs the whole system, `make test` passes the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HTMX := reviewer/static/vendor/htmx.min.js

.PHONY: demo test test-realjudge bench bench-compare lint stop install install-dev

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt clients/python/pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(VENV)/.runtime $@

$(HTMX): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	mkdir -p $(dir $@)
	cp node_modules/htmx.org/dist/htmx.min.js $@

install: $(VENV)/.runtime $(HTMX)
install-dev: $(VENV)/.dev $(HTMX)

# DEBUG=1: the demo serves on loopback over plain HTTP with a development secret.
demo: install
	DEBUG=$${DEBUG:-1} $(PY) manage.py demo

# The suite gets private servers of its own (.data/test), apart from the demo's, and runs in two pytest-xdist
# workers, each with servers of its own (.data/test/gw0, ...); PYTEST_WORKERS=0 runs it in one process, see README.
# It skips the real-judge tests, which `make test-realjudge` runs on their own (`PYTEST_ARGS=--realjudge`: both).
# PYTHONDONTWRITEBYTECODE= undoes a machine that sets it (these do): the suite starts Python processes by the dozen
# (workers, Celery, gunicorn, the commands), and each then compiled every module of the app from source again.
PYTEST_WORKERS ?= 2
test: install-dev
	DEBUG=1 PYTHONDONTWRITEBYTECODE= TOLLGATE_DATA_DIR=$${TOLLGATE_DATA_DIR:-.data/test} $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# In one process (no -n): the tests share one model server, and it works a judge call on both cores.
test-realjudge: install-dev
	DEBUG=1 TOLLGATE_DATA_DIR=$${TOLLGATE_DATA_DIR:-.data/test} $(PY) -m pytest --realjudge $(PYTEST_ARGS) tests/realjudge

# `make bench BENCH=throughput` runs only the benchmarks whose names contain that word.
bench: install-dev
	DEBUG=1 TOLLGATE_DATA_DIR=$${TOLLGATE_DATA_DIR:-.data/bench} $(PY) -m bench $(BENCH)

# `make bench-compare BASE=main~20 HEAD=main BENCH=certified` runs one benchmark's phases from two commits,
# interleaved and repeated, and says which is faster only where the spreads do not overlap (bench/compare.py);
# COMPARE_ARGS passes more, e.g. COMPARE_ARGS='--setting NAME=VALUE --rounds 11'.
bench-compare: install-dev
	DEBUG=1 TOLLGATE_DATA_DIR=$${TOLLGATE_DATA_DIR:-.data/bench} $(PY) -m bench.compare \
		--base $(or $(BASE),HEAD) --head $(or $(HEAD),HEAD) $(COMPARE_ARGS) $(BENCH)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

stop:
	$(PY) -m reviewer.embedded stop
	TOLLGATE_DATA_DIR=.data/test $(PY) -m reviewer.embedded stop
	for dir in .data/test/gw*; do [ -d "$$dir" ] && TOLLGATE_DATA_DIR=$$dir $(PY) -m reviewer.embedded stop; done; true
	TOLLGATE_DATA_DIR=.data/bench $(PY) -m reviewer.embedded stop
