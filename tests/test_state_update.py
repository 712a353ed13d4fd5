"""`update_state` and the compare-and-swap of `set_state` (`expected=`), on all four backends.

The promise: an erase (`clear_session`, `forget`) is never undone by a state update planned
from a read made before it: the backend compares the state read with the session's in the
same statement, script or transaction as the owner check and the write, and the update is
planned again from a fresh read when it changed. Checked here one primitive at a time, with
the erase injected between the read and the write (sync and async), racing in threads against
the `update_session_state` tool, and from forked processes updating one state at once (no
update lost). `tests/test_store_model.py` interleaves it with every other call.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from typing import Any

import pytest
from store_kit import backend_name, reopen
from test_store_races import ROUNDS, _arace, _race

from langchain_rolling_memory import RollingStore
from langchain_rolling_memory.adapters.memory_tools import TOOL_BUILDERS
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError

FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


# ---------------------------------------------------------------------- the primitive


def test_set_state_writes_only_over_the_state_expected(store: RollingStore) -> None:
    backend = store._sync
    assert backend.set_state("s1", "c1", '{"a": 1}', 1.0, expected=None) is True
    assert backend.set_state("s1", "c1", '{"b": 2}', 1.0, expected=None) is False
    assert backend.set_state("s1", "c1", '{"b": 2}', 1.0, expected='{"x": 0}') is False
    assert backend.set_state("s1", "c1", '{"b": 2}', 1.0, expected='{"a": 1}') is True
    with pytest.raises(OwnershipError):  # the owner's refusal wins over a mismatch
        backend.set_state("s1", "c2", "{}", 1.0, expected='{"x": 0}')
    with pytest.raises(OwnershipError):
        backend.set_state("s1", None, "{}", 1.0, expected='{"b": 2}')
    assert backend.set_state("s1", "c1", '{"c": 3}', 1.0) is True  # unchecked, as before
    assert store.get_state("s1") == {"c": 3}
    assert store.sessions("c1") == ["s1"]


async def test_async_set_state_writes_only_over_the_state_expected(store: RollingStore) -> None:
    backend = store._async
    assert await backend.set_state("s1", None, '{"a": 1}', 1.0, expected=None) is True
    assert await backend.set_state("s1", "c1", '{"b": 2}', 1.0, expected=None) is False
    assert await backend.set_state("s1", "c1", '{"b": 2}', 1.0, expected='{"a": 1}') is True  # adopts
    with pytest.raises(OwnershipError):
        await backend.set_state("s1", "c2", "{}", 1.0, expected='{"b": 2}')
    assert await store.aget_state("s1") == {"b": 2}
    assert await store.asessions("c1") == ["s1"]


def test_a_state_expected_absent_is_written_on_a_session_with_no_state(store: RollingStore) -> None:
    from langchain_core.messages import HumanMessage

    store.append("s1", [HumanMessage("hello")], client_id="c1")
    assert store._sync.set_state("s1", "c1", '{"k": 1}', 1.0, expected='{"k": 0}') is False
    assert store._sync.set_state("s1", "c1", '{"k": 1}', 1.0, expected=None) is True
    assert store.get_state("s1") == {"k": 1}
    assert [r.message.content for r in store.read("s1")] == ["hello"]
    store.clear_session("s1")
    assert store._sync.set_state("s1", "c1", '{"k": 2}', 1.0, expected='{"k": 1}') is False
    assert store._sync.get_session("s1") is None  # a lost compare creates no session row


# ---------------------------------------------------------------------- update_state


async def test_update_state_merges_and_a_none_value_deletes(store: RollingStore) -> None:
    assert store.update_state("s1", {"a": 1, "b": [1]}, client_id="c1") == {"a": 1, "b": [1]}
    assert store.update_state("s1", {"a": None, "c": "é"}, client_id="c1") == {"b": [1], "c": "é"}
    assert await store.aupdate_state("s1", {"b": None, "d": 1.5}, client_id="c1") == {"c": "é", "d": 1.5}
    assert store.get_state("s1", client_id="c1") == {"c": "é", "d": 1.5}
    with pytest.raises(OwnershipError):
        store.update_state("s1", {"x": 1}, client_id="c2")
    with pytest.raises(OwnershipError):
        await store.aupdate_state("s1", {"x": 1})
    assert store.get_state("s1") == {"c": "é", "d": 1.5}


@pytest.mark.parametrize("erase", ["clear_session", "forget"])
async def test_an_async_update_planned_before_an_erase_never_writes_the_erased_state(
    store: RollingStore, erase: str
) -> None:
    await store.aset_state("s1", {"card": "4111"}, client_id="ana")
    backend = store._async
    real = backend.get_state

    async def read_then_erased(session_id: str, reader: Any = None) -> str | None:
        raw = await real(session_id, reader)
        del backend.get_state  # once
        if erase == "clear_session":
            await store.aclear_session("s1")
        else:
            await store.aforget("ana")
        return raw

    backend.get_state = read_then_erased  # type: ignore[method-assign]
    try:
        assert await store.aupdate_state("s1", {"city": "Lyon"}, client_id="ana") == {"city": "Lyon"}
    finally:
        backend.__dict__.pop("get_state", None)
    assert await store.aget_state("s1", client_id="ana") == {"city": "Lyon"}


def test_update_state_gives_up_after_losing_every_race(store: RollingStore) -> None:
    store.set_state("s1", {"n": 0}, client_id="c1")
    backend = store._sync
    real = backend.get_state
    reads = []

    def read_then_changed(session_id: str, reader: Any = None) -> str | None:
        raw = real(session_id, reader)
        reads.append(raw)
        store.set_state("s1", {"n": len(reads)}, client_id="c1")
        return raw

    backend.get_state = read_then_changed  # type: ignore[method-assign]
    try:
        with pytest.raises(StaleWriteError):
            store.update_state("s1", {"x": 1}, client_id="c1")
    finally:
        backend.__dict__.pop("get_state", None)
    assert store.get_state("s1") == {"n": len(reads)}


# ---------------------------------------------------------------------- races


def _erasing(erase: str, leaks: list[object]) -> Any:
    """The eraser's step: put a secret key in alice's state, erase, then check that no secret
    key is there (only this step writes them, and it has just erased them all)."""

    def step(other: RollingStore, i: int) -> None:
        with contextlib.suppress(StaleWriteError):
            other.update_state("s", {f"secret{i}": "4111"}, client_id="alice")
        if erase == "clear_session":
            other.clear_session("s")
        else:
            other.forget("alice")
        found = [k for k in other.get_state("s") if k.startswith("secret")]
        if found:
            leaks.append((i, found))

    return step


@pytest.mark.parametrize("erase", ["clear_session", "forget"])
def test_the_state_tool_racing_an_erase_never_writes_an_erased_key_back(
    store: RollingStore, erase: str
) -> None:
    store.set_state("s", {"probe": 0}, client_id="alice")
    tool = TOOL_BUILDERS["update_session_state"](store, "alice", "s")
    leaks: list[object] = []
    counter = iter(range(10**9))

    def probe() -> None:
        tool.invoke({"updates": {"probe": next(counter)}})

    _race(store, _erasing(erase, leaks), probe)
    assert leaks == []
    assert not [k for k in store.get_state("s") if k.startswith("secret")]


@pytest.mark.parametrize("erase", ["clear_session", "forget"])
async def test_the_async_state_tool_racing_an_erase_never_writes_an_erased_key_back(
    store: RollingStore, erase: str
) -> None:
    await store.aset_state("s", {"probe": 0}, client_id="alice")
    tool = TOOL_BUILDERS["update_session_state"](store, "alice", "s")
    leaks: list[object] = []
    counter = iter(range(10**9))

    async def probe() -> None:
        await tool.ainvoke({"updates": {"probe": next(counter)}})

    await _arace(store, _erasing(erase, leaks), probe)
    assert leaks == []
    assert not [k for k in (await store.aget_state("s")) if k.startswith("secret")]


def test_updates_racing_each_other_lose_no_key(store: RollingStore) -> None:
    """Each thread (its own store object on the servers) updates its own key: every one's
    last value is there at the end (a read-merge-write without the compare loses some)."""
    workers = 3
    others = [store if backend_name(store) == "memory" else reopen(store) for _ in range(workers)]
    failures: list[BaseException] = []

    def work(w: int) -> None:
        try:
            for k in range(ROUNDS):
                others[w].update_state("s", {f"w{w}": k}, client_id="c")
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for other in others:
            if other is not store:
                other.close()
    assert failures == []
    assert store.get_state("s") == {f"w{w}": ROUNDS - 1 for w in range(workers)}


def _forked_updater(store: RollingStore, worker: int, count: int) -> None:
    # The store object was opened by the parent before the fork, as gunicorn --preload does.
    try:
        for k in range(count):
            store.update_state("forked", {f"w{worker}": k}, client_id="c")
    except BaseException:
        os._exit(3)
    os._exit(0)


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_forked_workers_updating_one_state_lose_no_key(shared_store: RollingStore) -> None:
    assert FORK is not None
    shared_store.set_state("forked", {}, client_id="c")  # a live connection in the parent
    workers, count = 3, 20
    procs = [FORK.Process(target=_forked_updater, args=(shared_store, w, count)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    hung = [p for p in procs if p.exitcode is None]
    for p in hung:  # a stuck child must fail the test, not hang the run at exit
        p.kill()
        p.join()
    assert not hung
    assert [p.exitcode for p in procs] == [0] * workers
    assert shared_store.get_state("forked") == {f"w{w}": count - 1 for w in range(workers)}
