"""Races of erase and re-creation against the reads and writes of the first owner (issue 20),
run unchanged on every backend.

One thread, on its own store object (its own connections, as another process would be),
erases session ``s`` and re-creates it under another client (bob), then under its first owner
(alice), over and over; others read, search, install summaries, write facts or forget as alice
meanwhile, on the sync or the async API. Every check is made by the store in the statement or
script that returns or writes the rows, so no interleaving may leak bob's text to alice, land
a summary planned before an erase on a later session, bring back a fact erased by `forget`, or
let alice's forget erase bob's session. Bounded by a number of rounds (a second or two on the
servers), not by time.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from store_kit import backend_name, reopen

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import FactError, OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore

ROUNDS = 30
PROBES = 2

Step = Callable[[RollingStore, int], None]


@contextlib.contextmanager
def _eraser(
    store: RollingStore, step: Step
) -> Iterator[tuple[Callable[[], None], threading.Event, threading.Semaphore]]:
    """The erasing side: a function that waits for the probes' first calls, then runs
    `step(other, 0..ROUNDS-1)` on another store object of the same data, and the event it sets
    when done (however it ends); `ready` is released once by each probe after its first call."""
    other = store if backend_name(store) == "memory" else reopen(store)
    done = threading.Event()
    ready = threading.Semaphore(0)

    def erase() -> None:
        try:
            for _ in range(PROBES):
                assert ready.acquire(timeout=60), "a probe never ran"
            for i in range(ROUNDS):
                step(other, i)
        finally:
            done.set()

    try:
        yield erase, done, ready
    finally:
        done.set()
        if other is not store:
            other.close()


def _race(store: RollingStore, step: Step, probe: Callable[[], None]) -> None:
    """Run the eraser's steps in one thread while `PROBES` threads call `probe` in a loop,
    from before the first step until after the last one."""
    failures: list[BaseException] = []
    with _eraser(store, step) as (erase, done, ready):

        def guarded(fn: Callable[[], None]) -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)
                done.set()
                for _ in range(PROBES):
                    ready.release()

        def run() -> None:
            try:
                probe()
            finally:
                ready.release()
            while not done.is_set():
                probe()

        threads = [threading.Thread(target=guarded, args=(f,)) for f in [erase] + [run] * PROBES]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]


async def _arace(store: RollingStore, step: Step, probe: Callable[[], Awaitable[None]]) -> None:
    """`_race` with async probes on the test's event loop (PostgreSQL and Redis: their native
    async twins) and the eraser in a worker thread."""
    with _eraser(store, step) as (erase, done, ready):

        async def run() -> None:
            try:
                await probe()
            finally:
                ready.release()
            while not done.is_set():
                await probe()

        outcome = await asyncio.gather(
            asyncio.to_thread(erase), *(run() for _ in range(PROBES)), return_exceptions=True
        )
    for result in outcome:
        if isinstance(result, BaseException):
            raise result


def _bob_then_alice(
    store: RollingStore, i: int, *, forget: bool = False, while_bobs: Callable[[], None] = lambda: None
) -> None:
    """Erase alice's session (`clear_session`, or `forget`), give ``s`` to bob, call
    `while_bobs`, then give ``s`` back to alice."""
    if forget:
        store.forget("alice")
    else:
        store.clear_session("s")
    store.append("s", [HumanMessage(f"zebra bob secret {i}")], client_id="bob")
    while_bobs()
    store.clear_session("s")
    store.append("s", [HumanMessage(f"zebra alice {i}")], client_id="alice")


def _bobs(texts: list[str]) -> list[str]:
    return [t for t in texts if "bob" in t]


_READS: dict[str, Callable[[RollingStore], list[str]]] = {
    "search-session": lambda s: [h.text for h in s.search("zebra", client_id="alice", session_id="s")],
    "search-client": lambda s: [h.text for h in s.search("zebra", client_id="alice")],
    "read_turn": lambda s: [
        str(m.message.content) for m in s.read_turn("s", limit=5, client_id="alice").messages
    ],
    "read": lambda s: [str(r.message.content) for r in s.read("s", client_id="alice")],
    "export": lambda s: [str(session) for session in s.export("alice")["sessions"]],
}


async def _aread_turn(store: RollingStore) -> list[str]:
    return [
        str(m.message.content) for m in (await store.aread_turn("s", limit=5, client_id="alice")).messages
    ]


async def _asearch(store: RollingStore, **where: Any) -> list[str]:
    return [h.text for h in await store.asearch("zebra", client_id="alice", **where)]


_AREADS: dict[str, Callable[[RollingStore], Awaitable[list[str]]]] = {
    "search-session": lambda s: _asearch(s, session_id="s"),
    "search-client": lambda s: _asearch(s),
    "read_turn": _aread_turn,
}


@pytest.mark.parametrize("how", list(_READS))
def test_a_read_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore, how: str
) -> None:
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []

    def probe() -> None:
        with contextlib.suppress(OwnershipError):  # the read saw bob's session: refused, fine
            leaks.extend(_bobs(_READS[how](store)))

    _race(store, _bob_then_alice, probe)
    assert leaks == []


@pytest.mark.parametrize("how", list(_AREADS))
async def test_an_async_read_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore, how: str
) -> None:
    await store.aappend("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []

    async def probe() -> None:
        with contextlib.suppress(OwnershipError):
            leaks.extend(_bobs(await _AREADS[how](store)))

    await _arace(store, _bob_then_alice, probe)
    assert leaks == []


def test_a_summary_planned_before_an_erase_never_lands_on_a_later_session(store: RollingStore) -> None:
    """Each summary names the generation it was planned from in its meta; a turn read (one
    instant) must never find a summary of another generation than the session's."""
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[tuple[str, str | None]] = []

    def probe() -> None:
        try:
            turn = store.read_turn("s", limit=5, client_id="alice")
        except OwnershipError:
            turn = None
        if turn is not None and turn.generation is not None and turn.messages:
            store.install_summary(
                "s",
                f"summary of {turn.messages[-1].message.content}",
                covered_seq=turn.messages[-1].seq,
                expected_version=turn.record.version if turn.record else 0,
                meta={"generation": turn.generation},
                generation=turn.generation,
            )
        now = store.read_turn("s", limit=0)
        if now.record is not None and now.record.meta.get("generation") != now.generation:
            leaks.append((now.record.text, now.generation))

    _race(store, _bob_then_alice, probe)
    assert leaks == []


def test_a_fact_planned_before_forget_is_never_written_after_it(store: RollingStore) -> None:
    """While bob holds ``s`` after `forget("alice")`, no fact of hers can be valid: any one found
    then was planned from an erased session and written after the erase."""
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []
    counter = iter(range(10**9))

    def step(other: RollingStore, i: int) -> None:
        _bob_then_alice(
            other, i, forget=True, while_bobs=lambda: leaks.extend(f.text for f in other.facts("alice"))
        )

    def probe() -> None:
        try:
            generation = store.read_turn("s", limit=1, client_id="alice").generation
        except OwnershipError:
            return
        if generation is None:
            return
        with contextlib.suppress(StaleWriteError, FactError):  # refused, or her facts are full
            store.add_fact("alice", f"fact {next(counter)}", planned_from=SessionMark("s", generation))

    _race(store, step, probe)
    assert leaks == []


def _checking_bobs_session(changed: list[object]) -> Step:
    """The eraser's step, checking after each of bob's appends that his session holds his
    message alone, whatever alice's forget did meanwhile."""

    def step(other: RollingStore, i: int) -> None:
        def check() -> None:
            rows = [r.message.content for r in other.read("s")]
            if rows != [f"zebra bob secret {i}"]:
                changed.append(rows)

        _bob_then_alice(other, i, while_bobs=check)

    return step


def test_the_first_owners_forget_never_erases_the_next_owners_session(store: RollingStore) -> None:
    changed: list[object] = []
    _race(store, _checking_bobs_session(changed), lambda: store.forget("alice"))
    assert changed == []


async def test_the_first_owners_async_forget_never_erases_the_next_owners_session(
    store: RollingStore,
) -> None:
    changed: list[object] = []

    async def probe() -> None:
        await store.aforget("alice")

    await _arace(store, _checking_bobs_session(changed), probe)
    assert changed == []
