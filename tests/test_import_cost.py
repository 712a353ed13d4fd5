"""What importing the package costs: nothing but the package's own first module. Every public
name is served on first access (PEP 562), so the base import loads no CLI, no argparse, no
multiprocessing, no langsmith, no sqlite3, no lab (a distribution of its own, lab/); and the lab's
heavy dependencies (rich, matplotlib) are imported only where used. Each check runs in a fresh
interpreter, on this checkout's library and lab."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import langchain_rolling_memory

ROOT = Path(__file__).resolve().parents[1]
INIT = ROOT / "langchain_rolling_memory" / "__init__.py"
CHECKOUT = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lab")])}


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=CHECKOUT,
        capture_output=True,
        text=True,
        check=False,
    )


def _modules_after(code: str) -> set[str]:
    done = _fresh(f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


HEAVY = (
    "argparse",
    "multiprocessing",
    "sqlite3",
    "_sqlite3",
    "langsmith",
    "rich",
    "matplotlib",
    "importlib.metadata",
)


def test_importing_the_package_loads_no_cli_argparse_multiprocessing_langsmith_nor_sqlite() -> None:
    loaded = _modules_after("import langchain_rolling_memory")
    assert not [m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY]
    ours = sorted(m for m in loaded if m.startswith("langchain_rolling_memory"))
    assert ours == ["langchain_rolling_memory", "langchain_rolling_memory._compat"]


def test_a_chain_on_a_memory_store_loads_no_sqlite3_no_tenacity_and_a_sqlite_store_loads_sqlite3() -> None:
    memory = _modules_after(
        "from langchain_rolling_memory import extractive_summarizer, open_store, with_rolling_memory\n"
        "open_store('memory://').close()"
    )
    assert "tenacity" not in memory  # langchain-core's retry, imported once a summarizer retries
    assert "sqlite3" not in memory
    assert not [m for m in memory if m.startswith("langchain_rolling_memory_lab")]
    sqlite = _modules_after(
        "from langchain_rolling_memory import open_store\nopen_store('sqlite:///:memory:').close()"
    )
    assert "sqlite3" in sqlite


def test_the_whole_public_api_loads_no_lab_and_no_argparse_of_ours() -> None:
    loaded = _modules_after(
        "from langchain_rolling_memory import *\nfrom langchain_rolling_memory import __version__"
    )
    assert not [m for m in loaded if m.startswith("langchain_rolling_memory_lab")]


def test_every_public_name_and_subpackage_resolves_in_a_fresh_process() -> None:
    code = (
        "import langchain_rolling_memory as m\n"
        "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert m.stores.open_store is m.open_store and m.errors.StoreError is m.StoreError\n"
        "assert set(m.__all__) <= set(dir(m))\n"
        "print(m.__version__)\n"
    )
    done = _fresh(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == langchain_rolling_memory.__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nosuch'"):
        langchain_rolling_memory.nosuch  # noqa: B018
    with pytest.raises(ImportError):
        exec("from langchain_rolling_memory import nosuch", {})


def _type_checking_names() -> dict[str, str]:
    """The names the `if TYPE_CHECKING:` block imports (what type checkers see), by module."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "_TYPE_CHECKING")
    return {
        alias.name: node.module or ""
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_lazy_table_the_typed_imports_and_all_name_the_same_things() -> None:
    lazy = langchain_rolling_memory._LAZY
    typed = _type_checking_names()
    exported = set(langchain_rolling_memory.__all__) - {"__version__"}
    assert set(lazy) == set(typed) == exported
    for name, module in lazy.items():  # each name is the very object its typed import names
        typed_module = __import__(typed[name], fromlist=[name])
        assert getattr(typed_module, name) is getattr(langchain_rolling_memory, name), (name, module)


def test_the_cli_without_its_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import sys\nsys.modules['rich'] = None  # as if not installed\n"
        "from langchain_rolling_memory_lab.cli import main\n"
        "sys.exit(main(['demo']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=CHECKOUT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "pip install 'langchain-rolling-memory[cli]'" in done.stderr, done.stderr


def test_every_lab_module_but_the_renderers_imports_without_rich_or_matplotlib() -> None:
    """The lab's heavy dependencies are behind its extras: rich ([cli]) and matplotlib ([plot])
    are imported by a function that first names the extra (cli_render, rich's renderers, is
    imported only by such a function)."""
    lab = sorted(
        f"langchain_rolling_memory_lab.{p.stem}"
        for p in (ROOT / "lab" / "langchain_rolling_memory_lab").glob("*.py")
        if p.stem not in {"__init__", "cli_render"}
    )
    code = "import importlib, sys\nsys.modules['rich'] = sys.modules['matplotlib'] = None\n" + "".join(
        f"importlib.import_module({name!r})\n" for name in lab
    )
    done = _fresh(code)
    assert done.returncode == 0, done.stderr
