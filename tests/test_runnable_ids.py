"""`with_rolling_memory` finds its ids as the agent middleware does: a default client given at
construction, the session from ``session_id`` or else ``thread_id``; today's keys still work,
and a session owned by a client is still reachable only by naming that client."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from agent_models import ScriptedChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import OwnershipError, RollingStore, open_store, with_rolling_memory
from langchain_rolling_memory.errors import ConfigurationError, InvalidIdError


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary"


def system_text(request: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in request if m.type == "system")


def test_the_default_client_is_used_when_the_config_names_none() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize, client_id="ana")
    chat.invoke([HumanMessage("hi")], config={"configurable": {"session_id": "s1"}})
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    info = store.session_info("s1")
    assert info is not None and info.client_id == "ana"


def test_a_client_named_in_the_config_wins_over_the_default() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    store.add_fact("bob", "Prefers email")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize, client_id="ana")
    chat.invoke([HumanMessage("hi")], config={"configurable": {"client_id": "bob", "session_id": "s2"}})
    assert "Prefers email" in system_text(model.requests[0])
    assert "Saturdays" not in system_text(model.requests[0])
    info = store.session_info("s2")
    assert info is not None and info.client_id == "bob"


def test_thread_id_names_the_session_when_session_id_is_absent() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize, client_id="ana")
    chat.invoke([HumanMessage("first")], config={"configurable": {"thread_id": "t1"}})
    chat.invoke([HumanMessage("second")], config={"configurable": {"thread_id": "t1"}})
    assert [m.text for m in store.transcript("t1")] == ["first", "ok 1", "second", "ok 2"]
    # The second call saw the first turn: the history is the thread's.
    assert [m.text for m in model.requests[1] if m.type != "system"] == ["first", "ok 1", "second"]


def test_session_id_wins_over_thread_id() -> None:
    store = open_store("memory://")
    chat = with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hi")], config={"configurable": {"session_id": "s1", "thread_id": "t1"}})
    assert len(store.transcript("s1")) == 2
    assert store.transcript("t1") == []


async def test_thread_id_and_the_default_client_in_async_calls() -> None:
    store = open_store("memory://")
    await store.aadd_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize, client_id="ana")
    await chat.ainvoke([HumanMessage("hi")], config={"configurable": {"thread_id": "t1"}})
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    assert len(await store.atranscript("t1")) == 2


def test_no_session_at_all_is_one_clear_error_before_the_model() -> None:
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=open_store("memory://"), summarizer=summarize, client_id="ana")
    with pytest.raises(ConfigurationError, match=r"session_id.*thread_id"):
        chat.invoke([HumanMessage("hi")], config={"configurable": {}})
    with pytest.raises(ConfigurationError, match=r"session_id.*thread_id"):
        chat.invoke([HumanMessage("hi")])
    assert model.requests == []


def test_a_bad_default_client_is_refused_when_built() -> None:
    with pytest.raises(InvalidIdError, match="client_id"):
        with_rolling_memory(
            ScriptedChatModel(), store=open_store("memory://"), summarizer=summarize, client_id="a b"
        )


def test_the_default_client_reaches_only_its_own_sessions(store: RollingStore) -> None:
    store.append("s-b", [HumanMessage("bob's secret"), AIMessage("noted")], client_id="bob")
    store.append("s-a", [HumanMessage("ana's secret"), AIMessage("noted")], client_id="ana")
    model = ScriptedChatModel()
    as_ana = with_rolling_memory(model, store=store, summarizer=summarize, client_id="ana")
    with pytest.raises(OwnershipError):
        as_ana.invoke([HumanMessage("hi")], config={"configurable": {"thread_id": "s-b"}})
    # Naming another client reaches only that client's sessions, the default's are refused.
    with pytest.raises(OwnershipError):
        as_ana.invoke(
            [HumanMessage("hi")], config={"configurable": {"client_id": "bob", "session_id": "s-a"}}
        )
    # Without a default, a call naming no client reaches no owned session.
    anonymous = with_rolling_memory(model, store=store, summarizer=summarize)
    with pytest.raises(OwnershipError):
        anonymous.invoke([HumanMessage("hi")], config={"configurable": {"thread_id": "s-a"}})
    assert model.requests == []
    assert [m.text for m in store.transcript("s-b")] == ["bob's secret", "noted"]
    assert [m.text for m in store.transcript("s-a")] == ["ana's secret", "noted"]
    as_ana.invoke([HumanMessage("hi")], config={"configurable": {"thread_id": "s-a"}})
    assert len(store.transcript("s-a")) == 4


def test_todays_keys_still_work_without_a_default() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hi")], config={"configurable": {"client_id": "ana", "session_id": "s1"}})
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    info = store.session_info("s1")
    assert info is not None and info.client_id == "ana"
