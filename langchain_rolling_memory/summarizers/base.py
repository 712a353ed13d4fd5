"""The summarizer contract: anything that turns (previous summary, messages) into summary text.

Owns the interface (sync and async twins) and what a summary result is; turning functions and
chat models into it is `coerce`. Does not decide when to summarize (engine) nor where to store (stores).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, Union, runtime_checkable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

__all__ = [
    "Summarizer",
    "SummarizerLike",
    "SummaryResult",
    "run_coroutine_sync",
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


def as_result(value: object) -> SummaryResult:
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
