"""A store's life on every backend: ``with`` / ``async with``, `setup()`, ``setup=False``,
closed is final, and a store left open when a script ends."""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import STORE_FACTORIES, _probe, unique_prefix
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL, raw_contents, wipe

from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores import RollingStore, SQLiteRollingStore, open_store

ROOT = Path(__file__).resolve().parents[1]


def test_with_closes_the_store_and_a_closed_store_refuses_every_call(store: RollingStore) -> None:
    with store as opened:
        assert opened is store
        store.append("s1", [HumanMessage("hello")])
        assert [m.content for m in store.transcript("s1")] == ["hello"]
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        store.append("s1", [HumanMessage("again")])
    with pytest.raises(StoreError, match="closed"):
        store.read("s1")
    with pytest.raises(StoreError, match="closed"):
        store.setup()
    store.close()  # closing twice is harmless


async def test_async_with_closes_the_store_and_a_closed_store_refuses_async_calls(
    store: RollingStore,
) -> None:
    async with store as opened:
        assert opened is store
        await store.aappend("s1", [HumanMessage("hello")])
        assert [m.content for m in await store.atranscript("s1")] == ["hello"]
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        await store.aappend("s1", [HumanMessage("again")])
    with pytest.raises(StoreError, match="closed"):
        await store.asummary("s1")
    with pytest.raises(StoreError, match="closed"):
        async with store:
            pass


async def test_setup_is_idempotent_and_keeps_the_data(store: RollingStore) -> None:
    store.append("s1", [HumanMessage("kept")], client_id="ana")
    store.setup()
    store.setup()
    await store.asetup()
    assert [m.content for m in store.transcript("s1")] == ["kept"]
    assert store.sessions("ana") == ["s1"]


# ---------------------------------------------------------------------- setup=False


def _unset(kind: str, tmp_path: Path, prefix: str) -> RollingStore:
    """A store of `kind` opened with setup=False on a prefix nothing was created under."""
    if kind == "sqlite":
        return SQLiteRollingStore(tmp_path / "later" / "memory.db", table_prefix=prefix, setup=False)
    _probe(kind)
    url = POSTGRES_URL if kind == "postgres" else REDIS_URL
    sep = "&" if "?" in url else "?"
    return open_store(f"{url}{sep}prefix={prefix}", setup=False)


@pytest.mark.parametrize("kind", ["postgres", "redis", "sqlite"])
async def test_setup_false_creates_nothing_and_a_missing_schema_names_setup(
    kind: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    store = _unset(kind, tmp_path, prefix)
    try:
        if kind == "sqlite":
            assert not (tmp_path / "later").exists()
        else:
            assert _schema_exists(kind, prefix) is False
        with pytest.raises(StoreError, match=r"setup\(\)"):
            store.append("s1", [HumanMessage("hi")])
        with pytest.raises(StoreError, match=r"setup\(\)"):
            await store.aread("s1")
        if kind == "redis":
            assert raw_contents(store) == []  # the refused calls wrote nothing either
        store.setup()
        store.append("s1", [HumanMessage("hi")])
        assert [m.content for m in await store.atranscript("s1")] == ["hi"]
    finally:
        await store.aclose()
        wipe(store)


async def test_setup_false_opens_set_up_tables_with_a_role_that_may_not_create_any() -> None:
    _probe("postgres")
    import psycopg

    prefix, role = unique_prefix(), f"lrm_dml_{uuid.uuid4().hex[:8]}"
    owner = open_store(f"{POSTGRES_URL}?prefix={prefix}")
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}")
        tables = [
            r[0]
            for r in admin.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (prefix + "%",))
        ]
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(tables)} TO {role}")
    url = POSTGRES_URL.replace("postgres@", f"{role}@", 1)
    try:
        with pytest.raises(StoreError, match="permission denied"):
            open_store(f"{url}?prefix={prefix}")  # today's default: DDL in the constructor
        with open_store(f"{url}?prefix={prefix}", setup=False) as store:
            store.append("s1", [HumanMessage("hi"), AIMessage("hello")])
            assert [m.content for m in await store.atranscript("s1")] == ["hi", "hello"]
    finally:
        owner.close()
        wipe(owner)
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {role}")


def _schema_exists(kind: str, prefix: str) -> bool:
    if kind == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass(%s)", (f"{prefix}meta",)).fetchone()
            return row is not None and row[0] is not None
    import redis

    with redis.Redis.from_url(REDIS_URL) as r:
        return bool(r.exists(f"{prefix}schema"))


# ---------------------------------------------------------------------- at exit

_SCRIPT = """
import asyncio, sys, time
from langchain_core.messages import HumanMessage
from langchain_rolling_memory.stores import open_store

store = open_store(sys.argv[1])  # kept open until the interpreter exits, never closed


async def main():
    await store.aappend("s1", [HumanMessage("hi")])
    other = open_store(sys.argv[1])  # dropped with main's frame, never closed either
    await other.aappend("s2", [HumanMessage("hi")])


asyncio.run(main())
print(time.time(), flush=True)
"""


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_script_that_never_closes_its_store_exits_at_once_and_leaves_nothing_open(
    kind: str, tmp_path: Path
) -> None:
    """Before, on Python 3.13: ``asyncio.run`` never returned now and then (psycopg_pool's
    tasks swallowed its final cancellation), else the exit waited ~20 s on the pool's threads
    ("couldn't stop thread ... within 5.0 seconds"); and the async clients died unclosed."""
    backend = STORE_FACTORIES[kind](tmp_path)
    url = (POSTGRES_URL if kind == "postgres" else REDIS_URL) + f"?prefix={backend.prefix}"  # type: ignore[attr-defined]
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        command = [sys.executable, "-W", "always::ResourceWarning", str(script), url]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the script did not exit within 60 s: {exc.stderr!r}")
        exited = time.time()
        assert done.returncode == 0, done.stderr
        assert "couldn't stop thread" not in done.stderr
        assert "ResourceWarning" not in done.stderr, done.stderr
        # The bound: once main has returned, the exit does not wait on the pool.
        exit_took = exited - float(done.stdout.strip())
        assert exit_took < 10, f"the interpreter took {exit_took:.1f} s to exit: {done.stderr}"
    finally:
        backend.close()
        wipe(backend)


def test_a_guard_left_pending_by_a_loop_closed_by_hand_is_collected_without_an_error() -> None:
    # A runner that closes its loop without cancelling the tasks (pytest-asyncio 1.0, a script
    # calling loop.close()) leaves the close-with-loop guard pending; when the collector
    # destroys it, the guard must not try to await its close (that raised "coroutine ignored
    # GeneratorExit" from inside the collector).
    import asyncio
    import gc

    from langchain_rolling_memory.stores.lifecycle import close_with_loop

    async def close() -> None:
        await asyncio.sleep(0)  # a real close suspends (the pool's or the client's)

    async def open_guard() -> None:
        close_with_loop(close)

    seen: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(open_guard())
        loop.close()
        del loop
        gc.collect()
    finally:
        sys.unraisablehook = previous
    # Only the guard's own errors count: earlier tests' garbage may be collected here too.
    assert [u for u in seen if "close_with_loop" in repr(u.object)] == []


def test_a_sqlite_store_dropped_without_close_closes_its_own_connection(tmp_path: Path) -> None:
    """Before: the connection stayed open until collected, and Python 3.13 then warns
    "ResourceWarning: unclosed database" (an error under this suite's warning filter)."""
    store = SQLiteRollingStore(tmp_path / "dropped.db")
    store.append("s1", [HumanMessage("kept")])
    conn = store.backend._conn
    assert conn is not None
    del store
    gc.collect()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    with SQLiteRollingStore(tmp_path / "dropped.db") as again:  # the data was committed
        assert [m.content for m in again.transcript("s1")] == ["kept"]
