"""A turn costs one tail read: the view after a write is built from what was read, and is
exactly what a fresh read would give (other writers, compactions and clears included)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, WindowedChatMessageHistory
from langchain_rolling_memory.stores import RollingStore


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{previous[:40]} + {len(messages)} folded".strip()


def dump(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    return [(type(m).__name__, m.text) for m in messages]


Factory = Callable[[RollingStore], Any]

KINDS: dict[str, Factory] = {
    "rolling-count": lambda store: RollingSummaryChatMessageHistory(
        "s", summarizer=summarize, store=store, max_turns=6, keep_last=2
    ),
    "rolling-tokens": lambda store: RollingSummaryChatMessageHistory(
        "s", summarizer=summarize, store=store, max_turns=None, max_tokens=80, keep_tokens=30
    ),
    "window-count": lambda store: WindowedChatMessageHistory("s", store=store, max_messages=5),
    "window-tokens": lambda store: WindowedChatMessageHistory(
        "s", store=store, max_messages=None, max_tokens=60
    ),
}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_after_every_write_the_view_equals_a_fresh_read(store: RollingStore, kind: str, seed: int) -> None:
    make = KINDS[kind]
    rng = random.Random(seed)
    writers = [make(store), make(store)]  # two objects on one session: interleaved writers
    for step in range(40):
        writer = rng.choice(writers)
        if rng.random() < 0.3:
            writer.messages  # noqa: B018 - a read at the start of a call, as RunnableWithMessageHistory does
        if rng.random() < 0.03:
            writer.clear()
        batch: list[BaseMessage] = [HumanMessage(f"q{step} " + "word " * rng.randint(0, 12))]
        if rng.random() < 0.8:
            batch.append(AIMessage(f"a{step} " + "word " * rng.randint(0, 12)))
        writer.add_messages(batch)
        assert dump(writer.messages) == dump(make(store).messages), f"step {step}"


class Reads:
    """Counts a store's reads by primitive; a primitive called by another counts once, as the outer."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: RollingStore) -> None:
        self.counts = {"read": 0, "get_summary": 0, "summary_and_tail": 0}
        self._depth = 0
        for name in self.counts:
            monkeypatch.setattr(store.backend, name, self._wrap(name, getattr(store.backend, name)))
        # The append that brings the summary back with it (one round trip) reads the summary.
        appended = self._wrap("get_summary", store.backend.append_and_summary)
        monkeypatch.setattr(store.backend, "append_and_summary", appended)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            # A one-row read (after a compaction, the check that the folded messages are
            # still in the transcript) is not a read of the tail.
            single = name == "read" and len(args) > 2 and args[2] == 1
            # The re-read under a compaction's lease (`read_turn(limit=0)`: the summary record
            # and the erase generation, no row) is a summary read, not a read of the tail.
            head = name == "summary_and_tail" and len(args) > 1 and args[1] == 0
            self.counts["get_summary" if head else name] += self._depth == 0 and not single
            self._depth += 1
            try:
                return original(*args)
            finally:
                self._depth -= 1

        return counted

    @property
    def tail(self) -> int:
        return self.counts["read"] + self.counts["summary_and_tail"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_turn_reads_the_tail_once(store: RollingStore, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make = KINDS[kind]
    seed = make(store)
    for i in range(3):
        seed.add_messages([HumanMessage(f"q{i}"), AIMessage(f"a{i}")])
    reads = Reads(monkeypatch, store)
    for i in range(3, 12):  # compactions included
        history = make(store)  # a new object per call, as a history factory gives
        history.messages  # noqa: B018 - the read at the start of a call
        history.add_messages([HumanMessage(f"q{i}"), AIMessage(f"a{i}")])
        assert reads.tail == i - 2, f"turn {i}"


def test_a_rolling_turn_reads_the_tail_once_and_never_recounts_tokens(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted: list[str] = []

    def counter(messages: Sequence[BaseMessage]) -> int:
        counted.extend(m.text for m in messages)
        return sum(len(m.text) for m in messages)

    def make() -> RollingSummaryChatMessageHistory:
        return RollingSummaryChatMessageHistory(
            "s", summarizer=summarize, store=store, max_turns=None, max_tokens=40, token_counter=counter
        )

    reads = Reads(monkeypatch, store)
    for i in range(10):
        history = make()
        history.messages  # noqa: B018
        history.add_messages([HumanMessage(f"question {i}"), AIMessage(f"answer {i}")])
    counts = dict(reads.counts, tail=reads.tail)
    record = store.summary("s")
    assert record is not None
    # The read at the start of each call, and one after the first append, which created the
    # session's row: the state read before it had no erase generation to plan a write from.
    assert counts["tail"] == 10 + 1
    # One summary-only read after each write, and one under the lease of each compaction.
    assert counts["get_summary"] == 10 + record.version
    # Each message is counted when it is written, and once more as part of the input of the
    # summarizer call that folds it (this summarizer reports no usage): never per turn.
    transcript = [m.text for m in store.transcript("s")]
    for seq, text in enumerate(transcript, start=1):
        assert counted.count(text) == (2 if seq <= record.covered_seq else 1), text
