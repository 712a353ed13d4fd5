"""The package's layout as a contract: the library never imports the lab, and no module
imports itself back through another (no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "langchain_rolling_memory"
NAME = PACKAGE.name


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Modules of this package that `path` imports, at any level (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(NAME):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith(NAME))
    return found


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(f"{NAME}.lab")))
def test_the_library_never_imports_the_lab(module: str) -> None:
    lab = sorted(m for m in GRAPH[module] if m.startswith(f"{NAME}.lab"))
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
