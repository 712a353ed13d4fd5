"""The summarizer contract: anything that turns (previous summary, messages) into summary text.

Owns the interface (sync and async twins) and how a summarizer takes the memory's language
(`in_memory_language`); what a summary result is (`SummaryResult`, re-exported here) is the
pure `core.summary_result`, turning functions and chat models into it is `coerce`. Does not
decide when to summarize (engine) nor where to store (stores).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from langchain_rolling_memory.core.summary_result import SummaryResult


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


def as_result(value: object) -> SummaryResult:
    if isinstance(value, SummaryResult):
        return value
    if isinstance(value, str):
        return SummaryResult(value)
    if value is None:
        return SummaryResult("")
    msg = f"a summarizer must return a str or SummaryResult, got {type(value).__name__}"
    raise TypeError(msg)
