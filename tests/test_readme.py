"""The README's examples run as a reader would run them: in order, in one folder, twice.

Every ```python block runs in a fresh interpreter (this test's), with the working directory set to
one shared folder and no provider key in the environment, so blocks that reuse a file
(``sqlite:///memory.db``), a client or a session meet what the earlier blocks left there. The
whole sequence then runs a second time in the same folder: an example must still pass when it is
run again. The CLI commands run the same way, after the Python blocks, in the same folder: what
``rolling-memory demo`` made is what ``facts list`` and ``inspect`` must find. The machinery is
shared with the docs pages' test (`doc_runs.py`); the README marks no block to skip.

Each block and command is its own test, with its own time budget (`STEP_TIMEOUT`, and the
suite's per-test timeout): under machine load a slow block fails alone, never the whole file.
"""

from __future__ import annotations

import re

import pytest
from doc_runs import (
    CLI_WANTED,
    README,
    ROOT,
    PageRuns,
    Step,
    blocks,
    check_the_cli_examples_find_what_the_demo_made,
    cli_commands,
    fences,
    steps,
)

RUNS = 2
STEPS = steps(README, RUNS)


@pytest.fixture(scope="module")
def readme_runs(tmp_path_factory: pytest.TempPathFactory) -> PageRuns:
    return PageRuns(tmp_path_factory.mktemp("readme"), STEPS)


def test_readme_has_python_examples_and_the_cli_commands() -> None:
    assert len(blocks(README)) >= 3, "the README should show runnable ```python examples"
    assert [b for b in blocks(README) if b.skip is not None] == [], "every README example runs"
    assert {info for _, info in fences(README)} <= {"python", "text"}
    commands = cli_commands(README)
    for wanted in CLI_WANTED:
        assert any(c.startswith(wanted) for c in commands), f"no `{wanted}` example in the CLI section"


REPOSITORY = "https://github.com/langchain-rolling-memory/langchain-rolling-memory/blob/main/"


def test_the_readme_is_short_starts_with_install_and_links_into_the_docs() -> None:
    """A package index shows the README alone: short, Install first, every link absolute."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "the README grows past 250 lines: move the detail to docs/"
    assert re.findall(r"^## (.+)$", text, re.MULTILINE)[0] == "Install"
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets and all(t.startswith("https://") for t in targets), (
        "a relative link breaks on an index page"
    )
    files = [t.removeprefix(REPOSITORY) for t in targets if t.startswith(REPOSITORY)]
    assert any(f.startswith("docs/") for f in files)
    assert [f for f in files if not (ROOT / f).is_file()] == [], "a README link to a file that does not exist"


@pytest.mark.parametrize("step", STEPS, ids=lambda step: step.id)
def test_readme_example_runs_in_order_in_one_folder(readme_runs: PageRuns, step: Step) -> None:
    """One test (and one time budget) per block or command, run in the README's order."""
    outcome = readme_runs.outcome(step.run, step.key)
    assert outcome.returncode == 0, outcome.explain()


def test_the_first_example_shows_no_deprecation_warning(readme_runs: PageRuns) -> None:
    first = readme_runs.outcome(0, "python 0")
    assert first.returncode == 0, first.explain()
    assert "DeprecationWarning" not in first.stderr, first.explain()


@pytest.mark.parametrize("run", range(RUNS), ids=lambda r: f"run{r + 1}")
def test_the_cli_examples_find_what_the_demo_made(readme_runs: PageRuns, run: int) -> None:
    check_the_cli_examples_find_what_the_demo_made(readme_runs, cli_commands(README), run)
