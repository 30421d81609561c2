# rectizarr developer targets. Everything goes through a local virtual environment in .venv,
# created on first use with the newest Python >= 3.12 on the machine (else python3).
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: test demo lint bench bench-quick bench-scale clean env

env: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $$(.ci/find-python) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,lint,dask,xarray]'
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) examples/quickstart.py

lint: $(STAMP)
	$(PY) -m ruff check rectizarr tests
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

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
