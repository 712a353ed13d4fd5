"""Concurrent erases of one session against its re-creation: no erase may fail (issue 20).

Two store objects on the same data (their own connections, as two processes would have) clear
session ``erase-order-s`` over and over while a third appends to it (re-creating it after each erase),
claims its lease and installs summaries. On PostgreSQL an erase that found no session row used
to lock the lease, message and summary rows before the session row, the reverse of every
other writer, and the server broke the cycle by failing one of them (``DeadlockDetected``).
Every call here must succeed: bounded by rounds, not by time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from store_kit import backend_name, leftovers, reopen

from langchain_rolling_memory.errors import StaleWriteError
from langchain_rolling_memory.stores import RollingStore

ROUNDS = 40
CLEARERS = 2
SID = "erase-order-s"


def _counting(failures: list[BaseException], fn: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Call `fn`, counting a failure instead of stopping (the test reports how many)."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        failures.append(exc)


def _compact(store: RollingStore, i: int) -> None:
    """Take the lease of ``erase-order-s`` and install a summary planned from its turn read."""
    if not store.claim(SID, "worker", ttl=30):
        return
    try:
        turn = store.read_turn(SID, limit=5)
        if turn.generation is not None and turn.messages:
            store.install_summary(
                SID,
                f"summary {i}",
                covered_seq=turn.messages[-1].seq,
                expected_version=turn.record.version if turn.record else 0,
                lease_owner="worker",
                generation=turn.generation,
            )
    except StaleWriteError:  # erased since the read: refused, as it should be
        pass
    finally:
        store.release(SID, "worker")


def _write(store: RollingStore, failures: list[BaseException], done: threading.Event) -> None:
    """The third side: re-create the session, `ROUNDS` times, and compact it."""
    try:
        for i in range(ROUNDS):
            _counting(failures, store.append, SID, [HumanMessage(f"zebra {i}")], client_id="alice")
            _counting(failures, _compact, store, i)
    finally:
        done.set()


def _check(store: RollingStore, failures: list[BaseException], calls: int) -> None:
    assert not failures, f"{len(failures)} of {calls} calls failed: {failures[0]!r}"
    # Nothing was left behind without its session row: the id takes a fresh session, and an
    # erase takes all of it.
    store.append(SID, [HumanMessage("last")], client_id="alice")
    assert [r.message.content for r in store.read(SID)][-1:] == ["last"]
    store.clear_session(SID)
    assert leftovers(store, SID) == []


def test_concurrent_clears_of_a_session_being_recreated_all_succeed(store: RollingStore) -> None:
    shared = backend_name(store) == "memory"
    stores = [store if shared else reopen(store) for _ in range(CLEARERS + 1)]
    done = threading.Event()
    started = threading.Barrier(CLEARERS + 1)
    failures: list[BaseException] = []
    clears: list[int] = []

    def write(mine: RollingStore) -> None:
        started.wait(timeout=60)
        _write(mine, failures, done)

    def clear(mine: RollingStore) -> None:
        started.wait(timeout=60)
        while not done.is_set():
            _counting(failures, mine.clear_session, SID)
            clears.append(1)

    threads = [threading.Thread(target=write, args=(stores[0],))]
    threads += [threading.Thread(target=clear, args=(mine,)) for mine in stores[1:]]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for other in stores:
            if other is not store:
                other.close()
    _check(store, failures, ROUNDS * 2 + len(clears))


async def test_concurrent_async_clears_of_a_session_being_recreated_all_succeed(store: RollingStore) -> None:
    """The same race with the clears on the async API (PostgreSQL's and Redis's own twins)."""
    writer = store if backend_name(store) == "memory" else reopen(store)
    done = threading.Event()
    failures: list[BaseException] = []
    clears: list[int] = []

    async def clear() -> None:
        while not done.is_set():
            try:
                await store.aclear_session(SID)
            except Exception as exc:
                failures.append(exc)
            clears.append(1)

    try:
        await asyncio.gather(
            asyncio.to_thread(_write, writer, failures, done), *(clear() for _ in range(CLEARERS))
        )
    finally:
        if writer is not store:
            writer.close()
    _check(store, failures, ROUNDS * 2 + len(clears))
