# Two entry points for a fresh machine with only Python 3 (and make):
#   make demo   the main job: the offline demo of a long conversation
#   make test   the whole test suite (unit, backends, notebooks), after setting everything up
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint check clean

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

demo: $(VENV)/.installed-cli
	$(BIN)/rolling-memory demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

lint: $(VENV)/.installed-dev
	$(BIN)/python -m ruff check langchain_rolling_memory tests benchmarks scripts examples
	$(BIN)/python -m ruff format --check langchain_rolling_memory tests benchmarks scripts examples
	$(BIN)/python -m mypy

check: test lint

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache
