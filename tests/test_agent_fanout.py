"""Parallel tool calls wider than the policy's window: the middleware keeps folding (the whole
tool group at once, never split), the graph state stays bounded, and every request still
pairs each tool call with its results and holds the latest question."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel, text_of, tool_pairs_intact
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.stores import InMemoryRollingStore


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"cloudy in {city}"


def fan_out(turn: int, width: int) -> AIMessage:
    calls = [
        {"name": "weather", "args": {"city": f"c{turn}-{k}"}, "id": f"w{turn}-{k}", "type": "tool_call"}
        for k in range(width)
    ]
    return AIMessage("", tool_calls=calls)


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{len(messages)} more messages folded"


@pytest.mark.parametrize(
    ("options", "width", "cap"),
    [
        ({}, 30, 36),
        ({}, 40, 36),
        ({"max_turns": 3, "keep_last": 1, "hard_cap": 4}, 3, 4),
        ({"max_turns": 4, "keep_last": 2}, 14, 12),
    ],
    ids=["default-policy-30-calls", "default-policy-40-calls", "small-cap-3-calls", "wider-than-the-cap"],
)
def test_wide_parallel_tool_calls_keep_folding(options: dict[str, Any], width: int, cap: int) -> None:
    turns = 5
    script: list[AIMessage] = []
    for t in range(turns):
        script += [fan_out(t, width), AIMessage(f"final {t}")]
    model = ScriptedChatModel(script=script)
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"), summarizer=summarize, memory_tools=(), **options
    )
    agent = create_agent(model, [weather], middleware=[memory], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t", "client_id": "ana"}}
    sizes = []
    for t in range(turns):
        before = len(model.requests)
        agent.invoke({"messages": [HumanMessage(f"question {t}")]}, config)
        sizes.append(len(agent.get_state(config).values["messages"]))
        for request in model.requests[before:]:
            body = [m for m in request if m.type != "system"]
            assert tool_pairs_intact(body)
            assert f"question {t}" in text_of(request)
        answered = [m for m in model.requests[-1] if isinstance(m, ToolMessage)]
        # The model sees its own tool results, unless the call and its results alone exceed the cap (the view's
        # fallback window then leaves the whole group out rather than split it).
        assert len(answered) == (width if width + 1 <= cap else 0)
    assert max(sizes) <= cap + width + 3, sizes  # one turn beyond the cap at most: bounded
    stored = memory.store.read("t", after_seq=0, limit=10_000, newest=False)
    assert sum(isinstance(m.message, ToolMessage) for m in stored) == turns * width  # nothing lost


def wide_backlog(width: int) -> list[BaseMessage]:
    results = [ToolMessage("sunny", tool_call_id=f"w0-{k}") for k in range(width)]
    return [fan_out(0, width), *results, AIMessage("final"), HumanMessage("question 1"), AIMessage("ok")]


def test_a_store_backlog_starting_with_a_group_wider_than_the_cap_folds_it_whole() -> None:
    store = InMemoryRollingStore()
    engine = Compactor(
        store, Compactor.build(store, summarize).summarizer, FoldPolicy(max_turns=4, keep_last=2)
    )
    store.append("s", wide_backlog(20))  # 24 messages, cap 12: the oldest chunk ends inside the group
    done = engine.compact("s")
    assert done is not None and done.covered_seq >= 21  # the call and its 20 results at once
    assert tool_pairs_intact(engine.view(engine.load("s"))[1:])


async def test_a_store_backlog_starting_with_a_wide_group_folds_it_whole_async() -> None:
    store = InMemoryRollingStore()
    engine = Compactor(
        store, Compactor.build(store, summarize).summarizer, FoldPolicy(max_turns=4, keep_last=2)
    )
    await store.aappend("s", wide_backlog(20))
    done = await engine.acompact("s")
    assert done is not None and done.covered_seq >= 21
