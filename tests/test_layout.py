"""The package's layout as a contract: the library never imports the lab (a distribution of its
own, lab/), no module imports itself back through another (no import cycle), and no module builds
on LangChain's deprecated `RunnableWithMessageHistory` or silences a warning."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langchain_rolling_memory"
NAME = PACKAGE.name
LAB = PACKAGE.parent / "lab" / "langchain_rolling_memory_lab"  # the lab distribution's package
LAB_NAME = LAB.name
OLD_LAB = f"{NAME}.lab"  # its path inside the library before, served by _compat for one release


def _module_name(path: Path) -> str:
    parts = path.relative_to((LAB if path.is_relative_to(LAB) else PACKAGE).parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules of the library or the lab that `path` imports, at any level (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(NAME):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(NAME))
    return found


MODULES = {_module_name(p): p for p in [*sorted(PACKAGE.rglob("*.py")), *sorted(LAB.rglob("*.py"))]}
GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def _is_lab(module: str) -> bool:
    return module.split(".")[0] == LAB_NAME or module == OLD_LAB or module.startswith(f"{OLD_LAB}.")


def test_the_lab_left_the_library() -> None:
    assert not (PACKAGE / "lab").exists(), "the lab is its own distribution: lab/langchain_rolling_memory_lab"
    assert sum(1 for m in MODULES if m.startswith(LAB_NAME)) > 10


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_library_never_imports_the_lab_nor_the_lab_its_old_path(module: str) -> None:
    imported = _imports(MODULES[module])
    old = sorted(m for m in imported if m == OLD_LAB or m.startswith(f"{OLD_LAB}."))
    assert not old, f"{module} imports the lab's old path {old}: import {LAB_NAME}"
    if module.startswith(LAB_NAME):
        return  # the lab may import any of the library
    lab = sorted(m for m in imported if _is_lab(m))
    assert not lab, f"{module} imports the lab: {lab}"


def _cycle_from(start: str) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in GRAPH[node]:
            if nxt == start and len(path) > 1:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


@pytest.mark.parametrize("module", sorted(m for m, p in MODULES.items() if p.name != "__init__.py"))
def test_no_module_imports_itself_back(module: str) -> None:
    assert _cycle_from(module) is None, f"import cycle: {' -> '.join(_cycle_from(module) or [])}"


# ---------------------------------------------------------------- the folders are the layers

LIBRARY = ("core", "runtime", "summarizers", "stores", "engine", "adapters")
ROOT_LAYER = "package"  # __init__.py: the public API
RULES: dict[str, set[str]] = {
    "errors": set(),
    "_compat": set(),
    "core": {"errors", "core"},
    "runtime": {"errors", "runtime"},
    "summarizers": {"errors", "core", "runtime", "summarizers"},
    "stores": {"errors", "core", "stores"},
    "engine": {"errors", "core", "runtime", "stores", "summarizers", "engine"},
    "adapters": {"errors", "core", "runtime", "stores", "summarizers", "engine", "adapters"},
    ROOT_LAYER: {"errors", "_compat", *LIBRARY},
    "testing": {"errors", "core", "stores", "testing"},
    "lab": {"errors", *LIBRARY, ROOT_LAYER, "lab"},
}
"""What each layer may import of the package: a folder, or a top-level module."""


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == LAB_NAME:
        return "lab"
    return ROOT_LAYER if len(parts) == 1 else parts[1]


def _allowed(module: str, target: str) -> bool:
    if _layer(target) in RULES[_layer(module)]:
        return True
    # A package's __init__ may serve the names of the old module it replaced (see `_compat`).
    return MODULES[module].name == "__init__.py" and target == f"{NAME}._compat"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_the_layers_its_folder_allows(module: str) -> None:
    layer = _layer(module)
    assert layer in RULES, (
        f"{module}: the folder {layer!r} has no rule in RULES (nor a row in docs/architecture.md)"
    )
    wrong = sorted(t for t in GRAPH[module] if not _allowed(module, t) and _layer(t) != layer)
    assert not wrong, f"{module} ({layer}) may import only {sorted(RULES[layer])}, imports {wrong}"


# The pure core: only these standard modules, and of the others only langchain-core's types
# and pydantic (the structured summary's schema). Out, among others: os, io, sys, sqlite3,
# socket, time, threading, asyncio, logging, random, uuid.
CORE_STDLIB = {
    "__future__", "abc", "bisect", "collections", "dataclasses", "datetime", "enum", "functools",
    "difflib", "hashlib", "heapq", "itertools", "json", "math", "numbers", "operator", "re", "string",
    "struct", "types", "typing", "unicodedata",
}  # fmt: skip
# hashlib: digests are pure functions of their input (graph_state fingerprints messages);
# difflib: string matching only (settings name the closest option to a misspelt one);
# struct: floats to bytes and back (`core.dense` packs the vectors every store keeps).
CORE_THIRD_PARTY = {"langchain_core", "pydantic"}
CLOCK_CALLS = {
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
    "time.time", "time.time_ns", "time.monotonic", "time.perf_counter",
}  # fmt: skip
IO_CALLS = {"open", "print", "input", "breakpoint"}
CORE = sorted(m for m in MODULES if _layer(m) == "core")


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted name it was imported as (``Date`` -> ``datetime.date``)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


@pytest.mark.parametrize("module", CORE)
def test_the_core_does_no_io_and_reads_no_clock(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    outside = sorted(imported - CORE_STDLIB - CORE_THIRD_PARTY - {NAME})
    assert not outside, f"{module} is pure: it may not import {outside}"
    aliases = _aliases(tree)
    calls = {_dotted(node.func, aliases) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert not calls & CLOCK_CALLS, f"{module} reads the clock: {sorted(calls & CLOCK_CALLS)} (inject 'now')"
    assert not calls & IO_CALLS, f"{module} does I/O: {sorted(calls & IO_CALLS)}"


# ---------------------------------------------------------------- no deprecated base, no silenced warning

DEPRECATED = "RunnableWithMessageHistory"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_runnable_with_message_history(module: str) -> None:
    # Deprecated in langchain-core 1.x, removed in 2.0 (issue 22): `with_rolling_memory` is built on
    # `Runnable`. The histories stay `BaseChatMessageHistory`, so the users of that class keep
    # working (the tests and the README show them in it), but no module of ours, the lab's
    # included, needs it.
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    imported = set(_aliases(tree).values())
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    wrong = sorted(
        name
        for name in imported
        if name.endswith(DEPRECATED) or name.startswith("langchain_core.runnables.history")
    )
    assert not wrong, f"{module} imports {wrong}: build on langchain_core.runnables.Runnable instead"
    assert DEPRECATED not in used, f"{module} reaches {DEPRECATED} as an attribute"


def _ignore_filters(tree: ast.AST) -> list[int]:
    """Lines that install a warnings filter whose action is "ignore"."""
    aliases = _aliases(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if _dotted(node.func, aliases) not in ("warnings.filterwarnings", "warnings.simplefilter"):
            continue
        action = (
            node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "action"), None)
        )
        if not isinstance(action, ast.Constant) or action.value == "ignore":
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_silences_a_warning(module: str) -> None:
    # A warning (a deprecation above all) is the user's to see or to filter: the package hides
    # none, so it cannot lean on a deprecated class while silencing what that class says.
    lines = _ignore_filters(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    assert not lines, f"{module} installs an 'ignore' warnings filter at lines {lines}"


BACKENDS = {"memory": "InMemoryRollingStore", "sqlite": "SQLiteRollingStore", "postgres": "PostgresRollingStore", "redis": "RedisRollingStore"}  # fmt: skip


def _backend(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "stores" and parts[2] in BACKENDS else None


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if _layer(m) == "stores" and m != f"{NAME}.stores")
)
def test_a_backend_imports_no_other_and_the_shared_store_modules_none(module: str) -> None:
    # stores/__init__.py exports the two backends that need no extra; urls.py imports the
    # backend a URL names by its dotted name, when used.
    others = sorted(t for t in GRAPH[module] if _backend(t) not in (None, _backend(module)))
    assert not others, f"{module} imports another backend: {others}"


def _third_party(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return {name.split(".")[0] for name in names}


TEST_TOOLS = {"pytest", "_pytest", "pytest_asyncio", "hypothesis"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) != "testing"))
def test_only_the_testing_kit_imports_test_tools(module: str) -> None:
    # pytest is no runtime dependency: only the kit needs it (the `testing` extra).
    tools = sorted(_third_party(module) & TEST_TOOLS)
    assert not tools, f"{module} imports {tools}: only langchain_rolling_memory.testing may"


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if _backend(m) and not m.endswith((".aio", ".store")))
)
def test_only_the_store_class_joins_a_backend_and_its_async_twin(module: str) -> None:
    aio = sorted(t for t in GRAPH[module] if t.endswith(".aio"))
    assert not aio, f"{module} imports {aio}: only the backend's store.py joins its twins"


@pytest.mark.parametrize(
    "module",
    [f"{NAME}.stores.postgres.{m}" for m in ("sql", "sync", "aio", "search", "reads", "setup", "conn")]
    + [f"{NAME}.stores.redis.{m}" for m in ("scripts", "sync", "aio", "search", "erase", "layout")],
)
def test_the_twins_and_their_shared_modules_import_no_driver(module: str) -> None:
    drivers = _third_party(module) & {"psycopg", "psycopg_pool", "redis"}
    assert not drivers, f"{module} imports {drivers}: the store hands its twins the driver"


def test_every_backend_has_the_same_shape() -> None:
    stores = PACKAGE / "stores"
    folders = sorted(p.name for p in stores.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(BACKENDS), "one sub-package per backend, each in BACKENDS"
    for folder, store in BACKENDS.items():
        assert (stores / folder / "store.py").exists(), f"stores/{folder}/store.py holds the store class"
        init = ast.parse((stores / folder / "__init__.py").read_text(encoding="utf-8"))
        exported = [
            ast.literal_eval(node.value)
            for node in init.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets)
        ]
        assert exported == [[store]], f"stores/{folder}/__init__.py exports {store} only"


# ---------------------------------------------------------------- the docs' layer map

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
HEADING = "## The layers, as the package is built"


def _layer_table() -> list[list[str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/architecture.md has no {HEADING!r} section"
    lines = text.split(HEADING, 1)[1].strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _named(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _tree() -> dict[str, set[str]]:
    """Layer -> its modules, as paths relative to their layer's folder (or to the package)."""
    found: dict[str, set[str]] = {
        "lab": {p.relative_to(LAB).as_posix() for p in LAB.rglob("*.py")} - {"__init__.py"}
    }
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) == 1:
            found.setdefault(path.stem if path.stem in RULES else ROOT_LAYER, set()).add(relative.name)
        elif relative.name != "__init__.py":
            found.setdefault(relative.parts[0], set()).add("/".join(relative.parts[1:]))
    return found


def test_the_docs_layer_map_matches_the_tree_and_the_rules() -> None:
    rows = _layer_table()
    table = {row[0]: row for row in rows}
    assert list(table) == list(RULES), f"one row per layer, in RULES' order: {list(RULES)}"
    tree = _tree()
    for layer, (_, modules, _owns, may_import) in table.items():
        named = _named(modules)
        folder = f"{layer}/"
        listed = {m for m in named if m != folder}
        assert listed == tree.get(layer, set()), (
            f"docs/architecture.md row {layer!r}: not in the tree {sorted(listed - tree.get(layer, set()))}, "
            f"not in the docs {sorted(tree.get(layer, set()) - listed)}"
        )
        assert set(_named(may_import)) == RULES[layer], (
            f"docs/architecture.md row {layer!r} may import {sorted(RULES[layer])}"
        )
