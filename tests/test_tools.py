"""The memory tools: bound to one client (and session) in code, on every backend."""

from __future__ import annotations

import json

import pytest

from langchain_rolling_memory.adapters.memory_tools import (
    forget_fact_tool,
    memory_tools,
    remember_tool,
    session_state_tool,
)
from langchain_rolling_memory.errors import InvalidIdError
from langchain_rolling_memory.stores import RollingStore


def test_remember_stores_a_tool_fact_for_the_bound_client_only(store: RollingStore) -> None:
    tool = remember_tool(store, "client-a")
    assert tool.invoke({"text": "Delivers on Saturdays"}) == "Saved."
    [fact] = store.facts("client-a")
    assert (fact.text, fact.key, fact.source) == ("Delivers on Saturdays", None, "tool")
    assert store.facts("client-b") == []


def test_the_model_cannot_name_the_client(store: RollingStore) -> None:
    tool = remember_tool(store, "client-a")
    assert set(tool.args) == {"text", "key"}
    # An extra argument naming another client is not part of the schema and changes nothing.
    tool.invoke({"text": "Likes tea", "client_id": "client-b"})
    assert [f.text for f in store.facts("client-a")] == ["Likes tea"]
    assert store.facts("client-b") == []


def test_remember_with_a_key_replaces_the_old_value(store: RollingStore) -> None:
    tool = remember_tool(store, "client-a")
    tool.invoke({"text": "Works in the Sales team", "key": "team"})
    tool.invoke({"text": "Works in the Logistics team", "key": "team"})
    assert [(f.key, f.text) for f in store.facts("client-a")] == [("team", "Works in the Logistics team")]


def test_remember_reports_a_refused_fact_to_the_model_and_writes_nothing(store: RollingStore) -> None:
    tool = remember_tool(store, "client-a")
    reply = tool.invoke({"text": "x" * (store.max_fact_chars + 1)})
    assert reply.startswith("Not saved:")
    assert "max_fact_chars" in reply
    assert tool.invoke({"text": "Likes tea", "key": "bad key!"}).startswith("Not saved:")
    assert store.facts("client-a") == []


def test_remember_says_when_the_filter_refused_the_fact(store: RollingStore) -> None:
    store.fact_filter = lambda text, key: None if "diabetes" in text.lower() else text
    tool = remember_tool(store, "client-a")
    assert "filter" in tool.invoke({"text": "Has diabetes"})
    assert store.facts("client-a") == []


async def test_remember_works_async(store: RollingStore) -> None:
    tool = remember_tool(store, "client-a")
    assert await tool.ainvoke({"text": "Prefers email", "key": "channel"}) == "Saved."
    assert [(f.key, f.text) for f in await store.afacts("client-a")] == [("channel", "Prefers email")]


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "a b", "x" * 129, "c*", "a'; DROP TABLE facts; --"])
def test_a_tool_cannot_be_built_for_a_bad_client_id(store: RollingStore, bad: str) -> None:
    with pytest.raises(InvalidIdError):
        remember_tool(store, bad)


def test_forget_fact_deletes_by_key_or_exact_text_of_the_bound_client(store: RollingStore) -> None:
    store.add_fact("client-a", "Works in the Logistics team", key="team")
    store.add_fact("client-a", "Likes tea")
    store.add_fact("client-b", "Likes tea")
    tool = forget_fact_tool(store, "client-a")
    assert tool.invoke({"fact": "[team]"}) == "Forgot 1 fact(s)."
    assert tool.invoke({"fact": '"likes TEA"'}) == "Forgot 1 fact(s)."
    assert tool.invoke({"fact": "nothing like this"}).startswith("No saved fact")
    assert store.facts("client-a") == []
    assert [f.text for f in store.facts("client-b")] == ["Likes tea"]


async def test_forget_fact_works_async(store: RollingStore) -> None:
    store.add_fact("client-a", "Likes tea")
    assert await forget_fact_tool(store, "client-a").ainvoke({"fact": "Likes tea"}) == "Forgot 1 fact(s)."
    assert await store.afacts("client-a") == []


def test_session_state_tool_merges_keys_and_null_removes_one(store: RollingStore) -> None:
    store.set_state("s1", {"step": "cart", "coupon": "X1"}, client_id="client-a")
    tool = session_state_tool(store, "s1", client_id="client-a")
    reply = tool.invoke({"updates": {"step": "payment", "amount": 42.5, "coupon": None}})
    assert json.loads(reply) == {"step": "payment", "amount": 42.5}
    assert store.get_state("s1") == {"step": "payment", "amount": 42.5}


def test_session_state_tool_refuses_a_session_of_another_client(store: RollingStore) -> None:
    store.set_state("s1", {"step": "cart"}, client_id="client-a")
    reply = session_state_tool(store, "s1", client_id="client-b").invoke({"updates": {"step": "stolen"}})
    assert reply.startswith("Not updated:")
    assert "cart" not in reply
    assert store.get_state("s1") == {"step": "cart"}


async def test_session_state_tool_works_async(store: RollingStore) -> None:
    tool = session_state_tool(store, "s1", client_id="client-a")
    await tool.ainvoke({"updates": {"due": "2026-12-01"}})
    assert await store.aget_state("s1") == {"due": "2026-12-01"}
    assert (await store.asession_info("s1")).client_id == "client-a"  # type: ignore[union-attr]


def test_memory_tools_bundle_the_client_and_session_tools(store: RollingStore) -> None:
    assert [t.name for t in memory_tools(store, "client-a")] == ["remember", "forget_fact"]
    names = [t.name for t in memory_tools(store, "client-a", "s1")]
    assert names == ["remember", "forget_fact", "update_session_state"]
