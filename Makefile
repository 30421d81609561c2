# rectizarr developer targets. Everything goes through a local virtual environment in .venv,
# created on first use with the newest Python >= 3.12 on the machine (else python3).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=
SOAK_ARGS   ?=
# The main run's tests run on pytest-xdist's worker processes (the test extra), each handed a test as it
# frees up (worksteal): the S3 fault and kill tests mostly wait, and the others run meanwhile (2 cores: 1353
# -> 607-821 s). PYTEST_WORKERS: how many, "auto" is one per core (at most 4); `make test PYTEST_WORKERS=0`
# runs them in one process (pdb). test-oldest stays in one process: its tests keep the cores busy, and two
# workers took longer (122-134 s against 115-121 s).
PYTEST_WORKERS ?= auto
XDIST       := -n $(PYTEST_WORKERS) --maxprocesses=4 --dist worksteal

.PHONY: test demo lint bench bench-quick bench-scale soak clean env

env: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $$(.ci/find-python) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,lint,dask,xarray]'
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-oldest

# The oldest supported Python (requires-python: 3.11, without zarr-python) runs the unit, fork and
# consistency tests too, in its own .venv-3.11. What is the same on every Python runs in the main run only:
# the S3 cases (moto, obstore), the tests of the test servers and of the source's layering.
# Without that Python, CI (CI set) fails; elsewhere it is a note.
OLDEST_PY   := $(shell .ci/find-oldest-python --version)
OLDEST      := .venv-$(OLDEST_PY)
OLDEST_ARGS := -p no:cacheprovider tests/unit tests/reliability/test_concurrency.py \
               tests/reliability/test_consistency.py tests/reliability/test_crash_safety.py \
               tests/reliability/test_atomic_updates.py \
               -k "not s3 and not obstore" --ignore=tests/unit/test_fault_server.py --ignore=tests/unit/test_layering.py
.PHONY: test-oldest

test-oldest:
	@if .ci/find-oldest-python >/dev/null; then $(MAKE) --no-print-directory $(OLDEST)/.installed && \
	  echo '$(OLDEST)/bin/python -m pytest $(OLDEST_ARGS)' && $(OLDEST)/bin/python -m pytest $(OLDEST_ARGS); \
	elif [ -n "$$CI" ]; then echo "make test-oldest: CI needs Python $(OLDEST_PY), the oldest supported" \
	  "(python$(OLDEST_PY) on PATH, or pyenv's), for its tests" >&2; exit 1; \
	else echo "note: no Python $(OLDEST_PY) here (python$(OLDEST_PY) or pyenv's): the tests on the oldest" \
	  "supported Python are left to CI"; fi

$(OLDEST)/.installed: pyproject.toml
	@test -x $(OLDEST)/bin/python || $$(.ci/find-oldest-python) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -e '.[test]'
	@touch $@

demo: $(STAMP)
	$(PY) examples/quickstart.py

lint: $(STAMP)
	$(PY) -m ruff check rectizarr tests
	$(PY) -m ruff format --check rectizarr tests scripts benchmarks examples conformance_data
	$(PY) -m mypy rectizarr

bench: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/run.py

bench-scale: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/scale.py

bench-quick: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	$(PY) benchmarks/run.py --quick

# Client processes doing random operations on one hierarchy for 10 minutes, with SIGKILLs (and, on S3, a
# moto server with injected faults); the history is checked afterwards: scripts/soak.py --help.
soak: $(STAMP)
	$(PY) scripts/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(OLDEST)
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
