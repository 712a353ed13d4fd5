"""The question is always sent (issue 12, defect 2): every path keeps the latest user message
and its tool pairs, folding the tool exchanges after it when they alone exceed the limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel, tool_call, tool_pairs_intact
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import langchain_rolling_memory.core.cuts as policy
from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store, with_rolling_memory
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.stores import InMemoryRollingStore

QUESTION = "QUESTION: what is the weather in every city?"


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"18°C and cloudy in {city}"


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{previous} | {len(messages)} folded".strip(" |")


def has_question(messages: Sequence[BaseMessage], text: str = QUESTION) -> bool:
    return any(isinstance(m, HumanMessage) and text in m.text for m in messages)


def tool_loop(calls: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    for i in range(calls):
        messages += [
            tool_call("weather", {"city": f"c{i}"}, f"call-{i}"),
            ToolMessage("sunny", tool_call_id=f"call-{i}"),
        ]
    return messages


def test_an_agent_turn_of_40_tool_calls_sends_the_question_with_every_model_call() -> None:
    store = open_store("memory://")
    script: list[Any] = [tool_call("weather", {"city": f"c{i}"}, f"call-{i}") for i in range(40)]
    model = ScriptedChatModel(script=[*script, AIMessage("done")])
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize, max_turns=12, keep_last=6)
    agent = create_agent(model, [weather], middleware=[memory])
    agent.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t"}})
    assert len(model.requests) == 41
    assert [i for i, r in enumerate(model.requests) if not has_question(r)] == []
    assert all(tool_pairs_intact(r) for r in model.requests)
    # The tool exchanges after the question were folded, so the requests stay bounded.
    assert max(len(r) for r in model.requests) <= 1 + 1 + 12
    record = store.summary("t")
    assert record is not None and record.covered_seq > 1


def test_one_17_message_exchange_keeps_its_question_in_the_history_view() -> None:
    history = RollingSummaryChatMessageHistory("s", summarizer=summarize, max_turns=4, keep_last=1)
    history.add_messages(tool_loop(8))
    view = history.messages
    assert has_question(view)
    assert tool_pairs_intact(view[1:])
    assert history.summary  # the oldest tool exchanges were folded, not the question dropped


def test_a_backlog_past_the_cap_still_sends_the_question_while_compaction_fails() -> None:
    def down(previous: str, messages: Sequence[BaseMessage]) -> str:
        raise ConnectionError("summarizer down")

    store = InMemoryRollingStore()
    engine = Compactor(store, Compactor.build(store, down).summarizer, FoldPolicy(max_turns=4, keep_last=2))
    store.append("s", tool_loop(20))  # 41 messages: the read tail (cap 12) holds no user message
    view = engine.view(engine.advance("s"))
    assert store.summary("s") is None
    assert has_question(view)
    assert tool_pairs_intact(view[1:])
    assert len(view) <= 1 + 4


def test_a_16000_word_question_is_sent_never_dropped() -> None:
    big = QUESTION + " " + "word " * 16000
    history = RollingSummaryChatMessageHistory(
        "s", summarizer=summarize, max_turns=None, max_tokens=1000, keep_tokens=200
    )
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    history.add_messages([HumanMessage(big)])
    history.add_messages(
        [tool_call("weather", {"city": "Lyon"}, "c1"), ToolMessage("sunny", tool_call_id="c1")]
    )
    view = history.messages
    assert has_question(view)
    sent = next(m for m in view if QUESTION in m.text)
    assert "characters of this message are not shown" in sent.text  # shortened, visibly
    assert tool_pairs_intact([m for m in view if not isinstance(m, HumanMessage)])
    assert len(history.transcript[2].text) == len(big)  # the transcript keeps it whole


def test_a_16000_word_question_reaches_the_model_through_the_runnable_and_the_middleware() -> None:
    big = QUESTION + " " + "word " * 16000
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=open_store("memory://"), summarizer=summarize, max_tokens=1000)
    config = {"configurable": {"client_id": "c", "session_id": "s"}}
    chat.invoke([HumanMessage("hi")], config)
    chat.invoke([HumanMessage(big)], config)
    assert has_question(model.requests[-1])
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(store=open_store("memory://"), summarizer=summarize, max_tokens=1000)
    agent = create_agent(model, [weather], middleware=[memory], system_prompt="SYS")
    agent.invoke({"messages": [HumanMessage(big)]}, {"configurable": {"thread_id": "t"}})
    assert has_question(model.requests[-1])


def test_question_fold_cut_folds_the_tool_exchanges_after_the_question() -> None:
    messages = tool_loop(4)  # question + 8 messages
    assert policy.question_fold_cut(messages, max_turns=6, keep_last=2) == 7
    assert policy.question_fold_cut(messages, max_turns=9, keep_last=2) == 0  # within the limit
    assert policy.question_fold_cut(messages[:2], max_turns=1, keep_last=1) == 0  # nothing after it to fold
    assert policy.with_question(messages[7:], messages[0])[0] is messages[0]
    assert policy.with_question(messages, messages[0]) == messages


def test_shorten_message_keeps_both_ends_around_a_visible_marker() -> None:
    message = HumanMessage("START " + "word " * 5000 + " END")
    short = policy.shorten_message(message, max_tokens=300)
    assert short.text.startswith("START") and short.text.endswith("END")
    assert "characters of this message are not shown" in short.text
    assert policy.shorten_message(HumanMessage("short"), max_tokens=300).text == "short"


# ---------------------------------------------------------------- property


def pairs_whole(messages: Sequence[BaseMessage]) -> bool:
    """No tool result without its call just before it, no call left open before another
    message; only the last calls may still wait for results (a turn in progress)."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AIMessage):
            open_calls = {str(c["id"]) for c in message.tool_calls}
    return True


@st.composite
def turns(draw: st.DrawFn) -> list[list[BaseMessage]]:
    """Batches of a conversation with tool loops, as `add_messages` receives them."""
    batches: list[list[BaseMessage]] = []
    counter = 0
    for t in range(draw(st.integers(1, 6))):
        batch: list[BaseMessage] = [HumanMessage(f"{QUESTION} {t}")]
        for _ in range(draw(st.integers(0, 14))):
            ids = [f"c{counter + k}" for k in range(draw(st.integers(1, 2)))]
            counter += len(ids)
            batch.append(AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": i} for i in ids]))
            batch.extend(ToolMessage("r " * draw(st.integers(1, 30)), tool_call_id=i) for i in ids)
        if draw(st.booleans()):
            batch.append(AIMessage("answer"))
        size = draw(st.integers(1, 5))
        batches.extend(batch[i : i + size] for i in range(0, len(batch), size))
    return batches


@settings(max_examples=120, deadline=None)
@given(
    turns(),
    st.integers(2, 8),
    st.integers(1, 7),
    st.sampled_from([None, 60, 200]),
    st.integers(0, 3),
)
def test_every_view_holds_the_latest_question_and_no_split_tool_pair(
    batches: list[list[BaseMessage]], max_turns: int, keep: int, max_tokens: int | None, fail_every: int
) -> None:
    calls = [0]

    def flaky(previous: str, messages: Sequence[BaseMessage]) -> str:
        calls[0] += 1
        if fail_every and calls[0] % (fail_every + 1) == 0:
            raise ConnectionError("down")
        return summarize(previous, messages)

    history = RollingSummaryChatMessageHistory(
        "s",
        summarizer=flaky,
        max_turns=max_turns,
        keep_last=min(keep, max_turns - 1),
        max_tokens=max_tokens,
        backoff=0,
    )
    latest = ""
    for batch in batches:
        history.add_messages(batch)
        latest = next((m.text for m in reversed(batch) if isinstance(m, HumanMessage)), latest)
        view = history.messages
        assert has_question(view, latest), [m.text[:30] for m in view]
        assert pairs_whole(view)


@pytest.mark.parametrize("failing", [False, True], ids=["summarizing", "summarizer-down"])
def test_a_checkpointed_agent_turn_of_40_tool_calls_sends_the_question_with_every_model_call(
    failing: bool,
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def down(previous: str, messages: Sequence[BaseMessage]) -> str:
        raise RuntimeError("provider down")

    script: list[Any] = [tool_call("weather", {"city": f"c{i}"}, f"call-{i}") for i in range(40)]
    model = ScriptedChatModel(script=[*script, AIMessage("done")])
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"), summarizer=down if failing else summarize, max_turns=12, keep_last=6
    )
    agent = create_agent(model, [weather], middleware=[memory], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t"}})
    assert len(model.requests) == 41
    assert [i for i, r in enumerate(model.requests) if not has_question(r)] == []
    assert all(tool_pairs_intact(r) for r in model.requests)
    # Folded, or past the cap a window: the requests stay bounded either way.
    assert max(len(r) for r in model.requests) <= 1 + 1 + 3 * 12
