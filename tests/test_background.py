"""Background compaction: the turn never waits, nothing is missing, one compaction at a time.

Every wait here is on an event's state (a summarizer gated on `threading.Event`), never on
elapsed time: "the turn returned while the summarizer was still blocked" is read from the
gate, so the tests are neither slow nor flaky on a loaded machine.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_rolling_memory import (
    InMemoryRollingStore,
    RollingSummaryChatMessageHistory,
    SQLiteRollingStore,
)
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, summary_text
from langchain_rolling_memory.runtime.background import Workers, call_with_timeout
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.summarizers import SummaryResult

GATE_TIMEOUT = 20.0
"""How long a gated summarizer waits before giving up (only reached when a test fails)."""


class Gate:
    """A summarizer that blocks until `release` is set, and records what it was asked."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append((previous, [m.text for m in messages]))
        self.entered.set()
        self.release.wait(GATE_TIMEOUT)
        self.finished.set()
        return f"summary {len(self.calls)} of {len(messages)}"


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{i}"), AIMessage(f"a{i}")]


def history(
    store: RollingStore, gate: Any, session_id: str = "s", **options: Any
) -> RollingSummaryChatMessageHistory:
    options = {"max_turns": 4, "keep_last": 2, "background": True, **options}
    return RollingSummaryChatMessageHistory(session_id, summarizer=gate, store=store, **options)


def test_the_turn_that_crosses_the_threshold_returns_while_the_summarizer_is_blocked(
    store: RollingStore,
) -> None:
    gate = Gate()
    h = history(store, gate)
    h.add_messages(turn(0))
    h.add_messages(turn(1))
    assert not gate.entered.is_set()  # 4 messages: not over max_turns=4
    h.add_messages(turn(2))  # 6 > 4: schedules and returns
    assert gate.entered.wait(GATE_TIMEOUT), "the compaction was never started"
    assert not gate.finished.is_set(), "add_messages waited for the summarizer"
    assert texts(h.messages) == ["q0", "a0", "q1", "a1", "q2", "a2"]  # nothing missing meanwhile
    assert h.summary == ""
    gate.release.set()
    assert h.flush(timeout=GATE_TIMEOUT)
    assert h.summary == "summary 1 of 4"
    assert gate.calls == [("", ["q0", "a0", "q1", "a1"])]
    fresh = history(store, gate)
    assert fresh.messages[0].id == SUMMARY_MESSAGE_ID
    assert texts(fresh.messages[1:]) == ["q2", "a2"]
    assert len(h.transcript) == 6


def test_while_a_compaction_runs_the_view_is_the_old_summary_and_every_unsummarized_message(
    store: RollingStore,
) -> None:
    gate = Gate()
    gate.release.set()
    h = history(store, gate)
    for i in range(3):
        h.add_messages(turn(i))
    assert h.flush(timeout=GATE_TIMEOUT)
    gate.release.clear()
    gate.entered.clear()
    for i in range(3, 5):
        h.add_messages(turn(i))  # tail q2..a4 = 6 > 4: second compaction, blocked
    assert gate.entered.wait(GATE_TIMEOUT)
    view = h.messages
    assert view[0].id == SUMMARY_MESSAGE_ID
    assert summary_text(view[0]) == "summary 1 of 4"  # quoted in the message (issue 12, defect 8)
    assert texts(view[1:]) == ["q2", "a2", "q3", "a3", "q4", "a4"]
    assert texts(history(store, gate).messages[1:]) == texts(view[1:])  # same from a fresh object
    gate.release.set()
    assert h.flush(timeout=GATE_TIMEOUT)
    assert gate.calls[1] == ("summary 1 of 4", ["q2", "a2", "q3", "a3"])


def test_a_second_trigger_while_one_runs_does_not_start_another(store: RollingStore) -> None:
    gate = Gate()
    h = history(store, gate)
    for i in range(3):
        h.add_messages(turn(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    other = history(store, gate)  # another history object of the same store and session
    for i in range(3, 6):
        other.add_messages(turn(i))  # due again at every turn
        h.add_messages([HumanMessage(f"extra{i}")])
    assert len(gate.calls) == 1
    gate.release.set()
    assert h.flush(timeout=GATE_TIMEOUT)
    assert len(gate.calls) == 1
    h.add_messages([HumanMessage("next")])  # still due: now a new compaction may start
    assert h.flush(timeout=GATE_TIMEOUT)
    assert len(gate.calls) == 2
    assert len(h.transcript) == 6 + 6 + 3 + 1


def test_a_background_summary_is_installed_with_compare_and_swap(store: RollingStore) -> None:
    gate = Gate()
    h = history(store, gate)
    for i in range(3):
        h.add_messages(turn(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    # Another process installs its summary while ours is being written.
    assert store.install_summary("s", "theirs", covered_seq=4, expected_version=0)
    gate.release.set()
    assert h.flush(timeout=GATE_TIMEOUT)
    record = store.summary("s")
    assert record is not None
    assert (record.text, record.version) == ("theirs", 1)


def test_flush_without_pending_work_returns_at_once(store: RollingStore) -> None:
    h = history(store, Gate())
    h.add_messages(turn(0))
    assert h.flush(timeout=0) is True


def test_flush_reports_work_still_running_after_its_timeout(store: RollingStore) -> None:
    gate = Gate()
    h = history(store, gate)
    for i in range(3):
        h.add_messages(turn(i))
    assert gate.entered.wait(GATE_TIMEOUT)
    assert h.flush(timeout=0) is False
    gate.release.set()
    assert h.flush(timeout=GATE_TIMEOUT) is True


class AsyncGate:
    """An async summarizer gated on an asyncio event (created on the test's loop)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.finished = False
        self.calls = 0

    async def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        self.finished = True
        return f"async summary of {len(messages)}"


async def test_async_turn_returns_while_the_summarizer_task_waits(store: RollingStore) -> None:
    gate = AsyncGate()
    h = history(store, gate)
    for i in range(3):
        await h.aadd_messages(turn(i))
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    assert not gate.finished
    assert texts(await h.aget_messages()) == ["q0", "a0", "q1", "a1", "q2", "a2"]
    for i in range(3, 5):
        await h.aadd_messages(turn(i))  # due again: no second task
    assert gate.calls == 1
    gate.release.set()
    assert await h.aflush(timeout=GATE_TIMEOUT)
    assert await h.asummary() == "async summary of 4"


async def test_sync_flush_on_the_loop_thread_of_a_pending_task_refuses_to_block(store: RollingStore) -> None:
    gate = AsyncGate()
    h = history(store, gate)
    for i in range(3):
        await h.aadd_messages(turn(i))
    await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    with pytest.raises(RuntimeError, match="aflush"):
        h.flush()
    gate.release.set()
    assert await h.aflush(timeout=GATE_TIMEOUT)


class LoopBoundSummarizer:
    """Hangs when awaited (the loop will close under it), answers when called from a thread."""

    def __init__(self) -> None:
        self.awaited = threading.Event()
        self.sync_calls = 0

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        self.sync_calls += 1
        return SummaryResult(f"finished on a thread: {len(messages)}")

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        self.awaited.set()
        await asyncio.Event().wait()  # never set
        raise AssertionError("unreachable")


@pytest.fixture(params=["memory", "sqlite"])
def local_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RollingStore]:
    """An embedded store: the tests below close event loops on purpose, and a server
    backend's async connections belong to the loop that opened them."""
    backend = InMemoryRollingStore() if request.param == "memory" else SQLiteRollingStore(tmp_path / "m.db")
    yield backend
    backend.close()


def test_a_task_cut_short_by_the_loop_closing_is_finished_on_a_worker_thread(
    local_store: RollingStore,
) -> None:
    store = local_store
    summarizer = LoopBoundSummarizer()
    h = history(store, summarizer)

    async def app() -> None:
        for i in range(3):
            await h.aadd_messages(turn(i))
        await asyncio.to_thread(summarizer.awaited.wait, GATE_TIMEOUT)
        # returning now: asyncio.run cancels the compaction task while it is in flight

    asyncio.run(app())
    assert h.flush(timeout=GATE_TIMEOUT)
    assert summarizer.awaited.is_set()
    assert summarizer.sync_calls == 1
    assert h.summary == "finished on a thread: 4"
    record = store.summary("s")
    assert record is not None
    assert record.covered_seq == 4


def test_a_task_that_never_started_before_the_loop_closed_still_lands(local_store: RollingStore) -> None:
    store = local_store
    summarizer = LoopBoundSummarizer()
    h = history(store, summarizer)

    async def app() -> None:
        for i in range(3):
            await h.aadd_messages(turn(i))  # the task is created, the loop closes at once

    asyncio.run(app())
    assert h.flush(timeout=GATE_TIMEOUT)
    assert h.summary == "finished on a thread: 4"


# ---------------------------------------------------------------- RunnableWithMessageHistory


@pytest.mark.parametrize("reuse", [False, True], ids=["new-history-per-call", "one-history-reused"])
def test_a_background_compaction_landing_mid_call_neither_duplicates_nor_drops(
    store: RollingStore, reuse: bool
) -> None:
    gate = Gate()
    cache: dict[str, RollingSummaryChatMessageHistory] = {}

    def get_history(session_id: str) -> RollingSummaryChatMessageHistory:
        if not reuse:
            return history(store, gate, session_id)
        return cache.setdefault(session_id, history(store, gate, session_id))

    prompts: list[list[str]] = []

    def model(messages: list[BaseMessage]) -> AIMessage:
        prompts.append(texts(messages))
        if len(prompts) == 4:
            # The call is in progress (the view was read): let the compaction land now.
            assert gate.entered.is_set()
            assert not gate.finished.is_set()
            gate.release.set()
            assert history(store, gate, "mid").flush(timeout=GATE_TIMEOUT)
            assert store.summary("mid") is not None
        return AIMessage(f"a{len(prompts)}")

    chain = RunnableWithMessageHistory(RunnableLambda(model), get_history)
    for i in range(1, 4):
        chain.invoke([HumanMessage(f"q{i}")], config={"configurable": {"session_id": "mid"}})
    assert gate.entered.wait(GATE_TIMEOUT)  # the third turn crossed max_turns=4
    chain.invoke([HumanMessage("q4")], config={"configurable": {"session_id": "mid"}})

    assert texts(store.transcript("mid")) == ["q1", "a1", "q2", "a2", "q3", "a3", "q4", "a4"]
    assert prompts[3] == ["q1", "a1", "q2", "a2", "q3", "a3", "q4"]  # the old view, complete
    assert gate.calls == [("", ["q1", "a1", "q2", "a2"])]
    view = get_history("mid").messages
    assert view[0].id == SUMMARY_MESSAGE_ID
    assert texts(view[1:]) == ["q3", "a3", "q4", "a4"]


async def test_an_async_background_compaction_landing_mid_call_neither_duplicates_nor_drops(
    store: RollingStore,
) -> None:
    gate = AsyncGate()
    prompts: list[list[str]] = []

    async def model(messages: list[BaseMessage]) -> AIMessage:
        prompts.append(texts(messages))
        if len(prompts) == 4:
            assert gate.entered.is_set()
            assert not gate.finished
            gate.release.set()
            assert await history(store, gate, "amid").aflush(timeout=GATE_TIMEOUT)
            assert gate.finished
        return AIMessage(f"a{len(prompts)}")

    chain = RunnableWithMessageHistory(RunnableLambda(model), lambda sid: history(store, gate, sid))
    for i in range(1, 5):
        await chain.ainvoke([HumanMessage(f"q{i}")], config={"configurable": {"session_id": "amid"}})
        if i == 3:
            await asyncio.wait_for(gate.entered.wait(), GATE_TIMEOUT)
    assert texts(await store.atranscript("amid")) == ["q1", "a1", "q2", "a2", "q3", "a3", "q4", "a4"]
    assert prompts[3] == ["q1", "a1", "q2", "a2", "q3", "a3", "q4"]
    assert await store.asummary("amid") is not None


# ---------------------------------------------------------------- interpreter exit

_EXIT_SCRIPT = """
import sys, threading, time
from langchain_core.messages import AIMessage, HumanMessage
from langchain_rolling_memory import RollingSummaryChatMessageHistory, SQLiteRollingStore

mode = sys.argv[2]
started = threading.Event()

def summarizer(previous, messages):
    started.set()
    if mode == "hang":
        threading.Event().wait()  # never returns
    time.sleep(0.2)  # still running when the main thread ends
    return f"landed after exit: {len(messages)}"

store = SQLiteRollingStore(sys.argv[1])
history = RollingSummaryChatMessageHistory(
    "s", summarizer=summarizer, store=store, max_turns=4, keep_last=2, background=True,
    timeout=None, exit_timeout=1.0 if mode == "hang" else 30.0,
)
for i in range(3):
    history.add_messages([HumanMessage(f"q{i}"), AIMessage(f"a{i}")])
started.wait()
print("main thread done", flush=True)
"""


def _run_exit_script(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(_EXIT_SCRIPT))
    # The package under test (this checkout) comes first on the child's path.
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "m.db"), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a guard against a hang, not a speed assertion
        check=False,
    )


def test_interpreter_exit_waits_for_a_pending_background_compaction(tmp_path: Path) -> None:
    done = _run_exit_script(tmp_path, "slow")
    assert done.returncode == 0, done.stderr
    assert "main thread done" in done.stdout
    with SQLiteRollingStore(tmp_path / "m.db") as store:
        record = store.summary("s")
        assert record is not None
        assert record.text == "landed after exit: 4"
        assert len(store.transcript("s")) == 6


def test_interpreter_exit_does_not_hang_on_a_hung_summarizer(tmp_path: Path) -> None:
    done = _run_exit_script(tmp_path, "hang")
    assert done.returncode == 0, done.stderr
    assert "did not finish before exit" in done.stderr
    with SQLiteRollingStore(tmp_path / "m.db") as store:
        assert store.summary("s") is None
        assert len(store.transcript("s")) == 6  # nothing lost


# ---------------------------------------------------------------- the threads underneath


def test_call_with_timeout_gives_up_on_a_hung_call_without_blocking() -> None:
    never = threading.Event()
    with pytest.raises(TimeoutError, match=r"timeout=0\.05"):
        call_with_timeout(never.wait, 0.05)
    never.set()


def test_call_with_timeout_passes_results_and_errors_through() -> None:
    assert call_with_timeout(lambda: 42, 10) == 42
    with pytest.raises(ZeroDivisionError):
        call_with_timeout(lambda: 1 / 0, 10)


def test_workers_drain_reports_work_still_running_past_its_exit_timeout() -> None:
    pool = Workers(size=2, name="test-workers")
    release = threading.Event()
    quick = pool.submit(lambda: "done", exit_timeout=10)
    stuck = pool.submit(lambda: release.wait(GATE_TIMEOUT), exit_timeout=0)
    assert quick.result(timeout=GATE_TIMEOUT) == "done"
    assert pool.drain() == [stuck]
    release.set()
    assert stuck.result(timeout=GATE_TIMEOUT) is True
    assert pool.drain() == []
    assert pool.pending == 0


def test_busy_workers_do_not_starve_the_summarizers_they_wait_for(store: RollingStore) -> None:
    # Each background compaction waits for its summarizer under a timeout; if the summarizer
    # ran on the same bounded pool, four busy compactions would wait for it forever.
    gates = [Gate() for _ in range(4)]
    histories = [history(store, gate, f"busy{i}", timeout=60.0) for i, gate in enumerate(gates)]
    for h in histories:
        for i in range(3):
            h.add_messages(turn(i))
    assert all(gate.entered.wait(GATE_TIMEOUT) for gate in gates)
    for gate in gates:
        gate.release.set()
    assert all(h.flush(timeout=GATE_TIMEOUT) for h in histories)
    assert [h.summary for h in histories] == ["summary 1 of 4"] * 4
