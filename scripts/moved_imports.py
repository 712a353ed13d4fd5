"""Rewrite the module paths before issue 21's layout into the new ones, in place (and the lab's
old path, ``langchain_rolling_memory.lab``, into its distribution's ``langchain_rolling_memory_lab``).

For a branch started before the move: ``python scripts/moved_imports.py $(git diff --name-only main...)``
then ``ruff check --select I --fix`` to sort the imports again. Reads the table of
`langchain_rolling_memory._compat`; prints the files it changed.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

# Read by path: a tree half merged may not import as a package yet.
_SPEC = importlib.util.spec_from_file_location(
    "_moved_table", Path(__file__).resolve().parents[1] / "langchain_rolling_memory" / "_compat.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_TABLE_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_TABLE_MODULE)
MOVED: dict[str, str] = _TABLE_MODULE.MOVED
MOVED_INTO_PACKAGE: dict[str, str] = _TABLE_MODULE.MOVED_INTO_PACKAGE

_DOTTED = re.compile(r"\blangchain_rolling_memory(?:\.[A-Za-z_]\w*)+")
_FROM_PACKAGE = re.compile(
    r"^(\s*)from (langchain_rolling_memory(?:\.\w+)*) import (\w+)(?: as (\w+))?\s*$", re.M
)
_TABLE = {**MOVED, **MOVED_INTO_PACKAGE, _TABLE_MODULE.LAB: _TABLE_MODULE.LAB_PACKAGE}
_NEW = tuple(sorted(set(_TABLE.values())))


def _dotted(match: re.Match[str]) -> str:
    if (match.group(0) + ".").startswith(tuple(f"{new}." for new in _NEW)):
        return match.group(0)  # a new path already (``engine.compaction`` is not ``engine`` + more)
    parts = match.group(0).split(".")
    for end in range(len(parts), 1, -1):
        new = _TABLE.get(".".join(parts[:end]))
        if new is not None:
            return ".".join([new, *parts[end:]])
    return match.group(0)


def _from_package(match: re.Match[str]) -> str:
    # ``from langchain_rolling_memory.stores import redis_erase as erase``: an old module
    # named as a package's attribute.
    indent, package, name, alias = match.groups()
    new = MOVED.get(f"{package}.{name}")
    return match.group(0) if new is None else f"{indent}import {new} as {alias or name}"


def rewrite(text: str) -> str:
    """`text` with every old module path replaced by its new one."""
    return _DOTTED.sub(_dotted, _FROM_PACKAGE.sub(_from_package, text))


def main(paths: list[str]) -> int:
    for name in paths:
        path = Path(name)
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
