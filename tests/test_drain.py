"""Shutting down: drain the background compactions, then close; a closed store is never touched.

The report: a 3 s summarizer, 30 users and a stop right after the traffic. Closing the store in
a FastAPI lifespan gave 30 tracebacks ("could not release the lease ... is closed") and saved
0 of 30 summaries. Here the summarizer is gated on an event instead of slow, so that the jobs
are in flight when the drain or the close comes, whatever the machine's load; a real SQLite
file holds the data and is read raw to prove that nothing is written after the close.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import _probe, unique_prefix
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from memory_fakes import raw_dump
from store_kit import POSTGRES_URL, wipe

from langchain_rolling_memory import (
    Drained,
    RollingSummaryChatMessageHistory,
    SQLiteRollingStore,
    with_rolling_memory,
)
from langchain_rolling_memory.core.records import CompactionResult
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.background import jobs_of
from langchain_rolling_memory.summarizers import SummaryResult

SESSIONS = 30
GATE_TIMEOUT = 20.0
"""How long a gated call waits before giving up (only reached when a test fails)."""


class Gate:
    """A summarizer blocked until `release` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.entered.set()
        self.release.wait(GATE_TIMEOUT)
        return f"summary of {len(messages)} messages"


class AsyncGate:
    """An async summarizer blocked until `release` is set (events of the test's loop)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.entered.set()
        await self.release.wait()
        return f"async summary of {len(messages)} messages"


def turns(session: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{session}"), AIMessage("a"), HumanMessage("more"), AIMessage("b")]


def histories(
    store: SQLiteRollingStore, summarizer: Any, **options: Any
) -> list[RollingSummaryChatMessageHistory]:
    return [
        RollingSummaryChatMessageHistory(
            f"s{i}",
            client_id=f"c{i}",
            store=store,
            summarizer=summarizer,
            max_turns=2,
            keep_last=1,
            background=True,
            **options,
        )
        for i in range(SESSIONS)
    ]


def summaries(path: Path) -> list[str | None]:
    with SQLiteRollingStore(path) as store:
        return [(s.text if (s := store.summary(f"s{i}")) else None) for i in range(SESSIONS)]


def loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------------- drain, then close


def test_drain_then_close_installs_every_pending_summary_and_its_extraction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = Gate()
    extracted: list[str] = []

    def extract(result: CompactionResult) -> None:  # stands for the fact extractor
        store.set_state(result.session_id, {"extracted": True}, client_id=f"c{result.session_id[1:]}")
        extracted.append(result.session_id)

    chats = histories(store, gate, on_compaction=extract)
    for i, chat in enumerate(chats):
        chat.add_messages(turns(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    gate.release.set()
    drained = chats[0].compactor.drain(timeout=GATE_TIMEOUT)
    store.close()
    assert drained.pending == 0 and drained.finished >= 1
    assert all(text is not None for text in summaries(tmp_path / "m.db"))
    assert sorted(extracted) == sorted(f"s{i}" for i in range(SESSIONS))
    assert loud(caplog) == []


async def test_adrain_then_aclose_installs_every_pending_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = AsyncGate()
    chats = histories(store, gate)
    for i, chat in enumerate(chats):
        await chat.aadd_messages(turns(i))
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    gate.release.set()
    drained = await chats[0].compactor.adrain(timeout=GATE_TIMEOUT)
    await store.aclose()
    assert drained == Drained(finished=drained.finished, pending=0) and drained.finished >= 1
    assert all(text is not None for text in summaries(tmp_path / "m.db"))
    assert loud(caplog) == []


def test_a_drain_that_times_out_says_how_many_jobs_still_run(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = Gate()
    chats = histories(store, gate)[:3]
    for i, chat in enumerate(chats):
        chat.add_messages(turns(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    try:
        assert chats[0].compactor.drain(timeout=0) == Drained(finished=0, pending=3)
    finally:
        gate.release.set()
    assert chats[0].compactor.drain(timeout=GATE_TIMEOUT) == Drained(finished=3, pending=0)
    assert chats[0].compactor.drain(timeout=0) == Drained(finished=0, pending=0)  # nothing left
    store.close()


@pytest.mark.parametrize("timeout", [-1, float("nan"), "20", True])
def test_a_drain_refuses_a_timeout_that_is_not_seconds(tmp_path: Path, timeout: Any) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    chain = _chain(store, Gate())
    with pytest.raises(ConfigurationError, match=r"timeout must be a number of seconds >= 0 or None"):
        chain.drain(timeout=timeout)
    with pytest.raises(ConfigurationError, match=r"got"):
        asyncio.run(chain.adrain(timeout=timeout))
    store.close()


async def test_a_sync_drain_on_the_loop_thread_of_pending_tasks_refuses_to_block(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = AsyncGate()
    chat = histories(store, gate)[0]
    await chat.aadd_messages(turns(0))
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    with pytest.raises(RuntimeError, match="adrain"):
        chat.compactor.drain(timeout=GATE_TIMEOUT)
    gate.release.set()
    assert await chat.compactor.adrain(timeout=GATE_TIMEOUT) == Drained(finished=1, pending=0)
    await store.aclose()


# ---------------------------------------------------------------------- close without a drain


def test_closing_under_pending_compactions_drops_them_with_one_line_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a traceback per job in flight ("could not release the lease"), an ERROR per
    session for the queued ones."""
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = Gate()
    chats = histories(store, gate)
    for i, chat in enumerate(chats):
        chat.add_messages(turns(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    store.close()
    at_close = raw_dump(store)
    gate.release.set()
    jobs = jobs_of(store)  # the existing per-session wait: the test also runs on the code before
    assert all(jobs.flush(f"s{i}", GATE_TIMEOUT) for i in range(SESSIONS))
    assert raw_dump(store) == at_close
    said = loud(caplog)
    assert [r for r in said if r.exc_info] == []
    assert [r.levelname for r in said] == ["WARNING"], [r.getMessage() for r in said]
    assert "closed" in said[0].getMessage() and "drain" in said[0].getMessage()


def test_an_extraction_cut_by_the_close_is_dropped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    inside, release = threading.Event(), threading.Event()

    def extract(result: CompactionResult) -> None:
        inside.set()
        release.wait(GATE_TIMEOUT)
        store.add_fact(f"c{result.session_id[1:]}", "likes tea")

    chat = histories(store, lambda previous, messages: "a summary of the talk", on_compaction=extract)[0]
    chat.add_messages(turns(0))
    assert inside.wait(GATE_TIMEOUT)
    store.close()
    at_close = raw_dump(store)
    release.set()
    assert jobs_of(store).flush("s0", GATE_TIMEOUT)
    assert raw_dump(store) == at_close
    said = loud(caplog)
    assert [r for r in said if r.exc_info] == [], [r.getMessage() for r in said]
    assert len(said) == 1 and "closed" in said[0].getMessage()


async def test_aclosing_under_pending_compaction_tasks_drops_them_with_one_line_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = AsyncGate()
    chats = histories(store, gate)
    for i, chat in enumerate(chats):
        await chat.aadd_messages(turns(i))
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    await store.aclose()
    at_close = raw_dump(store)
    gate.release.set()
    jobs = jobs_of(store)
    assert all([await jobs.aflush(f"s{i}", GATE_TIMEOUT) for i in range(SESSIONS)])
    assert raw_dump(store) == at_close
    said = loud(caplog)
    assert [r for r in said if r.exc_info] == []
    assert [r.levelname for r in said] == ["WARNING"], [r.getMessage() for r in said]


# ---------------------------------------------------------------------- from the adapters


def _chain(store: SQLiteRollingStore, summarizer: Any) -> Any:
    return with_rolling_memory(
        RunnableLambda(lambda messages: AIMessage("ok")),
        store=store,
        summarizer=summarizer,
        max_turns=2,
        keep_last=1,
        background=True,
    )


def _ask(chain: Any, session: int) -> None:
    config = {"configurable": {"client_id": f"c{session}", "session_id": f"s{session}"}}
    for text in ("q", "more"):
        chain.invoke([HumanMessage(text)], config=config)


def test_the_runnable_drains_the_compactions_of_its_store(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = Gate()
    chain = _chain(store, gate)
    for i in range(3):
        _ask(chain, i)
    assert gate.entered.wait(GATE_TIMEOUT)
    assert chain.drain(timeout=0) == Drained(finished=0, pending=3)
    gate.release.set()
    assert chain.drain(timeout=GATE_TIMEOUT) == Drained(finished=3, pending=0)
    store.close()
    assert summaries(tmp_path / "m.db")[:3] == ["summary of 2 messages"] * 3


async def test_the_runnable_adrains_the_compaction_tasks_of_its_store(tmp_path: Path) -> None:
    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = AsyncGate()
    chain = _chain(store, gate)
    for i in range(3):
        config = {"configurable": {"client_id": f"c{i}", "session_id": f"s{i}"}}
        for text in ("q", "more"):
            await chain.ainvoke([HumanMessage(text)], config=config)
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    gate.release.set()
    assert (await chain.adrain(timeout=GATE_TIMEOUT)).pending == 0
    await store.aclose()
    assert summaries(tmp_path / "m.db")[:3] == ["async summary of 2 messages"] * 3


def test_the_middleware_drains_the_compactions_of_its_store(tmp_path: Path) -> None:
    from agent_models import ScriptedChatModel
    from langchain.agents import create_agent

    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

    store = SQLiteRollingStore(tmp_path / "m.db")
    gate = Gate()
    memory = RollingMemoryMiddleware(store=store, summarizer=gate, max_turns=2, keep_last=1, background=True)
    agent = create_agent(ScriptedChatModel(), [], middleware=[memory])
    for i in range(3):
        config = {"configurable": {"thread_id": f"s{i}", "client_id": f"c{i}"}}
        for text in ("q", "more"):
            agent.invoke({"messages": [HumanMessage(text)]}, config=config)
    assert gate.entered.wait(GATE_TIMEOUT)
    assert memory.drain(timeout=0).pending >= 1
    gate.release.set()
    assert memory.drain(timeout=GATE_TIMEOUT).pending == 0
    assert asyncio.run(memory.adrain(timeout=0)) == Drained(finished=0, pending=0)
    store.close()
    assert all(text is not None for text in summaries(tmp_path / "m.db")[:3])


# ---------------------------------------------------------------------- the loop ends first


class SyncAfterLoop:
    """A summarizer whose async call never answers (the loop ends under it) and whose sync
    call answers at once (the worker thread that finishes a cancelled task's compaction)."""

    def __init__(self, calls: int) -> None:
        self.calls, self.all_in = calls, asyncio.Event()

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return SummaryResult(f"finished on a thread: {len(messages)} messages")

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        self.calls -= 1
        if self.calls == 0:  # every task waits here, none in the middle of a statement
            self.all_in.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_loop_ending_under_compaction_tasks_hands_them_to_threads_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``asyncio.run`` ends (a server stopping, no drain) with PostgreSQL compaction tasks in
    flight: each cancelled task's lease release found the loop's pool closed and logged a
    traceback ("could not release the lease"); the work still lands on worker threads."""
    _probe("postgres")
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    store = PostgresRollingStore(POSTGRES_URL, table_prefix=unique_prefix(), pool_size=2)
    sessions = 3
    try:
        summarizer = SyncAfterLoop(sessions)
        chats = [
            RollingSummaryChatMessageHistory(
                f"s{i}", store=store, summarizer=summarizer, max_turns=2, keep_last=1, background=True
            )
            for i in range(sessions)
        ]

        async def traffic() -> None:
            for i, chat in enumerate(chats):
                await chat.aadd_messages(turns(i))
            await asyncio.wait_for(summarizer.all_in.wait(), GATE_TIMEOUT)

        asyncio.run(traffic())
        assert chats[0].compactor.drain(timeout=GATE_TIMEOUT).pending == 0
        got = [s.text if (s := store.summary(f"s{i}")) else None for i in range(sessions)]
        assert got == ["finished on a thread: 2 messages"] * sessions
        # Ours only: psycopg_pool may warn of a connection attempt the loop's end cut short
        # (the pool was growing for the concurrent tasks).
        ours = [r for r in loud(caplog) if r.name == "langchain_rolling_memory"]
        assert [r.getMessage() for r in ours] == []
    finally:
        store.close()
        wipe(store)
