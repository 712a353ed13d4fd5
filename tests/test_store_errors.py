"""Loud, clear failures: a read-only or full SQLite file and a stuck PostgreSQL statement raise
`StoreError` naming the cause (reads of a read-only file still work)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import server_unavailable
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL, raw_contents, wipe

from langchain_rolling_memory.errors import ConfigurationError, StoreError
from langchain_rolling_memory.stores import RollingStore, SQLiteRollingStore


def _populated(path: Path) -> None:
    store = SQLiteRollingStore(path)
    store.append("s1", [HumanMessage("hello"), AIMessage("hi")], client_id="c1")
    store.set_state("s1", {"cart": 2}, client_id="c1")
    store.install_summary("s1", "they greeted", covered_seq=1, expected_version=0)
    store.add_fact("c1", "Likes tea")
    store.close()


def _expected_reads(store: RollingStore) -> None:
    assert [m.content for m in store.transcript("s1")] == ["hello", "hi"]
    assert store.get_state("s1") == {"cart": 2}
    assert store.summary("s1").text == "they greeted"  # type: ignore[union-attr]
    assert [f.text for f in store.facts("c1")] == ["Likes tea"]


# ------------------------------------------------------------------ SQLite read-only


def test_a_read_only_store_reads_and_refuses_writes_with_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    _populated(path)
    before = path.read_bytes()
    store = SQLiteRollingStore(path, read_only=True)
    try:
        _expected_reads(store)
        for write in (
            lambda: store.append("s1", [HumanMessage("more")], client_id="c1"),
            lambda: store.add_fact("c1", "Likes coffee"),
            lambda: store.forget("c1"),
        ):
            with pytest.raises(StoreError, match="read-only") as caught:
                write()
            assert str(path) in str(caught.value)
        _expected_reads(store)
    finally:
        store.close()
    assert path.read_bytes() == before


def test_a_read_only_file_without_the_tables_gives_a_clear_store_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SQLiteRollingStore(path).close()
    with pytest.raises(StoreError, match=r"read-only.*tables other_\*"):
        SQLiteRollingStore(path, read_only=True, table_prefix="other_")


_AS_NOBODY = textwrap.dedent(
    """
    import json, os, sys
    from langchain_core.messages import HumanMessage
    from langchain_rolling_memory.errors import StoreError
    from langchain_rolling_memory.stores import SQLiteRollingStore

    os.setgid(65534)
    os.setuid(65534)  # from here on the file modes apply, as to any unprivileged service
    store = SQLiteRollingStore(sys.argv[1])
    out = {"read_only": store.read_only, "transcript": [m.content for m in store.transcript("s1")],
           "facts": [f.text for f in store.facts("c1")]}
    try:
        store.append("s1", [HumanMessage("more")], client_id="c1")
        out["write"] = "written"
    except StoreError as exc:
        out["write"] = str(exc)
    print(json.dumps(out))
    """
)


@pytest.fixture(params=["file", "file_and_folder"])
def write_protected_copy(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A copy of a store whose file (and, in the second case, folder) the test's user may not write."""
    source = tmp_path / "source.db"
    _populated(source)
    # tmp_path's parents are private to root; the unprivileged child needs its own folder.
    folder = Path(tempfile.mkdtemp(prefix="lrm-ro-"))
    folder.chmod(0o777)
    copy = folder / "copy.db"
    shutil.copy(source, copy)
    copy.chmod(0o444)
    if request.param == "file_and_folder":
        folder.chmod(0o555)
    try:
        yield copy
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_write_protected_file_is_opened_read_only_and_its_reads_work(write_protected_copy: Path) -> None:
    before = write_protected_copy.read_bytes()
    if os.geteuid() == 0:  # root ignores file modes: run the store as an unprivileged user
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.run(
            [sys.executable, "-c", _AS_NOBODY, str(write_protected_copy)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd="/",
        )
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
    else:
        store = SQLiteRollingStore(write_protected_copy)
        out = {
            "read_only": store.read_only,
            "transcript": [m.content for m in store.transcript("s1")],
            "facts": [f.text for f in store.facts("c1")],
        }
        try:
            store.append("s1", [HumanMessage("more")], client_id="c1")
            out["write"] = "written"
        except StoreError as exc:
            out["write"] = str(exc)
        store.close()
    assert out["read_only"] is True
    assert out["transcript"] == ["hello", "hi"]
    assert out["facts"] == ["Likes tea"]
    assert str(write_protected_copy) in out["write"] and "read-only" in out["write"]
    assert write_protected_copy.read_bytes() == before


def test_a_path_that_cannot_be_opened_gives_a_store_error_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="unable to open") as caught:
        SQLiteRollingStore(folder)
    assert str(folder) in str(caught.value)


# ------------------------------------------------------------------ SQLite disk full


async def test_a_full_disk_gives_a_store_error_writes_nothing_and_the_store_recovers(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "full.db")
    try:
        store.append("s1", [HumanMessage("before")], client_id="c1")
        pages = store.backend._conn.execute("PRAGMA page_count").fetchone()[0]
        store.backend._conn.execute(f"PRAGMA max_page_count = {pages}")  # no room for one more page
        before = raw_contents(store)
        big = [HumanMessage("x" * 20_000) for _ in range(5)]
        with pytest.raises(StoreError, match="full") as caught:
            store.append("s1", big, client_id="c1")
        assert str(store.path) in str(caught.value) and "nothing was written" in str(caught.value)
        with pytest.raises(StoreError, match="full"):
            await store.aappend("s1", big, client_id="c1")
        assert raw_contents(store) == before
        store.backend._conn.execute(f"PRAGMA max_page_count = {pages * 1000}")
        assert store.append("s1", big, client_id="c1") == [2, 3, 4, 5, 6]
    finally:
        store.close()


# ------------------------------------------------------------------ PostgreSQL statement timeout


def _pg_store(**options: object) -> RollingStore:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.Error as exc:
        server_unavailable("postgres", str(exc))  # skipped here, a failure under CI
    from conftest import unique_prefix

    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    return PostgresRollingStore.from_url(POSTGRES_URL, table_prefix=unique_prefix(), pool_size=2, **options)


@pytest.fixture
async def slow_pg() -> Iterator[RollingStore]:
    from conftest import disposing

    async with disposing(_pg_store(statement_timeout=0.5)) as store:
        yield store


def _hold_lock(store: RollingStore, table: str, seconds: float, ready: threading.Event) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL) as conn, conn.transaction():
        conn.execute(f"LOCK TABLE {store.prefix}{table} IN ACCESS EXCLUSIVE MODE")  # type: ignore[attr-defined]
        ready.set()
        time.sleep(seconds)


async def _append(store: RollingStore, use_async: bool, text: str) -> list[int]:
    if use_async:
        return await store.aappend("s1", [HumanMessage(text)])
    return store.append("s1", [HumanMessage(text)])


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_held_lock_makes_a_turn_fail_fast_with_a_store_error(
    slow_pg: RollingStore, use_async: bool
) -> None:
    slow_pg.append("s1", [HumanMessage("before")])
    ready = threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(slow_pg, "sessions", 4.0, ready))
    holder.start()
    try:
        assert ready.wait(10)
        started = time.monotonic()
        with pytest.raises(StoreError, match="statement_timeout") as caught:
            await _append(slow_pg, use_async, "during")
        assert time.monotonic() - started < 3.0
        assert "canceling statement" in str(caught.value)
    finally:
        holder.join()
    assert [m.content for m in slow_pg.transcript("s1")] == ["before"]
    assert slow_pg.append("s1", [HumanMessage("after")]) == [2]


def test_the_statement_timeout_applies_to_every_pooled_statement(slow_pg: RollingStore) -> None:
    with pytest.raises(StoreError, match="statement_timeout"):
        slow_pg.backend._fetch("read", "SELECT pg_sleep(3)", ())  # type: ignore[attr-defined]


async def test_statement_timeout_keeps_the_callers_options_and_can_be_turned_off() -> None:
    from conftest import disposing

    store = _pg_store(statement_timeout=1.5, connect_kwargs={"options": "-c lock_timeout=12345"})
    async with disposing(store):
        shown = store.backend._fetch(
            "read", "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')", ()
        )  # type: ignore[attr-defined]
        assert shown == [("1500ms", "12345ms")]
    store = _pg_store(statement_timeout=None)
    async with disposing(store):
        assert store.backend._fetch("read", "SHOW statement_timeout", ()) == [("0",)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", [0, -1.0, float("inf")])
def test_a_bad_statement_timeout_is_a_configuration_error(value: float) -> None:
    with pytest.raises(ConfigurationError, match="statement_timeout"):
        _pg_store(statement_timeout=value)


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        ({"port": "1"}, "Connection refused"),
        ({"user": "no_such_role_lrm"}, 'role "no_such_role_lrm" does not exist'),
        ({"dbname": "no_such_db_lrm"}, 'database "no_such_db_lrm" does not exist'),
    ],
    ids=["refused-port", "unknown-role", "missing-database"],
)
def test_a_wrong_postgres_url_fails_at_once_with_the_servers_reason(
    change: dict[str, str], cause: str
) -> None:
    up = _pg_store()  # the server is up (or the test is skipped, or fails under CI)
    up.close()
    wipe(up)
    import psycopg

    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    parts = {**psycopg.conninfo.conninfo_to_dict(POSTGRES_URL), **change}
    # The pool would wait `timeout` (60 s here) before a PoolTimeout that hides the cause.
    with pytest.raises(StoreError) as caught:
        PostgresRollingStore(psycopg.conninfo.make_conninfo(**parts), timeout=60)
    text = str(caught.value)
    assert cause in text and "PoolTimeout" not in text and "\n" not in text


async def _read(store: RollingStore, use_async: bool) -> list[Any]:
    return await store.aread("s1") if use_async else store.read("s1")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_paused_server_fails_the_turn_after_the_deadline_instead_of_holding_it(
    use_async: bool,
) -> None:
    """A stopped backend enforces no statement_timeout of its own: the client's deadline does."""
    import signal
    import uuid

    import psycopg
    from conftest import disposing

    name = f"lrm-paused-{uuid.uuid4().hex[:8]}"
    store = _pg_store(statement_timeout=0.5, connect_kwargs={"application_name": name})
    async with disposing(store):
        await _append(store, use_async, "before")  # the pool's connection exists and is idle
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            pids = [
                r[0]
                for r in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
                )
            ]
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(StoreError, match="did not answer"):
                await _read(store, use_async)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        # The store recovers on a fresh connection once the server answers again.
        assert [r.message.content for r in await _read(store, use_async)] == ["before"]
