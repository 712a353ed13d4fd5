"""A session erased and re-created by another client while a run of its first client reads,
searches, installs a summary and writes facts planned from its reads (issue 20, defects 2-4),
on every backend: whatever the interleaving, the first client sees none of the other's text,
and none of its writes planned before an erase lands on the new session. Bounded by a count
of rounds, not by time."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from store_kit import backend_name, reopen

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore

ROUNDS = 40


def _attacker(store: RollingStore, leaks: list[str], done: threading.Event, start: threading.Barrier) -> None:
    """Each round: erase ana, give `s1` to bob, check that nothing of ana's landed while it was
    bob's, then give `s1` back to ana for the next round."""
    try:
        start.wait()
        for i in range(ROUNDS):
            store.forget("ana")
            store.clear_session("s1")
            store.append("s1", [HumanMessage(f"bob secret {i}"), AIMessage("bob note")], client_id="bob")
            for _ in range(3):  # a window for ana's stale writes, checked at both ends
                if store.summary("s1") is not None:
                    leaks.append(f"summary on bob's session: {store.summary('s1')}")
                if store.facts("ana"):
                    leaks.append(f"ana's facts came back after forget: {store.facts('ana')}")
                store.read_turn("s1", limit=5, client_id="bob")
            store.clear_session("s1")
            store.append("s1", [HumanMessage(f"ana note {i}"), AIMessage("ana secret")], client_id="ana")
            for _ in range(3):
                store.read_turn("s1", limit=5, client_id="ana")
    finally:
        done.set()


def _leaked(texts: list[str]) -> list[str]:
    return [t for t in texts if "bob" in t]


def _victim(
    store: RollingStore, leaks: list[str], done: threading.Event, start: threading.Barrier, counts: list[int]
) -> None:
    start.wait()
    n = 0
    while n == 0 or not done.is_set():  # at least one pass, however the threads are scheduled
        n += 1
        try:
            turn = store.read_turn("s1", limit=10, client_id="ana")
        except OwnershipError:
            turn = None
        if turn is not None:
            leaks += _leaked([str(m.message.content) for m in turn.messages])
            if turn.generation is not None and turn.messages:
                version = turn.record.version if turn.record else 0
                store.install_summary(
                    "s1",
                    f"ana summary {n}",
                    covered_seq=turn.messages[-1].seq,
                    expected_version=version,
                    generation=turn.generation,
                )
                with contextlib.suppress(StaleWriteError):
                    store.add_fact(
                        "ana", f"ana fact {n % 4}", planned_from=SessionMark("s1", turn.generation)
                    )
        for where in ({"client_id": "ana", "session_id": "s1"}, {"client_id": "ana"}):
            with contextlib.suppress(OwnershipError):
                leaks += _leaked([h.text for h in store.search("secret note", **where)])  # type: ignore[arg-type]
        with contextlib.suppress(OwnershipError):
            leaks += _leaked([str(m.message.content) for m in store.read("s1", client_id="ana")])
        leaks += _leaked([str(s) for s in store.export("ana")["sessions"]])
    counts.append(n)


def test_no_text_of_the_new_owner_reaches_the_old_one_and_no_stale_write_lands(store: RollingStore) -> None:
    # The attacker uses its own store object (its own connections) where the backend has one.
    other = store if backend_name(store) == "memory" else reopen(store)
    leaks: list[str] = []
    errors: list[BaseException] = []
    counts: list[int] = []
    done = threading.Event()
    start = threading.Barrier(3)

    def guarded(fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:  # reported below, with its traceback
            errors.append(exc)
            done.set()
            start.abort()

    threads = [threading.Thread(target=guarded, args=(_attacker, other, leaks, done, start))]
    threads += [
        threading.Thread(target=guarded, args=(_victim, store, leaks, done, start, counts)) for _ in range(2)
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        done.set()
        if other is not store:
            other.close()
    if errors:
        raise errors[0]
    assert leaks == []
    assert len(counts) == 2 and min(counts) > 0
