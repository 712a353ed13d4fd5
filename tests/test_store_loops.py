"""A store used from many event loops holds the connections of the live ones only.

Async connections belong to the loop that made them. A store opened once and used from
``asyncio.run(...)`` again and again (a CLI, a test suite, a sync web app calling async code)
must not keep the connections of the loops that ended: before, each ended loop left its
PostgreSQL pool open (20 loops, 20 backends held; 300 exhausted a server's 100).
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from conftest import _probe, unique_prefix
from langchain_core.messages import HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL, wipe

from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores import RollingStore

LOOPS = 20


def _pg_backends(name: str) -> int:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
        return int(row[0]) if row else 0


def _redis_clients(name: str) -> int:
    import redis

    with redis.Redis.from_url(REDIS_URL) as r:
        return sum(1 for client in r.client_list() if client.get("name") == name)


def _settled(count: Callable[[], int], bound: int) -> int:
    """The count once it is within `bound`, or after 10 s: a server ends a backend just
    after its client hangs up, not at the same instant."""
    deadline = time.monotonic() + 10
    while (held := count()) > bound and time.monotonic() < deadline:
        time.sleep(0.05)
    return held


@pytest.fixture(params=["postgres", "redis"])
def named_store(request: pytest.FixtureRequest) -> Iterator[tuple[RollingStore, Callable[[], int]]]:
    """A server store whose connections carry a unique name, and the count of them."""
    kind = request.param
    _probe(kind)
    name = f"lrm-{uuid.uuid4().hex[:12]}"
    store: RollingStore
    if kind == "postgres":
        from langchain_rolling_memory.stores.postgres import PostgresRollingStore

        store = PostgresRollingStore(
            POSTGRES_URL, table_prefix=unique_prefix(), connect_kwargs={"application_name": name}
        )
        yield store, lambda: _pg_backends(name)
    else:
        from langchain_rolling_memory.stores.redis import RedisRollingStore

        store = RedisRollingStore(REDIS_URL, key_prefix=unique_prefix(), client_kwargs={"client_name": name})
        yield store, lambda: _redis_clients(name)
    store.close()
    wipe(store)


def test_a_store_never_closed_keeps_no_connection_of_the_loops_that_ended(
    named_store: tuple[RollingStore, Callable[[], int]],
) -> None:
    store, held = named_store
    store.append("s1", [HumanMessage("hi")])
    before = held()  # the sync pool's or client's
    for _ in range(LOOPS):
        assert [m.content for m in asyncio.run(store.atranscript("s1"))] == ["hi"]
    assert _settled(held, before) <= before
    store.close()
    assert _settled(held, 0) == 0


# psycopg_pool's worker tasks, left pending on a loop closed by hand, complain when collected
# ("Event loop is closed"): theirs, and beyond a store's reach; the connections are closed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_loop_closed_by_hand_leaves_its_connections_to_the_next_loop_or_close(
    named_store: tuple[RollingStore, Callable[[], int]],
) -> None:
    """A runner that closes its loop without cancelling its tasks gives the store no signal:
    the next loop that uses the store finds the dead one and closes its connections."""
    store, held = named_store
    if type(store).__name__ == "RedisRollingStore":
        pytest.skip("redis.asyncio sockets of a closed loop can only be closed by the collector")
    store.append("s1", [HumanMessage("hi")])
    before = held()
    for _ in range(LOOPS):
        loop = asyncio.new_event_loop()
        try:
            assert [m.content for m in loop.run_until_complete(store.atranscript("s1"))] == ["hi"]
        finally:
            loop.close()
    assert _settled(held, before + 2) <= before + 2  # the last loop's, closed below
    store.close()
    assert _settled(held, 0) == 0
    gc.collect()  # psycopg_pool's complaints, here under this test's filter, not in the next test


def test_a_task_cleaning_up_after_the_loop_ended_opens_no_new_pool(
    named_store: tuple[RollingStore, Callable[[], int]],
) -> None:
    """``asyncio.run`` cancels every task at once: a task whose ``finally`` uses the store
    (a compaction releasing its lease) may run after the store's guard closed the loop's pool.
    Before, it opened a new pool there, whose guard came too late to be cancelled: the pool
    stayed connected and its tasks were destroyed pending."""
    store, held = named_store
    if type(store).__name__ == "RedisRollingStore":
        pytest.skip("a Redis client opens no pool of tasks")
    store.append("s1", [HumanMessage("hi")])
    before = held()
    seen: list[BaseException] = []

    async def cleans_up(started: asyncio.Event) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            for _ in range(3):  # let the store's guard run first
                await asyncio.sleep(0)
            try:
                await store.atranscript("s1")
            except StoreError as exc:
                seen.append(exc)

    async def main() -> None:
        await store.atranscript("s1")  # the loop's pool, and its guard
        started = asyncio.Event()
        asyncio.get_running_loop().create_task(cleans_up(started))
        await started.wait()

    asyncio.run(main())
    assert [str(e).split(";")[0] for e in seen] == [
        "this event loop is ending (its tasks were cancelled) and the store's connections on it are closed"
    ]
    assert _settled(held, before) <= before
