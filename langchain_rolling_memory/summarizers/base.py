"""The summarizer contract: anything that turns (previous summary, messages) into summary text.

Owns the adaptation of plain functions (sync or async) and chat models to one interface with
sync and async twins. Does not decide when to summarize (engine) nor where to store (stores).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import types
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from langchain_rolling_memory.errors import ConfigurationError

__all__ = [
    "FunctionSummarizer",
    "Summarizer",
    "SummarizerLike",
    "SummaryResult",
    "as_summarizer",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class SummaryResult:
    """What a summarizer returns: the text, and what it cost when known.

    Attributes:
        text: the summary text.
        input_tokens / output_tokens: tokens billed for the model calls (None: unknown, the
            engine counts them); 0 for a summarizer that calls no model.
        calls: model calls that answered (a retry after an unusable reply counts twice).
    """

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    calls: int = 1


@runtime_checkable
class Summarizer(Protocol):
    """The interface the engine calls; build one with `as_summarizer`."""

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult: ...

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult: ...


SummaryFunction = Callable[[str, Sequence[BaseMessage]], str | SummaryResult]
AsyncSummaryFunction = Callable[[str, Sequence[BaseMessage]], Awaitable[str | SummaryResult]]
SummarizerLike = Union[Summarizer, BaseChatModel, SummaryFunction, AsyncSummaryFunction]


def _result(value: object) -> SummaryResult:
    if isinstance(value, SummaryResult):
        return value
    if isinstance(value, str):
        return SummaryResult(value)
    if value is None:
        return SummaryResult("")
    msg = f"a summarizer must return a str or SummaryResult, got {type(value).__name__}"
    raise TypeError(msg)


def run_coroutine_sync(factory: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine from sync code without touching a running event loop.

    With no loop in this thread, `asyncio.run` is used. Inside a running loop (sync code
    called from async code), the coroutine runs on a fresh loop in a helper thread: never
    a nested or re-entered loop, so it cannot deadlock the caller's loop.
    """

    async def main() -> _T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="lrm-async-summarizer", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class FunctionSummarizer:
    """Adapts a plain function, sync or async, to the `Summarizer` interface."""

    def __init__(self, fn: SummaryFunction | AsyncSummaryFunction) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - callables with async __call__
        )

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return _result(run_coroutine_sync(lambda: self.fn(previous, messages)))  # type: ignore[arg-type, return-value]
        return _result(self.fn(previous, messages))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return _result(await self.fn(previous, messages))  # type: ignore[misc]
        return _result(await asyncio.to_thread(self.fn, previous, messages))

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
        from langchain_rolling_memory.summarizers.chat_model import chat_model_summarizer

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
