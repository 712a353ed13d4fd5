"""A plain-function summarizer is held to the check a chat model's reply is (issue 24, item 3):
an answer empty once cleaned, or under its `min_words`, is asked for once more; a second such
answer is a `SummarizerError`, reported and backed off the usual way, and nothing of it is
installed, on every backend. What the function raises is not retried by the summarizer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingStore, RollingSummaryChatMessageHistory
from langchain_rolling_memory.errors import ConfigurationError, SummarizerError
from langchain_rolling_memory.summarizers import FunctionSummarizer, SummaryResult, as_summarizer

# Lesson 2's example: "Client mécontent." is under 20 words and asked for again.
SHORT = "Client mécontent."
GOOD = (
    "Ana Ruiz, cliente à Lyon, est mécontente de sa livraison du samedi ; elle cherche un "
    "créneau le matin, et l'assistant lui propose un avoir ou une nouvelle livraison."
)
FOLDED: list[BaseMessage] = [
    HumanMessage("Je suis Ana Ruiz, ma livraison de samedi n'est jamais arrivée."),
    AIMessage("Je suis désolé, je regarde ce qui s'est passé."),
]


@dataclass
class Answers:
    """A summary function answering from a list (the last answer repeated), counting its calls."""

    answers: list[str]
    calls: list[int] = field(default_factory=list)

    def __call__(self, previous: str, messages: list[BaseMessage]) -> str:
        self.calls.append(len(messages))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


@pytest.mark.parametrize(
    ("answers", "min_words", "calls", "text"),
    [
        pytest.param([GOOD], 20, 1, GOOD, id="long-enough-once"),
        pytest.param([SHORT, GOOD], 20, 2, GOOD, id="short-then-good"),
        pytest.param(["", GOOD], 0, 2, GOOD, id="empty-then-good"),
        pytest.param(["## Résumé", GOOD], 0, 2, GOOD, id="title-only-then-good"),
        pytest.param([SHORT], 0, 1, SHORT, id="short-accepted-without-minimum"),
        pytest.param([SHORT], 2, 1, SHORT, id="exactly-the-minimum"),
    ],
)
def test_a_functions_answer_is_checked_and_asked_for_once_more(
    answers: list[str], min_words: int, calls: int, text: str
) -> None:
    fn = Answers(answers)
    result = FunctionSummarizer(fn, min_words=min_words).summarize("", FOLDED)
    assert (result.text, result.calls, len(fn.calls)) == (text, calls, calls)


@pytest.mark.parametrize(
    ("answers", "min_words", "error"),
    [
        pytest.param([SHORT, SHORT], 20, r"answered 2 words twice .*under min_words=20", id="short-twice"),
        pytest.param(["", "  "], 0, r"returned nothing usable twice", id="empty-twice"),
        pytest.param([SHORT, ""], 20, r"returned nothing usable twice", id="short-then-empty"),
    ],
)
def test_a_second_unusable_answer_is_a_summarizer_error(
    answers: list[str], min_words: int, error: str
) -> None:
    fn = Answers(answers)
    with pytest.raises(SummarizerError, match=error):
        FunctionSummarizer(fn, min_words=min_words).summarize("", FOLDED)
    assert len(fn.calls) == 2


def test_the_minimum_is_never_more_than_the_word_cap() -> None:
    fn = Answers([SHORT])
    assert FunctionSummarizer(fn, min_words=20, max_words=2).summarize("", FOLDED).text == SHORT
    assert len(fn.calls) == 1


def test_a_structured_answer_is_judged_by_its_fields() -> None:
    def structured(previous: str, messages: list[BaseMessage]) -> SummaryResult:
        return SummaryResult("Sujet : livraison.", fields={"topic": "livraison"})

    result = FunctionSummarizer(structured, min_words=20).summarize("", FOLDED)
    assert (result.text, result.calls) == ("Sujet : livraison.", 1)


def test_what_the_function_raises_is_not_retried_by_the_summarizer() -> None:
    calls: list[int] = []

    def failing(previous: str, messages: list[BaseMessage]) -> str:
        calls.append(1)
        raise ValueError("the CRM is down")

    with pytest.raises(ValueError, match="the CRM is down"):
        FunctionSummarizer(failing).summarize("", FOLDED)
    assert calls == [1]


async def test_the_async_twin_checks_sync_and_async_functions_alike() -> None:
    fn = Answers([SHORT, GOOD])
    result = await FunctionSummarizer(fn, min_words=20).asummarize("", FOLDED)
    assert (result.text, result.calls, len(fn.calls)) == (GOOD, 2, 2)

    answers = iter(["", ""])

    async def empty(previous: str, messages: list[BaseMessage]) -> str:
        await asyncio.sleep(0)
        return next(answers)

    with pytest.raises(SummarizerError, match="nothing usable twice"):
        await FunctionSummarizer(empty).asummarize("", FOLDED)
    assert next(answers, "used up") == "used up"


def test_a_plain_function_given_as_summarizer_is_held_to_a_non_empty_answer() -> None:
    wrapped = as_summarizer(Answers(["x"]), max_words=50)
    assert isinstance(wrapped, FunctionSummarizer)
    assert (wrapped.min_words, wrapped.max_words) == (0, 50)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        pytest.param(
            {"min_words": -1}, r"min_words must not be negative.*got min_words=-1", id="negative-min"
        ),
        pytest.param({"max_words": 0}, r"max_words must be positive, got max_words=0", id="zero-cap"),
    ],
)
def test_bad_word_limits_are_refused(options: dict[str, int], error: str) -> None:
    with pytest.raises(ConfigurationError, match=error):
        FunctionSummarizer(Answers([GOOD]), **options)  # type: ignore[arg-type]


# ---------------------------------------------------------------- through the memory, every backend


def _history(
    store: RollingStore, summarizer: object, errors: list[BaseException]
) -> RollingSummaryChatMessageHistory:
    return RollingSummaryChatMessageHistory(
        "validated",
        store=store,
        summarizer=summarizer,  # type: ignore[arg-type]
        max_turns=2,
        keep_last=1,
        language="fr",
        on_error=lambda session_id, exc: errors.append(exc),
    )


@pytest.mark.parametrize(
    ("build", "answers"),
    [
        pytest.param(lambda fn: fn, ["", ""], id="plain-function-empty-twice"),
        pytest.param(
            lambda fn: FunctionSummarizer(fn, min_words=20), [SHORT, SHORT], id="validated-short-twice"
        ),
    ],
)
def test_an_unusable_answer_twice_installs_nothing_and_loses_nothing(
    store: RollingStore,
    build: Callable[[Answers], object],
    answers: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fn = Answers(answers)
    errors: list[BaseException] = []
    history = _history(store, build(fn), errors)
    with caplog.at_level(logging.ERROR, logger="langchain_rolling_memory"):
        history.add_messages([*FOLDED, HumanMessage("Pouvez-vous me rappeler ?")])
    assert len(fn.calls) == 2, "asked once more, then reported"
    assert [type(e) for e in errors] == [SummarizerError]
    assert "compaction of session 'validated' failed" in caplog.text
    assert store.summary("validated") is None
    assert [m.message.text for m in store.read("validated")] == [
        *(m.text for m in FOLDED),
        "Pouvez-vous me rappeler ?",
    ]


async def test_a_short_answer_then_a_good_one_installs_the_good_one(store: RollingStore) -> None:
    fn = Answers([SHORT, GOOD])
    errors: list[BaseException] = []
    history = _history(store, FunctionSummarizer(fn, min_words=20), errors)
    await history.aadd_messages([*FOLDED, HumanMessage("Pouvez-vous me rappeler ?")])
    summary = await store.asummary("validated")
    assert summary is not None and summary.text == GOOD
    assert (errors, len(fn.calls)) == ([], 2)
