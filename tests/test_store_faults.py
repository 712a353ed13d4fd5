"""Connections dropped mid-turn: a transparent retry that never doubles, or a clear StoreError."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL
from tcp_proxy import FaultyProxy

from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores import RollingStore


def _contents(store: RollingStore, session_id: str = "s1") -> list[str]:
    return [str(r.message.content) for r in store.read(session_id)]


def _turn(n: int) -> list[HumanMessage | AIMessage]:
    return [HumanMessage(f"q{n}"), AIMessage(f"a{n}")]


class TestLostReply:
    """The write reached the server and committed; the reply never came back."""

    def test_append_is_retried_once_and_not_doubled(
        self, proxied_store: tuple[RollingStore, FaultyProxy]
    ) -> None:
        store, proxy = proxied_store
        store.append("s1", _turn(1))
        proxy.lose_reply_to(b"probe-lost-reply")
        assert store.append("s1", [HumanMessage("probe-lost-reply"), AIMessage("a2")]) == [3, 4]
        assert proxy.lost_replies == 1
        assert _contents(store) == ["q1", "a1", "probe-lost-reply", "a2"]
        assert store.append("s1", _turn(3)) == [5, 6]

    async def test_async_append_is_retried_once_and_not_doubled(
        self, proxied_store: tuple[RollingStore, FaultyProxy]
    ) -> None:
        store, proxy = proxied_store
        await store.aappend("s1", _turn(1))
        proxy.lose_reply_to(b"probe-lost-async")
        assert await store.aappend("s1", [HumanMessage("probe-lost-async")]) == [3]
        assert proxy.lost_replies == 1
        assert [str(r.message.content) for r in await store.aread("s1")] == ["q1", "a1", "probe-lost-async"]

    def test_a_lost_summary_install_is_not_applied_twice(
        self, proxied_store: tuple[RollingStore, FaultyProxy]
    ) -> None:
        store, proxy = proxied_store
        store.append("s1", _turn(1))
        proxy.lose_reply_to(b"probe-summary")
        # The retry finds the version already moved: it answers False, and the record is the one install.
        store.install_summary("s1", "probe-summary", covered_seq=1, expected_version=0)
        assert proxy.lost_replies == 1
        record = store.summary("s1")
        assert record is not None
        assert (record.text, record.version) == ("probe-summary", 1)


class TestServerGone:
    def test_an_unreachable_server_gives_a_clear_store_error_and_writes_nothing(
        self, proxied_store: tuple[RollingStore, FaultyProxy]
    ) -> None:
        store, proxy = proxied_store
        store.append("s1", _turn(1))
        proxy.down()
        with pytest.raises(StoreError, match="failed twice"):
            store.append("s1", _turn(2))
        with pytest.raises(StoreError):
            store.read("s1")
        proxy.up()
        for _ in range(50):  # the pool reconnects in the background
            try:
                assert _contents(store) == ["q1", "a1"]
                break
            except StoreError:
                time.sleep(0.1)
        assert _contents(store) == ["q1", "a1"]
        assert store.append("s1", _turn(3)) == [3, 4]

    async def test_async_unreachable_server_gives_a_store_error(
        self, proxied_store: tuple[RollingStore, FaultyProxy]
    ) -> None:
        store, proxy = proxied_store
        await store.aappend("s1", _turn(1))
        proxy.down()
        with pytest.raises(StoreError):
            await store.aappend("s1", _turn(2))
        proxy.up()
        assert [r.seq for r in store.read("s1")] == [1, 2]


def _terminate(application_name: str, only_waiting: bool = False) -> int:
    waiting = " AND wait_event_type = 'Lock'" if only_waiting else ""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        rows = admin.execute(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s{waiting}",
            (application_name,),
        ).fetchall()
    return len(rows)


class TestPostgresTerminated:
    def test_a_terminated_idle_connection_is_replaced_transparently(
        self, pg_store: tuple[RollingStore, str]
    ) -> None:
        store, name = pg_store
        store.append("s1", _turn(1))
        assert _terminate(name) >= 1
        assert store.append("s1", _turn(2)) == [3, 4]
        assert _contents(store) == ["q1", "a1", "q2", "a2"]

    async def test_async_terminated_connection_is_replaced_transparently(
        self, pg_store: tuple[RollingStore, str]
    ) -> None:
        store, name = pg_store
        await store.aappend("s1", _turn(1))
        assert _terminate(name) >= 1
        assert await store.aappend("s1", _turn(2)) == [3, 4]
        record, tail = await store.asummary_and_tail("s1", limit=10)
        assert record is None
        assert [str(r.message.content) for r in tail] == ["q1", "a1", "q2", "a2"]

    def test_a_connection_terminated_mid_append_is_retried_once(
        self, pg_store: tuple[RollingStore, str]
    ) -> None:
        store, name = pg_store
        store.append("s1", _turn(1))
        table = f"{store.prefix}messages"  # type: ignore[attr-defined]
        outcome: list[object] = []
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute("BEGIN")
            admin.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            writer = threading.Thread(target=lambda: outcome.append(store.append("s1", _turn(2))))
            writer.start()
            for _ in range(300):  # until the append waits on the lock, inside its statement
                waiting = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                    (name,),
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.05)
            assert _terminate(name, only_waiting=True) == 1
            admin.execute("ROLLBACK")
        writer.join(30)
        assert outcome == [[3, 4]]
        assert _contents(store) == ["q1", "a1", "q2", "a2"]


def _kill_clients(client_name: str) -> int:
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as admin:
        ids = [c["id"] for c in admin.client_list() if c.get("name") == client_name]
        for client_id in ids:
            admin.client_kill_filter(_id=client_id)
    return len(ids)


class TestRedisClientKill:
    def test_a_killed_connection_is_replaced_transparently(
        self, redis_store: tuple[RollingStore, str]
    ) -> None:
        store, name = redis_store
        store.append("s1", _turn(1))
        assert _kill_clients(name) >= 1
        assert store.append("s1", _turn(2)) == [3, 4]
        assert _contents(store) == ["q1", "a1", "q2", "a2"]

    async def test_async_killed_connection_is_replaced_transparently(
        self, redis_store: tuple[RollingStore, str]
    ) -> None:
        store, name = redis_store
        await store.aappend("s1", _turn(1))
        assert _kill_clients(name) >= 1
        assert await store.aappend("s1", _turn(2)) == [3, 4]
        assert [str(r.message.content) for r in await store.aread("s1")] == ["q1", "a1", "q2", "a2"]
