"""SQLite indexes messages at the first search after their append (schema 3): an append writes
no index entry, a search still finds exactly what indexing at every append found (same scores,
same order), from any connection to the file, and an erase before any search leaves nothing."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from test_memory_lazy_index import _WORDS, _apply, _op

import langchain_rolling_memory.core.lexical_search as search
from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore
from langchain_rolling_memory.stores.contract import AppendBatch
from langchain_rolling_memory.stores.sqlite.store import SQLiteBackend


class _EagerBackend(SQLiteBackend):
    """The reference: the same backend, its index caught up inside every append's call."""

    def append(self, batch: AppendBatch) -> list[int]:
        seqs = super().append(batch)
        self._catch_up()
        return seqs


def to_schema_4(conn: sqlite3.Connection, p: str) -> None:
    """Undo what schema 5 added to a file (its rows stay): what an older release left."""
    conn.execute(f"DROP INDEX {p}facts_expiry")
    conn.execute(f"ALTER TABLE {p}facts DROP COLUMN expires_at")
    conn.execute(f"UPDATE {p}meta SET value = '4' WHERE key = 'schema_version'")


def to_schema_3(conn: sqlite3.Connection, p: str) -> None:
    """Undo what schemas 4 and 5 added to a file (its rows stay): what an older release left."""
    to_schema_4(conn, p)
    conn.execute(f"DROP TRIGGER {p}sessions_claimed")
    conn.execute(f"DROP INDEX {p}search_docs_facts")
    for table, column in [
        ("search_docs", "terms"),
        ("search_docs", "repeats"),
        ("sessions", "generation"),
        ("sessions", "indexed_terms"),
    ]:
        conn.execute(f"ALTER TABLE {p}{table} DROP COLUMN {column}")
    conn.execute(f"UPDATE {p}search_docs SET client_id = NULL WHERE fact_id IS NULL")
    conn.execute(f"UPDATE {p}meta SET value = '3' WHERE key = 'schema_version'")


def _entries(store: SQLiteRollingStore) -> int:
    return int(
        store.backend._query(f"SELECT count(*) FROM {store.prefix}search_docs WHERE fact_id IS NULL")[0][0]
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, max_size=30))
def test_a_lazy_sqlite_index_finds_what_indexing_at_each_append_found(ops: list[tuple[object, ...]]) -> None:
    lazy, eager = SQLiteRollingStore(":memory:"), RollingStore(_EagerBackend(":memory:"))
    try:
        for op in [*ops, ("search", "c1", " ".join(_WORDS), True), ("search", "c2", " ".join(_WORDS), True)]:
            assert _apply(lazy, op) == _apply(eager, op), op
    finally:
        lazy.close()
        eager.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_append_analyses_no_text_until_a_search(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    analysed: list[str] = []
    real = search.index_text

    def counting(text: str) -> str:
        analysed.append(text)
        return real(text)

    monkeypatch.setattr(search, "index_text", counting)
    store: RollingStore = InMemoryRollingStore() if kind == "memory" else SQLiteRollingStore(":memory:")
    try:
        store.append("s1", [HumanMessage("We adopted a cat"), AIMessage("Named Oscar")], client_id="c1")
        assert analysed == []
        assert [h.seq for h in store.search("oscar", client_id="c1")] == [2]
        assert sorted(analysed) == ["Named Oscar", "We adopted a cat"]
    finally:
        store.close()


def test_an_append_writes_no_index_entry_until_a_search(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    try:
        store.append(
            "s1", [HumanMessage("We adopted a cat named Oscar"), AIMessage("Oscar!")], client_id="c1"
        )
        store.append("s2", [HumanMessage("The cat sleeps")], client_id="c2")
        assert _entries(store) == 0
        assert [h.seq for h in store.search("oscar cat", client_id="c1")] == [1, 2]
        assert _entries(store) == 3  # every session of the file, not only the scope searched
        store.append("s1", [HumanMessage("Oscar went to Lisbon")], client_id="c1")
        assert _entries(store) == 3
        assert [h.seq for h in store.search("lisbon", client_id="c1", session_id="s1")] == [3]
    finally:
        store.close()


async def test_a_search_from_another_connection_indexes_and_finds_new_messages(tmp_path: Path) -> None:
    writer = SQLiteRollingStore(tmp_path / "m.db")
    reader = SQLiteRollingStore(tmp_path / "m.db")
    try:
        writer.append("s1", [HumanMessage("Lisbon in June")], client_id="c1")
        assert [h.seq for h in await reader.asearch("lisbon", client_id="c1")] == [1]
        writer.append("s1", [HumanMessage("Lisbon by train")], client_id="c1")
        assert [h.seq for h in writer.search("lisbon train", client_id="c1")] == [2, 1]
        assert _entries(reader) == 2  # each message indexed once, whoever caught up
    finally:
        writer.close()
        reader.close()


@pytest.mark.parametrize("erase", ["forget", "clear_session", "purge"])
def test_messages_erased_before_any_search_are_never_indexed(tmp_path: Path, erase: str) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    try:
        store.append("s1", [HumanMessage("Oscar the cat")], client_id="c1")
        store.append("s2", [HumanMessage("Oscar the dog")], client_id="c2")
        if erase == "forget":
            store.forget("c1")
        elif erase == "clear_session":
            store.clear_session("s1")
        else:
            store.backend._query(f"UPDATE {store.prefix}sessions SET updated_at = 0 WHERE session_id = 's1'")
            assert store.purge(older_than=60) == 1
        assert store.search("oscar", client_id="c1") == []
        assert [h.session_id for h in store.search("oscar", client_id="c2")] == ["s2"]
        rows = store.backend._query(f"SELECT session_id FROM {store.prefix}search_docs")
        assert rows == [("s2",)]
    finally:
        store.close()


def test_a_schema_2_file_is_migrated_without_indexing_anything_twice(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteRollingStore(path)
    store.append("s1", [HumanMessage("Paris in spring"), AIMessage("Paris it is")], client_id="c1")
    assert len(store.search("paris", client_id="c1")) == 2  # indexed, as schema 2 did at append
    store.close()
    with closing(sqlite3.connect(path)) as conn, conn:  # back to the schema-2 layout
        to_schema_3(conn, "lrm_")
        conn.execute("DROP INDEX lrm_sessions_unindexed")
        conn.execute("ALTER TABLE lrm_sessions DROP COLUMN indexed_seq")
        conn.execute("UPDATE lrm_meta SET value = '2' WHERE key = 'schema_version'")
    again = SQLiteRollingStore(path)
    try:
        again.append("s1", [HumanMessage("Paris once more")], client_id="c1")
        assert sorted(h.seq for h in again.search("paris", client_id="c1")) == [1, 2, 3]
        assert _entries(again) == 3
    finally:
        again.close()


def test_a_read_only_store_says_what_it_cannot_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    writer = SQLiteRollingStore(path)
    writer.append("s1", [HumanMessage("Lisbon in June")], client_id="c1")
    reader = SQLiteRollingStore(path, read_only=True)
    try:
        with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
            assert reader.search("lisbon", client_id="c1") == []
        assert "read-only store cannot index them" in caplog.text
        writer.search("lisbon", client_id="c1")
        assert [h.seq for h in reader.search("lisbon", client_id="c1")] == [1]
    finally:
        reader.close()
        writer.close()
