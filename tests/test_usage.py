"""Usage accounting: each compaction's summarizer cost is recorded and readable per session."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingStore, RollingSummaryChatMessageHistory, SummaryUsage
from langchain_rolling_memory.summarizers import SummaryResult


def _turns(n: int, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(start, start + n):
        out += [HumanMessage(f"question {i} " + "word " * 20), AIMessage(f"answer {i} " + "word " * 20)]
    return out


def _billed(previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
    return SummaryResult(f"{len(messages)} folded", input_tokens=1000, output_tokens=50, calls=2)


def test_counters_add_up_over_compactions_on_every_backend(store: RollingStore) -> None:
    history = RollingSummaryChatMessageHistory(
        "s-usage", summarizer=_billed, store=store, max_turns=4, keep_last=2
    )
    assert store.usage("s-usage") == SummaryUsage()
    history.add_messages(_turns(3))
    history.add_messages(_turns(3, start=3))
    usage = store.usage("s-usage")
    assert usage.compactions == usage.summarizer_calls == 2
    assert usage.model_calls == 4
    assert (usage.input_tokens, usage.output_tokens, usage.summarizer_tokens) == (2000, 100, 2100)
    assert usage.folded_messages == len(history.transcript) - (len(history.messages) - 1)
    assert usage.folded_tokens > usage.summary_tokens > 0
    assert usage.saved_tokens_per_call == usage.folded_tokens - usage.summary_tokens
    assert history.usage == usage


async def test_async_usage_reads_the_same_counters(store: RollingStore) -> None:
    history = RollingSummaryChatMessageHistory(
        "s-ausage", summarizer=_billed, store=store, max_turns=4, keep_last=2
    )
    await history.aadd_messages(_turns(3))
    assert await history.ausage() == await store.ausage("s-ausage") == store.usage("s-ausage")
    assert store.usage("s-ausage").summarizer_calls == 1


def test_tokens_are_counted_when_the_summarizer_does_not_report_them() -> None:
    history = RollingSummaryChatMessageHistory(
        "s-count", summarizer=lambda p, m: "short summary", max_turns=4, keep_last=2
    )
    history.add_messages(_turns(3))
    usage = history.usage
    assert (usage.summarizer_calls, usage.model_calls) == (1, 1)
    assert usage.input_tokens > 40  # the folded messages were counted
    assert usage.output_tokens > 0


def test_counters_round_trip_through_meta_and_keep_the_other_keys() -> None:
    usage = SummaryUsage(1, 2, 3, 4, 5, 6, 7, 8)
    meta = usage.to_meta({"sections": ["Topic 1: x"]})
    assert meta["sections"] == ["Topic 1: x"]
    assert meta["summarizer_input_tokens"] == 4 and meta["summarizer_output_tokens"] == 5
    assert SummaryUsage.from_meta(meta) == usage


def test_added_counts_one_compaction_and_replaces_the_summary_size() -> None:
    before = SummaryUsage(compactions=1, summarizer_calls=1, model_calls=2, summary_tokens=40)
    after = before.added(
        model_calls=3,
        input_tokens=100,
        output_tokens=10,
        folded_messages=4,
        folded_tokens=90,
        summary_tokens=30,
    )
    assert after == SummaryUsage(2, 2, 5, 100, 10, 4, 90, 30)


def test_a_malformed_meta_reads_as_zero() -> None:
    assert SummaryUsage.from_meta({"compactions": "3", "folded_tokens": True}) == SummaryUsage()
    assert SummaryUsage.from_meta(None) == SummaryUsage()
