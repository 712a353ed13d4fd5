"""Stores on a pool, connection or client the caller hands in: used as it is, checked, never
closed by the store, and refused by a forked child when it cannot be replaced there."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from conftest import _probe, unique_prefix
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL

from langchain_rolling_memory.errors import ConfigurationError, StoreError

FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


@pytest.fixture
def pg() -> Iterator[tuple[Any, str]]:
    """The PostgreSQL driver and a fresh table prefix, wiped afterwards."""
    _probe("postgres")
    import psycopg

    prefix = unique_prefix()
    yield psycopg, prefix
    _drop_tables(prefix)


def _drop_tables(prefix: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for table in ("meta", "sessions", "messages", "summaries", "leases", "facts", "vectors"):
            conn.execute(f"DROP TABLE IF EXISTS {prefix}{table} CASCADE")


def _pg_store(conn: Any, prefix: str, **options: Any) -> Any:
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    return PostgresRollingStore(conn=conn, table_prefix=prefix, **options)


async def test_a_handed_in_sync_pool_serves_both_apis_and_stays_open(pg: tuple[Any, str]) -> None:
    from psycopg_pool import ConnectionPool

    _, prefix = pg
    with ConnectionPool(POSTGRES_URL, kwargs={"autocommit": True}, min_size=1, max_size=2, open=True) as pool:
        with _pg_store(pool, prefix) as store:
            store.append("s1", [HumanMessage("sync")], client_id="ana")
            await store.aappend("s1", [AIMessage("async, in a thread")], client_id="ana")
            assert [m.content for m in await store.atranscript("s1")] == ["sync", "async, in a thread"]
            await store.avacuum(full=False)
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.execute(f"SELECT count(*) FROM {prefix}messages").fetchone() == (2,)


async def test_a_handed_in_async_pool_serves_the_async_api_and_sets_up_at_first_call(
    pg: tuple[Any, str],
) -> None:
    from psycopg_pool import AsyncConnectionPool

    _, prefix = pg
    async with AsyncConnectionPool(
        POSTGRES_URL, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    ) as apool:
        store = _pg_store(apool, prefix)
        await store.aappend("s1", [HumanMessage("hi")])
        assert [m.content for m in await store.atranscript("s1")] == ["hi"]
        with pytest.raises(StoreError, match="async methods"):
            store.append("s1", [HumanMessage("sync")])
        async with store:
            pass
        assert not apool.closed
        async with apool.connection() as conn:
            cur = await conn.execute(f"SELECT count(*) FROM {prefix}messages")
            assert await cur.fetchone() == (1,)


async def test_a_handed_in_connection_serves_the_store_and_stays_open(pg: tuple[Any, str]) -> None:
    psycopg, prefix = pg
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        store = _pg_store(conn, prefix)
        store.append("s1", [HumanMessage("one")])
        await store.aappend("s1", [HumanMessage("two")])
        assert store.last_seq("s1") == 2
        store.close()
        assert not conn.closed
        assert conn.execute("SELECT 1").fetchone() == (1,)


async def test_a_handed_in_async_connection_serves_the_store_and_stays_open(pg: tuple[Any, str]) -> None:
    psycopg, prefix = pg
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        async with _pg_store(conn, prefix) as store:
            await store.aappend("s1", [HumanMessage("one"), AIMessage("two")])
            assert await store.alast_seq("s1") == 2
        assert not conn.closed
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)


def test_a_handed_in_connection_the_store_cannot_use_is_refused(pg: tuple[Any, str]) -> None:
    psycopg, prefix = pg
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    with psycopg.connect(POSTGRES_URL) as conn, pytest.raises(ConfigurationError, match="autocommit=True"):
        _pg_store(conn, prefix)
    with (
        psycopg.connect(POSTGRES_URL, autocommit=True, row_factory=dict_row) as conn,
        pytest.raises(ConfigurationError, match="row_factory=dict_row"),
    ):
        _pg_store(conn, prefix)
    with (
        ConnectionPool(POSTGRES_URL, min_size=1, max_size=1, open=True) as pool,
        pytest.raises(ConfigurationError, match="autocommit"),
    ):
        _pg_store(pool, prefix)  # checked on the first connection it lends
    closed = ConnectionPool(POSTGRES_URL, open=False)
    with pytest.raises(ConfigurationError, match="closed"):
        _pg_store(closed, prefix)
    with pytest.raises(ConfigurationError, match="not both"):
        _pg_store(None, prefix)


def test_a_handed_in_connection_on_tables_not_set_up_names_setup(pg: tuple[Any, str]) -> None:
    psycopg, prefix = pg
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        store = _pg_store(conn, prefix, setup=False)
        with pytest.raises(StoreError, match=r"setup\(\)"):
            store.read("s1")
        store.setup()
        assert store.read("s1") == []


def _append_in_child(store: Any, queue: Any) -> None:
    try:
        store.append("child", [HumanMessage("from the child")])
        queue.put("stored")
    except StoreError as exc:
        queue.put(f"StoreError: {exc}")
    except BaseException as exc:
        queue.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_a_forked_child_refuses_a_pool_its_parent_handed_in(pg: tuple[Any, str]) -> None:
    assert FORK is not None
    from psycopg_pool import ConnectionPool

    _, prefix = pg
    with ConnectionPool(POSTGRES_URL, kwargs={"autocommit": True}, min_size=1, max_size=2, open=True) as pool:
        store = _pg_store(pool, prefix)
        store.append("parent", [HumanMessage("before the fork")])
        queue = FORK.Queue()
        child = FORK.Process(target=_append_in_child, args=(store, queue))
        child.start()
        answer = queue.get(timeout=60)
        child.join(60)
        assert answer.startswith("StoreError: ") and "forked" in answer, answer
        assert store.read("child") == []
        store.append("parent", [HumanMessage("after the fork")])  # the parent's pool is untouched
        assert store.last_seq("parent") == 2


# ---------------------------------------------------------------------- Redis


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    _probe("redis")
    import redis

    prefix = unique_prefix()
    yield prefix
    with redis.Redis.from_url(REDIS_URL) as r:
        keys = list(r.scan_iter(match=prefix + "*"))
        if keys:
            r.delete(*keys)


def _redis_store(client: Any, prefix: str, **options: Any) -> Any:
    from langchain_rolling_memory.stores.redis import RedisRollingStore

    return RedisRollingStore(client=client, key_prefix=prefix, **options)


async def test_a_handed_in_redis_client_serves_both_apis_and_stays_open(redis_prefix: str) -> None:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with redis.Redis.from_url(REDIS_URL, decode_responses=True, retry=Retry(NoBackoff(), 0)) as client:
        with _redis_store(client, redis_prefix) as store:
            store.append("s1", [HumanMessage("sync")])
            await store.aappend("s1", [AIMessage("async, in a thread")])
            assert [m.content for m in await store.atranscript("s1")] == ["sync", "async, in a thread"]
        assert client.ping()
        assert client.llen(f"{redis_prefix}s:{{s1}}:msgs") == 2


async def test_a_handed_in_async_redis_client_serves_the_async_api_and_stays_open(redis_prefix: str) -> None:
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    client = redis.asyncio.Redis.from_url(REDIS_URL, decode_responses=True, retry=Retry(NoBackoff(), 0))
    try:
        async with _redis_store(client, redis_prefix) as store:
            await store.aappend("s1", [HumanMessage("hi")])
            assert [m.content for m in await store.atranscript("s1")] == ["hi"]
            with pytest.raises(StoreError, match="async methods"):
                store.read("s1")
        assert await client.ping()
        assert await client.get(f"{redis_prefix}schema") is not None  # set up at the first call
    finally:
        await client.aclose()


def test_a_redis_client_that_would_resend_or_return_bytes_is_refused(redis_prefix: str) -> None:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    with (
        redis.Redis.from_url(REDIS_URL, retry=Retry(NoBackoff(), 0)) as raw,
        pytest.raises(ConfigurationError, match="decode_responses=True"),
    ):
        _redis_store(raw, redis_prefix)
    with (
        redis.Redis.from_url(REDIS_URL, decode_responses=True, retry=Retry(NoBackoff(), 3)) as resending,
        pytest.raises(ConfigurationError, match=r"retry=Retry\(NoBackoff\(\), 0\)"),
    ):
        _redis_store(resending, redis_prefix)
    with pytest.raises(ConfigurationError, match=r"redis\.Redis or redis\.asyncio\.Redis"):
        _redis_store(object(), redis_prefix)


@pytest.mark.parametrize("given", ["own pool", "sync pool", "async pool"])
async def test_a_postgres_store_picks_its_async_primitives_once_from_what_it_was_given(
    pg: tuple[Any, str], given: str
) -> None:
    """Native async on its own pools or an async one handed in, a worker thread over the sync
    primitives on a sync one: fixed when the store is built (no method swapped later)."""
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from langchain_rolling_memory.stores.contract import ThreadedAsync
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore
    from langchain_rolling_memory.stores.postgres.aio import AsyncPostgres

    _, prefix = pg
    if given == "own pool":
        async with PostgresRollingStore(POSTGRES_URL, table_prefix=prefix) as store:
            assert isinstance(store.async_backend, AsyncPostgres)
            await store.aappend("s1", [HumanMessage("hi")])
    elif given == "sync pool":
        pool = ConnectionPool(POSTGRES_URL, kwargs={"autocommit": True}, min_size=1, max_size=1, open=True)
        with pool, _pg_store(pool, prefix) as store:
            assert isinstance(store.async_backend, ThreadedAsync)
            assert store.async_backend.sync is store.backend
            await store.aappend("s1", [HumanMessage("hi")])
    else:
        apool = AsyncConnectionPool(
            POSTGRES_URL, kwargs={"autocommit": True}, min_size=1, max_size=1, open=False
        )
        await apool.open()
        async with apool, _pg_store(apool, prefix) as store:
            assert isinstance(store.async_backend, AsyncPostgres)
            await store.aappend("s1", [HumanMessage("hi")])


@pytest.mark.parametrize("given", ["own client", "sync client"])
def test_a_redis_store_picks_its_async_primitives_once_from_what_it_was_given(
    redis_prefix: str, given: str
) -> None:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from langchain_rolling_memory.stores.contract import ThreadedAsync
    from langchain_rolling_memory.stores.redis import RedisRollingStore
    from langchain_rolling_memory.stores.redis.aio import AsyncRedis

    if given == "own client":
        with RedisRollingStore(REDIS_URL, key_prefix=redis_prefix) as store:
            assert isinstance(store.async_backend, AsyncRedis)
        return
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True, retry=Retry(NoBackoff(), 0))
    with client, _redis_store(client, redis_prefix) as store:
        assert isinstance(store.async_backend, ThreadedAsync)
        assert store.async_backend.sync is store.backend
