# Two entry points for a fresh machine with only Python 3 (and make):
#   make demo   the main job: the offline demo of a long conversation
#   make test   the whole test suite (unit, backends, notebooks), after setting everything up
#   make docs   the docs site (docs/, mkdocs.yml) into site/, warnings as errors
# and for CI (.ci/run): make lint, make dist (both distributions built and twine-checked),
# make test-newest (the newest release of every dependency).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pip 25.1 is the first to install PEP 735 dependency groups (--group), where dev and bench live.
PIP_MIN := pip>=25.1

.PHONY: demo test docs lint dist check test-newest clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

# The command (demo, replay, eval) is the second distribution in lab/: the library's [cli] extra
# requires it, and pip takes it from the folder given beside (it is not fetched from an index).
$(VENV)/.installed-dev: pyproject.toml lab/pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade "$(PIP_MIN)"
	$(BIN)/python -m pip install --quiet -e ".[all,notebooks]" -e ./lab --group dev
	touch $@

$(VENV)/.installed-cli: pyproject.toml lab/pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade "$(PIP_MIN)"
	$(BIN)/python -m pip install --quiet -e ".[cli]" -e ./lab
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/activate
	$(BIN)/python -m pip install --quiet --upgrade "$(PIP_MIN)"
	$(BIN)/python -m pip install --quiet -e . --group docs
	touch $@

demo: $(VENV)/.installed-cli
	$(BIN)/rolling-memory demo

# Two workers, each running whole test files (the README's examples run in order in one file).
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 --dist loadfile

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict  # the variable silences Material's end-of-life banner

lint: $(VENV)/.installed-dev
	$(BIN)/python -m ruff check langchain_rolling_memory lab tests benchmarks scripts examples
	$(BIN)/python -m ruff format --check langchain_rolling_memory lab tests benchmarks scripts examples
	$(BIN)/python -m mypy

# The two distributions' sdists and wheels into dist/, checked as an index would (twine --strict).
dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python -m build --no-isolation --outdir dist lab
	$(BIN)/python -m twine check --strict dist/*

check: test lint

# The tests that call models (the summarizer's retries, the providers' wire payloads and failures,
# the agents' middleware) in a throwaway venv holding the newest release of every dependency. The
# dev venv lags where an extra pins: google-genai holds tenacity below 9.2, so google is left out
# here (its cases deselected). Deprecations are errors: pytest's own filters (pyproject) already
# make every warning one but the named LangChain ones the legacy tests build on (a -W on the
# command line would override those); PYTHONWARNINGS reaches what runs outside them.
NEWEST ?= $(VENV)-newest
NEWEST_TESTS ?= tests/test_chat_model_summarizer.py tests/test_provider_wire.py \
	tests/test_provider_failures.py tests/test_agent_wire.py tests/test_agents.py \
	-k "not gemini and not test_keys_are_read_from_the_environment"
test-newest:
	rm -rf $(NEWEST)
	$(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install --quiet --upgrade "$(PIP_MIN)"
	$(NEWEST)/bin/python -m pip install --quiet -e ".[openai,postgres,redis,agents]" --group test
	@$(NEWEST)/bin/python -m pip list --format=freeze | grep -iE '^(langchain|langgraph|tenacity|openai)' | tr '\n' ' '; echo
	PYTHONWARNINGS=error::DeprecationWarning $(NEWEST)/bin/python -m pytest -q -p no:cacheprovider $(NEWEST_TESTS)
	rm -rf $(NEWEST)

clean:
	rm -rf $(VENV) $(VENV)-newest dist build lab/dist site .pytest_cache .mypy_cache .ruff_cache
