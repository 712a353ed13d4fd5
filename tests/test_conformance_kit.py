"""The conformance kit (`langchain_rolling_memory.testing`) tested as a backend author uses it:
a test module that subclasses `RollingStoreConformance`, run by pytest in-process (`pytester`)
with pytest's defaults (pytest-asyncio in strict mode, no project config).

The in-memory reference passes it, with only the checks that need an undefined hook skipped
(and saying which hook); each deliberately broken backend of `broken_stores` fails it, on the
checks of the promise it drops; a class without a `store` fixture says what to define; and the
package imports without pytest while the kit, without it, names the extra to install.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_rolling_memory.testing import RollingStoreConformance

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
# The inner runs set the loop scope as pytest-asyncio asks its users to (else it warns each run).
INNER_ARGS = ("-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function")

AUTHOR_MODULE = """
import pytest

from {module} import {backend}
from langchain_rolling_memory.testing import RollingStoreConformance


class Test{backend}(RollingStoreConformance):
    @pytest.fixture
    def store(self):
        with {backend}() as store:
            yield store
"""
"""A backend author's test module, as the docs show it: the kit, a `store` fixture, no hook."""


# The checks that need a hook the author module does not define (raw_contents, reopen,
# set_schema_version); each test id appears once per parameter set.
NEEDS_A_HOOK = {
    "test_bad_batches_raise_and_write_nothing",
    "test_a_compaction_that_claimed_before_an_erase_never_installs_after_it",
    "test_another_clients_session_is_refused_and_nothing_written",
    "test_purge_deletes_sessions_not_written_since_the_cutoff",
    "test_forget_leaves_no_row_or_key_of_the_client",
    "test_unsafe_ids_are_refused_and_nothing_is_written",
    "test_a_new_store_object_sees_the_same_data",
    "test_a_store_written_by_a_newer_schema_is_refused",
    "test_async_methods_match_the_sync_ones",
    "test_a_summary_is_never_installed_on_a_session_with_no_row",
    "test_the_async_install_checks_the_generation_too",
    "test_a_fact_planned_from_an_erased_or_foreign_session_is_refused_and_nothing_written",
}

# What each broken backend must fail on, at least (the promise it drops).
CAUGHT_BY = {
    "OwnerBlindSearch": {
        "test_a_session_comes_back_only_to_its_owner_now",
        "test_a_session_searched_with_its_old_owner_gives_nothing_of_the_new_one",
        "test_the_async_search_filters_the_owner_in_the_statement_too",
    },
    "GenerationBlindInstall": {
        "test_an_install_needs_the_generation_it_was_planned_from",
        "test_an_install_planned_before_an_erase_is_refused_after_it",
    },
    "SharedLease": {
        "test_lease_is_exclusive_until_released",
        "test_expired_lease_can_be_taken_over",
    },
    "ForgetKeepsFacts": {"test_forget_leaves_no_row_or_key_of_the_client"},
}


def _run_kit(pytester: pytest.Pytester, backend: str, module: str = "broken_stores") -> dict[str, set[str]]:
    """Run the kit on `backend` as its author would; outcome -> names of the tests (parameters dropped)."""
    pytester.makepyfile(test_my_backend=AUTHOR_MODULE.format(module=module, backend=backend))
    # The loop scope set as pytest-asyncio asks its users to (else it warns on every run).
    recorder = pytester.inline_run(
        "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function"
    )
    found: dict[str, set[str]] = {}
    for report in recorder.getreports("pytest_runtest_logreport"):
        if report.when == "call" or report.outcome != "passed":
            found.setdefault(report.outcome, set()).add(report.nodeid.split("::")[-1].split("[")[0])
    return found


def test_the_in_memory_reference_passes_the_kit_and_skips_only_what_needs_a_hook(
    pytester: pytest.Pytester,
) -> None:
    outcomes = _run_kit(pytester, "InMemoryRollingStore", "langchain_rolling_memory.stores")
    assert set(outcomes) == {"passed", "skipped"}, outcomes.get("failed")
    assert outcomes["skipped"] == NEEDS_A_HOOK
    every = {name for name in dir(RollingStoreConformance) if name.startswith("test_")}
    assert outcomes["passed"] | outcomes["skipped"] == every


@pytest.mark.parametrize("backend", sorted(CAUGHT_BY))
def test_the_kit_fails_a_backend_that_drops_a_promise(pytester: pytest.Pytester, backend: str) -> None:
    failed = _run_kit(pytester, backend).get("failed", set())
    assert CAUGHT_BY[backend] <= failed, f"{backend}: the kit missed {sorted(CAUGHT_BY[backend] - failed)}"


def test_a_suite_without_a_store_fixture_says_what_to_define(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_forgotten="from langchain_rolling_memory.testing import RollingStoreConformance\n\n\n"
        "class TestForgotten(RollingStoreConformance):\n    pass\n"
    )
    result = pytester.runpytest_inprocess(*INNER_ARGS, "-k", "test_append_returns")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*TestForgotten defines no `store` fixture; define one that yields an empty store*"]
    )


def test_the_package_imports_without_pytest_and_the_kit_names_the_extra(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['pytest'] = sys.modules['pytest_asyncio'] = None  # as if not installed\n"
        "import langchain_rolling_memory, langchain_rolling_memory.stores\n"
        "import langchain_rolling_memory.testing\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("langchain_rolling_memory.errors.MissingExtraError: "), done.stderr
    assert "pip install 'langchain-rolling-memory[testing]'" in last


def _readme_example() -> tuple[str, int]:
    """The docs' "Writing a backend" test module, and the number of checks it says it runs."""
    section = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8").split("## Writing a backend", 1)[1]
    section = section.split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    count = re.search(r"It runs (\d+) checks", section)
    assert block and count, "docs/backends.md's Writing a backend section lost its example or its count"
    return block.group(1), int(count.group(1))


def test_the_readme_example_runs_the_kit_and_says_how_many_checks(pytester: pytest.Pytester) -> None:
    source, count = _readme_example()
    pytester.makepyfile(test_my_backend=source)
    recorder = pytester.inline_run(*INNER_ARGS)
    passed, skipped, failed = recorder.listoutcomes()
    assert not failed, [report.nodeid for report in failed]
    assert len(passed) + len(skipped) == count
    assert {report.nodeid.split("::")[-1].split("[")[0] for report in skipped} == NEEDS_A_HOOK
