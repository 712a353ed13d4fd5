"""Turning what a user passes as `summarizer=` (a function, an async one, a chat model) into a `Summarizer`.

Owns the coercion only; the interface is `base`, the chat-model summarizer is `chat_model`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from langchain_rolling_memory.background import run_coroutine_sync
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.summarizers.base import (
    AsyncSummaryFunction,
    Summarizer,
    SummarizerLike,
    SummaryFunction,
    SummaryResult,
    as_result,
)
from langchain_rolling_memory.summarizers.chat_model import chat_model_summarizer

__all__ = ["FunctionSummarizer", "as_summarizer"]


class FunctionSummarizer:
    """Adapts a plain function, sync or async, to the `Summarizer` interface."""

    def __init__(self, fn: SummaryFunction | AsyncSummaryFunction) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - callables with async __call__
        )

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return as_result(run_coroutine_sync(lambda: self.fn(previous, messages)))  # type: ignore[arg-type, return-value]
        return as_result(self.fn(previous, messages))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return as_result(await self.fn(previous, messages))  # type: ignore[misc]
        return as_result(await asyncio.to_thread(self.fn, previous, messages))

    def __repr__(self) -> str:
        return f"FunctionSummarizer({getattr(self.fn, '__name__', self.fn)!r})"


_PLAIN_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def as_summarizer(obj: SummarizerLike, *, language: str = "en", max_words: int = 120) -> Summarizer:
    """Turn a function, an async function, a chat model or a `Summarizer` into a `Summarizer`.

    Args:
        obj: ``(previous_summary, messages) -> str`` (sync or async), any LangChain
            `BaseChatModel` (prompted with the default summary prompt), or a `Summarizer`.
        language: language of the default prompt for chat models (``"en"``, ``"fr"``).
        max_words: word cap of the default prompt for chat models.

    Example:
        >>> s = as_summarizer(lambda previous, messages: f"{len(messages)} messages")
        >>> s.summarize("", []).text
        '0 messages'
    """
    if isinstance(obj, BaseChatModel):
        return chat_model_summarizer(obj, language=language, max_words=max_words)
    if isinstance(obj, _PLAIN_FUNCTIONS):
        # Histories are built at every call of a chain: skip the slow protocol check.
        return FunctionSummarizer(obj)
    if isinstance(obj, Summarizer):
        return obj
    if callable(obj):
        return FunctionSummarizer(obj)
    msg = (
        "summarizer must be a function (previous_summary, messages) -> str, an async one, "
        f"a BaseChatModel or a Summarizer, got {type(obj).__name__}"
    )
    raise ConfigurationError(msg)
