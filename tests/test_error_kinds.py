"""One exception per kind of mistake (issue 21): the library raises a bare `ValueError` nowhere.

A wrong value is one of the package's `ValueError` subclasses, each named for its kind (a
setting, an argument, an id, a text, a fact, a conversation file; see `errors`), so that the
same mistake raises the same class whichever adapter or store it is made through, and
``except ValueError`` still catches all of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from langchain_rolling_memory import errors, open_store
from langchain_rolling_memory.errors import ConfigurationError, InvalidArgumentError, RollingMemoryError

PACKAGE = Path(__file__).resolve().parents[1] / "langchain_rolling_memory"
LIBRARY = sorted(PACKAGE.rglob("*.py"))  # the lab is a distribution of its own (lab/)


def _raised_names(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                found.append((node.lineno, target.id))
    return found


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_library_raises_no_bare_value_error(path: Path) -> None:
    bare = [line for line, name in _raised_names(path) if name == "ValueError"]
    assert not bare, (
        f"{path.name} raises a bare ValueError at lines {bare}: raise the errors.py class of its kind"
    )


def test_every_value_error_kind_is_a_package_error_and_documented_in_the_tree() -> None:
    kinds = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, ValueError) and issubclass(c, RollingMemoryError)
    ]
    assert InvalidArgumentError in kinds and ConfigurationError in kinds
    for kind in kinds:
        assert kind.__name__ in (errors.__doc__ or ""), (
            f"{kind.__name__} is missing from the tree in errors.py"
        )
        assert kind.__doc__, kind.__name__


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.read("s1", limit=-1),
        lambda s: s.read("s1", after_seq=-2),
        lambda s: s.append("s1", [HumanMessage("a")], token_counts=[1, 2]),
        lambda s: s.set_state("s1", {"when": object()}),
    ],
    ids=["negative limit", "negative seq", "token counts", "state not JSON"],
)
def test_a_call_given_a_value_it_cannot_take_raises_invalid_argument_and_writes_nothing(call) -> None:  # type: ignore[no-untyped-def]
    store = open_store("memory://")
    with pytest.raises(InvalidArgumentError):
        call(store)
    assert store.read("s1") == [] and store.get_state("s1") == {}
