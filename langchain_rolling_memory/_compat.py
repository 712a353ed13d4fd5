"""The module paths before the folders were the layers (issue 21), kept for one release.

Owns the table of moves and the import hook that serves an old dotted name: importing
``langchain_rolling_memory.history`` gives the module now at
``langchain_rolling_memory.adapters.chat_histories``, the same object (so `isinstance`,
identity and monkeypatching hold), with a `DeprecationWarning` naming the new path. Two old
modules are now packages of the same name: the ``engine`` package serves the old module's
names through its ``__getattr__`` (`moved_attribute`), each backend package exports its store
class. The package's ``__init__`` installs the hook; nothing in the library imports an old path.

The lab (the CLI, demo, eval) left the package for a distribution of its own (issue 25):
``langchain_rolling_memory.lab`` and its submodules are served the same way from
``langchain_rolling_memory_lab`` when that is installed, and name what to install when it is not.
This is the one place the library names the lab, by a string, imported only on that old path.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.abc import Loader as _Loader
    from importlib.abc import MetaPathFinder as _MetaPathFinder
else:  # importlib.abc imports importlib.resources, pathlib, tempfile...: the protocols are enough
    _Loader = _MetaPathFinder = object

_PACKAGE = "langchain_rolling_memory"

_RELATIVE = {
    # core: pure
    "ids": "core.ids",
    "records": "core.records",
    "serde": "core.serde",
    "quoting": "core.quoting",
    "tool_pairs": "core.tool_pairs",
    "policy": "core.cuts",
    "limits": "core.trigger_keep",
    "prompts": "core.prompts",
    "topics": "core.topics",
    "search": "core.lexical_search",
    "recall": "core.recall_block",
    "framing": "core.framing",
    "fact_rules": "core.fact_rules",
    "usage": "core.usage",
    "planning": "core.planner",
    "presets": "core.presets",
    "summarizers.structured": "core.structured_summary",
    # runtime
    "background": "runtime.background",
    "tracing": "runtime.tracing",
    # engine (the old ``engine`` module is the package's `moved_attribute`)
    "extractor": "engine.fact_extractor",
    "context": "engine.memory_reads",
    "recalling": "engine.recaller",
    "shutdown": "engine.shutdown",
    # adapters
    "history": "adapters.chat_histories",
    "stored_history": "adapters.history_base",
    "runnable": "adapters.runnable",
    "agents": "adapters.middleware",
    "agent_run": "adapters.agent_run",
    "tools": "adapters.memory_tools",
    "erasure": "adapters.erasure",
    "graph_store": "adapters.langgraph_store",
    # stores (``stores.memory``, ``.sqlite``, ``.postgres``, ``.redis`` are packages exporting their store)
    "stores.backend": "stores.contract",
    "stores.base": "stores.api",
    "stores.searching": "stores.search_api",
    "stores.sqlite_sql": "stores.sqlite.sql",
    "stores.sqlite_search": "stores.sqlite.search",
    "stores.postgres_aio": "stores.postgres.aio",
    "stores.postgres_sync": "stores.postgres.sync",
    "stores.postgres_conn": "stores.postgres.conn",
    "stores.postgres_reads": "stores.postgres.reads",
    "stores.postgres_search": "stores.postgres.search",
    "stores.postgres_setup": "stores.postgres.setup",
    "stores.postgres_sql": "stores.postgres.sql",
    "stores.deadlines": "stores.postgres.deadlines",
    "stores.redis_aio": "stores.redis.aio",
    "stores.redis_sync": "stores.redis.sync",
    "stores.redis_erase": "stores.redis.erase",
    "stores.redis_layout": "stores.redis.layout",
    "stores.redis_scripts": "stores.redis.scripts",
    "stores.redis_search": "stores.redis.search",
}
MOVED: dict[str, str] = {f"{_PACKAGE}.{old}": f"{_PACKAGE}.{new}" for old, new in _RELATIVE.items()}
"""Old dotted module name -> the module that holds its code now."""

KEPT_NAMES: dict[str, dict[str, str]] = {
    f"{_PACKAGE}.policy": {"is_tool_safe": "core.tool_pairs", "pair_tool_calls": "core.tool_pairs"},
    f"{_PACKAGE}.agents": {"resolve_ids": "adapters.agent_run"},
    f"{_PACKAGE}.stores.base": {
        "FACT_SOURCES": "core.records",
        "Fact": "core.records",
        "FactPlan": "core.records",
        "FactSource": "core.records",
        "SCHEMA_VERSION": "stores.contract",
    },
}
"""Names an old module exported (its ``__all__``) that its new module no longer imports: the old
path still has them, from the module that defines them."""

MOVED_INTO_PACKAGE: dict[str, str] = {f"{_PACKAGE}.engine": f"{_PACKAGE}.engine.compaction"}
"""An old module whose name is now a package's -> the module its names moved to."""

LAB = f"{_PACKAGE}.lab"
"""The lab's old path: it and every module under it now live in `LAB_PACKAGE`."""
LAB_PACKAGE = "langchain_rolling_memory_lab"
LAB_MISSING = (
    f"{LAB} moved to the distribution langchain-rolling-memory-lab (import {LAB_PACKAGE}), "
    "which is not installed; install it with: pip install 'langchain-rolling-memory[cli]'"
)


def _bootstrap(filename: str) -> bool:
    return "importlib" in filename and "_bootstrap" in filename


def _warn(old: str, new: str, *, inside: tuple[str, ...] = ()) -> None:
    msg = f"{old} moved to {new}: import it from there (the old path goes in the next release)"
    # Point at the code that imported the old path. `warnings` does not count the import
    # system's bootstrap frames, so neither does this walk past them.
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
        (__name__, "importlib", "_frozen_importlib", *inside)
    ):
        frame = frame.f_back
        if not _bootstrap(frame.f_code.co_filename):
            level += 1
    warnings.warn(msg, DeprecationWarning, stacklevel=level)


class _MovedModule(_Loader):
    """Loads an old name as the new module itself: `sys.modules` then holds one object under both."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder, replaced in `exec_module`

    def exec_module(self, module: types.ModuleType) -> None:
        _warn(module.__name__, self.new)
        new = importlib.import_module(self.new)
        for name, defined_in in KEPT_NAMES.get(module.__name__, {}).items():
            if not hasattr(new, name):
                setattr(new, name, getattr(importlib.import_module(f"{_PACKAGE}.{defined_in}"), name))
        # The import system returns what `sys.modules` holds under the name once this returns.
        sys.modules[module.__name__] = new


class _MovedFinder(_MetaPathFinder):
    """Finds the old names only: consulted after the regular finders, which find every other."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModule(new))


class _LabModule(_MovedModule):
    """An old lab path: the module of the lab distribution, or an error naming what to install."""

    def exec_module(self, module: types.ModuleType) -> None:
        try:
            importlib.import_module(LAB_PACKAGE)
        except ModuleNotFoundError as exc:
            if exc.name != LAB_PACKAGE:
                raise
            raise ModuleNotFoundError(LAB_MISSING, name=module.__name__) from None
        super().exec_module(module)


class _LabFinder(_MetaPathFinder):
    """Finds the lab's old paths, before the regular finders: those would find a submodule in the
    lab package's folder and load a second copy of it under the old name."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != LAB and not fullname.startswith(f"{LAB}."):
            return None
        return importlib.machinery.ModuleSpec(fullname, _LabModule(LAB_PACKAGE + fullname[len(LAB) :]))


def install() -> None:
    """Serve the old module paths (idempotent; called by the package's ``__init__``)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
    if not any(isinstance(finder, _LabFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _LabFinder())


def moved_attribute(package: str, name: str) -> object:
    """A name of the old module `package` (now a package), from the module it moved to.

    The ``__getattr__`` of such a package calls this: a name that module defines is returned
    with a `DeprecationWarning` (once: the package keeps it); anything else raises
    `AttributeError` (so that ``from package import submodule`` still imports the submodule).
    """
    new = MOVED_INTO_PACKAGE[package]
    module = importlib.import_module(new)
    if name.startswith("__") or name not in vars(module):
        msg = f"module {package!r} has no attribute {name!r}"
        raise AttributeError(msg)
    _warn(f"{package}.{name}", f"{new}.{name}", inside=(package,))
    value = vars(module)[name]
    setattr(sys.modules[package], name, value)
    return value
