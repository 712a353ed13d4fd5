# Two entry points for a fresh machine with only Python 3 (and make):
#   make demo   the main job: the offline demo of a long conversation
#   make test   the whole test suite (unit, backends, notebooks), after setting everything up
#   make docs   the docs site (docs/, mkdocs.yml) into site/, warnings as errors
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test docs lint check clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

$(VENV)/.installed-cli: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[cli]"
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@

demo: $(VENV)/.installed-cli
	$(BIN)/rolling-memory demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict  # the variable silences Material's end-of-life banner

lint: $(VENV)/.installed-dev
	$(BIN)/python -m ruff check langchain_rolling_memory tests benchmarks scripts examples
	$(BIN)/python -m ruff format --check langchain_rolling_memory tests benchmarks scripts examples
	$(BIN)/python -m mypy

check: test lint

clean:
	rm -rf $(VENV) dist build site .pytest_cache .mypy_cache .ruff_cache
