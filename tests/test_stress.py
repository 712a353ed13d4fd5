"""Stress: erase racing append, a claim racing another run's append, read or clear, forked
writers, a clear during a compaction, on every backend.

Bounded in time (``LRM_STRESS_SECONDS`` per race and backend, 2 by default) and on by default.
Each test states the promise it attacks; its figures (tries, messages stored, rows left) are
in its assertion messages and printed as one ``STRESS`` line (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import backend_name, raw_contents, reopen

from langchain_rolling_memory import Compactor, OwnershipError
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.stores import RollingStore, SQLiteRollingStore
from langchain_rolling_memory.summarizers import as_summarizer

RACE_SECONDS = float(os.environ.get("LRM_STRESS_SECONDS", "2.0"))
FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def _report(attack: str, store: RollingStore, **figures: object) -> str:
    line = " ".join([f"STRESS {attack} {backend_name(store)}:", *(f"{k}={v}" for k, v in figures.items())])
    print(line)
    return line


def _second(store: RollingStore) -> RollingStore:
    """Another store object on the same data (the in-memory store has only itself)."""
    return store if backend_name(store) == "memory" else reopen(store)


def test_erase_racing_append_leaves_nothing_of_the_client_and_no_wedged_session(store: RollingStore) -> None:
    other = _second(store)
    tries = orphans = stored = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"s{tries}"
            store.append(session, [HumanMessage("first")], client_id="ana")
            go = threading.Barrier(2)
            errors: list[BaseException] = []

            def append(
                session: str = session, go: threading.Barrier = go, errors: list[BaseException] = errors
            ) -> None:
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
            stored += len(rows)
            if rows:
                if info is None or info.client_id != "ana" or exported.get(session) != len(rows):
                    orphans += 1
                # The session is usable afterwards (no unique-key clash with left-over rows).
                store.append(session, [HumanMessage("after")], client_id="ana")
                assert [r.seq for r in store.read(session)] == list(range(1, len(rows) + 2))
            store.forget("ana")
            assert not store.read(session)
        left = raw_contents(store)
        figures = _report(
            "forget-vs-append", store, tries=tries, stored=stored, orphans=orphans, left=len(left)
        )
        assert orphans == 0, f"{orphans} of {tries} tries left rows outside the client's export ({figures})"
        assert left == [], f"rows left after {tries} tries ({figures})"
    finally:
        if other is not store:
            other.close()


def _index_entries(store: RollingStore) -> int:
    """Index entries the backend holds for messages (where it keeps them apart from the rows)."""
    name = backend_name(store)
    if name == "sqlite":
        assert isinstance(store, SQLiteRollingStore)
        return int(store.backend._query(f"SELECT count(*) FROM {store.prefix}search_docs")[0][0])
    if name == "memory":
        indexes = store.backend._indexes.values()  # type: ignore[attr-defined]
        return sum(len(index) for index in indexes) + len(store.backend._pending)  # type: ignore[attr-defined]
    return 0  # PostgreSQL and Redis keep a message's index entry in its row or key


def test_erase_racing_append_and_search_leaves_nothing_findable(store: RollingStore) -> None:
    writer, searcher = _second(store), _second(store)
    tries = found = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"q{tries}"
            store.append(session, [HumanMessage("oscar first")], client_id="ana")
            go = threading.Barrier(3)
            errors: list[BaseException] = []

            def run(
                call: Callable[[], object], go: threading.Barrier = go, errors: list[BaseException] = errors
            ) -> None:
                go.wait()
                try:
                    call()
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [
                threading.Thread(
                    target=run,
                    args=(lambda s=session: writer.append(s, [HumanMessage("oscar late")], client_id="ana"),),
                ),
                # A search indexes what was appended (SQLite, in-memory) while the erase runs.
                threading.Thread(target=run, args=(lambda: searcher.search("oscar", client_id="ana"),)),
            ]
            for thread in threads:
                thread.start()
            go.wait()
            store.forget("ana")
            for thread in threads:
                thread.join()
            assert not errors, f"append or search failed during an erase: {errors[0]!r}"
            store.forget("ana")  # what an append after the first erase wrote
            if store.search("oscar", client_id="ana") or searcher.search("oscar late", session_id=session):
                found += 1
        left = _index_entries(store)
        figures = _report("forget-vs-append-and-search", store, tries=tries, found=found, index_left=left)
        assert found == 0, f"{found} of {tries} tries found a message after its erase ({figures})"
        assert left == 0, f"index entries left after {tries} tries ({figures})"
    finally:
        for other in {id(writer): writer, id(searcher): searcher}.values():
            if other is not store:
                other.close()


ERASES: dict[str, Callable[[RollingStore], object]] = {
    "clear": lambda store: store.clear_session("s"),
    "purge": lambda store: store.purge(older_than=0),
}


@pytest.mark.parametrize("erase", sorted(ERASES))
def test_an_erase_racing_append_never_leaves_rows_without_their_session(
    store: RollingStore, erase: str
) -> None:
    other = _second(store)
    tries = bad = stored = 0
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
            ERASES[erase](store)
            thread.join()
            rows = store.read("s")
            stored += len(rows)
            if rows and store.session_info("s") is None:
                bad += 1
            store.clear_session("s")
        left = raw_contents(store)
        figures = _report(
            f"{erase}-vs-append", store, tries=tries, stored=stored, orphans=bad, left=len(left)
        )
        assert bad == 0, f"{bad} of {tries} tries left messages of an erased session ({figures})"
        assert left == [], figures
    finally:
        if other is not store:
            other.close()


def test_an_anonymous_append_racing_a_claim_never_lands_in_the_claimed_session(store: RollingStore) -> None:
    # Defect 4: the owner check of an append naming no client is the store's own, in the same
    # atomic write, not a check made before it. Each try, on a fresh session, an anonymous
    # append races the first append of client ana (which makes the session hers): the anonymous
    # message lands before the claim, or is refused; never after ana's first message.
    other = _second(store)
    tries = refused = before = after = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"claim{tries}"
            go = threading.Barrier(2)
            outcome: list[object] = []

            def anonymous(
                session: str = session, go: threading.Barrier = go, out: list[object] = outcome
            ) -> None:
                go.wait()
                try:
                    out.append(other.append(session, [HumanMessage("anonymous")]))
                except OwnershipError as exc:
                    out.append(exc)

            thread = threading.Thread(target=anonymous)
            thread.start()
            go.wait()
            store.append(session, [HumanMessage("ana's secret")], client_id="ana")
            thread.join()
            texts = [str(r.message.content) for r in store.read(session)]
            if isinstance(outcome[0], OwnershipError):
                refused += 1
                assert texts == ["ana's secret"], texts
            elif texts.index("anonymous") < texts.index("ana's secret"):
                before += 1
            else:
                after += 1
            info = store.session_info(session)
            assert info is not None and info.client_id == "ana"
        figures = _report(
            "anonymous-vs-claim",
            store,
            tries=tries,
            refused=refused,
            landed_before=before,
            landed_after=after,
        )
        assert after == 0, f"{after} of {tries} anonymous appends landed in the claimed session ({figures})"
    finally:
        if other is not store:
            other.close()


def test_an_anonymous_clear_racing_a_claim_never_erases_the_claimed_session(store: RollingStore) -> None:
    # The clear of a run naming no client checks the owner in the erase itself: racing ana's
    # first append, it erases the session before her claim, or nothing; never her message.
    other = _second(store)
    tries = refused = erased = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"wipe{tries}"
            go = threading.Barrier(2)
            outcome: list[object] = []

            def clear(
                session: str = session, go: threading.Barrier = go, out: list[object] = outcome
            ) -> None:
                go.wait()
                try:
                    other.clear_session(session, client_id=None)
                    out.append(None)
                except OwnershipError as exc:
                    out.append(exc)

            thread = threading.Thread(target=clear)
            thread.start()
            go.wait()
            store.append(session, [HumanMessage("ana's secret")], client_id="ana")
            thread.join()
            refused += isinstance(outcome[0], OwnershipError)
            if [str(r.message.content) for r in store.read(session)] != ["ana's secret"]:
                erased += 1
        figures = _report("anonymous-clear-vs-claim", store, tries=tries, refused=refused, erased=erased)
        assert erased == 0, f"{erased} of {tries} anonymous clears erased the claimed session ({figures})"
    finally:
        if other is not store:
            other.close()


def test_a_read_racing_a_claim_never_returns_the_claimed_session(store: RollingStore) -> None:
    # The owner check of a read naming a client (or none) is made in the read itself: a run
    # reading a fresh session while client ana claims it sees nothing of hers, or is refused.
    other = _second(store)
    tries = refused = empty = leaked = 0
    deadline = time.monotonic() + RACE_SECONDS
    try:
        while time.monotonic() < deadline:
            tries += 1
            session = f"peek{tries}"
            go = threading.Barrier(2)
            seen: list[object] = []

            reader = None if tries % 2 else "bob"  # a run naming no client, or another client
            way = tries // 2 % 3

            def peek(
                session: str = session,
                go: threading.Barrier = go,
                seen: list[object] = seen,
                reader: str | None = reader,
                way: int = way,
            ) -> None:
                go.wait()
                try:  # the tail read, the turn's one read, or the batched read of what follows
                    if way == 0:
                        seen.append(other.summary_and_tail(session, limit=10, client_id=reader)[1])
                    elif way == 1:
                        seen.append(other.read_memory(session, limit=10, client_id=reader).turn.messages)
                    else:
                        seen.append(other.messages_after([(session, 0)], client_id=reader))
                except OwnershipError as exc:
                    seen.append(exc)

            thread = threading.Thread(target=peek)
            thread.start()
            go.wait()
            store.append(session, [HumanMessage("ana's secret")], client_id="ana")
            thread.join()
            if isinstance(seen[0], OwnershipError):
                refused += 1
            elif any(row is not None and "secret" in str(row.message.content) for row in seen[0]):  # type: ignore[attr-defined]
                leaked += 1
            else:
                empty += 1
        figures = _report("read-vs-claim", store, tries=tries, refused=refused, empty=empty, leaked=leaked)
        assert leaked == 0, f"{leaked} of {tries} reads returned the claimed session ({figures})"
    finally:
        if other is not store:
            other.close()


def _forked_writer(store: RollingStore, worker: int, count: int) -> None:
    # The store object was opened by the parent before the fork, as gunicorn --preload does.
    sync_part = count * 3 // 4
    for k in range(sync_part):
        if k == count // 4:
            # The child's collector finalizes the parent's garbage store mid-run (the parent's
            # collector was off from its last use to the fork, so it is still there).
            gc.collect()
        if k % 2:
            store.append("forked", [HumanMessage(f"w{worker}:{k}")], client_id="c")
            continue
        # A turn's own write and reads through the copy: the append pipelined with the summary
        # read, the turn's one read, and the batched read of what follows a seq.
        seqs, _ = store.append_and_summary("forked", [HumanMessage(f"w{worker}:{k}")], client_id="c")
        store.read_memory("forked", limit=8, client_id="c")
        (after,) = store.messages_after([("forked", seqs[0] - 1)], client_id="c")
        if after is None or after.message.content != f"w{worker}:{k}":
            os._exit(3)

    async def tail() -> None:  # the async twins too, on the child's own event loop
        for k in range(sync_part, count):
            if k % 2:
                await store.aappend("forked", [HumanMessage(f"w{worker}:{k}")], client_id="c")
                continue
            seqs, _ = await store.aappend_and_summary(
                "forked", [HumanMessage(f"w{worker}:{k}")], client_id="c"
            )
            await store.aread_memory("forked", limit=8, client_id="c")
            (after,) = await store.amessages_after([("forked", seqs[0] - 1)], client_id="c")
            if after is None or after.message.content != f"w{worker}:{k}":
                os._exit(3)

    asyncio.run(tail())
    os._exit(0)


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_forked_workers_on_a_store_opened_before_the_fork_store_every_message(
    shared_store: RollingStore,
) -> None:
    # The reproduction (defect 6): 4 workers x 100 appends through a store opened in
    # the parent, while the child's collector frees another store that became garbage in the
    # parent (SQLite before the fix: 315 of 400 stored, and no call raised).
    assert FORK is not None
    shared_store.append("warm", [HumanMessage("opened in the parent")])  # a live connection
    gc.collect()
    gc.disable()  # from here to the fork, so that the garbage store reaches the children
    try:
        garbage = reopen(shared_store)
        garbage.append("warm", [AIMessage("garbage store, used once")])
        cycle: list[object] = [garbage]
        cycle.append(cycle)  # only the cyclic collector frees it: in each child
        del garbage, cycle
        workers, count = 4, 100
        procs = [FORK.Process(target=_forked_writer, args=(shared_store, w, count)) for w in range(workers)]
        for p in procs:
            p.start()
    finally:
        gc.enable()
    deadline = time.monotonic() + 60
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = [p for p in procs if p.exitcode is None]
    for p in hung:  # a stuck child must fail the test, not hang the run at exit
        p.kill()
        p.join()
    texts = [str(r.message.content) for r in shared_store.read("forked")]
    exits = [p.exitcode for p in procs]
    figures = _report(
        "forked-writers", shared_store, tries=workers * count, stored=len(texts), hung=len(hung)
    )
    assert not hung, f"{len(hung)} of {workers} workers hung ({figures})"
    assert exits == [0] * workers, figures
    assert len(texts) == workers * count, f"{len(texts)} of {workers * count} messages stored"
    for w in range(workers):
        mine = [t for t in texts if t.startswith(f"w{w}:")]
        assert mine == [f"w{w}:{k}" for k in range(count)], f"worker {w} lost or reordered messages"
    # The parent's own store still works after its children wrote through copies of it.
    shared_store.append("warm", [HumanMessage("parent after the fork")])
    assert shared_store.read("warm")[-1].message.content == "parent after the fork"


def _fds_on(path: str) -> int:
    """How many file descriptors of this process are open on `path` (Linux: /proc)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == path
        except OSError:  # the descriptor listing the folder itself, already closed
            continue
    return count


def _sqlite_child(store: RollingStore, path: str, report: Connection) -> None:
    inherited = _fds_on(path)
    gc.collect()  # frees the parent's garbage store here, in the child
    after_collect = _fds_on(path)
    store.append("child", [HumanMessage("written by the child")])
    report.send((inherited, after_collect, _fds_on(path)))
    os._exit(0)


@pytest.mark.skipif(FORK is None or not os.path.isdir("/proc/self/fd"), reason="needs fork() and /proc")
def test_a_forked_child_opens_its_own_sqlite_connection_and_never_closes_the_inherited_ones(
    tmp_path: Path,
) -> None:
    # Closing an inherited SQLite connection in the child drops the child's POSIX locks on the
    # file (they are per process), under the child's own connection: the 315-of-400 defect.
    assert FORK is not None
    path = str(tmp_path / "fork.db")
    live = SQLiteRollingStore(path)
    live.append("warm", [HumanMessage("opened in the parent")])
    garbage = SQLiteRollingStore(path)
    garbage.append("warm", [AIMessage("garbage store, used once")])
    cycle: list[object] = [garbage]
    cycle.append(cycle)
    del garbage, cycle
    gc.disable()  # keep the garbage for the child's collector
    try:
        ours, theirs = FORK.Pipe()
        child = FORK.Process(target=_sqlite_child, args=(live, path, theirs))
        child.start()
        inherited, after_collect, own = ours.recv()
        child.join(30)
    finally:
        gc.enable()
    assert child.exitcode == 0
    assert after_collect == inherited, "the child's collector closed a connection inherited from the parent"
    assert own == inherited + 1, "the child wrote through the parent's connection instead of its own"
    assert [str(r.message.content) for r in live.read("child")] == ["written by the child"]
    live.close()


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
    installed = record is not None and "1234" in record.text
    _report("clear-during-compaction", store, tries=1, erased_summary_installed=installed)
    assert record is None or "1234" not in record.text, f"the erased summary was installed: {record}"
    assert [str(r.message.content) for r in store.read("s")][-1] == "hello again"
