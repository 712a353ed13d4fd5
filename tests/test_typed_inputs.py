"""Inputs typed as users write them pass ``mypy --strict`` where the library takes them.

This module is in mypy's files (pyproject ``[tool.mypy]``): a summarizer function typed with
``list[BaseMessage]`` must be accepted by every ``summarizer=``, and ``trigger=`` / ``keep=``
written as in `SummarizationMiddleware` must type-check. At run time the tests check that the
promises hold: the messages do arrive as a `list`, the limits are the ones written.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import (
    RollingMemoryMiddleware,
    RollingSummaryChatMessageHistory,
    open_store,
    with_rolling_memory,
)
from langchain_rolling_memory.summarizers import as_summarizer

received: list[object] = []


def summarize_list(previous: str, messages: list[BaseMessage]) -> str:
    received.append(messages)
    return f"{len(messages)} messages, the last: {messages[-1].text}"


async def asummarize_list(previous: str, messages: list[BaseMessage]) -> str:
    received.append(messages)
    return f"{len(messages)} messages"


def summarize_sequence(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{len(messages)} messages"


def turns(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{i}") if i % 2 == 0 else AIMessage(f"a{i}") for i in range(n)]


def test_a_list_typed_function_gets_a_list() -> None:
    received.clear()
    history = RollingSummaryChatMessageHistory("s1", summarizer=summarize_list, max_turns=4, keep_last=2)
    history.add_messages(turns(5))
    assert history.summary == "3 messages, the last: q2"
    assert [type(m) for m in received] == [list]


async def test_an_async_list_typed_function_gets_a_list() -> None:
    received.clear()
    history = RollingSummaryChatMessageHistory("s1", summarizer=asummarize_list, max_turns=4, keep_last=2)
    await history.aadd_messages(turns(5))
    assert await history.asummary() == "3 messages"
    assert [type(m) for m in received] == [list]


def test_every_entry_point_takes_list_and_sequence_typed_functions() -> None:
    store = open_store("memory://")
    for fn in (summarize_list, asummarize_list, summarize_sequence):
        assert as_summarizer(fn) is not None
        RollingSummaryChatMessageHistory("s1", summarizer=fn, store=store)
        RollingMemoryMiddleware(store=store, summarizer=fn)
        with_rolling_memory(GenericFakeChatModel(messages=iter([])), store=store, summarizer=fn)


def test_the_limit_forms_type_check_as_written() -> None:
    one = RollingSummaryChatMessageHistory(
        "s1", summarizer=summarize_list, trigger=("messages", 12), keep=("tokens", 500)
    )
    assert (one.compactor.policy.max_turns, one.compactor.policy.keep_tokens) == (11, 500)
    several = RollingSummaryChatMessageHistory(
        "s1", summarizer=summarize_list, trigger=[("messages", 50), {"tokens": 3000}], keep=("messages", 4)
    )
    assert (several.compactor.policy.max_turns, several.compactor.policy.max_tokens) == (49, 2999)
