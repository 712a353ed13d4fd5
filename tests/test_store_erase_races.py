"""Races of erase and re-creation against the reads and writes of the first owner (issue 20),
run unchanged on every backend.

One thread erases session ``s`` and re-creates it under another client (bob), then under its
first owner (alice), over and over; others search, read, install summaries or write facts as
alice meanwhile. Every check is made by the store in the statement or script that returns
or writes the rows, so no interleaving may leak bob's text to alice, land a summary planned
before an erase on a later session, or bring back a fact erased by `forget`. Bounded by a
number of rounds (a second or two on the servers), not by time.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

import pytest
from langchain_core.messages import HumanMessage

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import FactError, OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore

ROUNDS = 40
PROBES = 2


def _race(step: Callable[[int], None], probe: Callable[[], None]) -> None:
    """Run `step(0..ROUNDS-1)` in one thread while `PROBES` threads call `probe` in a loop;
    the steps start once every probe has run once, and the probes stop after the last step."""
    stop = threading.Event()
    started = threading.Barrier(PROBES + 1)
    failures: list[BaseException] = []

    def erase() -> None:
        try:
            started.wait()
            for i in range(ROUNDS):
                step(i)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
        finally:
            stop.set()

    def run() -> None:
        try:
            probe()
            started.wait()
            while not stop.is_set():
                probe()
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
            stop.set()
            started.abort()

    threads = [threading.Thread(target=erase)] + [threading.Thread(target=run) for _ in range(PROBES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _bob_then_alice(store: RollingStore, i: int, *, forget: bool = False) -> None:
    if forget:
        store.forget("alice")
    else:
        store.clear_session("s")
    store.append("s", [HumanMessage(f"zebra bob secret {i}")], client_id="bob")
    store.clear_session("s")
    store.append("s", [HumanMessage(f"zebra alice {i}")], client_id="alice")


@pytest.mark.parametrize("scope", ["session", "client"])
def test_a_search_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore, scope: str
) -> None:
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    where = {"client_id": "alice", "session_id": "s"} if scope == "session" else {"client_id": "alice"}
    leaks: list[str] = []

    def probe() -> None:
        try:
            hits = store.search("zebra", **where)  # type: ignore[arg-type]
        except OwnershipError:  # the caller's look-up saw bob's session: refused, fine
            return
        leaks.extend(h.text for h in hits if "bob" in h.text)

    _race(lambda i: _bob_then_alice(store, i), probe)
    assert leaks == []


async def test_an_async_search_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore,
) -> None:
    """The same race on the async API (PostgreSQL and Redis: their native async twins)."""
    await store.aappend("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []
    done = asyncio.Event()

    async def erase() -> None:
        try:
            for i in range(ROUNDS):
                await store.aclear_session("s")
                await store.aappend("s", [HumanMessage(f"zebra bob secret {i}")], client_id="bob")
                await store.aclear_session("s")
                await store.aappend("s", [HumanMessage(f"zebra alice {i}")], client_id="alice")
        finally:
            done.set()

    async def search() -> None:
        while not done.is_set():
            try:
                hits = await store.asearch("zebra", client_id="alice", session_id="s")
            except OwnershipError:
                continue
            leaks.extend(h.text for h in hits if "bob" in h.text)

    await asyncio.gather(erase(), *(search() for _ in range(PROBES)))
    assert leaks == []


def test_a_turn_read_as_the_first_owner_never_returns_the_next_owners_messages(store: RollingStore) -> None:
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []

    def probe() -> None:
        try:
            turn = store.read_turn("s", limit=5, client_id="alice")
        except OwnershipError:
            return
        leaks.extend(str(m.message.content) for m in turn.messages if "bob" in str(m.message.content))

    _race(lambda i: _bob_then_alice(store, i), probe)
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

    _race(lambda i: _bob_then_alice(store, i), probe)
    assert leaks == []


def test_a_fact_planned_before_forget_is_never_written_after_it(store: RollingStore) -> None:
    """Between `forget("alice")` and alice's next session, no fact of hers can be valid: any
    one found then was planned from an erased session and written after the erase."""
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    leaks: list[str] = []
    counter = iter(range(10**9))

    def step(i: int) -> None:
        store.forget("alice")
        store.append("s", [HumanMessage(f"zebra bob secret {i}")], client_id="bob")
        store.clear_session("s")
        leaks.extend(f.text for f in store.facts("alice"))
        store.append("s", [HumanMessage(f"zebra alice {i}")], client_id="alice")

    def probe() -> None:
        try:
            generation = store.read_turn("s", limit=1, client_id="alice").generation
        except OwnershipError:
            return
        if generation is None:
            return
        with contextlib.suppress(StaleWriteError, FactError):  # refused, or her facts are full
            store.add_fact("alice", f"fact {next(counter)}", planned_from=SessionMark("s", generation))

    _race(step, probe)
    assert leaks == []
