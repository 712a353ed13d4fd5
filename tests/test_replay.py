"""Replaying a conversation under several strategies: what each sends and what memory costs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from langchain_rolling_memory_lab.conversations import ConversationMessage
from langchain_rolling_memory_lab.replay import Strategy, default_strategies, replay


def _talk(n: int, *, session: str = "s1", client: str = "c1") -> list[ConversationMessage]:
    return [
        ConversationMessage(
            "user" if i % 2 == 0 else "assistant",
            f"Message {i}: we agreed to ship order {i} on Friday because the budget allows it.",
            session,
            client,
        )
        for i in range(n)
    ]


def test_full_buffer_sends_every_earlier_message_of_the_session() -> None:
    report = replay(_talk(6), strategies=[Strategy("full", "full")])
    full = report.result("full")
    assert full.requests == 3
    sizes = [n for _, n in full.request_sizes]
    assert sizes == sorted(sizes)
    assert len(set(sizes)) == 3
    # Each request extends the previous one, so all of the previous request is a cacheable prefix.
    assert full.cacheable_tokens == sum(sizes[:-1])


def test_window_requests_stop_growing_once_the_window_is_full() -> None:
    report = replay(_talk(60), strategies=[Strategy("window", "window", window=4)])
    sizes = [n for _, n in report.result("window").request_sizes]
    assert max(sizes[5:]) - min(sizes[5:]) <= 2


def test_summary_strategy_calls_the_summarizer_in_batches_and_counts_its_tokens() -> None:
    seen: list[int] = []

    def summarizer(previous: str, messages: Sequence[BaseMessage]) -> str:
        seen.append(len(messages))
        return f"{previous} folded {len(messages)}".strip()

    report = replay(
        _talk(40),
        strategies=[Strategy("summary", "summary", max_turns=8, keep_last=4)],
        summarizer=summarizer,
    )
    result = report.result("summary")
    assert result.summarizer_calls == len(seen) > 0
    assert all(n >= 4 for n in seen)
    assert result.summarizer_tokens > 0
    assert result.total_tokens == result.input_tokens + result.summarizer_tokens


def test_summary_beats_the_full_buffer_on_a_long_conversation_and_reports_break_even() -> None:
    report = replay(_talk(200))
    full, summary = report.result("full"), report.result("summary")
    assert summary.total_tokens < full.total_tokens
    even = report.break_even("summary")
    assert even is not None
    assert 1 < even < 200
    # From the break-even on, the summary strategy costs less, memory included.
    assert all(
        s < f for s, f in zip(summary.cumulative[even - 1 :], full.cumulative[even - 1 :], strict=False)
    )
    assert summary.cumulative[even - 2] >= full.cumulative[even - 2]


def test_break_even_is_none_when_summarizing_never_pays() -> None:
    report = replay(
        _talk(14),
        strategies=[Strategy("full", "full"), Strategy("summary", "summary", max_turns=4, keep_last=2)],
        summarizer=lambda previous, messages: "x " * 100,
    )
    assert report.break_even("summary") is None


def test_only_facts_cross_sessions() -> None:
    first = [
        ConversationMessage("user", "I have a severe peanut allergy.", "s1", "sam"),
        ConversationMessage("assistant", "Noted.", "s1", "sam"),
    ]
    second = [
        ConversationMessage("user", "What should I order?", "s2", "sam"),
        ConversationMessage("assistant", "Something safe.", "s2", "sam"),
    ]
    report = replay(first + second)
    facts, summary = report.result("summary+facts"), report.result("summary")
    assert facts.facts == 1
    # The second session's request carries the fact block only in the facts strategy.
    assert facts.request_sizes[-1][1] > summary.request_sizes[-1][1]
    assert report.result("full").request_sizes[-1][1] == summary.request_sizes[-1][1]


def test_rows_give_one_entry_per_strategy_with_savings_against_the_full_buffer() -> None:
    report = replay(_talk(80))
    rows = {row["strategy"]: row for row in report.rows()}
    assert list(rows) == [s.name for s in default_strategies()]
    assert rows["full"]["saved_vs_full"] is None
    saved = rows["summary"]["saved_vs_full"]
    assert isinstance(saved, float)
    assert 0 < saved < 1


def test_progress_is_reported_after_each_message() -> None:
    calls: list[tuple[int, int]] = []
    replay(_talk(10), on_progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 10) for i in range(1, 11)]


def test_replay_needs_a_strategy() -> None:
    with pytest.raises(ValueError, match="at least one strategy"):
        replay(_talk(2), strategies=[])


def test_a_keyless_summary_is_billed_as_an_llm_would_be_billed() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from langchain_rolling_memory import extractive_summarizer
    from langchain_rolling_memory.core.cuts import count_tokens
    from langchain_rolling_memory.core.prompts import default_prompt
    from langchain_rolling_memory.core.summary_result import SummaryResult
    from langchain_rolling_memory.summarizers.estimated import EstimatedCostSummarizer

    folded = [HumanMessage("My budget is 800 euros and I deliver on Saturdays."), AIMessage("Noted.")]
    billed = EstimatedCostSummarizer(extractive_summarizer(max_words=40), max_words=40)
    result = billed.summarize("", folded)
    request = default_prompt().messages("", folded, max_words=40)
    assert result.calls == 1
    assert result.input_tokens == count_tokens(request)
    assert result.output_tokens == count_tokens([AIMessage(result.text)])
    assert billed.estimated_tokens == result.input_tokens + result.output_tokens

    recorded = EstimatedCostSummarizer(extractive_summarizer(max_words=40), max_words=40, record_only=True)
    untouched = recorded.summarize("", folded)
    assert (untouched.calls, untouched.input_tokens, untouched.output_tokens) == (0, 0, 0)
    assert recorded.estimated_tokens == billed.estimated_tokens

    class Billed:
        def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
            return SummaryResult("from a model", 11, 3, calls=1)

        async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
            return self.summarize(previous, messages)

    real = EstimatedCostSummarizer(Billed())
    assert real.summarize("", folded) == SummaryResult("from a model", 11, 3, calls=1)
    assert real.estimated_tokens == 0
