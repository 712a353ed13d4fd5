"""The facts adapter and the one-call erasure on LangGraph's PostgreSQL store and checkpointer.

An agent as a LangGraph developer deploys it: `create_agent` with our middleware, a
`PostgresSaver` checkpointer and `RollingFactsStore` over our PostgreSQL store with a
`PostgresStore` inside, all on the local server. LangGraph's tables live in a schema of the
test's own (its tables have fixed names), dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agent_models import ScriptedChatModel, tool_call
from conftest import _probe
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from store_kit import POSTGRES_URL

from langchain_rolling_memory import (
    RollingFactsStore,
    RollingMemoryMiddleware,
    RollingStore,
    aforget_user,
    forget_user,
)


def _langgraph_postgres() -> tuple[Any, Any]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
    except ImportError as exc:
        reason = f"langgraph-checkpoint-postgres is not installed ({exc}); pip install -e . --group test"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI is set: the dev extra must be installed)")
        pytest.skip(reason)
    return PostgresStore, PostgresSaver


@pytest.fixture
def schema_url() -> Iterator[str]:
    """A URL whose connections use a fresh schema (LangGraph's tables have fixed names)."""
    _probe("postgres")
    import psycopg

    schema = f"lg_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def langgraph_pg(schema_url: str) -> Iterator[tuple[Any, Any]]:
    """LangGraph's `PostgresStore` and `PostgresSaver`, set up in the test's schema."""
    store_cls, saver_cls = _langgraph_postgres()
    with store_cls.from_conn_string(schema_url) as inner, saver_cls.from_conn_string(schema_url) as saver:
        inner.setup()
        saver.setup()
        yield inner, saver


@pytest.fixture
async def alanggraph_pg(schema_url: str) -> AsyncIterator[tuple[Any, Any]]:
    """LangGraph's async `AsyncPostgresStore` and `AsyncPostgresSaver`, for async graphs."""
    _langgraph_postgres()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with (
        AsyncPostgresStore.from_conn_string(schema_url) as inner,
        AsyncPostgresSaver.from_conn_string(schema_url) as saver,
    ):
        await inner.setup()
        await saver.setup()
        yield inner, saver


@pytest.fixture
def rolling_pg(pg_store: tuple[RollingStore, str]) -> RollingStore:
    """Our PostgreSQL store, with a table prefix of the test's own."""
    return pg_store[0]


@tool
def save_memory(content: str, runtime: ToolRuntime) -> str:
    """Save a memory about the user."""
    assert runtime.store is not None
    runtime.store.put((runtime.config["configurable"]["user_id"], "facts"), "diet", {"content": content})
    return "saved"


def _agent(store: RollingStore, model: ScriptedChatModel, graph_store: Any, saver: Any) -> Any:
    memory = RollingMemoryMiddleware(store=store, summarizer=lambda p, m: "summary", memory_tools=())
    return create_agent(model, [save_memory], middleware=[memory], store=graph_store, checkpointer=saver)


def _config(user: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def test_on_postgres_a_tools_fact_reaches_the_next_prompt_and_forget_user_erases_everywhere(
    rolling_pg: RollingStore, langgraph_pg: tuple[Any, Any]
) -> None:
    inner, saver = langgraph_pg
    graph_store = RollingFactsStore(rolling_pg, inner=inner)
    model = ScriptedChatModel(script=[tool_call("save_memory", {"content": "Vegetarian"}, "c1")])
    agent = _agent(rolling_pg, model, graph_store, saver)
    agent.invoke({"messages": [HumanMessage("I am vegetarian")]}, _config("ana", "ana-1"))
    agent.invoke({"messages": [HumanMessage("Dinner ideas?")]}, _config("ana", "ana-2"))
    agent.invoke({"messages": [HumanMessage("hi")]}, _config("bob", "bob-1"))
    assert "Vegetarian" in "\n".join(m.text for m in model.requests[-2] if m.type == "system")
    assert [f.text for f in rolling_pg.facts("ana")] == ["Vegetarian"]
    assert inner.search(("ana", "facts")) == []  # the facts are ours, not copied into PostgresStore
    graph_store.put(("ana", "trips"), "t1", {"city": "Lisbon"})
    graph_store.put(("bob", "trips"), "t1", {"city": "Porto"})

    erased = forget_user("ana", store=rolling_pg, graph_store=graph_store, checkpointer=saver)

    assert (
        sorted(erased.threads) == ["ana-1", "ana-2"] and erased.items == 1
    )  # the trip (the fact is ours: erased by forget first)
    assert rolling_pg.facts("ana") == [] and rolling_pg.sessions("ana") == []
    assert inner.search(("ana",)) == []
    for thread in ("ana-1", "ana-2"):
        assert saver.get_tuple({"configurable": {"thread_id": thread}}) is None
    assert saver.get_tuple({"configurable": {"thread_id": "bob-1"}}) is not None
    assert inner.get(("bob", "trips"), "t1") is not None
    assert rolling_pg.sessions("bob") == ["bob-1"]


async def test_on_postgres_the_async_twins_put_read_and_erase(
    rolling_pg: RollingStore, alanggraph_pg: tuple[Any, Any]
) -> None:
    inner, saver = alanggraph_pg
    graph_store = RollingFactsStore(rolling_pg, inner=inner)
    await graph_store.aput(("ana", "facts"), "diet", {"content": "Vegetarian"})
    await graph_store.aput(("ana", "trips"), "t1", {"city": "Lisbon"})
    assert [i.key for i in await graph_store.asearch(("ana",))] == ["diet", "t1"]
    model = ScriptedChatModel()
    await _agent(rolling_pg, model, graph_store, saver).ainvoke(
        {"messages": [HumanMessage("Dinner ideas?")]}, _config("ana", "ana-1")
    )
    assert "Vegetarian" in "\n".join(m.text for m in model.requests[0] if m.type == "system")
    erased = await aforget_user("ana", store=rolling_pg, graph_store=graph_store, checkpointer=saver)
    assert (
        erased.threads == ("ana-1",) and erased.items == 1
    )  # the trip (the fact is ours: erased by forget first)
    assert await rolling_pg.afacts("ana") == [] and await inner.asearch(("ana",)) == []
    assert await saver.aget_tuple({"configurable": {"thread_id": "ana-1"}}) is None
