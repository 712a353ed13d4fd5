"""A summarizer on top of any LangChain chat model: prompt, call with retries, read usage, clean.

Owns the request/reply cycle of one summary: the prompt, bounded retries of transient
provider errors, the structured (opt-in) answer, one stricter retry after an unusable
(empty, title-only, too short or too long) reply, and the token usage. Sync and async share every step but the model call. It does not
decide when to summarize nor enforce the overall timeout (that is the engine's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.policy import count_tokens
from langchain_rolling_memory.prompts import SummaryPrompt, clean_summary, default_prompt
from langchain_rolling_memory.summarizers.base import SummaryResult
from langchain_rolling_memory.summarizers.structured import (
    StructuredSummary,
    parse_structured_summary,
    render_structured_summary,
)
from langchain_rolling_memory.tracing import SUMMARIZE, traced

__all__ = ["ChatModelSummarizer", "chat_model_summarizer", "is_transient_error"]

_T = TypeVar("_T")

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_TRANSIENT_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailable",
        "ResourceExhausted",
        "DeadlineExceeded",
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "RemoteProtocolError",
        "ServerDisconnectedError",
    }
)


def is_transient_error(exc: BaseException) -> bool:
    """True if retrying the same request may succeed (rate limit, 5xx, timeout, connection).

    Reads `langchain_core`'s ``ModelError.is_retryable`` when the integration sets it, then
    HTTP status codes and well-known exception names along the ``__cause__`` chain.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        retryable = getattr(type(current), "is_retryable", None)
        if retryable is True:
            return True
        if isinstance(current, (TimeoutError, ConnectionError)):
            return True
        for attribute in ("status_code", "code", "status"):
            status = getattr(current, attribute, None)
            if isinstance(status, int) and status in _TRANSIENT_STATUS:
                return True
        if type(current).__name__ in _TRANSIENT_NAMES:
            return True
        current = current.__cause__ or current.__context__
    return False


def _is_parse_failure(exc: BaseException) -> bool:
    """True if a structured call failed on the answer's shape (the SDK's own parser or a
    refusal), not on the provider: the caller then asks again for JSON in plain text."""
    if isinstance(exc, ValueError):
        return True
    return any(cls.__name__ == "ModelRefusalError" for cls in type(exc).__mro__)


def _long_enough(text: str, min_words: int, max_words: int) -> bool:
    # A summary is never required to be longer than its own cap.
    return len(text.split()) >= min(min_words, max_words)


@dataclass(frozen=True)
class _Reply:
    message: BaseMessage
    parsed: StructuredSummary | None


class ChatModelSummarizer:
    """Prompts a chat model for the summary; sync and async share the prepare/finish steps.

    * Transient provider errors (rate limits, 5xx, timeouts, dropped connections) are
      retried up to `retries` times, waiting `backoff`, then twice as long each time (at most
      `max_backoff` seconds); other errors are raised at once.
    * An unusable reply (empty, title-only, under `min_words` words once cleaned, or over
      twice the word cap; a parsed structured answer is not held to `min_words`) gets one retry with a stricter plain-text instruction; the cleaned
      best effort is returned after that (possibly empty, which the engine treats as a
      failure and retries later). The retry is a model call: `SummaryResult.calls` counts it.
    * With `structured`, the model is asked for a `StructuredSummary` (through
      `with_structured_output` when the model supports it, JSON in the prompt otherwise);
      the answer is rendered compactly into the summary text. If the provider's own parser
      rejects the answer, the same request is sent once more without the schema; a reply
      that does not parse is used as plain text.

    Args:
        model: any LangChain chat model.
        prompt: the summary prompt (see `default_prompt`).
        max_words: word cap of the summary.
        min_words: a shorter cleaned reply is retried once (lesson 2 validates at 20 words);
            never more than `max_words`; 0 accepts any non-empty reply.
        structured: ask for a structured summary.
        language: language of the structured summary's field labels.
        retries: retries of a transient error per model call (0: none).
        backoff: seconds before the first retry.
        max_backoff: longest wait between two retries.
        is_transient: decides which errors are retried (default `is_transient_error`).
        sleep, asleep: injected waits (tests pass no-op ones).
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompt: SummaryPrompt,
        max_words: int = 120,
        min_words: int = 20,
        structured: bool = False,
        language: str = "en",
        retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        is_transient: Callable[[BaseException], bool] = is_transient_error,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if max_words < 1:
            msg = f"max_words must be positive, got max_words={max_words!r}"
            raise ConfigurationError(msg)
        if min_words < 0:
            msg = (
                f"min_words must not be negative (0 accepts any non-empty reply), got min_words={min_words!r}"
            )
            raise ConfigurationError(msg)
        if retries < 0 or backoff < 0 or max_backoff < 0:
            msg = (
                "retries, backoff and max_backoff must not be negative, got "
                f"retries={retries!r}, backoff={backoff!r}, max_backoff={max_backoff!r}"
            )
            raise ConfigurationError(msg)
        self.model = model
        # Every call is named and tagged as the memory's (see `tracing`): here, once.
        self._call: Runnable[Any, Any] = traced(model, SUMMARIZE)
        self.prompt = prompt
        self.max_words = max_words
        self.min_words = min_words
        self.structured = structured
        self.language = language
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.is_transient = is_transient
        self.sleep = sleep
        self.asleep = asleep
        self._structured_model: Runnable[Any, Any] | None = None
        if structured:
            try:
                structured_model = model.with_structured_output(StructuredSummary, include_raw=True)
                self._structured_model = traced(structured_model, SUMMARIZE)
            except NotImplementedError:
                self._structured_model = None  # the prompt asks for JSON, parsed from the text

    # ------------------------------------------------------------------ shared steps

    def _request(self, previous: str, messages: Sequence[BaseMessage], strict: bool) -> list[BaseMessage]:
        # The stricter retry asks for plain sentences: the fallback when structure fails.
        return self.prompt.messages(
            previous,
            messages,
            max_words=self.max_words,
            strict=strict,
            structured=self.structured and not strict,
        )

    def _delay(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.backoff * 2**attempt))

    def _reply(self, output: Any, structured: bool) -> _Reply:
        if structured and isinstance(output, dict) and isinstance(output.get("raw"), BaseMessage):
            raw: BaseMessage = output["raw"]
            parsed = parse_structured_summary(output.get("parsed")) or parse_structured_summary(raw.text)
            return _Reply(raw, parsed)
        if not isinstance(output, BaseMessage):
            msg = f"the summary model returned {type(output).__name__}, expected a message"
            raise TypeError(msg)
        return _Reply(output, parse_structured_summary(output.text) if structured else None)

    def _finish(self, request: list[BaseMessage], reply: _Reply) -> tuple[SummaryResult, bool]:
        raw = (
            render_structured_summary(reply.parsed, language=self.language)
            if reply.parsed
            else reply.message.text
        )
        text = clean_summary(raw, max_words=self.max_words)
        usage = reply.message.usage_metadata if isinstance(reply.message, AIMessage) else None
        fields = reply.parsed.model_dump() if reply.parsed else None
        if usage:
            result = SummaryResult(text, usage.get("input_tokens"), usage.get("output_tokens"), fields=fields)
        else:
            result = SummaryResult(text, count_tokens(request), count_tokens([reply.message]), fields=fields)
        # A parsed structured answer is short by design: its fields, not its length, count.
        long_enough = reply.parsed is not None or _long_enough(text, self.min_words, self.max_words)
        usable = bool(text) and long_enough and len(raw.split()) <= 2 * self.max_words
        return result, usable

    @staticmethod
    def _merge(first: SummaryResult, second: SummaryResult) -> SummaryResult:
        return SummaryResult(
            second.text or first.text,
            (first.input_tokens or 0) + (second.input_tokens or 0),
            (first.output_tokens or 0) + (second.output_tokens or 0),
            calls=first.calls + second.calls,
            fields=second.fields if second.text else first.fields,
        )

    # ------------------------------------------------------------------ sync

    def _retrying(self, call: Callable[[], _T]) -> _T:
        attempt = 0
        while True:
            try:
                return call()
            except Exception as exc:
                if attempt >= self.retries or not self.is_transient(exc):
                    raise
                self.sleep(self._delay(attempt))
                attempt += 1

    def _ask(
        self, previous: str, messages: Sequence[BaseMessage], strict: bool
    ) -> tuple[SummaryResult, bool]:
        request = self._request(previous, messages, strict)
        schema_model = self._structured_model if not strict else None
        if schema_model is not None:
            try:
                output = self._retrying(lambda: schema_model.invoke(request))
                return self._finish(request, self._reply(output, True))
            except Exception as exc:
                if not _is_parse_failure(exc):
                    raise
        output = self._retrying(lambda: self._call.invoke(request))
        return self._finish(request, self._reply(output, self.structured and not strict))

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        result, usable = self._ask(previous, messages, strict=False)
        if usable:
            return result
        second, _ = self._ask(previous, messages, strict=True)
        return self._merge(result, second)

    # ------------------------------------------------------------------ async

    async def _aretrying(self, call: Callable[[], Awaitable[_T]]) -> _T:
        attempt = 0
        while True:
            try:
                return await call()
            except Exception as exc:
                if attempt >= self.retries or not self.is_transient(exc):
                    raise
                await self.asleep(self._delay(attempt))
                attempt += 1

    async def _aask(
        self, previous: str, messages: Sequence[BaseMessage], strict: bool
    ) -> tuple[SummaryResult, bool]:
        request = self._request(previous, messages, strict)
        schema_model = self._structured_model if not strict else None
        if schema_model is not None:
            try:
                output = await self._aretrying(lambda: schema_model.ainvoke(request))
                return self._finish(request, self._reply(output, True))
            except Exception as exc:
                if not _is_parse_failure(exc):
                    raise
        output = await self._aretrying(lambda: self._call.ainvoke(request))
        return self._finish(request, self._reply(output, self.structured and not strict))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        result, usable = await self._aask(previous, messages, strict=False)
        if usable:
            return result
        second, _ = await self._aask(previous, messages, strict=True)
        return self._merge(result, second)

    def __repr__(self) -> str:
        mode = ", structured" if self.structured else ""
        return f"ChatModelSummarizer({type(self.model).__name__}{mode})"


def chat_model_summarizer(
    model: BaseChatModel,
    *,
    prompt: SummaryPrompt | None = None,
    language: str = "en",
    max_words: int = 120,
    min_words: int = 20,
    structured: bool = False,
    retries: int = 2,
    backoff: float = 0.5,
    **options: Any,
) -> ChatModelSummarizer:
    """A summarizer that prompts `model` with the default (or your) summary prompt.

    Args:
        model: any LangChain chat model.
        prompt: your `SummaryPrompt` (default: the built-in one for `language`).
        language: ``"en"`` or ``"fr"`` (prompt and structured labels).
        max_words: word cap of the summary.
        min_words: a reply shorter than this gets the one stricter retry (0: no minimum).
        structured: ask for a `StructuredSummary` rendered compactly (see `ChatModelSummarizer`).
        retries, backoff: bounded retries of transient provider errors.
        **options: other `ChatModelSummarizer` settings (``max_backoff``, ``is_transient``...).

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Summary: Ana likes tea.")]))
        >>> chat_model_summarizer(model, min_words=0).summarize("", [HumanMessage("I'm Ana, I like tea")]).text
        'Ana likes tea.'
    """
    return ChatModelSummarizer(
        model,
        prompt=prompt or default_prompt(language),
        max_words=max_words,
        min_words=min_words,
        structured=structured,
        language=language,
        retries=retries,
        backoff=backoff,
        **options,
    )
