"""Several real processes (spawned) on one session: nothing lost or doubled, one summary per window."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import store_url
from store_workers import (
    RecordingSummarizer,
    append_worker,
    compact_worker,
    facts_worker,
    hanging_compactor,
    read_lines,
    turns_worker,
)

from langchain_rolling_memory import Compactor
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.summarizers import as_summarizer

CTX = multiprocessing.get_context("spawn")


def _run_all(procs: list[Any], start: Any) -> None:
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(procs)


def _fill(store: RollingStore, session_id: str, n: int) -> None:
    store.append(
        session_id, [HumanMessage(f"m{i}") if i % 2 else AIMessage(f"m{i}") for i in range(1, n + 1)]
    )


def test_concurrent_appenders_lose_and_duplicate_nothing_and_keep_each_writers_order(
    shared_store: RollingStore,
) -> None:
    url, writers, count = store_url(shared_store), 3, 40
    start = CTX.Event()
    procs = [
        CTX.Process(target=append_worker, args=(url, "shared", f"w{w}", count, start)) for w in range(writers)
    ]
    _run_all(procs, start)
    rows = shared_store.read("shared")
    assert [r.seq for r in rows] == list(range(1, writers * count + 1))
    texts = [str(r.message.content) for r in rows]
    assert len(set(texts)) == len(texts) == writers * count
    for w in range(writers):
        mine = [t for t in texts if t.startswith(f"w{w}:")]
        assert mine == [f"w{w}:{k}" for k in range(count)]
    assert shared_store.sessions("client-1") == ["shared"]


def test_the_summarizer_runs_once_per_window_across_processes(
    shared_store: RollingStore, tmp_path: Path
) -> None:
    _fill(shared_store, "s1", 13)  # max_turns=12: one compaction is due
    calls = str(tmp_path / "calls.txt")
    start = CTX.Event()
    procs = [
        CTX.Process(target=compact_worker, args=(store_url(shared_store), "s1", calls, start, 0.5))
        for _ in range(3)
    ]
    _run_all(procs, start)
    assert len(read_lines(calls)) == 1
    record = shared_store.summary("s1")
    assert record is not None
    assert (record.version, record.covered_seq) == (1, 7)
    assert record.meta["summarizer_calls"] == 1


def test_concurrent_turns_call_the_summarizer_once_per_installed_summary(
    shared_store: RollingStore, tmp_path: Path
) -> None:
    calls = str(tmp_path / "calls.txt")
    start = CTX.Event()
    url, writers, turns = store_url(shared_store), 3, 12
    procs = [
        CTX.Process(target=turns_worker, args=(url, "chat", f"w{w}", turns, calls, start))
        for w in range(writers)
    ]
    _run_all(procs, start)
    record = shared_store.summary("chat")
    assert record is not None
    assert len(read_lines(calls)) == record.version == record.meta["summarizer_calls"]
    rows = shared_store.read("chat")
    assert [r.seq for r in rows] == list(range(1, writers * turns * 2 + 1))
    texts = [str(r.message.content) for r in rows]
    for w in range(writers):
        mine = [t for t in texts if t.startswith(f"w{w}:")]
        assert mine == [f"w{w}:{kind}{k}" for k in range(turns) for kind in ("q", "a")]
    assert all(r.tokens is not None for r in rows), "token counts are stored with each message"


def test_a_killed_compactor_blocks_the_session_only_until_its_lease_expires(
    shared_store: RollingStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(shared_store, "s1", 13)
    calls = str(tmp_path / "calls.txt")
    child = CTX.Process(target=hanging_compactor, args=(store_url(shared_store), "s1", calls, 30.0))
    child.start()
    try:
        for _ in range(600):  # the child holds the lease once its summarizer has been called
            if read_lines(calls) or not child.is_alive():
                break
            time.sleep(0.1)
        assert read_lines(calls), "the child compactor never reached its summarizer"
    finally:
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert shared_store.summary("s1") is None, "no half-written summary"
    assert [r.seq for r in shared_store.read("s1")] == list(range(1, 14))

    compactor = Compactor(
        shared_store,
        as_summarizer(RecordingSummarizer(calls)),
        FoldPolicy(max_turns=12, keep_last=6),
        timeout=None,
    )
    assert compactor.compact("s1") is None, "the dead compactor's lease still holds"
    assert len(read_lines(calls)) == 1
    later = time.time() + 31  # past the lease: the session is not blocked any more
    monkeypatch.setattr(shared_store, "_now", lambda: later)
    result = compactor.compact("s1")
    assert result is not None
    assert (result.version, result.covered_seq) == (1, 7)
    assert len(read_lines(calls)) == 2


def test_processes_adding_the_same_facts_store_each_once(shared_store: RollingStore) -> None:
    start = CTX.Event()
    url, writers = store_url(shared_store), 3
    procs = [
        CTX.Process(target=facts_worker, args=(url, "client-1", f"w{w}", 40, start)) for w in range(writers)
    ]
    _run_all(procs, start)
    facts = shared_store.facts("client-1")
    unkeyed = sorted(f.text for f in facts if f.key is None)
    assert unkeyed == sorted(f"Fact number {k}" for k in range(40))
    assert sorted(f.key for f in facts if f.key is not None) == sorted(f"key-{k}" for k in range(40))
