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

The same races with an append's *rewind* (the contract's **rewind** invariant): alice's appends,
half of them withdrawing the rows past a seq first, race one another and `clear_session` or
`forget`; each call is timed, and the store at rest must hold a gap-free transcript that agrees
with every order the calls may have taken (a write no later call could withdraw is kept, one a
later rewind or erase passed is gone from read, search and export). Another client's rewind is
refused and withdraws nothing. Last, a rewind in a forked child on the store its parent opened.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import multiprocessing
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage
from store_kit import backend_name, reopen

from langchain_rolling_memory import index_vectors
from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.engine.dense import model_name
from langchain_rolling_memory.errors import FactError, OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore

ROUNDS = 30
PROBES = 2

Step = Callable[[RollingStore, int], None]
FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


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


_EMBED = DeterministicFakeEmbedding(size=8)
_EMBEDDED = model_name(_EMBED)


def _embedded_bob_then_alice(store: RollingStore, i: int) -> None:
    """`_bob_then_alice` with every message given its vector as soon as it is stored."""
    _bob_then_alice(store, i, while_bobs=lambda: index_vectors(store, _EMBED, client_id="bob"))
    index_vectors(store, _EMBED, client_id="alice")


def _near(store: RollingStore, **where: Any) -> list[str]:
    query = _EMBED.embed_query("zebra")
    return [h.text for h in store.vector_search(query, model=_EMBEDDED, client_id="alice", limit=5, **where)]


async def _anear(store: RollingStore, **where: Any) -> list[str]:
    query = _EMBED.embed_query("zebra")
    hits = await store.avector_search(query, model=_EMBEDDED, client_id="alice", limit=5, **where)
    return [h.text for h in hits]


@pytest.mark.parametrize("scope", ["session", "client"])
def test_a_vector_search_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore, scope: str
) -> None:
    store.append("s", [HumanMessage("zebra alice")], client_id="alice")
    index_vectors(store, _EMBED, client_id="alice")
    where = {"session_id": "s"} if scope == "session" else {}
    leaks: list[str] = []
    found = 0

    def probe() -> None:
        nonlocal found
        with contextlib.suppress(OwnershipError):
            texts = _near(store, **where)
            found += len(texts)
            leaks.extend(_bobs(texts))

    _race(store, _embedded_bob_then_alice, probe)
    assert leaks == []
    assert found > 0  # the probes did see alice's messages between the erases


@pytest.mark.parametrize("scope", ["session", "client"])
async def test_an_async_vector_search_as_the_first_owner_never_returns_the_next_owners_messages(
    store: RollingStore, scope: str
) -> None:
    await store.aappend("s", [HumanMessage("zebra alice")], client_id="alice")
    index_vectors(store, _EMBED, client_id="alice")
    where = {"session_id": "s"} if scope == "session" else {}
    leaks: list[str] = []

    async def probe() -> None:
        with contextlib.suppress(OwnershipError):
            leaks.extend(_bobs(await _anear(store, **where)))

    await _arace(store, _embedded_bob_then_alice, probe)
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


# ------------------------------------------------------------------ rewinds (an append's branch)


def _word(n: int) -> str:
    """A unique search term for write `n`: letters only, fixed width, so no term is another's
    prefix and the tokenizer keeps it whole."""
    letters = ""
    for _ in range(5):
        n, digit = divmod(n, 26)
        letters += chr(ord("a") + digit)
    return "qx" + letters


class _History:
    """What the racing threads did, each call timed (`time.monotonic_ns`, one clock for the
    process) from before it started to after it returned: the writes alice's appends
    acknowledged (word, seq, the rewind they carried) and the erases."""

    def __init__(self) -> None:
        self._numbers = itertools.count()
        self.writes: list[tuple[int, int, str, int, int | None]] = []  # start, end, word, seq, rewind
        self.erases: list[tuple[int, int]] = []

    def append(self, store: RollingStore, *, count: int = 1, rewind: int | None = None) -> None:
        words = [_word(next(self._numbers)) for _ in range(count)]
        start = time.monotonic_ns()
        seqs = store.append("s", [HumanMessage(f"note {w}") for w in words], client_id="alice", rewind=rewind)
        self._written(start, words, seqs, rewind)

    async def aappend(self, store: RollingStore, *, count: int = 1, rewind: int | None = None) -> None:
        words = [_word(next(self._numbers)) for _ in range(count)]
        start = time.monotonic_ns()
        seqs = await store.aappend(
            "s", [HumanMessage(f"note {w}") for w in words], client_id="alice", rewind=rewind
        )
        self._written(start, words, seqs, rewind)

    def _written(self, start: int, words: list[str], seqs: list[int], rewind: int | None) -> None:
        end = time.monotonic_ns()
        assert len(seqs) == len(words), (words, seqs)
        self.writes.extend((start, end, w, seq, rewind) for w, seq in zip(words, seqs, strict=True))
        if not words:  # a withdrawal alone: no word, but its rewind counts
            self.writes.append((start, end, "", 0, rewind))

    def erase(self, store: RollingStore, how: str) -> None:
        start = time.monotonic_ns()
        if how == "forget":
            store.forget("alice")
        else:
            store.clear_session("s")
        self.erases.append((start, time.monotonic_ns()))

    def check(self, store: RollingStore) -> int:
        """The store at rest against the history; returns how many acknowledged words a later
        rewind surely withdrew (so a test can tell that its race withdrew anything)."""
        rows = [(r.seq, str(r.message.content)) for r in store.read("s", client_id="alice")]
        assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1)), rows  # gap-free from 1
        where = {w: seq for _, _, w, seq, _ in self.writes if w}
        kept = {text.removeprefix("note "): seq for seq, text in rows}
        assert len(kept) == len(rows)
        for word, seq in kept.items():  # every row is an acknowledged write, at its own seq
            assert where.get(word) == seq, (word, seq, where.get(word))
        rewinds = [(start, end, back) for start, end, _, _, back in self.writes if back is not None]
        withdrawn = 0
        for start, end, word, seq, _ in self.writes:
            if not word:
                continue
            erased = any(e_start > end for e_start, _ in self.erases)
            rewound = any(r_start > end and back < seq for r_start, _, back in rewinds)
            if erased or rewound:  # an erase or rewind that began after it returned: gone
                assert word not in kept, (word, "came back after an erase" if erased else "rewound")
                withdrawn += rewound
            may_go = any(e_end > start for _, e_end in self.erases) or any(
                r_end > start and back < seq and (r_start, r_end) != (start, end)
                for r_start, r_end, back in rewinds
            )
            if not may_go:  # nothing that may have come after it could withdraw it: kept
                assert kept.get(word) == seq, (word, seq, "lost")
        # At rest, a word is found (search, export) exactly when its row is read.
        exported = str(store.export("alice"))
        for word in where:
            found = [h for h in store.search(word, client_id="alice") if word in (h.text or "").split()]
            assert [(h.session_id, h.seq) for h in found] == ([("s", kept[word])] if word in kept else []), (
                word
            )
            assert (word in exported) == (word in kept), word
        return withdrawn


_ERASES = ["clear_session", "forget", "none"]


def _rewinder(history: _History, store: RollingStore) -> Callable[[], None]:
    """A probe: alice's appends, every other one rewinding one or two rows (or more, past an
    erase), a withdrawal alone now and then."""
    calls = itertools.count()

    def probe() -> None:
        n = next(calls)
        if n % 2:
            history.append(store, count=1 + n % 3 // 2)
            return
        back = max(0, store.last_seq("s") - 1 - n % 3)
        history.append(store, count=0 if n % 10 == 4 else 1, rewind=back)

    return probe


def _rewind_step(history: _History, how: str) -> Step:
    """The other side: erase alice's session (or not) and append to it again."""

    def step(other: RollingStore, i: int) -> None:
        if how != "none":
            history.erase(other, how)
        history.append(other, count=2)
        time.sleep(0.001)  # let the probes' threads (or event loop) in between the steps

    return step


@pytest.mark.parametrize("how", _ERASES)
def test_rewinds_racing_appends_and_erases_withdraw_exactly_the_rows_they_passed(
    store: RollingStore, how: str
) -> None:
    history = _History()
    history.append(store, count=3)
    _race(store, _rewind_step(history, how), _rewinder(history, store))
    assert history.check(store) > 0


@pytest.mark.parametrize("how", _ERASES)
async def test_async_rewinds_racing_appends_and_erases_withdraw_exactly_the_rows_they_passed(
    store: RollingStore, how: str
) -> None:
    history = _History()
    await history.aappend(store, count=3)
    calls = itertools.count()

    async def probe() -> None:
        n = next(calls)
        if n % 2:
            await history.aappend(store)
            return
        back = max(0, await store.alast_seq("s") - 1 - n % 3)
        await history.aappend(store, rewind=back)

    await _arace(store, _rewind_step(history, how), probe)
    assert history.check(store) > 0


def test_another_clients_rewind_racing_the_owners_appends_is_refused_and_withdraws_nothing(
    store: RollingStore,
) -> None:
    history = _History()
    history.append(store, count=3)
    generation = store.read_turn("s", limit=0, client_id="alice").generation
    accepted: list[object] = []
    intruders = itertools.count()

    def step(other: RollingStore, i: int) -> None:
        word = _word(10**6 + next(intruders))
        for who, messages in (("bob", [HumanMessage(f"note {word}")]), ("bob", []), (None, [])):
            for back in (0, max(0, other.last_seq("s") - 1)):
                try:
                    if i % 2:
                        accepted.append(other.append("s", messages, client_id=who, rewind=back))
                    else:
                        accepted.append(other.append_and_summary("s", messages, client_id=who, rewind=back))
                except OwnershipError:
                    pass

    _race(store, step, lambda: history.append(store))
    assert accepted == []
    assert history.check(store) == 0
    rows = store.read("s", client_id="alice")
    assert len(rows) == len(history.writes)  # every append of hers kept
    assert store.read_turn("s", limit=0, client_id="alice").generation == generation  # nothing went
    assert store.search(_word(10**6), client_id="bob") == []


def _rewind_in_child(store: RollingStore, api: str, pipe: Any) -> None:
    """In a forked child, on the store its parent opened: rewind alice's session past seq 2 and
    append (`api`: on the sync or the async API), then read and search what it wrote; report
    what it saw, then exit without cleanup."""

    async def on_async_api() -> tuple[list[int], list[str], list[tuple[int | None, str]]]:
        seqs = await store.aappend("s", [HumanMessage("note qxchild")], client_id="alice", rewind=2)
        rows = [str(r.message.content) for r in await store.aread("s", client_id="alice")]
        hits = [(h.seq, h.text) for h in await store.asearch("qxchild qxthree", client_id="alice")]
        return seqs, rows, hits

    try:
        if api == "async":  # a new loop in a new thread: the fork copied the parent's running one
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pipe.send(repr(pool.submit(asyncio.run, on_async_api()).result(60)))
        else:
            seqs = store.append("s", [HumanMessage("note qxchild")], client_id="alice", rewind=2)
            rows = [str(r.message.content) for r in store.read("s", client_id="alice")]
            hits = [(h.seq, h.text) for h in store.search("qxchild qxthree", client_id="alice")]
            pipe.send(repr((seqs, rows, hits)))  # sent before it returns (a Queue's thread would not be)
    except BaseException as exc:
        pipe.send(f"{type(exc).__name__}: {exc}")
    finally:
        os._exit(0)


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_a_rewind_in_a_forked_child_is_what_the_parent_then_reads_and_rewinds(
    shared_store: RollingStore, api: str
) -> None:
    """The parent opened the store and used both APIs (live connections) before the fork, as
    gunicorn --preload does; the child's rewind withdraws the parent's rows; the parent then
    reads and searches exactly the child's result and rewinds and appends itself."""
    assert FORK is not None
    store = shared_store
    store.append("s", [HumanMessage("note qxone"), HumanMessage("note qxtwo")], client_id="alice")
    await store.aappend("s", [HumanMessage("note qxthree")], client_id="alice")
    assert [h.seq for h in await store.asearch("qxthree", client_id="alice")] == [3]
    generation = store.read_turn("s", limit=0, client_id="alice").generation
    receiver, sender = FORK.Pipe(duplex=False)
    child = FORK.Process(target=_rewind_in_child, args=(store, api, sender))
    child.start()
    ready = await asyncio.to_thread(receiver.poll, 60)
    child.join(60)
    if child.exitcode is None:  # a stuck child must fail the test, not hang the run at exit
        child.kill()
        child.join()
    assert ready and child.exitcode == 0, child.exitcode
    answer = receiver.recv()
    expected = ["note qxone", "note qxtwo", "note qxchild"]
    assert answer == repr(([3], expected, [(3, "note qxchild")])), answer
    # The parent, on the connections it held before the fork, sees exactly the child's result.
    assert [str(r.message.content) for r in store.read("s", client_id="alice")] == expected
    assert [str(r.message.content) for r in await store.aread("s", client_id="alice")] == expected
    assert [(h.seq, h.text) for h in store.search("qxchild qxthree", client_id="alice")] == [
        (3, "note qxchild")
    ]
    assert [h.seq for h in await store.asearch("qxthree qxchild", client_id="alice")] == [3]
    assert store.read_turn("s", limit=0, client_id="alice").generation not in (None, generation)
    # ...and rewinds and appends itself, on both APIs.
    assert store.append("s", [HumanMessage("note qxfour")], client_id="alice", rewind=1) == [2]
    assert await store.aappend("s", [HumanMessage("note qxfive")], client_id="alice", rewind=2) == [3]
    assert [str(r.message.content) for r in store.read("s", client_id="alice")] == [
        "note qxone",
        "note qxfour",
        "note qxfive",
    ]
    assert store.search("qxtwo qxchild qxthree", client_id="alice") == []
    assert sorted(h.seq or 0 for h in await store.asearch("qxfour qxfive", client_id="alice")) == [2, 3]
    exported = str(store.export("alice"))
    assert "qxchild" not in exported and "qxtwo" not in exported and "qxfive" in exported
