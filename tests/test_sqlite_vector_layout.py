"""SQLite keeps dense vectors in a rowid table (schema 8): a file written at schema 7 (the vectors
in a WITHOUT ROWID table, most of each vector on an overflow page) is converted when it is
opened, and every vector, every search result and every erasure path is what it was."""

from __future__ import annotations

import multiprocessing
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.engine.dense import index_vectors, model_name
from langchain_rolling_memory.stores import SQLiteRollingStore
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION, VectorWrite

SMALL = DeterministicFakeEmbedding(size=8)
LARGE = DeterministicFakeEmbedding(size=384)
_WORDS = ["camping", "pottery", "lake", "dog", "museum", "paint", "run", "Lisbon"]


def to_schema_7(path: Path, p: str = "lrm_") -> None:
    """The vectors table as schema 6 made it and schema 7 left it (its rows kept)."""
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(
            f"""
            DROP TRIGGER {p}messages_unembedded;
            CREATE TABLE {p}vectors_old (
                session_id TEXT NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL,
                vector BLOB NOT NULL, PRIMARY KEY (session_id, seq, model)
            ) WITHOUT ROWID;
            INSERT INTO {p}vectors_old SELECT session_id, seq, model, vector FROM {p}vectors;
            DROP TABLE {p}vectors;
            ALTER TABLE {p}vectors_old RENAME TO {p}vectors;
            CREATE TRIGGER {p}messages_unembedded AFTER DELETE ON {p}messages BEGIN
                DELETE FROM {p}vectors WHERE session_id = old.session_id AND seq = old.seq;
            END;
            UPDATE {p}meta SET value = '7' WHERE key = 'schema_version';
            """
        )


def _rows(path: Path) -> list[tuple[str, int, str, bytes]]:
    with closing(sqlite3.connect(path)) as conn:
        return sorted(conn.execute("SELECT session_id, seq, model, vector FROM lrm_vectors"))


def _one(path: Path, sql: str, *params: object) -> str:
    with closing(sqlite3.connect(path)) as conn:
        return str(conn.execute(sql, params).fetchone()[0])


def _table_sql(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'lrm_vectors'").fetchone()[0])


def _searches(store: SQLiteRollingStore, clients: list[str]) -> list[object]:
    out: list[object] = []
    for embeddings in (SMALL, LARGE):
        query = embeddings.embed_query("camping by the lake")
        for client in clients:
            hits = store.vector_search(query, model=model_name(embeddings), client_id=client, limit=50)
            out.append([(h.session_id, h.seq, round(h.score, 6)) for h in hits])
    return out


_session = st.tuples(
    st.sampled_from(["ana", "ben"]),
    st.lists(st.lists(st.sampled_from(_WORDS), min_size=0, max_size=4), min_size=1, max_size=5),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_session, min_size=1, max_size=6), st.booleans())
def test_a_schema_7_file_keeps_every_vector_and_search_result_once_converted(
    tmp_path: Path, sessions: list[tuple[str, list[list[str]]]], large_too: bool
) -> None:
    path = tmp_path / f"{uuid.uuid4().hex}.db"  # tmp_path is shared by the examples
    store = SQLiteRollingStore(path)
    for n, (client, texts) in enumerate(sessions):
        messages = [(HumanMessage if i % 2 == 0 else AIMessage)(" ".join(t)) for i, t in enumerate(texts)]
        store.append(f"s{n}", messages, client_id=client)
    for client in ("ana", "ben"):
        index_vectors(store, SMALL, client_id=client)
        if large_too:
            index_vectors(store, LARGE, client_id=client)
    before_rows, before_hits = _rows(path), _searches(store, ["ana", "ben"])
    store.close()

    to_schema_7(path)
    assert "WITHOUT ROWID" in _table_sql(path)
    store = SQLiteRollingStore(path)
    try:
        assert "WITHOUT ROWID" not in _table_sql(path)
        assert _one(path, "SELECT value FROM lrm_meta WHERE key = 'schema_version'") == str(SCHEMA_VERSION)
        assert _rows(path) == before_rows
        assert _searches(store, ["ana", "ben"]) == before_hits
        assert store.unembedded(model_name(SMALL), client_id="ana") == []
    finally:
        store.close()


def test_after_the_conversion_a_vector_is_replaced_in_place_and_erased_with_its_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.db"
    store = SQLiteRollingStore(path)
    store.append("s1", [HumanMessage("we went camping"), AIMessage("by the lake")], client_id="ana")
    store.append("s2", [HumanMessage("a pottery class")], client_id="ana")
    index_vectors(store, SMALL, client_id="ana")
    store.close()
    to_schema_7(path)
    store = SQLiteRollingStore(path)
    try:
        # The unique key holds: the same message embedded again replaces its row.
        assert store.unembedded(model_name(SMALL), client_id="ana") == []
        rows = _rows(path)
        session, seq, model, vector = rows[0]
        generation = _one(path, "SELECT generation FROM lrm_sessions WHERE session_id = ?", session)
        again = VectorWrite(session, seq, generation, vector)
        assert store.put_vectors(model, [again]) == 1
        assert _rows(path) == rows
        # The trigger came back: an erase takes the session's vectors with its messages.
        store.clear_session("s1")
        assert {r[0] for r in _rows(path)} == {"s2"}
        store.forget("ana")
        assert _rows(path) == []
    finally:
        store.close()


FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def _open_and_search(path: str, expected: list[object], done: Any) -> None:
    store = SQLiteRollingStore(path)
    try:
        done.put(_searches(store, ["ana", "ben"]) == expected)
    finally:
        store.close()


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_processes_opening_a_schema_7_file_at_once_convert_it_once(tmp_path: Path) -> None:
    assert FORK is not None
    path = tmp_path / "v.db"
    store = SQLiteRollingStore(path)
    for n in range(6):
        store.append(
            f"s{n}", [HumanMessage(f"{_WORDS[n]} and {_WORDS[n + 1]}")], client_id=["ana", "ben"][n % 2]
        )
    index_vectors(store, LARGE)
    rows, expected = _rows(path), _searches(store, ["ana", "ben"])
    store.close()
    to_schema_7(path)
    done = FORK.Queue()
    children = [FORK.Process(target=_open_and_search, args=(str(path), expected, done)) for _ in range(4)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0, 0, 0, 0]
    assert [done.get(timeout=5) for _ in children] == [True] * 4
    assert _rows(path) == rows
    assert "WITHOUT ROWID" not in _table_sql(path)
