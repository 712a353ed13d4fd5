"""scripts/version_matrix.py: which interpreters it picks and the table it prints (not the slow run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "version_matrix.py"


@pytest.fixture
def matrix() -> ModuleType:
    spec = importlib.util.spec_from_file_location("version_matrix", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["version_matrix"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("version_matrix", None)


def test_it_picks_the_oldest_and_newest_python_that_requires_python_allows(
    matrix: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for version in ("3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0", "3.13.0t-dev"):
        python = tmp_path / "versions" / version / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.touch()
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    chosen = [p.parents[1].name for p in matrix._pythons([])]
    assert chosen == [
        "3.11.7",
        "3.13.0",
    ]  # requires-python is >=3.11; a free-threaded dev build is not a release
    assert [p.parents[1].name for p in matrix._pythons(["3.12"])] == ["3.12.1"]


def test_the_table_has_one_row_per_run_with_counts_versions_and_install_failures(matrix: ModuleType) -> None:
    rows = [
        matrix.Row(
            "3.11.7", "lowest-direct", "ok", {"passed": 10, "failed": 1}, {"langchain-core": "1.8.0"}, 1.0
        ),
        matrix.Row("3.13.0", "lowest-direct", "No solution found", {}, {}, 1.0),
    ]
    table = matrix._table(rows).splitlines()
    assert table[0].startswith("| python | resolution | passed | failed | errors | skipped | langchain-core")
    assert table[2] == "| 3.11.7 | lowest-direct | 10 | 1 | 0 | 0 | 1.8.0 |"
    assert "install failed: No solution found" in table[3]
