"""The client's facts are items of LangGraph's `BaseStore` (`RollingFactsStore`), and a user is
erased in one call across our store, the graph's store and its checkpointer (`forget_user`).

What a LangGraph developer does: a node's ``get_store()`` and a tool's ``runtime.store`` put a
memory in ``(user_id, "facts")``, and the next prompt has it (middleware and runnable alike);
the facts the memory wrote are items there; other namespaces live in LangGraph's own store.
On every backend of ours; PostgreSQL's `PostgresStore` and `PostgresSaver` in
`test_graph_facts_postgres.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel, text_of, tool_call
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langchain_rolling_memory import (
    RollingFactsStore,
    RollingMemoryMiddleware,
    RollingStore,
    aforget_user,
    forget_user,
    open_store,
    with_rolling_memory,
)
from langchain_rolling_memory.errors import ConfigurationError, FactError

FACTS = ("ana", "facts")


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary"


def system_text(request: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in request if m.type == "system")


# ---------------------------------------------------------------- items are facts


def test_an_item_put_in_the_facts_namespace_is_a_fact_and_reads_back(store: RollingStore) -> None:
    graph_store = RollingFactsStore(store, inner=InMemoryStore())
    graph_store.put(FACTS, "diet", {"content": "Vegetarian"})
    graph_store.put(FACTS, "allergy", {"content": "Allergic to peanuts", "pinned": True})
    assert {(f.key, f.text, f.pinned) for f in store.facts("ana")} == {
        ("diet", "Vegetarian", False),
        ("allergy", "Allergic to peanuts", True),
    }
    item = graph_store.get(FACTS, "diet")
    assert item is not None and item.value == {"content": "Vegetarian"} and item.namespace == FACTS
    graph_store.put(FACTS, "diet", {"content": "Vegan"})
    assert [f.text for f in store.facts("ana") if f.key == "diet"] == ["Vegan"]
    graph_store.delete(FACTS, "diet")
    assert graph_store.get(FACTS, "diet") is None
    assert [f.text for f in store.facts("ana")] == ["Allergic to peanuts"]


def test_facts_the_memory_wrote_are_items_addressed_by_key_or_id() -> None:
    store = open_store("memory://")
    keyed = store.add_fact("ana", "Team: Lisbon office", key="team")
    loose = store.add_fact("ana", "Delivers on Saturdays")
    assert keyed is not None and loose is not None
    graph_store = RollingFactsStore(store)
    assert sorted(i.key for i in graph_store.search(FACTS)) == sorted(["team", loose.id])
    graph_store.put(FACTS, loose.id, {"content": "Delivers on Sundays"})
    assert [(f.id, f.text) for f in store.facts("ana") if f.key is None] == [
        (loose.id, "Delivers on Sundays")
    ]


def test_a_search_ranks_the_facts_by_the_query_and_filters_by_value() -> None:
    store = open_store("memory://")
    graph_store = RollingFactsStore(store)
    for key, text in [("a", "Prefers window seats on trains"), ("b", "Vegetarian"), ("c", "Lives in Lisbon")]:
        graph_store.put(FACTS, key, {"content": text})
    found = graph_store.search(FACTS, query="which seats on trains?")
    assert found[0].key == "a" and found[0].score is not None and found[0].score > 0
    assert [i.key for i in graph_store.search(FACTS, filter={"content": "Vegetarian"})] == ["b"]
    assert [i.key for i in graph_store.search(FACTS, filter={"content": {"$ne": "Vegetarian"}}, limit=1)] != [
        "b"
    ]


def test_other_namespaces_go_to_the_inner_store_and_a_search_pages_over_both() -> None:
    store, inner = open_store("memory://"), InMemoryStore()
    graph_store = RollingFactsStore(store, inner=inner)
    graph_store.put(FACTS, "diet", {"content": "Vegetarian"})
    graph_store.put(("ana", "trips"), "t1", {"city": "Lisbon"})
    assert inner.get(("ana", "trips"), "t1") is not None
    assert inner.search(("ana",)) == [inner.get(("ana", "trips"), "t1")]  # the fact is not copied there
    assert [i.key for i in graph_store.search(("ana",))] == ["diet", "t1"]
    assert [i.key for i in graph_store.search(("ana",), offset=1)] == ["t1"]
    assert [i.key for i in graph_store.search(("ana",), limit=1)] == ["diet"]


def test_a_search_that_names_no_client_finds_no_facts() -> None:
    store, inner = open_store("memory://"), InMemoryStore()
    graph_store = RollingFactsStore(store, inner=inner)
    graph_store.put(FACTS, "diet", {"content": "Vegetarian"})
    graph_store.put(("bob", "facts"), "diet", {"content": "Vegan"})
    assert graph_store.search(()) == []
    assert graph_store.search(("bob", "facts"))[0].value == {"content": "Vegan"}


def test_a_namespace_template_like_langmems_places_the_client_where_it_says() -> None:
    store = open_store("memory://")
    graph_store = RollingFactsStore(store, namespace=("memories", "{client_id}"))
    graph_store.put(("memories", "ana"), "k1", {"content": "Vegetarian"})
    assert [f.text for f in store.facts("ana")] == ["Vegetarian"]
    assert graph_store.search(("memories",)) == []  # all clients at once: none


@pytest.mark.parametrize(
    "value",
    [
        {"content": {"kind": "Triple"}},
        {"text": "Vegetarian"},
        {"content": "x", "extra": 1},
        {"content": "x", "pinned": "yes"},
    ],
    ids=["structured-content", "no-content", "extra-field", "pinned-not-bool"],
)
def test_a_value_that_is_not_a_fact_is_refused_and_nothing_is_written(value: dict[str, Any]) -> None:
    store = open_store("memory://")
    with pytest.raises(FactError, match=r"its value is \{'content': str\}"):
        RollingFactsStore(store, inner=InMemoryStore()).put(FACTS, "k", value)
    assert store.facts("ana") == []


def test_facts_refuse_a_ttl_and_a_store_without_inner_refuses_other_namespaces() -> None:
    store = open_store("memory://")
    with pytest.raises(ConfigurationError, match="facts do not expire"):
        # As a store with TTL would send it (`put` itself refuses a ttl the inner store lacks).
        RollingFactsStore(store, inner=InMemoryStore()).batch([PutOp(FACTS, "k", {"content": "x"}, ttl=5)])
    with pytest.raises(ConfigurationError, match=r"pass inner=InMemoryStore\(\)"):
        RollingFactsStore(store).put(("ana", "trips"), "t1", {"city": "Lisbon"})
    assert store.facts("ana") == []


@pytest.mark.parametrize(
    "namespace",
    [("facts",), ("{client_id}", "{client_id}"), ("langgraph", "{client_id}"), ("a.b", "{client_id}")],
)
def test_a_bad_namespace_template_is_refused(namespace: tuple[str, ...]) -> None:
    with pytest.raises(ConfigurationError, match=r"exactly one '\{client_id\}'"):
        RollingFactsStore(open_store("memory://"), namespace=namespace)


async def test_the_async_twins_read_and_write_the_same_facts(store: RollingStore) -> None:
    graph_store = RollingFactsStore(store, inner=InMemoryStore())
    await graph_store.aput(FACTS, "diet", {"content": "Vegetarian"})
    await graph_store.aput(("ana", "trips"), "t1", {"city": "Lisbon"})
    assert [f.text for f in await store.afacts("ana")] == ["Vegetarian"]
    item = await graph_store.aget(FACTS, "diet")
    assert item is not None and item.value == {"content": "Vegetarian"}
    assert [i.key for i in await graph_store.asearch(("ana",))] == ["diet", "t1"]
    await graph_store.adelete(FACTS, "diet")
    assert await store.afacts("ana") == []


# ---------------------------------------------------------------- what a graph puts there reaches the prompt


def test_a_fact_put_by_a_node_with_get_store_reaches_with_rolling_memory_in_the_next_node() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)

    def remember(state: MessagesState) -> dict[str, Any]:
        get_store().put(FACTS, "diet", {"content": "Vegetarian"})
        return {}

    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke([state["messages"][-1]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    graph = builder.compile(store=RollingFactsStore(store, inner=InMemoryStore()))
    graph.invoke(
        {"messages": [HumanMessage("Dinner ideas?")]}, {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    )
    assert "Vegetarian" in system_text(model.requests[0])


@tool
def save_memory(content: str, runtime: ToolRuntime) -> str:
    """Save a memory about the user."""
    user = runtime.config["configurable"]["user_id"]
    assert runtime.store is not None
    runtime.store.put((user, "facts"), "diet", {"content": content})
    return "saved"


@tool
def list_memories(runtime: ToolRuntime) -> str:
    """List the memories about the user."""
    assert runtime.store is not None
    return "; ".join(
        i.value["content"] for i in runtime.store.search((runtime.config["configurable"]["user_id"], "facts"))
    )


def _agent(store: RollingStore, model: ScriptedChatModel, graph_store: Any, checkpointer: Any = None) -> Any:
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize)
    return create_agent(
        model, [save_memory, list_memories], middleware=[memory], store=graph_store, checkpointer=checkpointer
    )


def test_a_fact_a_tool_puts_in_runtime_store_reaches_the_middlewares_next_model_call() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(script=[tool_call("save_memory", {"content": "Vegetarian"}, "c1")])
    agent = _agent(store, model, RollingFactsStore(store, inner=InMemoryStore()))
    agent.invoke(
        {"messages": [HumanMessage("I am vegetarian")]},
        {"configurable": {"thread_id": "t1", "user_id": "ana"}},
    )
    assert "Vegetarian" not in system_text(model.requests[0])
    assert "Vegetarian" in system_text(model.requests[1])
    assert [f.text for f in store.facts("ana")] == ["Vegetarian"]


def test_facts_the_memorys_remember_tool_wrote_are_read_by_runtime_store() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(
        script=[tool_call("remember", {"text": "Prefers email"}, "c1"), tool_call("list_memories", {}, "c2")]
    )
    agent = _agent(store, model, RollingFactsStore(store, inner=InMemoryStore()))
    agent.invoke(
        {"messages": [HumanMessage("Email me")]}, {"configurable": {"thread_id": "t1", "user_id": "ana"}}
    )
    listed = [m for m in model.requests[2] if m.type == "tool"][-1]
    assert listed.text == "Prefers email"


# ---------------------------------------------------------------- erasure in one call


def _two_users(store: RollingStore) -> tuple[Any, InMemoryStore, InMemorySaver, ScriptedChatModel]:
    inner, saver, model = InMemoryStore(), InMemorySaver(), ScriptedChatModel()
    graph_store = RollingFactsStore(store, inner=inner)
    agent = _agent(store, model, graph_store, saver)
    for user, thread in [("ana", "ana-1"), ("ana", "ana-2"), ("bob", "bob-1")]:
        agent.invoke(
            {"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": thread, "user_id": user}}
        )
        graph_store.put((user, "facts"), "diet", {"content": f"{user} is vegetarian"})
        graph_store.put((user, "trips"), "t1", {"city": "Lisbon"})
    inner.put(("memories", "ana"), "m1", {"content": "written by langmem"})
    return graph_store, inner, saver, model


def _thread(saver: InMemorySaver, thread: str) -> Any:
    return saver.get_tuple({"configurable": {"thread_id": thread}})


def test_forget_user_erases_facts_items_and_threads_in_one_call_and_leaves_others() -> None:
    store = open_store("memory://")
    graph_store, inner, saver, _ = _two_users(store)
    erased = forget_user(
        "ana", store=store, graph_store=graph_store, checkpointer=saver, namespaces=[("memories", "ana")]
    )
    assert sorted(erased.threads) == ["ana-1", "ana-2"]
    assert erased.items == 2  # the trip, langmem's memory (the fact is ours: erased by forget first)
    assert store.facts("ana") == [] and store.sessions("ana") == []
    assert inner.search(("ana",)) == [] and inner.search(("memories", "ana")) == []
    assert _thread(saver, "ana-1") is None and _thread(saver, "ana-2") is None
    assert [f.text for f in store.facts("bob")] == ["bob is vegetarian"]
    assert inner.get(("bob", "trips"), "t1") is not None and _thread(saver, "bob-1") is not None


def test_forget_user_also_deletes_threads_named_by_the_caller() -> None:
    store, saver = open_store("memory://"), InMemorySaver()
    agent = create_agent(ScriptedChatModel(), [], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "elsewhere"}})
    assert forget_user("ana", store=store, checkpointer=saver, thread_ids=["elsewhere"]).threads == (
        "elsewhere",
    )
    assert _thread(saver, "elsewhere") is None
    with pytest.raises(TypeError, match="pass \\['elsewhere'\\]"):
        forget_user("ana", store=store, checkpointer=saver, thread_ids="elsewhere")


async def test_aforget_user_erases_the_same_and_leaves_others() -> None:
    store = open_store("memory://")
    graph_store, inner, saver, _ = _two_users(store)
    erased = await aforget_user("ana", store=store, graph_store=graph_store, checkpointer=saver)
    assert sorted(erased.threads) == ["ana-1", "ana-2"] and erased.items == 1  # the facts: by forget first
    assert await store.afacts("ana") == [] and await inner.asearch(("ana",)) == []
    assert _thread(saver, "ana-1") is None and _thread(saver, "bob-1") is not None
    assert inner.get(("memories", "ana"), "m1") is not None  # a namespace it was not told of


def test_a_turn_racing_forget_user_cannot_seed_its_deleted_thread_from_the_transcript() -> None:
    # A turn that lands while forget_user runs finds a deleted thread to be new and seeds it
    # from our store: our transcript must already be gone by then.
    store = open_store("memory://")
    saver = InMemorySaver()
    model = ScriptedChatModel()
    middleware = RollingMemoryMiddleware(
        store=store, summarizer=lambda p, m: "S", memory_tools=(), max_turns=4, keep_last=2
    )
    agent = create_agent(model, [], middleware=[middleware], checkpointer=saver)
    config = {"configurable": {"thread_id": "t", "client_id": "ana"}}
    agent.invoke({"messages": [HumanMessage("my passport is X099")]}, config)
    real_delete = saver.delete_thread

    def delete_then_race(thread_id: str) -> None:
        real_delete(thread_id)
        agent.invoke({"messages": [HumanMessage("a turn in between")]}, config)

    saver.delete_thread = delete_then_race  # type: ignore[method-assign]
    forget_user("ana", store=store, checkpointer=saver)
    assert "X099" not in text_of(model.requests[-1])
    state = agent.get_state(config).values.get("messages") or []
    assert "X099" not in text_of(state)
    assert store.transcript("t") == []
