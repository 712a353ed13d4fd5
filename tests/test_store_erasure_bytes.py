"""Erasure leaves no bytes: the files of a SQLite store, and PostgreSQL's table files after
`vacuum()`, no longer hold any text of an erased client."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL

from langchain_rolling_memory.stores import RollingStore, SQLiteRollingStore


def _marker() -> str:
    return f"ZQX{uuid.uuid4().hex[:12].upper()}"


def _write_everything(
    store: RollingStore, marker: str, client: str, session: str, *, facts: bool = True
) -> None:
    """The marker in every place a client's text lives: messages, state, summary, facts."""
    for i in range(30):  # enough rows to span several pages
        store.append(
            session,
            [HumanMessage(f"my card is {marker} #{i} " * 4), AIMessage(f"noted {marker}")],
            client_id=client,
        )
    store.set_state(session, {"secret": marker, marker: "key"}, client_id=client)
    assert store.install_summary(session, f"summary with {marker}", covered_seq=10, expected_version=0)
    if facts:
        store.add_fact(client, f"pin is {marker}")
        store.add_fact(client, f"lives at {marker} street", key="address")


def _files_holding(folder: Path, marker: str) -> list[str]:
    found = []
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        if marker.encode() in data:
            found.append(f"{path.name} ({len(data)} bytes)")
    return found


def _forget(store: RollingStore, client: str, session: str) -> object:
    return store.forget(client)


@pytest.mark.parametrize(
    "erase",
    [
        _forget,
        lambda store, client, session: store.clear_session(session),
        lambda store, client, session: store.purge(older_than=0),
    ],
    ids=["forget", "clear_session", "purge"],
)
def test_an_erase_leaves_no_byte_in_any_sqlite_file_while_the_store_is_open(
    tmp_path: Path, erase: Callable[[RollingStore, str, str], object]
) -> None:
    folder = tmp_path / "db"
    store = SQLiteRollingStore(folder / "memory.db")
    try:
        marker = _marker()
        other = _marker()
        # clear_session and purge keep the client's facts (their contract): no marker there.
        _write_everything(store, marker, "client-a", "session-a", facts=erase is _forget)
        assert _files_holding(folder, marker), "the test must see the marker before the erase"
        erase(store, "client-a", "session-a")
        _write_everything(store, other, "client-b", "session-b")  # later writes reuse the pages
        assert store.backend._conn.execute("PRAGMA secure_delete").fetchone() == (1,)
        assert _files_holding(folder, marker) == []
        assert _files_holding(folder, other)
        assert {p.name for p in folder.iterdir()} <= {"memory.db", "memory.db-wal", "memory.db-shm"}
    finally:
        store.close()


def test_secure_delete_is_set_even_where_the_library_default_is_off(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    try:
        assert store.backend._conn.execute("PRAGMA secure_delete").fetchone() == (1,)
        assert store.backend._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        store.close()


def test_an_erase_under_a_reader_is_finished_by_vacuum(tmp_path: Path) -> None:
    folder = tmp_path / "db"
    store = SQLiteRollingStore(folder / "memory.db")
    reader = None
    try:
        marker = _marker()
        _write_everything(store, marker, "client-a", "session-a")
        reader = sqlite3.connect(folder / "memory.db", isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM lrm_messages").fetchone()  # pins a snapshot
        store.backend._conn.execute("PRAGMA busy_timeout = 100")  # the checkpoint gives up quickly
        store.forget("client-a")
        assert store.facts("client-a") == []
        reader.execute("COMMIT")
        store.vacuum()
        assert _files_holding(folder, marker) == []
    finally:
        if reader is not None:
            reader.close()
        store.close()


# ------------------------------------------------------------------ PostgreSQL


def _pg_files_holding(store: RollingStore, marker: str) -> list[str]:
    """Table, index and TOAST files of the store's tables that hold `marker` (needs superuser)."""
    import psycopg

    prefix = store.prefix  # type: ignore[attr-defined]
    found = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # dirty pages reach the files
        rels = conn.execute(
            "SELECT c.oid::regclass::text, pg_relation_filepath(c.oid) FROM pg_class c "
            "WHERE c.relname LIKE %s OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname LIKE %s) "
            "OR c.oid IN (SELECT indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
            "WHERE t.relname LIKE %s)",
            (prefix + "%", prefix + "%", prefix + "%"),
        ).fetchall()
        for name, path in rels:
            if path is None:
                continue
            size = conn.execute("SELECT (pg_stat_file(%s, true)).size", (path,)).fetchone()
            if not size or size[0] is None:
                continue
            data = conn.execute("SELECT pg_read_binary_file(%s)", (path,)).fetchone()[0]
            if marker.encode() in bytes(data):
                found.append(name)
    return found


def _pg_superuser() -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            row = conn.execute("SELECT current_setting('is_superuser')").fetchone()
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    if row != ("on",):
        pytest.skip("reading table files needs a superuser")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_postgres_vacuum_full_removes_erased_rows_from_the_table_files(
    pg_store: tuple[RollingStore, str], use_async: bool
) -> None:
    _pg_superuser()
    store, _ = pg_store
    marker, kept = _marker(), _marker()
    _write_everything(store, marker, "client-a", "session-a")
    _write_everything(store, kept, "client-b", "session-b")
    store.forget("client-a")
    # What the module docstring says: deleted rows stay in the files until VACUUM FULL.
    assert _pg_files_holding(store, marker)
    store.vacuum(full=False)
    assert _pg_files_holding(store, marker), "a plain VACUUM leaves the bytes in the page"
    if use_async:
        await store.avacuum()
    else:
        store.vacuum()
    assert _pg_files_holding(store, marker) == []
    assert _pg_files_holding(store, kept)
    assert store.facts("client-b")
    # The statement timeout that VACUUM lifted for itself is back on the pooled connections.
    with store.backend.link.pool.connection() as conn:  # type: ignore[attr-defined]
        assert conn.execute("SHOW statement_timeout").fetchone() == ("30s",)


async def test_vacuum_keeps_what_was_not_erased_on_every_backend(store: RollingStore) -> None:
    store.add_fact("c1", "a fact")
    store.vacuum()
    await store.avacuum()
    assert [f.text for f in store.facts("c1")] == ["a fact"]
