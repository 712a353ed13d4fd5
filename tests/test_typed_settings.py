"""A misspelt setting is an error for mypy as well as at run time.

This module is in mypy's files (pyproject ``[tool.mypy]``, strict, so ``warn_unused_ignores``):
each misspelt keyword below carries ``# type: ignore[call-arg]``. If an entry point lost its
typed ``**options: Unpack[...]`` (back to ``**options: Any``), the ignore would be unused and
mypy would fail; at run time each call must raise `ConfigurationError` naming the right name.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage

from langchain_rolling_memory import (
    Compactor,
    MemorySettings,
    RollingMemoryMiddleware,
    RollingSummaryChatMessageHistory,
    open_store,
    preset,
    session_history_factory,
    with_rolling_memory,
)
from langchain_rolling_memory.errors import ConfigurationError


def summarize(previous: str, messages: list[BaseMessage]) -> str:
    return f"{len(messages)} folded"


def _history() -> object:
    return RollingSummaryChatMessageHistory("s", summarizer=summarize, max_turn=12)  # type: ignore[call-arg]


def _middleware() -> object:
    return RollingMemoryMiddleware(store=open_store("memory://"), summarizer=summarize, max_turn=12)  # type: ignore[call-arg]


def _chain() -> object:
    model = GenericFakeChatModel(messages=iter([AIMessage("ok")]))
    return with_rolling_memory(model, store=open_store("memory://"), summarizer=summarize, max_turn=12)  # type: ignore[call-arg]


def _compactor() -> object:
    return Compactor.build(open_store("memory://"), summarize, max_turn=12)  # type: ignore[call-arg]


def _factory() -> object:
    return session_history_factory(open_store("memory://"), summarize, max_turn=12)  # type: ignore[call-arg]


def _preset() -> object:
    return preset("support", max_turn=12)  # type: ignore[call-arg]


def _replace() -> object:
    return MemorySettings().replace(max_turn=12)  # type: ignore[call-arg]


def _wrong_type() -> object:
    return RollingSummaryChatMessageHistory("s", summarizer=summarize, keep_last="2")  # type: ignore[arg-type]


MISSPELT: dict[str, Callable[[], object]] = {
    "RollingSummaryChatMessageHistory": _history,
    "RollingMemoryMiddleware": _middleware,
    "with_rolling_memory": _chain,
    "Compactor.build": _compactor,
    "session_history_factory": _factory,
    "preset": _preset,
    "MemorySettings.replace": _replace,
}


@pytest.mark.parametrize("owner", sorted(MISSPELT))
def test_a_misspelt_keyword_is_a_type_error_and_a_configuration_error(owner: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        MISSPELT[owner]()
    assert str(caught.value) == f"unknown option 'max_turn' for {owner}; did you mean 'max_turns'?"


def test_a_keyword_of_the_wrong_type_is_a_type_error_and_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"^keep_last must be a whole number, got keep_last='2'$"):
        _wrong_type()
