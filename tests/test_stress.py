"""Stress: erase racing append, forked writers, a clear during a compaction, on every backend.

Bounded in time (a few seconds per backend) and on by default. Each test states the promise
it attacks; the figures (tries, messages stored, rows left) are in the assertion messages.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import backend_name, raw_contents, reopen

from langchain_rolling_memory import Compactor
from langchain_rolling_memory.policy import FoldPolicy
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.summarizers import as_summarizer

RACE_SECONDS = float(os.environ.get("LRM_STRESS_SECONDS", "2.0"))
FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def _second(store: RollingStore) -> RollingStore:
    """Another store object on the same data (the in-memory store has only itself)."""
    return store if backend_name(store) == "memory" else reopen(store)


def test_erase_racing_append_leaves_nothing_of_the_client_and_no_wedged_session(store: RollingStore) -> None:
    other = _second(store)
    tries = orphans = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"s{tries}"
            store.append(session, [HumanMessage("first")], client_id="ana")
            go = threading.Barrier(2)
            errors: list[BaseException] = []

            def append(session: str = session, go: threading.Barrier = go) -> None:
                go.wait()
                try:
                    other.append(session, [HumanMessage("late"), AIMessage("reply")], client_id="ana")
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            thread = threading.Thread(target=append)
            thread.start()
            go.wait()
            store.forget("ana")
            thread.join()
            assert not errors, f"append failed during an erase: {errors[0]!r}"
            # Either the append ran before the erase (all gone) or after it (a fresh session of
            # the client, fully reachable): never rows that the client's export does not show.
            rows = store.read(session)
            info = store.session_info(session)
            exported = {s["session_id"]: len(s["transcript"]) for s in store.export("ana")["sessions"]}
            if rows:
                if info is None or info.client_id != "ana" or exported.get(session) != len(rows):
                    orphans += 1
                # The session is usable afterwards (no unique-key clash with left-over rows).
                store.append(session, [HumanMessage("after")], client_id="ana")
                assert [r.seq for r in store.read(session)] == list(range(1, len(rows) + 2))
            store.forget("ana")
            assert not store.read(session)
        assert orphans == 0, f"{orphans} of {tries} tries left rows outside the client's export"
        assert raw_contents(store) == [], f"rows left after {tries} tries"
    finally:
        if other is not store:
            other.close()


def test_clear_racing_append_never_leaves_rows_without_their_session(store: RollingStore) -> None:
    other = _second(store)
    tries = bad = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            store.append("s", [HumanMessage("one")], client_id="ana")
            go = threading.Barrier(2)

            def append(go: threading.Barrier = go) -> None:
                go.wait()
                other.append("s", [HumanMessage("two")], client_id="ana")

            thread = threading.Thread(target=append)
            thread.start()
            go.wait()
            store.clear_session("s")
            thread.join()
            rows = store.read("s")
            if rows and store.session_info("s") is None:
                bad += 1
            store.clear_session("s")
        assert bad == 0, f"{bad} of {tries} tries left messages of a deleted session"
        assert raw_contents(store) == []
    finally:
        if other is not store:
            other.close()


def _forked_writer(store: RollingStore, worker: int, count: int) -> None:
    # The store object was opened by the parent before the fork, as gunicorn --preload does.
    for k in range(count):
        if k == count // 4:
            gc.collect()  # the child's collector meets the parent's garbage store mid-run
        store.append("forked", [HumanMessage(f"w{worker}:{k}")], client_id="c")
    os._exit(0)


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_forked_workers_on_a_store_opened_before_the_fork_store_every_message(
    shared_store: RollingStore,
) -> None:
    assert FORK is not None
    shared_store.append("warm", [HumanMessage("opened in the parent")])  # a live connection
    garbage = reopen(shared_store)
    garbage.append("warm", [AIMessage("garbage store, used once")])
    cycle: list[object] = [garbage]
    cycle.append(cycle)  # only the cyclic collector frees it: in the child, if at all
    del garbage, cycle
    workers, count = 4, 100
    procs = [FORK.Process(target=_forked_writer, args=(shared_store, w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    texts = [str(r.message.content) for r in shared_store.read("forked")]
    assert len(texts) == workers * count, f"{len(texts)} of {workers * count} messages stored"
    for w in range(workers):
        mine = [t for t in texts if t.startswith(f"w{w}:")]
        assert mine == [f"w{w}:{k}" for k in range(count)], f"worker {w} lost or reordered messages"
    # The parent's own store still works after its children wrote through copies of it.
    shared_store.append("warm", [HumanMessage("parent after the fork")])
    assert shared_store.read("warm")[-1].message.content == "parent after the fork"


class _GatedSummarizer:
    """Waits for the test to say go, then folds; records what it was asked to fold."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.folded: list[list[str]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.folded.append([str(m.content) for m in messages])
        self.started.set()
        assert self.go.wait(30)
        return "secret summary: my PIN is 1234 | ok | card 4111"


def test_a_compaction_started_before_a_clear_never_installs_after_it(store: RollingStore) -> None:
    gate = _GatedSummarizer()
    compactor = Compactor(
        store, as_summarizer(gate), FoldPolicy(max_turns=4, keep_last=1), timeout=None, start_delay=0
    )
    old = [HumanMessage("my PIN is 1234"), AIMessage("ok"), HumanMessage("card 4111"), AIMessage("ok")]
    store.append("s", [*old, HumanMessage("and?")], client_id="ana")
    runner = threading.Thread(target=compactor.compact, args=("s",))
    runner.start()
    assert gate.started.wait(10)
    store.clear_session("s")
    # The new conversation has the same message at the same seqs as the erased one.
    store.append("s", [*old, HumanMessage("hello again")], client_id="ana")
    gate.go.set()
    runner.join(30)
    record = store.summary("s")
    assert record is None or "1234" not in record.text, f"the erased summary was installed: {record}"
    assert [str(r.message.content) for r in store.read("s")][-1] == "hello again"
