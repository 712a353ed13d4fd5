"""The engine's own contract, on the in-memory store: when it compacts, what it folds, how it fails."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, summary_text
from langchain_rolling_memory.core.records import CompactionResult, SessionState
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.stores.memory import InMemoryRollingStore

SESSION = "s-engine"


class RecordingSummarizer:
    """Records exactly what each call was asked to fold; `fail` calls raise first."""

    def __init__(self, fail: int = 0, during: Callable[[], None] | None = None) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.fail = fail
        self.during = during

    def _answer(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        self.calls.append((previous, [str(m.content) for m in messages]))
        if self.during is not None:
            self.during()
        if len(self.calls) <= self.fail:
            msg = f"summarizer down (call {len(self.calls)})"
            raise ConnectionError(msg)
        return SummaryResult(f"summary {len(self.calls)}", input_tokens=10, output_tokens=2)

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return self._answer(previous, messages)

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return self._answer(previous, messages)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def turns(n: int, start: int = 1) -> list[BaseMessage]:
    return [(HumanMessage if i % 2 else AIMessage)(f"m{i}") for i in range(start, start + n)]


def compactor(
    summarizer: RecordingSummarizer,
    *,
    max_turns: int = 4,
    keep_last: int = 2,
    hard_cap: int | None = None,
    **options: Any,
) -> Compactor:
    policy = FoldPolicy(max_turns=max_turns, keep_last=keep_last, hard_cap=hard_cap)
    return Compactor(InMemoryRollingStore(), summarizer, policy, start_delay=0, **options)


def seen(state: SessionState) -> tuple[Any, ...]:
    """What a state shows (its record's and its messages' wall-clock dates aside)."""
    meta = state.record.meta if state.record else {}
    tail = [(m.seq, m.message, m.tokens) for m in state.tail]
    return (state.summary, state.covered_seq, state.version, meta, tail, state.truncated)


def write(engine: Compactor, messages: list[BaseMessage]) -> SessionState:
    engine.store.append(SESSION, messages)
    return engine.load(SESSION)


@pytest.mark.parametrize(
    ("written", "due"),
    [(0, 0), (3, 0), (4, 0), (5, 3), (7, 5)],
    ids=["empty", "under", "at-max-turns", "one-over-folds-all-but-keep-last", "three-over"],
)
def test_due_follows_the_count_policy(written: int, due: int) -> None:
    engine = compactor(RecordingSummarizer())
    state = write(engine, turns(written)) if written else engine.load(SESSION)
    assert engine.due(state) == due


def test_one_summarizer_call_folds_exactly_the_due_batch() -> None:
    summarizer = RecordingSummarizer()
    engine = compactor(summarizer)
    result = engine.compact(SESSION, write(engine, turns(5)))
    assert summarizer.calls == [("", ["m1", "m2", "m3"])]
    assert result is not None
    assert (result.folded, result.covered_seq, result.version, result.summary) == (3, 3, 1, "summary 1")
    assert [m.content for m in result.messages] == ["m1", "m2", "m3"]
    assert engine.compact(SESSION) is None  # nothing due any more
    assert len(summarizer.calls) == 1
    usage = engine.store.usage(SESSION)
    assert (usage.compactions, usage.folded_messages, usage.input_tokens) == (1, 3, 10)


def test_the_next_batch_is_folded_into_the_previous_summary() -> None:
    summarizer = RecordingSummarizer()
    engine = compactor(summarizer)
    engine.compact(SESSION, write(engine, turns(5)))
    engine.compact(SESSION, write(engine, turns(3, start=6)))
    assert summarizer.calls[1] == ("summary 1", ["m4", "m5", "m6"])
    assert engine.store.usage(SESSION).compactions == 2


def test_a_failed_summarizer_changes_nothing_backs_off_and_succeeds_later() -> None:
    clock, errors = Clock(), []
    summarizer = RecordingSummarizer(fail=1)
    engine = compactor(summarizer, clock=clock, backoff=2.0, on_error=lambda s, e: errors.append((s, e)))
    state = write(engine, turns(5))
    assert engine.compact(SESSION, state) is None
    assert engine.store.summary(SESSION) is None
    assert len(engine.store.transcript(SESSION)) == 5
    assert [(s, type(e)) for s, e in errors] == [(SESSION, ConnectionError)]
    assert engine.in_backoff(SESSION)
    assert engine.compact(SESSION, state) is None  # still backing off: the summarizer is not called
    assert len(summarizer.calls) == 1
    clock.now += 2.0
    result = engine.compact(SESSION, state)
    assert result is not None and result.summary == "summary 2"
    assert summarizer.calls[1] == ("", ["m1", "m2", "m3"])
    assert not engine.in_backoff(SESSION)


def test_a_compare_and_swap_lost_to_a_concurrent_install_installs_nothing() -> None:
    store = InMemoryRollingStore()

    def another_process_installs() -> None:
        store.install_summary(SESSION, "theirs", covered_seq=3, expected_version=0, meta={})

    summarizer = RecordingSummarizer(during=another_process_installs)
    engine = Compactor(store, summarizer, FoldPolicy(max_turns=4, keep_last=2))
    assert engine.compact(SESSION, write(engine, turns(5))) is None
    record = store.summary(SESSION)
    assert record is not None and (record.text, record.version, record.covered_seq) == ("theirs", 1, 3)
    assert store.usage(SESSION).compactions == 0
    assert not engine.in_backoff(SESSION)  # losing a race is not a failure


def test_advance_inline_folds_the_result_into_the_state_it_returns() -> None:
    summarizer = RecordingSummarizer()
    engine = compactor(summarizer)
    before = write(engine, turns(4))
    rows = engine.store.append(SESSION, turns(1, start=5))
    appended = [engine.load(SESSION).tail[-1]]
    assert [r.seq for r in appended] == rows
    state = engine.advance(SESSION, before, appended=appended)
    assert summarizer.calls == [("", ["m1", "m2", "m3"])]
    assert seen(state) == seen(engine.load(SESSION))
    view = engine.view(state)
    assert view[0].id == SUMMARY_MESSAGE_ID and summary_text(view[0]) == "summary 1"
    assert [m.content for m in view[1:]] == ["m4", "m5"]


def test_advance_in_the_background_returns_the_state_at_once_and_the_summary_lands() -> None:
    summarizer = RecordingSummarizer()
    engine = compactor(summarizer)
    engine.store.append(SESSION, turns(5))
    state = engine.advance(SESSION, background=True)
    assert state.summary == "" and len(state.tail) == 5
    assert engine.flush(SESSION, timeout=10)
    assert summarizer.calls == [("", ["m1", "m2", "m3"])]
    assert engine.load(SESSION).summary == "summary 1"


def test_advance_does_nothing_while_in_back_off() -> None:
    summarizer = RecordingSummarizer(fail=1)
    engine = compactor(summarizer, clock=Clock())
    engine.store.append(SESSION, turns(5))
    engine.advance(SESSION)
    state = engine.advance(SESSION)
    assert len(summarizer.calls) == 1
    assert state.summary == "" and len(state.tail) == 5


def test_the_view_falls_back_to_a_window_past_the_hard_cap(caplog: pytest.LogCaptureFixture) -> None:
    engine = compactor(RecordingSummarizer(fail=10**6), hard_cap=6, clock=Clock())
    engine.store.append(SESSION, turns(7))
    state = engine.advance(SESSION)
    assert engine.store.summary(SESSION) is None
    with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
        view = engine.view(state)
    # The last max_turns (m4-m7), starting on a user message (m4 is the model's).
    assert [m.content for m in view] == ["m5", "m6", "m7"]
    assert "falls back to a plain window" in caplog.text


def _result_fields(result: CompactionResult | None) -> tuple[Any, ...]:
    assert result is not None
    return (
        result.folded,
        result.covered_seq,
        result.version,
        result.summary,
        result.messages,
        dict(result.meta),
    )


async def test_the_sync_and_async_twins_fold_and_install_the_same() -> None:
    sync_summarizer, async_summarizer = RecordingSummarizer(), RecordingSummarizer()
    sync_engine, async_engine = compactor(sync_summarizer), compactor(async_summarizer)
    for start in (1, 6, 9):
        batch = turns(5 if start == 1 else 3, start=start)
        sync_engine.store.append(SESSION, batch)
        await async_engine.store.aappend(SESSION, batch)
        done_sync = sync_engine.compact(SESSION)
        done_async = await async_engine.acompact(SESSION)
        assert _result_fields(done_sync) == _result_fields(done_async)
    assert sync_summarizer.calls == async_summarizer.calls
    assert seen(sync_engine.load(SESSION)) == seen(await async_engine.aload(SESSION))
    sync_engine.store.append(SESSION, turns(3, start=12))
    await async_engine.store.aappend(SESSION, turns(3, start=12))
    assert seen(sync_engine.advance(SESSION)) == seen(await async_engine.aadvance(SESSION))
