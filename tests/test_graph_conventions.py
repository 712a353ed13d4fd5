"""LangGraph's conventions, kept by every adapter: a runnable called inside a node inherits the
run's ``configurable`` (as any LCEL runnable does), ``user_id`` names the client wherever
``client_id`` does, and a store of the wrong type is refused when the adapter is built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from agent_models import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

from langchain_rolling_memory import (
    RollingMemoryMiddleware,
    RollingSummaryChatMessageHistory,
    WindowedChatMessageHistory,
    open_store,
    session_history_factory,
    with_rolling_memory,
)
from langchain_rolling_memory.errors import ConfigurationError


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary"


def system_text(request: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in request if m.type == "system")


# ---------------------------------------------------------------- inside a LangGraph node


def _graph_calling(
    chat: Any, *, pass_config: dict[str, Any] | None = None, asynchronous: bool = False
) -> Any:
    """A one-node graph whose node calls `chat` with the state's newest message, passing no
    config (or `pass_config`), as a LangGraph developer writes a node."""

    def respond(state: MessagesState) -> dict[str, Any]:
        newest = [state["messages"][-1]]
        reply = chat.invoke(newest) if pass_config is None else chat.invoke(newest, pass_config)
        return {"messages": [reply]}

    async def arespond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke([state["messages"][-1]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", arespond if asynchronous else respond)
    builder.add_edge(START, "respond")
    return builder.compile()


def test_a_runnable_called_in_a_node_without_config_uses_the_runs_thread_and_client() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    graph = _graph_calling(chat)
    config = {"configurable": {"thread_id": "t1", "client_id": "ana"}}
    graph.invoke({"messages": [HumanMessage("first")]}, config)
    graph.invoke({"messages": [HumanMessage("second")]}, config)
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    assert [m.text for m in store.transcript("t1")] == ["first", "ok 1", "second", "ok 2"]
    info = store.session_info("t1")
    assert info is not None and info.client_id == "ana"


async def test_an_async_node_inherits_the_runs_configurable_too() -> None:
    store = open_store("memory://")
    await store.aadd_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    graph = _graph_calling(chat, asynchronous=True)
    await graph.ainvoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t2", "user_id": "ana"}}
    )
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    assert len(await store.atranscript("t2")) == 2


def test_a_config_passed_in_the_node_wins_over_the_runs() -> None:
    store = open_store("memory://")
    chat = with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize)
    graph = _graph_calling(chat, pass_config={"configurable": {"session_id": "own"}})
    graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t1"}})
    assert len(store.transcript("own")) == 2
    assert store.transcript("t1") == []


def test_outside_any_run_a_call_without_a_session_is_still_refused() -> None:
    chat = with_rolling_memory(ScriptedChatModel(), store=open_store("memory://"), summarizer=summarize)
    with pytest.raises(ConfigurationError, match="needs a session id"):
        chat.invoke([HumanMessage("hi")])


# ---------------------------------------------------------------- user_id, as LangGraph and mem0 name the client


def test_user_id_names_the_client_of_with_rolling_memory() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hi")], {"configurable": {"user_id": "ana", "thread_id": "t1"}})
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    info = store.session_info("t1")
    assert info is not None and info.client_id == "ana"


def test_the_same_client_as_client_id_and_user_id_is_accepted() -> None:
    store = open_store("memory://")
    chat = with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize)
    chat.invoke(
        [HumanMessage("hi")], {"configurable": {"user_id": "ana", "client_id": "ana", "session_id": "s"}}
    )
    info = store.session_info("s")
    assert info is not None and info.client_id == "ana"


def test_a_client_id_and_a_different_user_id_are_refused_before_anything_is_written() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    config = {"configurable": {"user_id": "bob", "client_id": "ana", "session_id": "s"}}
    with pytest.raises(ConfigurationError, match=r"client_id='ana'.*user_id='bob'"):
        chat.invoke([HumanMessage("hi")], config)
    assert model.requests == []
    assert store.session_info("s") is None


def test_an_invalid_user_id_is_refused_as_a_client_id_is() -> None:
    chat = with_rolling_memory(ScriptedChatModel(), store=open_store("memory://"), summarizer=summarize)
    with pytest.raises(ValueError, match="user_id must not be empty"):
        chat.invoke([HumanMessage("hi")], {"configurable": {"user_id": "", "session_id": "s"}})


@dataclass
class UserContext:
    user_id: str


def _agent(store: Any, model: ScriptedChatModel, **options: Any) -> Any:
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize, memory_tools=())
    return create_agent(model, [], middleware=[memory], **options)


def test_user_id_names_the_client_of_the_middleware_in_configurable_and_context() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    model = ScriptedChatModel()
    _agent(store, model).invoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    )
    assert "Delivers on Saturdays" in system_text(model.requests[0])
    agent = _agent(store, model, context_schema=UserContext)
    agent.invoke(
        {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t2"}}, context=UserContext("ana")
    )
    assert "Delivers on Saturdays" in system_text(model.requests[1])
    assert [store.session_info(t).client_id for t in ("t1", "t2")] == ["ana", "ana"]  # type: ignore[union-attr]


def test_the_middleware_refuses_a_client_id_and_a_different_user_id() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    config = {"configurable": {"thread_id": "t1", "user_id": "bob", "client_id": "ana"}}
    with pytest.raises(ConfigurationError, match="user_id"):
        _agent(store, model).invoke({"messages": [HumanMessage("hi")]}, config)
    assert model.requests == []
    assert store.session_info("t1") is None


# ---------------------------------------------------------------- a store of the wrong type


WRONG_STORE = r"store must be a RollingStore.*got langgraph\.store\.memory\.InMemoryStore"

BUILDERS = {
    "with_rolling_memory": lambda s: with_rolling_memory(ScriptedChatModel(), store=s, summarizer=summarize),
    "session_history_factory": lambda s: session_history_factory(s, summarize),
    "RollingSummaryChatMessageHistory": lambda s: RollingSummaryChatMessageHistory(
        "s", store=s, summarizer=summarize
    ),
    "WindowedChatMessageHistory": lambda s: WindowedChatMessageHistory("s", store=s),
    "RollingMemoryMiddleware": lambda s: RollingMemoryMiddleware(store=s, summarizer=summarize),
}


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
def test_a_langgraph_store_is_refused_when_the_adapter_is_built_naming_its_type(build: Any) -> None:
    with pytest.raises(ConfigurationError, match=WRONG_STORE):
        build(InMemoryStore())


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
def test_a_url_string_is_refused_with_the_way_to_open_it(build: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"got str.*open_store\('memory://'\)"):
        build("memory://")
