"""Every docs page's examples run as a reader would run them: in order, in the page's own folder.

Each page of ``docs/`` is read on its own (a reader lands on one page): its ```python blocks run
in order in one folder made for that page, then its CLI commands (the CLI page's), once; the
README's test runs its examples twice to show they can be run again. A block that cannot run
offline carries ``<!-- skip: reason -->`` above its fence; `SKIPPED` lists how many each page
may have, so a new skip is a decision written here, and each one shows its reason in the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_runs import (
    CLI_WANTED,
    DOCS,
    FENCE_LANGUAGES,
    PageRuns,
    Step,
    blocks,
    check_the_cli_examples_find_what_the_demo_made,
    cli_commands,
    fences,
    steps,
)

PAGES = sorted(DOCS.rglob("*.md"))
STEPS = [step for page in PAGES for step in steps(page, 1, name=page.relative_to(DOCS).as_posix())]
SKIPPED = {
    # It shows the real call a reader makes with a key; the same code runs offline just above it
    # (dummy key, local URL), and tests/test_provider_wire.py runs it against a local server.
    "summarizers.md": 1,
}
CLI_PAGE = DOCS / "cli.md"


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PageRuns]:
    """One runner per page, each in its own folder, made when the page's first step runs."""
    runs: dict[str, PageRuns] = {}

    class Lazy(dict[str, PageRuns]):
        def __missing__(self, page: str) -> PageRuns:
            folder = tmp_path_factory.mktemp(Path(page).stem)
            runs[page] = self[page] = PageRuns(folder, [s for s in STEPS if s.page == page])
            return runs[page]

    return Lazy()


def test_the_docs_show_runnable_examples_and_every_skip_says_why() -> None:
    assert len(PAGES) >= 10, PAGES
    per_page = {page.relative_to(DOCS).as_posix(): blocks(page) for page in PAGES}
    assert sum(len(found) for found in per_page.values()) >= 15, "the docs should show runnable examples"
    skipped = {page: [b.skip for b in found if b.skip is not None] for page, found in per_page.items()}
    assert {page: len(reasons) for page, reasons in skipped.items() if reasons} == SKIPPED
    assert all(skipped[page] and all(skipped[page]) for page in SKIPPED), f"a skip with no reason: {skipped}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(DOCS).as_posix())
def test_every_code_fence_is_python_or_text_at_the_margin(page: Path) -> None:
    """A fence the runner would not see (``py``, indented, unlabelled) would be an example never run."""
    odd = [(indent, info) for indent, info in fences(page) if indent or info not in FENCE_LANGUAGES]
    assert odd == [], f"{page.name}: label fences python (runs) or text (does not), at the margin"


@pytest.mark.parametrize("step", STEPS, ids=lambda step: step.id)
def test_docs_example_runs_in_order_in_its_pages_folder(page_runs: dict[str, PageRuns], step: Step) -> None:
    if step.skip is not None:
        pytest.skip(f"{step.name}: {step.skip}")
    outcome = page_runs[step.page].outcome(step.run, step.key)
    assert outcome.returncode == 0, outcome.explain()


def test_the_cli_page_shows_the_commands_and_they_find_what_the_demo_made(
    page_runs: dict[str, PageRuns],
) -> None:
    commands = cli_commands(CLI_PAGE)
    for wanted in CLI_WANTED:
        assert any(c.startswith(wanted) for c in commands), f"no `{wanted}` example on the CLI page"
    check_the_cli_examples_find_what_the_demo_made(page_runs[CLI_PAGE.name], commands, 0)
