"""Round trips per turn on PostgreSQL and Redis (issue 23), counted at the client's wire.

The counters are `benchmarks/round_trips.py`'s (libpq's trace of the connection; a redis-py
connection class counting its writes), on the sync and the native async drivers: a turn that
costs one more round trip than today fails here, whatever the machine's speed. Steady turns: the session exists, holds a fact, no
compaction due. The floor of a chain turn is one round trip (a read and an append, pipelined).
And what the one read sends a reader the session's owner refuses: its owner, no text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import REDIS_URL, STORE_FACTORIES, _probe, disposing
from langchain_core.messages import HumanMessage

import langchain_rolling_memory.stores.postgres.sql as pg
import langchain_rolling_memory.stores.redis.scripts as lua
from benchmarks.round_trips import SCENARIOS, TARGETS, Count, measure_postgres, measure_redis, private_redis
from langchain_rolling_memory.stores import RedisRollingStore, RollingStore
from langchain_rolling_memory.stores.contract import Reader

EXPECTED = {
    "postgresql": {
        "chain, recall off": 2,
        "chain, recall on": 3,
        "chain, recall on, answers read": 4,
        "agent (middleware)": 2,
        "agent (middleware, checkpointer)": 2,
        "agent (middleware), recall on": 3,
        "agent (middleware, checkpointer), recall on": 3,
    },
    # Redis searches in two scripts (the scope's statistics, then the excerpts).
    "redis": {
        "chain, recall off": 2,
        "chain, recall on": 4,
        "chain, recall on, answers read": 5,
        "agent (middleware)": 2,
        "agent (middleware, checkpointer)": 2,
        "agent (middleware), recall on": 4,
        "agent (middleware, checkpointer), recall on": 4,
    },
}
"""Round trips per steady turn: the chain's read (view, state, facts) and its write (append,
summary), the recall's search and, when it recalls questions, one read of their answers (all
of them: it was one read each); the agent's, as the chain's: its read before the model call
(view, state, facts, owner; with a checkpointer the state, facts and the transcript's end) and
one append after it (the user's input with the model's reply); with recall on, one more: the
search, on the store as the read found it (before the input's append, as a chain's turn), as
the chain's."""


def _check(counts: list[Count]) -> None:
    """Sync (`invoke`) and async (`ainvoke` on the native async driver) alike."""
    got = {c.scenario: c.trips for c in counts}
    backend = counts[0].backend
    want = {**EXPECTED[backend], **{f"{k}, async": v for k, v in EXPECTED[backend].items()}}
    assert got == want, f"{backend}: {got}"
    for scenario, target in TARGETS.items():
        assert got[scenario] <= target, f"{backend} {scenario}: {got[scenario]} > the target {target}"


def test_a_turn_costs_the_expected_round_trips_on_postgresql() -> None:
    _probe("postgres")
    _check(measure_postgres(3, SCENARIOS))


def test_a_turn_costs_the_expected_round_trips_on_redis() -> None:
    _probe("redis")
    _check(measure_redis(3, REDIS_URL, SCENARIOS))


def test_the_pipelined_append_runs_a_script_the_server_lost_once() -> None:
    """A NOSCRIPT reply in the pipeline (scripts flushed): the script runs again on its own,
    and the batch is appended once. On a private server: flushing the shared one's scripts
    would make other tests' clients reload theirs."""
    with private_redis() as url:
        if url is None:
            pytest.skip("no redis-server binary to start a private server")
        _flushed_scripts_reload(url)


def _flushed_scripts_reload(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, decode_responses=True)
    store = RedisRollingStore(client=client, key_prefix="noscript-test:")
    try:
        store.append_and_summary("s1", [HumanMessage("one")], client_id="alice")
        client.script_flush()
        seqs, record = store.append_and_summary("s1", [HumanMessage("two")], client_id="alice")
        assert seqs == [2] and record is None
        assert [m.content for m in store.transcript("s1")] == ["one", "two"]
    finally:
        store.close()
        client.close()


@pytest.mark.parametrize("reader", [Reader("bob"), Reader(None), Reader("bob", exact=True)])
@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_a_refused_turn_read_sends_nothing_of_the_session(
    kind: str, reader: Reader, tmp_path: Path
) -> None:
    """The reply of the one read (statement or script) to a reader the owner refuses holds
    the owner and nothing of the session: its text never leaves the server."""
    _probe(kind)
    async with disposing(STORE_FACTORIES[kind](tmp_path)) as store:
        store.append("s1", [HumanMessage("alice secret message")], client_id="alice")
        store.set_state("s1", {"note": "alice secret state"}, client_id="alice")
        assert store.install_summary("s1", "alice secret summary", covered_seq=1, expected_version=0)
        store.append("s1", [HumanMessage("alice secret tail")], client_id="alice")
        reply = _raw_read_memory(store, kind, reader)
        assert "secret" not in repr(reply) and "alice" in repr(reply)
        allowed = _raw_read_memory(store, kind, Reader("alice"))  # the owner's read: all of it
        for text in ("secret summary", "secret tail", "secret state"):
            assert text in repr(allowed)


def _raw_read_memory(store: RollingStore, kind: str, reader: Reader) -> Any:
    backend: Any = store.backend
    if kind == "postgres":
        params = pg.memory_params("s1", 10, reader, None, store._now())
        return backend._fetch("read", backend.q.read_memory, params)
    keys = backend.keys.read_memory("s1", None)
    return backend.clients.scripts["read_memory"](keys=keys, args=lua.memory_args(10, reader, None))
