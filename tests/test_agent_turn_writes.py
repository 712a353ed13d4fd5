"""An agent turn's store calls (issue 23): one read before the model call, one append after it.

`RollingMemoryMiddleware` leaves the turn's new messages (the user's input, tool results) for
the append after the model call, as `with_rolling_memory` does; the read before the call
tells which of them are stored already. Nothing the model is sent or the store keeps may
change for it: each run here is made twice, with the writes deferred and with them made
before the call as they were, and the two must send and store the same, whatever the turn
does (tool calls, inline or background compactions, a failing model call, a client sending
its conversation back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agent_models import ScriptedChatModel, tool_call
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import RollingStore, open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware


@tool
def weather(city: str) -> str:
    """The weather of a city."""
    return f"Sunny in {city}."


class ModelDown(Exception):
    """The model's provider failing one call."""


def _script(turns: int) -> list[AIMessage]:
    replies: list[AIMessage] = []
    for i in range(turns):
        if i % 3 == 1:
            replies += [tool_call("weather", {"city": f"city {i}"}, f"w{i}"), AIMessage(f"Sunny, {i}.")]
        else:
            replies.append(AIMessage(f"Answer {i}" + " and more" * (i % 4)))
    return replies


def _summarize(previous: str, messages: list[BaseMessage]) -> str:
    return (f"{previous} | " if previous else "") + "; ".join(m.text[:16] for m in messages)


def _seen(messages: list[BaseMessage], session: str) -> list[tuple[Any, ...]]:
    """What a message list says, without the ids the graph draws at random (and with the
    session's name, which a recalled excerpt shows, left out)."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = [(c["name"], c["args"], c["id"]) for c in m.tool_calls] if isinstance(m, AIMessage) else []
        call_id = m.tool_call_id if isinstance(m, ToolMessage) else None
        content = (
            m.content.replace(f'"{session}"', '"<session>"') if isinstance(m.content, str) else m.content
        )
        out.append((m.type, content, calls, call_id))
    return out


def _run(
    store: RollingStore,
    session: str,
    *,
    client: str = "ana",
    checkpointer: bool,
    background: bool,
    asynchronous: bool,
    fail_call: int,
    options: dict[str, Any],
) -> tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]], list[int]]:
    """Twelve turns; the model call numbered `fail_call` fails. The requests, the transcript
    and the turns that failed."""
    model = ScriptedChatModel(script=list(_script(30)))
    memory = RollingMemoryMiddleware(
        store=store, summarizer=_summarize, background=background, memory_tools=(), **options
    )
    agent = create_agent(
        model,
        [weather],
        middleware=[memory],
        system_prompt="SYS",
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    answer = model._next
    calls = [0]

    def next_reply(messages: list[BaseMessage]) -> AIMessage:
        calls[0] += 1
        if calls[0] == fail_call:
            model.requests.append(list(messages))
            raise ModelDown("provider down")
        return answer(messages)

    object.__setattr__(model, "_next", next_reply)
    config: Any = {"configurable": {"thread_id": session, "client_id": client}}
    failed: list[int] = []
    conversation: list[BaseMessage] = []
    for i in range(12):
        question = f"Question {i} about the weather" + " please" * (i % 4)
        if checkpointer:
            value: Any = {"messages": [HumanMessage(question)]}
        else:  # a client that sends its conversation back every other turn, ids and all
            asked = HumanMessage(question, id=f"{session}-h{i}")
            conversation = [*conversation, asked] if i % 2 else [asked]
            value = {"messages": conversation}
        try:
            result = (
                asyncio.run(agent.ainvoke(value, config)) if asynchronous else agent.invoke(value, config)
            )
        except ModelDown:
            failed.append(i)
            continue
        finally:
            if background:
                memory.flush(session)
        if not checkpointer and i % 2 == 0:
            conversation = result["messages"]
    transcript = _seen(store.transcript(session), session)
    return [_seen(r, session) for r in model.requests], transcript, failed


@pytest.mark.parametrize("policy", ["count", "tokens"])
@pytest.mark.parametrize("fail_call", [0, 5], ids=["answers", "a-call-fails"])
@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
def test_deferring_the_turn_writes_changes_nothing_sent_or_stored(
    store: RollingStore,
    monkeypatch: pytest.MonkeyPatch,
    checkpointer: bool,
    background: bool,
    fail_call: int,
    policy: str,
) -> None:
    options = (
        {"max_turns": 6, "keep_last": 2}
        if policy == "count"
        else {"trigger": ("tokens", 120), "keep": ("tokens", 40)}
    )
    run: Callable[[str], Any] = lambda session: _run(  # noqa: E731
        store,
        session,
        checkpointer=checkpointer,
        background=background,
        asynchronous=False,
        fail_call=fail_call,
        options=options,
    )
    deferred = run("deferred")
    monkeypatch.setattr(RollingMemoryMiddleware, "_defers", lambda self, state, ids: False)
    written_first = run("written-first")
    assert deferred == written_first
    requests, transcript, failed = deferred
    assert any("Summary of the earlier" in str(r) for r in requests), "compactions ran"
    assert failed == ([3] if fail_call else [])
    assert sum(1 for m in transcript if m[0] == "human") == 12  # a failed turn's question is kept


@pytest.mark.parametrize("fail_call", [0, 5], ids=["answers", "a-call-fails"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
def test_with_recall_deferring_the_turn_input_past_the_search_changes_no_excerpt(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch, checkpointer: bool, fail_call: int
) -> None:
    """The recall searches the store as the turn's read found it: the turn's input is appended
    after the model call (as a chain's turn does), and the excerpts found are those found when
    the input was written before the search."""

    def run(session: str) -> Any:
        return _run(
            store,
            session,
            client=session,  # each run searches its own client's sessions only
            checkpointer=checkpointer,
            background=False,
            asynchronous=False,
            fail_call=fail_call,
            options={"max_turns": 6, "keep_last": 2, "recall_tokens": 400},
        )

    deferred = run("deferred")
    monkeypatch.setattr(RollingMemoryMiddleware, "_defers", lambda self, state, ids: False)
    assert deferred == run("written-first")
    assert any("Excerpts of earlier conversations" in str(r) for r in deferred[0]), "something was recalled"


@pytest.mark.parametrize("recall", [False, True], ids=["recall-off", "recall-on"])
@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
def test_deferring_the_turn_writes_changes_nothing_async(
    monkeypatch: pytest.MonkeyPatch, checkpointer: bool, recall: bool
) -> None:
    def run(session: str) -> Any:
        return _run(
            store,
            session,
            client=session,
            checkpointer=checkpointer,
            background=False,
            asynchronous=True,
            fail_call=5,
            options={"max_turns": 6, "keep_last": 2, "recall_tokens": 400 if recall else None},
        )

    store = open_store("memory://")
    deferred = run("deferred")
    monkeypatch.setattr(RollingMemoryMiddleware, "_defers", lambda self, state, ids: False)
    assert deferred == run("written-first")


def _calls(
    store: RollingStore, names: tuple[str, ...], log: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in names:
        original = getattr(store, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            log.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(store, name, spy)


_READS_AND_WRITES = (
    "read",
    "read_memory",
    "read_turn",
    "last_seq",
    "summary",
    "get_state",
    "facts",
    "append",
    "append_and_summary",
)


@pytest.mark.parametrize("checkpointer", [False, True], ids=["no-checkpointer", "checkpointer"])
def test_a_steady_turn_reads_once_before_the_model_call_and_appends_once_after(
    monkeypatch: pytest.MonkeyPatch, checkpointer: bool
) -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Prefers mornings")
    log: list[str] = []

    def reply(_: list[BaseMessage]) -> AIMessage:
        log.append("model")
        return AIMessage("Noted.")

    model = ScriptedChatModel()
    model.script.extend([reply, reply])  # functions of the request, set past pydantic's check
    memory = RollingMemoryMiddleware(store=store, summarizer=_summarize, max_turns=50, keep_last=4)
    agent = create_agent(
        model, [], middleware=[memory], checkpointer=InMemorySaver() if checkpointer else None
    )
    config: Any = {"configurable": {"thread_id": "s1", "client_id": "ana"}}
    agent.invoke({"messages": [HumanMessage("first")]}, config)
    log.clear()
    _calls(store, _READS_AND_WRITES, log, monkeypatch)
    agent.invoke({"messages": [HumanMessage("second")]}, config)
    assert log == ["read_memory", "model", "append"]
    assert [m.text for m in store.transcript("s1")] == ["first", "Noted.", "second", "Noted."]


def test_a_model_call_resumed_after_it_failed_stores_each_message_once() -> None:
    store = open_store("memory://")
    failing = [True]

    def reply(_: list[BaseMessage]) -> AIMessage:
        if failing.pop() if failing else False:
            raise ModelDown("provider down")
        return AIMessage("Back.")

    model = ScriptedChatModel()
    model.script.extend([reply, reply])  # functions of the request, set past pydantic's check
    memory = RollingMemoryMiddleware(store=store, summarizer=_summarize, max_turns=50, keep_last=4)
    agent = create_agent(model, [], middleware=[memory], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "s1", "client_id": "ana"}}
    with pytest.raises(ModelDown):
        agent.invoke({"messages": [HumanMessage("are you there?")]}, config)
    assert [m.text for m in store.transcript("s1")] == ["are you there?"]
    agent.invoke(None, config)  # the run resumed from its last checkpoint: the model call again
    assert [m.text for m in store.transcript("s1")] == ["are you there?", "Back."]
    assert [m.text for m in model.requests[-1]] == [m.text for m in model.requests[0]]


def test_concurrent_runs_of_one_session_store_each_message_once() -> None:
    """Two runs of one session at once (no checkpointer): each run's deferred writes are told
    apart by its messages, whatever order their hooks interleave in."""
    store = open_store("memory://")
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(store=store, summarizer=_summarize, max_turns=50, keep_last=4)
    agent = create_agent(model, [], middleware=[memory])
    config: Any = {"configurable": {"thread_id": "s1", "client_id": "ana"}}

    async def both() -> None:
        await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"run {i}")]}, config) for i in range(4))
        )

    asyncio.run(both())
    texts = [m.text for m in store.transcript("s1")]
    assert sorted(t for t in texts if t.startswith("run")) == [f"run {i}" for i in range(4)]
    assert len(texts) == 8
    assert len(set(texts)) == 8
