"""The summarizer contract: anything that turns (previous summary, messages) into summary text.

Owns the interface (sync and async twins), how a summarizer takes the memory's language and
token cap (`in_memory_language`, `in_memory`) and when an answer is good enough to keep
(`usable_summary`, lesson 2's validation, shared by the summarizers that ask again); what a
summary result is (`SummaryResult`, re-exported here) is the pure `core.summary_result`,
turning functions and chat models into it is `coerce`. Does not decide when to summarize
(engine) nor where to store (stores).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from langchain_rolling_memory.core.prompts import check_max_words, clean_summary
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.errors import ConfigurationError


@runtime_checkable
class Summarizer(Protocol):
    """The interface the engine calls; build one with `as_summarizer`."""

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult: ...

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult: ...


# The messages are passed as a `list`: a function typed with ``list[BaseMessage]`` (or
# ``Sequence[BaseMessage]``) is accepted by mypy --strict.
SummaryFunction = Callable[[str, list[BaseMessage]], str | SummaryResult]
AsyncSummaryFunction = Callable[[str, list[BaseMessage]], Awaitable[str | SummaryResult]]
SummarizerLike = Union[
    Summarizer, BaseChatModel, str, Runnable[Any, Any], SummaryFunction, AsyncSummaryFunction
]
"""What ``summarizer=`` takes: see `as_summarizer`."""


def in_memory_language(summarizer: Summarizer, language: str) -> Summarizer:
    """`summarizer` as a memory in `language` uses it.

    The memory's language applies to a summarizer built without one: the built-in summarizers
    (`chat_model_summarizer`, `openai_summarizer`, `gemini_summarizer`, `extractive_summarizer`,
    a Runnable's) take ``language=None`` by default, and their ``with_language(language)``
    returns a copy in the memory's language. One given a language explicitly keeps it
    (``with_language`` returns it unchanged); so does any summarizer without ``with_language``
    (a plain function writes its own text).
    """
    method = getattr(summarizer, "with_language", None)
    if not callable(method):
        return summarizer
    localized: Summarizer = method(language)
    return localized


def in_memory(summarizer: Summarizer, language: str, max_summary_tokens: int | None) -> Summarizer:
    """`summarizer` as a memory in `language` whose summaries are capped at `max_summary_tokens`
    uses it: `in_memory_language`, then the cap stated in its prompt when it has one
    (``with_token_cap``; a summarizer given its own cap keeps it)."""
    localized = in_memory_language(summarizer, language)
    method = getattr(localized, "with_token_cap", None)
    if max_summary_tokens is None or not callable(method):
        return localized
    capped: Summarizer = method(max_summary_tokens)
    return capped


def as_result(value: object) -> SummaryResult:
    if isinstance(value, SummaryResult):
        return value
    if isinstance(value, str):
        return SummaryResult(value)
    if value is None:
        return SummaryResult("")
    msg = f"a summarizer must return a str or SummaryResult, got {type(value).__name__}"
    raise TypeError(msg)


def check_token_cap(max_summary_tokens: int | None) -> int | None:
    """`max_summary_tokens` itself if None or positive (else `ConfigurationError`)."""
    if max_summary_tokens is not None and (
        isinstance(max_summary_tokens, bool)
        or not isinstance(max_summary_tokens, int)
        or max_summary_tokens < 1
    ):
        msg = (
            "max_summary_tokens must be a positive int (or None for no token cap), "
            f"got max_summary_tokens={max_summary_tokens!r}"
        )
        raise ConfigurationError(msg)
    return max_summary_tokens


def check_word_limits(min_words: int, max_words: int) -> None:
    """Refuse a word cap under 1 or a negative minimum (`ConfigurationError`)."""
    check_max_words(max_words)
    if min_words < 0:
        msg = f"min_words must not be negative (0 accepts any non-empty reply), got min_words={min_words!r}"
        raise ConfigurationError(msg)


def long_enough(text: str, min_words: int, max_words: int) -> bool:
    """True if `text` has `min_words` words, or `max_words` when that is fewer: a summary is
    never required to be longer than its own cap."""
    return len(text.split()) >= min(min_words, max_words)


def usable_summary(result: SummaryResult, min_words: int, max_words: int) -> bool:
    """True if `result` can be kept: something left once cleaned (`clean_summary`), and long
    enough (`long_enough`) unless it is a structured summary, judged by its fields."""
    text = clean_summary(result.text, max_words=max_words)
    return bool(text) and (result.fields is not None or long_enough(text, min_words, max_words))


def merged_results(first: SummaryResult, second: SummaryResult) -> SummaryResult:
    """The answer of a retry (`second`, or `first` if it is empty), with both calls' cost."""
    return SummaryResult(
        second.text or first.text,
        (first.input_tokens or 0) + (second.input_tokens or 0),
        (first.output_tokens or 0) + (second.output_tokens or 0),
        calls=first.calls + second.calls,
        fields=second.fields if second.text else first.fields,
    )
