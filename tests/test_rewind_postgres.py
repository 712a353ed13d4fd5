"""An append's rewind on PostgreSQL: what the conformance kit cannot see from outside.

The withdrawn rows' vectors gone from the table (and a vector planned before the rewind never
written on the rows that replaced them), the search's statistics those of the rows kept, the
rewind serialized with the writers of its session (another rewind, an append, a summary install
holding the session row), one round trip, a lost reply retried without doubling, and a failed
rewind leaving a handed-in connection out of its transaction.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from conftest import _probe, disposing, unique_prefix
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import POSTGRES_URL
from tcp_proxy import FaultyProxy

from langchain_rolling_memory import index_vectors
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.core.serde import dumps_message
from langchain_rolling_memory.engine.dense import model_name
from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import VectorWrite
from langchain_rolling_memory.stores.postgres import PostgresRollingStore

FAKE = DeterministicFakeEmbedding(size=16)
MODEL = model_name(FAKE)


def _texts(*words: str) -> list[BaseMessage]:
    return [HumanMessage(w) if i % 2 == 0 else AIMessage(w) for i, w in enumerate(words)]


def _sql(store: RollingStore, query: str, *args: Any) -> list[tuple[Any, ...]]:
    prefix = store.prefix  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        return conn.execute(query.format(p=prefix), args).fetchall()


def _contents(store: RollingStore, session_id: str = "s1") -> list[str]:
    return [str(r.message.content) for r in store.read(session_id)]


def _gen(store: RollingStore, session_id: str = "s1") -> str | None:
    return store.read_turn(session_id, limit=0).generation


def _wait_for_lock(admin: Any, name: str, done: threading.Thread) -> None:
    """Until the store's connection (application_name `name`) waits on a lock, or `done` ended."""
    for _ in range(300):
        waiting = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
            (name,),
        ).fetchone()
        if (waiting and waiting[0]) or not done.is_alive():
            return
        time.sleep(0.05)


@pytest.fixture
async def pg() -> Any:
    _probe("postgres")
    async with disposing(PostgresRollingStore.from_url(POSTGRES_URL, table_prefix=unique_prefix())) as store:
        yield store


# ---------------------------------------------------------------- vectors


@pytest.mark.parametrize("use_async", [False, True])
async def test_the_withdrawn_rows_vectors_go_and_the_new_rows_are_unembedded(
    pg: RollingStore, use_async: bool
) -> None:
    pg.append(
        "s1", _texts("we adopted a cat", "lovely", "the cat is called Oscar", "nice name"), client_id="c"
    )
    assert index_vectors(pg, FAKE) == 4
    listed_before = VectorWrite("s1", 3, _gen(pg) or "", pack(FAKE.embed_query("stale")))
    before = _gen(pg)
    new = _texts("in fact we adopted a dog")
    if use_async:
        assert await pg.aappend("s1", new, client_id="c", rewind=2) == [3]
    else:
        assert pg.append("s1", new, client_id="c", rewind=2) == [3]
    assert _gen(pg) not in (None, before)
    # No vector row of a withdrawn seq is left, and seq 3 (reused) waits for its vector.
    assert _sql(pg, "SELECT seq FROM {p}vectors WHERE session_id = 's1' ORDER BY seq") == [(1,), (2,)]
    pending = pg.unembedded(MODEL, session_id="s1")
    assert [(u.seq, u.generation) for u in pending] == [(3, _gen(pg))]
    assert "dog" in pending[0].payload
    # A vector listed before the rewind (of the old seq 3) is never written on the new row.
    assert pg.put_vectors(MODEL, [listed_before]) == 0
    for text in ("the cat is called Oscar", "nice name"):
        hits = pg.vector_search(FAKE.embed_query(text), model=MODEL, client_id="c", limit=10)
        assert sorted(h.seq for h in hits) == [1, 2]
        assert all(h.text not in ("the cat is called Oscar", "nice name") for h in hits)
    assert index_vectors(pg, FAKE) == 1
    hits = pg.vector_search(FAKE.embed_query("in fact we adopted a dog"), model=MODEL, client_id="c")
    assert (hits[0].seq, hits[0].text) == (3, "in fact we adopted a dog")
    assert pg.unembedded(MODEL) == []


# ---------------------------------------------------------------- statistics


def test_the_statistics_after_a_rewind_are_those_of_the_rows_kept(pg: RollingStore) -> None:
    kept = _texts("oscar the cat", "a cat named oscar sleeps", "paris in spring")
    pg.append("s1", kept, client_id="alice")
    pg.append("s1", _texts("cat cat cat paris " * 9, "oscar " * 20, "spring spring"), client_id="alice")
    pg.append("s2", _texts("one more cat in another session"), client_id="alice")
    pg.append("s1", [], client_id="alice", rewind=3)
    # The reference: the same rows, written without a rewind, by another client.
    pg.append("t1", kept, client_id="bob")
    pg.append("t2", _texts("one more cat in another session"), client_id="bob")
    # The scope's message count (`last_seq`) is its rows', and no withdrawn row is indexed.
    assert _sql(pg, "SELECT last_seq FROM {p}sessions WHERE session_id = 's1'") == [(3,)]
    assert _sql(pg, "SELECT count(*) FROM {p}messages WHERE session_id = 's1'") == [(3,)]
    assert _sql(pg, "SELECT count(*) FROM {p}messages WHERE tsv @@ 'spring & spring'::tsquery") == [(2,)]
    for query in ("oscar cat", "paris spring", "cat paris sleeps session"):
        for mine, theirs in (
            (pg.search(query, client_id="alice", limit=50), pg.search(query, client_id="bob", limit=50)),
            (
                pg.search(query, session_id="s1", client_id="alice", limit=50),
                pg.search(query, session_id="t1", client_id="bob", limit=50),
            ),
        ):
            assert mine and [h.seq for h in mine] == [h.seq for h in theirs]
            assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], rel=1e-12)


# ---------------------------------------------------------------- concurrency


def test_two_threads_rewinding_one_session_never_leave_a_gap_or_a_duplicate(pg: RollingStore) -> None:
    pg.append("s1", _texts("start"), client_id="c")
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def writer(name: str, rewinds: bool) -> None:
        rng = random.Random(name)
        barrier.wait()
        try:
            for i in range(60):
                rewind = rng.randint(0, 8) if rewinds else None
                batch = _texts(*(f"{name} {i} {j}" for j in range(rng.randint(0, 3) if rewinds else 1)))
                if batch or rewind is not None:
                    pg.append("s1", batch, client_id="c", rewind=rewind)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=("one", True)),
        threading.Thread(target=writer, args=("two", True)),
        threading.Thread(target=writer, args=("plain", False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    seqs = [r.seq for r in pg.read("s1")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert pg.last_seq("s1") == len(seqs)


async def test_async_rewinds_of_one_session_never_leave_a_gap_or_a_duplicate(pg: RollingStore) -> None:
    await pg.aappend("s1", _texts("start"), client_id="c")

    async def writer(name: str) -> None:
        rng = random.Random(name)
        for i in range(40):
            words = [f"{name} {i} {j}" for j in range(rng.randint(0, 3))]
            await pg.aappend("s1", _texts(*words), client_id="c", rewind=rng.randint(0, 8))

    await asyncio.gather(*(writer(name) for name in ("a", "b", "c")))
    seqs = [r.seq for r in await pg.aread("s1")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert await pg.alast_seq("s1") == len(seqs)


@pytest.fixture
async def named() -> Any:
    """A store whose connections carry a unique application_name (to see them wait on a lock)."""
    _probe("postgres")
    name = f"lrm-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{sep}application_name={name}"
    async with disposing(
        PostgresRollingStore.from_url(url, table_prefix=unique_prefix(), pool_size=2)
    ) as store:
        yield store, name


def test_a_summary_installed_while_the_rewind_waits_keeps_its_rows(named: tuple[RollingStore, str]) -> None:
    """A summary install holds the session row (FOR KEY SHARE) while it writes: the rewind waits
    for it, then sees its covered seq (read after the lock), so it never withdraws its rows."""
    store, name = named
    store.append("s1", _texts("m1", "m2", "m3", "m4"), client_id="c")
    p = store.prefix  # type: ignore[attr-defined]
    outcome: list[object] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("BEGIN")
        admin.execute(f"SELECT 1 FROM {p}sessions WHERE session_id = 's1' FOR KEY SHARE")
        admin.execute(
            f"INSERT INTO {p}summaries (session_id, text, covered_seq, version, meta, updated_at) "
            "VALUES ('s1', 'm1 to m3', 3, 1, '{}', 0)"
        )
        rewinder = threading.Thread(
            target=lambda: outcome.append(store.append("s1", _texts("new"), client_id="c", rewind=1))
        )
        rewinder.start()
        _wait_for_lock(admin, name, rewinder)
        admin.execute("COMMIT")
    rewinder.join(30)
    assert outcome == [[4]]
    assert _contents(store) == ["m1", "m2", "m3", "new"]
    summary = store.summary("s1")
    assert summary is not None and summary.covered_seq == 3


def test_a_rewind_waiting_behind_another_sees_its_rows(named: tuple[RollingStore, str]) -> None:
    """Two rewinds of one session: the second, held by the first's lock, withdraws the rows the
    first wrote (read after the lock) instead of colliding with them."""
    store, name = named
    store.append("s1", _texts("m1", "m2", "m3", "m4"), client_id="c")
    p = store.prefix  # type: ignore[attr-defined]
    outcome: list[object] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        # The first rewind, by hand: the session row locked as `rewind_lock` locks it.
        admin.execute("BEGIN")
        admin.execute(f"UPDATE {p}sessions SET session_id = session_id WHERE session_id = 's1'")
        second = threading.Thread(
            target=lambda: outcome.append(store.append("s1", _texts("b"), client_id="c", rewind=2))
        )
        second.start()
        _wait_for_lock(admin, name, second)
        admin.execute(f"DELETE FROM {p}messages WHERE session_id = 's1' AND seq > 1")
        admin.execute(
            f"INSERT INTO {p}messages (session_id, seq, message, created_at) "
            "SELECT 's1', seq, message, created_at "
            "FROM (VALUES (2, %s, 0.0), (3, %s, 0.0)) AS v(seq, message, created_at)",
            tuple(dumps_message(m) for m in _texts("a1", "a2")),
        )
        admin.execute(f"UPDATE {p}sessions SET last_seq = 3 WHERE session_id = 's1'")
        admin.execute("COMMIT")
    second.join(30)
    assert outcome == [[3]]
    assert _contents(store) == ["m1", "a1", "b"]


# ---------------------------------------------------------------- round trips, retries, failures


@pytest.mark.parametrize("use_async", [False, True])
def test_a_rewind_costs_one_round_trip(use_async: bool) -> None:
    from benchmarks.round_trips import PgWire, _drop_tables

    _probe("postgres")
    loop = asyncio.new_event_loop() if use_async else None
    wire = PgWire(loop=loop)
    prefix = unique_prefix()
    store = PostgresRollingStore(conn=wire.conn, table_prefix=prefix)

    def run(name: str, *args: Any, **kwargs: Any) -> Any:
        if loop is None:
            return getattr(store, name)(*args, **kwargs)
        return loop.run_until_complete(getattr(store, f"a{name}")(*args, **kwargs))

    try:
        run("append", "s1", _texts("m1", "m2", "m3"), client_id="c")
        wire.count()
        assert run("append", "s1", _texts("m4"), client_id="c") == [4]
        assert wire.count() == (1, 1)  # the append without a rewind: its one statement
        assert run("append", "s1", _texts("x"), client_id="c", rewind=2) == [3]
        assert wire.count()[0] == 1
        assert run("append", "s1", [], client_id="c", rewind=1) == []
        assert wire.count()[0] == 1
        assert run("append_and_summary", "s1", _texts("y"), client_id="c", rewind=0) == ([1], None)
        assert wire.count()[0] == 1
        assert run("read", "s1")[0].message.content == "y"
    finally:
        if loop is None:
            store.close()
        else:
            loop.run_until_complete(store.aclose())
            store.close()
        wire.close()
        _drop_tables(prefix)
        if loop is not None:
            loop.close()


@pytest.fixture
async def proxied() -> Any:
    from urllib.parse import urlsplit

    _probe("postgres")
    url = urlsplit(POSTGRES_URL)
    proxy = FaultyProxy(url.hostname or "127.0.0.1", url.port or 5432)
    through = url._replace(
        netloc=f"{url.username + '@' if url.username else ''}127.0.0.1:{proxy.port}"
    ).geturl()
    store = PostgresRollingStore.from_url(through, table_prefix=unique_prefix(), pool_size=2, timeout=2)
    try:
        async with disposing(store):
            yield store, proxy
    finally:
        proxy.close()


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_rewind_whose_reply_is_lost_is_retried_once_and_not_doubled(
    proxied: tuple[RollingStore, FaultyProxy], use_async: bool
) -> None:
    store, proxy = proxied
    store.append("s1", _texts("m1", "m2", "m3", "m4"), client_id="c")
    proxy.lose_reply_to(b"probe-lost-rewind")
    new = _texts("probe-lost-rewind", "a")
    if use_async:
        assert await store.aappend("s1", new, client_id="c", rewind=1) == [2, 3]
    else:
        assert store.append("s1", new, client_id="c", rewind=1) == [2, 3]
    assert proxy.lost_replies == 1
    assert _contents(store) == ["m1", "probe-lost-rewind", "a"]
    assert store.append("s1", _texts("next"), client_id="c") == [4]


def test_a_rewind_cut_mid_statement_is_retried_once(named: tuple[RollingStore, str]) -> None:
    store, name = named
    store.append("s1", _texts("m1", "m2", "m3", "m4"), client_id="c")
    table = f"{store.prefix}messages"  # type: ignore[attr-defined]
    outcome: list[object] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("BEGIN")
        admin.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        writer = threading.Thread(
            target=lambda: outcome.append(store.append("s1", _texts("x", "y"), client_id="c", rewind=2))
        )
        writer.start()
        _wait_for_lock(admin, name, writer)
        killed = admin.execute(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock') AS t",
            (name,),
        ).fetchone()
        assert killed == (1,)
        admin.execute("ROLLBACK")
    writer.join(30)
    assert outcome == [[3, 4]]
    assert _contents(store) == ["m1", "m2", "x", "y"]


def test_a_failed_rewind_leaves_a_handed_in_connection_out_of_its_transaction() -> None:
    _probe("postgres")
    prefix = unique_prefix()
    # The caller's connection keeps its own settings: its statement_timeout is its own.
    with psycopg.connect(POSTGRES_URL, autocommit=True, options="-c statement_timeout=300") as conn:
        store = PostgresRollingStore(conn=conn, table_prefix=prefix)
        try:
            store.append("s1", _texts("m1", "m2", "m3"), client_id="c")
            with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                admin.execute("BEGIN")
                admin.execute(f"LOCK TABLE {prefix}messages IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(StoreError, match="statement_timeout"):
                    store.append("s1", _texts("x"), client_id="c", rewind=1)
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                admin.execute("ROLLBACK")
            assert _contents(store) == ["m1", "m2", "m3"]
            assert store.append("s1", _texts("x"), client_id="c", rewind=1) == [2]
            assert _contents(store) == ["m1", "x"]
        finally:
            store.close()
            for table in ("meta", "sessions", "messages", "summaries", "leases", "facts", "vectors"):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}{table} CASCADE")


def test_a_fold_planned_before_a_rewind_never_lands_after_it(pg: RollingStore) -> None:
    pg.append("s1", _texts("m1", "m2", "m3", "m4"), client_id="c")
    planned = _gen(pg)
    pg.append("s1", _texts("other"), client_id="c", rewind=2)
    assert not pg.install_summary("s1", "m1 to m4", covered_seq=4, expected_version=0, generation=planned)
    assert pg.summary("s1") is None
    # A rewind that withdraws nothing keeps the generation: a fold planned before it still lands.
    planned = _gen(pg)
    pg.append("s1", _texts("more"), client_id="c", rewind=9)
    assert _gen(pg) == planned
    assert pg.install_summary("s1", "m1 to other", covered_seq=3, expected_version=0, generation=planned)
