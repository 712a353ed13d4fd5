"""The module paths before the folders were the layers (issue 21) work for one release: each
old path is the new module itself, and importing it warns with the new path. So does the lab's
path inside the library, now the distribution langchain-rolling-memory-lab (issue 25)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import langchain_rolling_memory
from langchain_rolling_memory._compat import KEPT_NAMES, LAB, LAB_PACKAGE, MOVED, MOVED_INTO_PACKAGE
from langchain_rolling_memory.adapters.chat_histories import RollingSummaryChatMessageHistory
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.stores.api import RollingStore

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(langchain_rolling_memory.__file__).parent


@contextlib.contextmanager
def first_import(old: str) -> Iterator[None]:
    """`old` imported as if for the first time; afterwards, as it was before."""
    parent_name, _, leaf = old.rpartition(".")
    parent = sys.modules[parent_name]
    saved = sys.modules.pop(old, None)
    attribute = vars(parent).pop(leaf, None)
    try:
        yield
    finally:
        sys.modules.pop(old, None)
        vars(parent).pop(leaf, None)
        if saved is not None:
            sys.modules[old] = saved
        if attribute is not None:
            setattr(parent, leaf, attribute)


@pytest.mark.parametrize(
    "old", sorted(MOVED), ids=lambda name: name.removeprefix("langchain_rolling_memory.")
)
def test_an_old_path_is_the_new_module_and_warns(old: str) -> None:
    new = MOVED[old]
    with first_import(old):
        with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}\b") as caught:
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
        assert sys.modules[old] is sys.modules[new]
    assert len(caught) == 1


@pytest.mark.parametrize(
    "old", sorted(MOVED), ids=lambda name: name.removeprefix("langchain_rolling_memory.")
)
def test_an_old_path_has_no_file_left_and_the_new_one_has(old: str) -> None:
    relative = old.split(".")[1:]
    assert not PACKAGE.joinpath(*relative).with_suffix(".py").exists(), f"{old} is a module again"
    assert importlib.util.find_spec(MOVED[old]) is not None


@pytest.mark.parametrize(
    "old", sorted(KEPT_NAMES), ids=lambda name: name.removeprefix("langchain_rolling_memory.")
)
def test_an_old_path_keeps_the_names_it_exported_from_elsewhere(old: str) -> None:
    with first_import(old):
        with pytest.warns(DeprecationWarning, match="moved to"):
            module = importlib.import_module(old)
        for name, defined_in in KEPT_NAMES[old].items():
            assert getattr(module, name) is getattr(
                importlib.import_module(f"langchain_rolling_memory.{defined_in}"), name
            )


def test_names_through_an_old_path_are_the_same_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = "langchain_rolling_memory.stores.base", "langchain_rolling_memory.stores.api"
    with first_import(old):
        with pytest.warns(DeprecationWarning, match="stores.base moved to"):
            old_module = importlib.import_module(old)
        assert old_module.RollingStore is RollingStore
        assert isinstance(langchain_rolling_memory.open_store("memory://"), old_module.RollingStore)
        # Patching through the old path patches the code that runs.
        patched = type("PatchedStore", (), {})
        monkeypatch.setattr(old_module, "RollingStore", patched)
        assert importlib.import_module(new).RollingStore is patched


def test_the_old_engine_module_names_come_from_the_compaction_module(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(MOVED_INTO_PACKAGE) == {"langchain_rolling_memory.engine"}
    package = vars(langchain_rolling_memory.engine)
    monkeypatch.delitem(package, "Compactor", raising=False)
    with pytest.warns(
        DeprecationWarning, match=r"engine\.Compactor moved to .*engine\.compaction\.Compactor"
    ) as caught:
        from langchain_rolling_memory.engine import Compactor as OldCompactor
    assert OldCompactor is Compactor
    assert len(caught) == 1  # then kept by the package: said once, as an import is
    monkeypatch.delitem(package, "Compactor")
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        _ = langchain_rolling_memory.engine.NoSuchName  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("package", "store"),
    [
        ("memory", "InMemoryRollingStore"),
        ("sqlite", "SQLiteRollingStore"),
        ("postgres", "PostgresRollingStore"),
        ("redis", "RedisRollingStore"),
    ],
)
def test_an_old_backend_module_is_its_package_exporting_the_store(package: str, store: str) -> None:
    module = importlib.import_module(f"langchain_rolling_memory.stores.{package}")
    assert module.__all__ == [store]
    assert getattr(module, store) is getattr(importlib.import_module(f"{module.__name__}.store"), store)


def test_the_warning_points_at_the_code_that_imports_the_old_path() -> None:
    code = (
        "import sys\n"
        "from langchain_rolling_memory.history import RollingSummaryChatMessageHistory\n"
        "from langchain_rolling_memory.engine import Compactor\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "<string>:2: DeprecationWarning: langchain_rolling_memory.history moved to" in done.stderr
    assert "langchain_rolling_memory.adapters.chat_histories" in done.stderr
    assert "<string>:3: DeprecationWarning: langchain_rolling_memory.engine.Compactor moved to" in done.stderr
    assert RollingSummaryChatMessageHistory.__module__ == "langchain_rolling_memory.adapters.chat_histories"


def _old_lab_loaded() -> list[str]:
    return [name for name in sys.modules if name == LAB or name.startswith(f"{LAB}.")]


@pytest.mark.parametrize("leaf", ["", ".cli", ".eval_report"])
def test_the_labs_old_path_is_the_lab_distributions_module_and_warns(leaf: str) -> None:
    new = importlib.import_module(LAB_PACKAGE + leaf)
    for name in _old_lab_loaded():
        del sys.modules[name]
    vars(langchain_rolling_memory).pop("lab", None)
    try:
        with pytest.warns(DeprecationWarning, match=" moved to ") as caught:  # the old parent's too, once
            old, old_cli = (importlib.import_module(name) for name in (LAB + leaf, f"{LAB}.cli"))
        assert old is new and sys.modules[LAB + leaf] is new
        # A submodule of the old path is the lab's own, never a second copy of its file.
        assert old_cli is importlib.import_module(f"{LAB_PACKAGE}.cli")
        said = [str(w.message).split(":")[0] for w in caught]
        assert f"{LAB}{leaf} moved to {LAB_PACKAGE}{leaf}" in said
        assert said.count(f"{LAB} moved to {LAB_PACKAGE}") == 1
    finally:
        for name in _old_lab_loaded():
            del sys.modules[name]
        vars(langchain_rolling_memory).pop("lab", None)


def test_the_labs_old_path_without_the_lab_names_what_to_install() -> None:
    code = (
        "import sys\n"
        f"sys.modules[{LAB_PACKAGE!r}] = None  # as if not installed\n"
        "import langchain_rolling_memory.lab.cli\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"ModuleNotFoundError: {LAB} moved to the distribution langchain-rolling-memory-lab "
        f"(import {LAB_PACKAGE}), which is not installed; "
        "install it with: pip install 'langchain-rolling-memory[cli]'"
    ), done.stderr
    assert not PACKAGE.joinpath("lab").exists()


def test_the_rewrite_script_turns_old_paths_into_new_ones_and_leaves_new_ones() -> None:
    spec = importlib.util.spec_from_file_location("moved_imports", ROOT / "scripts" / "moved_imports.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    old = (
        "from langchain_rolling_memory.engine import Compactor\n"
        "from langchain_rolling_memory.stores import redis_erase as erase\n"
        "import langchain_rolling_memory.policy as policy\n"
        "patch('langchain_rolling_memory.stores.base.RollingStore.read')\n"
        "from langchain_rolling_memory.stores.sqlite import SQLiteRollingStore\n"
        "from langchain_rolling_memory.lab.cli import main\n"
    )
    new = (
        "from langchain_rolling_memory.engine.compaction import Compactor\n"
        "import langchain_rolling_memory.stores.redis.erase as erase\n"
        "import langchain_rolling_memory.core.cuts as policy\n"
        "patch('langchain_rolling_memory.stores.api.RollingStore.read')\n"
        "from langchain_rolling_memory.stores.sqlite import SQLiteRollingStore\n"
        "from langchain_rolling_memory_lab.cli import main\n"
    )
    assert script.rewrite(old) == new
    assert script.rewrite(new) == new
