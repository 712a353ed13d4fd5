"""Issue 4's "done when": facts learned in one session reach the next, stay private, and are erasable.

Session 1 learns facts through the `remember` tool and the extractor; session 2 of the same
client sees them in the model's prompt; another client sees nothing; a changed fact is
replaced; after `forget` nothing of the client remains in the store. On every backend.

The ids and texts searched for in a raw dump of the backend hold letters no hex id can (the
message ids are uuids: "...-b9ea-1..." holds "a-1"), so a trace found is the client's own.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from memory_fakes import RecordingChatModel, prompt_text, raw_dump, recording_model

from langchain_rolling_memory import (
    MEMORY_MESSAGE_ID,
    FactExtractor,
    RollingSummaryChatMessageHistory,
    memory_tools,
    with_rolling_memory,
)
from langchain_rolling_memory.stores import RollingStore


def remember_call(text: str, key: str | None, call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "remember", "args": {"text": text, "key": key}, "id": call_id}])


def summarize(previous: str, messages: Any) -> str:
    return (previous + " " if previous else "") + " / ".join(m.text for m in messages if m.text)


def build_chat(store: RollingStore, model: RecordingChatModel, extractor: RecordingChatModel) -> Any:
    def agent_turn(messages: list[BaseMessage], config: RunnableConfig) -> list[BaseMessage]:
        # The tools are bound to the client of this call, in code: the model only gives text.
        client_id = config["configurable"]["client_id"]
        tools = {t.name: t for t in memory_tools(store, client_id)}
        first = model.invoke(messages)
        if not isinstance(first, AIMessage) or not first.tool_calls:
            return [first]
        results = [tools[call["name"]].invoke(call) for call in first.tool_calls]
        return [first, *results, model.invoke([*messages, first, *results])]

    return with_rolling_memory(
        RunnableLambda(agent_turn),
        store=store,
        summarizer=summarize,
        extractor=FactExtractor(extractor),
        max_turns=4,
        keep_last=2,
    )


def memory_of(sent: list[BaseMessage]) -> str:
    return sent[0].text if sent and sent[0].id == MEMORY_MESSAGE_ID else ""


NO_CHANGE = json.dumps({"add": [], "update": [], "delete": []})


def test_two_sessions_share_facts_of_one_client_only_until_it_is_forgotten(
    store: RollingStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="langchain_rolling_memory")
    model = recording_model(
        [
            remember_call("Works in the Sales team", "team", "call-1"),
            "Nice to meet you, Ana.",
            "Saturday deliveries, noted.",
            "Your order is on its way.",
            "You're welcome.",
            # session 2
            "Hello again Ana.",
            remember_call("Works in the Logistics team", "team", "call-2"),
            "Congratulations on the move.",
            "Sure.",
            # client B
            "Hello, who are you?",
        ]
    )
    # One reply per compaction (max_turns=4, keep_last=2): two in session 1, two in session 2.
    extractor = recording_model(
        [
            NO_CHANGE,
            json.dumps({"add": [{"text": "Delivers on Saturdays", "key": "delivery_day"}]}),
            NO_CHANGE,
            NO_CHANGE,
        ]
    )
    chat = build_chat(store, model, extractor)
    a1 = {"configurable": {"client_id": "client-ana", "session_id": "ana-first-chat"}}
    a2 = {"configurable": {"client_id": "client-ana", "session_id": "ana-second-chat"}}
    b1 = {"configurable": {"client_id": "client-bob", "session_id": "bob-first-chat"}}

    # Session 1: the tool learns the team; compactions run the extractor, which learns the day.
    store.set_state("ana-first-chat", {"order": "A-1001", "amount_eur": 129.9}, client_id="client-ana")
    for question in (
        "Hi, I'm Ana from Sales.",
        "Please deliver on Saturdays.",
        "Where is my order?",
        "Thanks!",
    ):
        chat.invoke([HumanMessage(question)], config=a1)
    assert len(extractor.received) == 2
    assert "Please deliver on Saturdays." in extractor.received[1][-1].text
    assert [(f.key, f.text, f.source) for f in store.facts("client-ana")] == [
        ("team", "Works in the Sales team", "tool"),
        ("delivery_day", "Delivers on Saturdays", "extractor"),
    ]
    assert store.summary("ana-first-chat") is not None
    # Exact state is shown verbatim, never only through the summary.
    assert '{"amount_eur": 129.9, "order": "A-1001"}' in memory_of(model.received[-1])

    # Session 2 of the same client: the facts are in the model's prompt from the first call.
    calls_before = len(model.received)
    chat.invoke([HumanMessage("Hello, it's me again.")], config=a2)
    first_of_session_2 = memory_of(model.received[calls_before])
    assert '["team"] "Works in the Sales team"' in first_of_session_2
    assert '["delivery_day"] "Delivers on Saturdays"' in first_of_session_2
    assert "A-1001" not in first_of_session_2  # state belongs to session 1 only

    # A changed fact is replaced, not piled up, and the next prompt shows the new value only.
    chat.invoke([HumanMessage("I moved to the Logistics team.")], config=a2)
    chat.invoke([HumanMessage("Can you update my file?")], config=a2)
    assert [(f.key, f.text) for f in store.facts("client-ana")] == [
        ("team", "Works in the Logistics team"),
        ("delivery_day", "Delivers on Saturdays"),
    ]
    latest = memory_of(model.received[-1])
    assert "Logistics" in latest
    assert "Sales" not in latest

    # Another client sees nothing of client A.
    calls_before = len(model.received)
    chat.invoke([HumanMessage("Hi")], config=b1)
    seen_by_b = prompt_text(model.received[calls_before])
    for secret in ("Logistics", "Saturdays", "Ana", "A-1001"):
        assert secret not in seen_by_b
    assert store.facts("client-bob") == []

    # Export returns all of it; forget erases all of it, on every backend.
    exported = store.export("client-ana")
    assert {s["session_id"] for s in exported["sessions"]} == {"ana-first-chat", "ana-second-chat"}
    assert len(exported["facts"]) == 2
    json.dumps(exported)  # JSON-serializable as promised

    store.forget("client-ana")
    assert store.facts("client-ana") == []
    assert store.sessions("client-ana") == []
    for session_id in ("ana-first-chat", "ana-second-chat"):
        assert store.transcript(session_id) == []
        assert store.summary(session_id) is None
        assert store.get_state(session_id) == {}
        assert store.session_info(session_id) is None
    assert store.export("client-ana")["sessions"] == []
    raw = raw_dump(store)
    assert raw is not None, f"no raw dump for {type(store).__name__}: add one to tests/memory_fakes.py"
    traces = ("client-ana", "ana-first-chat", "ana-second-chat", "Logistics", "Saturdays", "Ana", "A-1001")
    assert not [t for t in traces if re.fullmatch(r"[0-9a-f-]*", t)]  # none could be part of a uuid
    for trace in traces:
        assert trace not in raw, f"{trace!r} is still in the {type(store).__name__} backend after forget"
    # Client B is untouched.
    assert store.sessions("client-bob") == ["bob-first-chat"]
    assert "bob-first-chat" in raw
    # Every model call was scripted: none failed inside a compaction listener (and was only logged).
    assert len(extractor.received) == 4
    assert "Hello, it's me again." in extractor.received[2][-1].text
    assert "I moved to the Logistics team." in extractor.received[3][-1].text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_async_path_learns_and_injects_facts_the_same_way(store: RollingStore) -> None:
    model = recording_model([f"answer {i}" for i in range(10)])
    extractor = recording_model(
        [json.dumps({"add": [{"text": "Delivers on Saturdays", "key": "delivery_day"}]})]
    )
    chat = with_rolling_memory(
        model, store=store, summarizer=summarize, extractor=FactExtractor(extractor), max_turns=4, keep_last=2
    )
    a1 = {"configurable": {"client_id": "client-a", "session_id": "a-1"}}
    for question in ("Deliver on Saturdays please.", "q2", "q3"):
        await chat.ainvoke([HumanMessage(question)], config=a1)
    assert len(extractor.received) == 1
    assert [(f.key, f.text) for f in await store.afacts("client-a")] == [
        ("delivery_day", "Delivers on Saturdays")
    ]
    await chat.ainvoke(
        [HumanMessage("When?")], config={"configurable": {"client_id": "client-a", "session_id": "a-2"}}
    )
    assert '["delivery_day"] "Delivers on Saturdays"' in memory_of(model.received[-1])
    await store.aforget("client-a")
    assert await store.afacts("client-a") == []
    assert await store.asessions("client-a") == []


def test_background_compaction_runs_the_extractor_off_the_turn(store: RollingStore) -> None:
    model = recording_model([f"answer {i}" for i in range(10)])
    extractor = recording_model([json.dumps({"add": [{"text": "Prefers email"}]})])
    chat = with_rolling_memory(
        model,
        store=store,
        summarizer=summarize,
        extractor=FactExtractor(extractor),
        max_turns=4,
        keep_last=2,
        background=True,
    )
    a1 = {"configurable": {"client_id": "client-a", "session_id": "a-1"}}
    for question in ("Email me, please.", "q2", "q3"):
        chat.invoke([HumanMessage(question)], config=a1)
    RollingSummaryChatMessageHistory("a-1", store=store, summarizer=summarize).flush(timeout=30)
    assert store.summary("a-1") is not None
    assert [f.text for f in store.facts("client-a")] == ["Prefers email"]
    assert "Email me, please." in extractor.received[0][-1].text
