"""Turning what a user passes as `summarizer=` into a `Summarizer`: a function (sync or async), a
chat model, a model string (``"openai:gpt-4o-mini"``, through LangChain's `init_chat_model`) or
any other Runnable (an LCEL chain).

Owns the coercion only; the interface is `base`, the chat-model summarizer is `chat_model`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import types
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable

from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, clean_summary
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.core.texts import ENGLISH, check_language, memory_texts
from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError, SummarizerError, require
from langchain_rolling_memory.runtime.background import run_coroutine_sync
from langchain_rolling_memory.runtime.tracing import SUMMARIZE, traced
from langchain_rolling_memory.summarizers.base import (
    AsyncSummaryFunction,
    Summarizer,
    SummarizerLike,
    SummaryFunction,
    as_result,
    check_word_limits,
    in_memory_language,
    merged_results,
    usable_summary,
)
from langchain_rolling_memory.summarizers.chat_model import chat_model_summarizer


def _unusable(result: SummaryResult, min_words: int, max_words: int) -> SummarizerError:
    """The failure of a function whose answer, asked for twice, was still unusable."""
    words = len(clean_summary(result.text, max_words=max_words).split())
    if not words:
        msg = f"the summarizer function returned nothing usable twice (last answer {result.text[:80]!r})"
        return SummarizerError(msg)
    msg = (
        f"the summarizer function answered {words} words twice (last answer {result.text[:80]!r}), "
        f"under min_words={min_words}: return a longer summary, or build "
        "FunctionSummarizer(fn, min_words=...) with a lower minimum"
    )
    return SummarizerError(msg)


class FunctionSummarizer:
    """Adapts a plain function, sync or async, to the `Summarizer` interface.

    The function is called as ``fn(previous_summary, messages)`` with `messages` a `list`.
    Its answer is held to the check a chat model's is (`base.usable_summary`): one that is
    empty once cleaned (a title, blanks, ``""``), or under `min_words` words (never more than
    `max_words`), is asked for once more; a second such answer is a `SummarizerError`, which
    the engine reports and backs off like any failure, so nothing unusable is installed. What
    the function raises is not retried here (the engine's back-off does, and a permanent
    error waits the longest).

    A plain function given as ``summarizer=`` is held to a non-empty answer only
    (``min_words=0``): functions are often deterministic and short by design (an outline,
    "3 more messages"), and asking again could not lengthen them. Wrap one to apply lesson 2's
    validation: ``summarizer=FunctionSummarizer(fn, min_words=20)``.

    Args:
        fn: ``(previous_summary, messages) -> str | SummaryResult``, sync or async.
        min_words: the shortest usable answer in words (lesson 2 validates at 20); 0 (the
            default) accepts any non-empty answer.
        max_words: the summary's word cap (a summary is never required to be longer).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> answers = iter(["Ana.", "Ana Ruiz, a client from Lyon, wants her parcels delivered on Saturdays."])
        >>> s = FunctionSummarizer(lambda previous, messages: next(answers), min_words=10)
        >>> result = s.summarize("", [HumanMessage("I'm Ana from Lyon, deliver on Saturdays")])
        >>> result.calls, result.text.split(",")[0]
        (2, 'Ana Ruiz')
    """

    def __init__(
        self, fn: SummaryFunction | AsyncSummaryFunction, *, min_words: int = 0, max_words: int = 120
    ) -> None:
        check_word_limits(min_words, max_words)
        self.fn = fn
        self.min_words = min_words
        self.max_words = max_words
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - callables with async __call__
        )

    def _call(self, previous: str, batch: list[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return as_result(run_coroutine_sync(lambda: self.fn(previous, batch)))  # type: ignore[arg-type, return-value]
        return as_result(self.fn(previous, batch))

    def _second(self, first: SummaryResult, second: SummaryResult) -> SummaryResult:
        if usable_summary(second, self.min_words, self.max_words):
            return merged_results(first, second)
        raise _unusable(second, self.min_words, self.max_words)

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        first = self._call(previous, list(messages))
        if usable_summary(first, self.min_words, self.max_words):
            return first
        return self._second(first, self._call(previous, list(messages)))

    async def _acall(self, previous: str, batch: list[BaseMessage]) -> SummaryResult:
        if self.is_async:
            return as_result(await self.fn(previous, batch))  # type: ignore[misc]
        return as_result(await asyncio.to_thread(self.fn, previous, batch))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        first = await self._acall(previous, list(messages))
        if usable_summary(first, self.min_words, self.max_words):
            return first
        return self._second(first, await self._acall(previous, list(messages)))

    def __repr__(self) -> str:
        return f"FunctionSummarizer({getattr(self.fn, '__name__', self.fn)!r})"


SUMMARY_PREFIX = ENGLISH.runnable_lead
"""How the previous summary leads a Runnable summarizer's input in English: the message
`SummarizationMiddleware` leaves in an agent's state, so a chain written for it works here (each
language's lead is its catalogue's `runnable_lead`)."""


def _runnable_result(output: object) -> SummaryResult:
    if isinstance(output, BaseMessage):
        usage = output.usage_metadata if isinstance(output, AIMessage) else None
        if usage:
            return SummaryResult(output.text, usage.get("input_tokens"), usage.get("output_tokens"))
        return SummaryResult(output.text)
    if isinstance(output, (str, SummaryResult)):
        return as_result(output)
    msg = f"a Runnable summarizer must return a str or a message, got {type(output).__name__}"
    raise TypeError(msg)


class RunnableSummarizer:
    """Adapts any Runnable (an LCEL chain, a `RunnableLambda`...) to the `Summarizer` interface.

    As with `SummarizationMiddleware`'s ``summarizer=``, the Runnable gets the messages to
    summarize, as a list, led by the previous summary (a `HumanMessage` starting with
    `SUMMARY_PREFIX`, or its translation in the summarizer's `language`) when there is one,
    and returns the summary: a `str` (a chain ending
    in `StrOutputParser`) or a message (a chain ending in a chat model; its token usage is
    kept). It holds its own prompt: a ``ChatPromptTemplate`` with one ``MessagesPlaceholder``
    takes the list as is.

    Example:
        >>> from langchain_core.runnables import RunnableLambda
        >>> s = RunnableSummarizer(RunnableLambda(lambda messages: f"{len(messages)} messages"))
        >>> s.summarize("Ana likes tea.", []).text
        '1 messages'
    """

    def __init__(self, runnable: Runnable[Any, Any], *, language: str | None = None) -> None:
        self.runnable = runnable
        # The lead's language: None takes the memory's (`with_language`), English alone.
        self.language = check_language(language) if language is not None else "en"
        self.explicit_language = language is not None
        # Named and tagged like the chat-model summarizer's calls (tracing, nostream).
        self._call = traced(runnable, SUMMARIZE)

    def with_language(self, language: str) -> RunnableSummarizer:
        """This summarizer in a memory of `language`: itself if it was given a language (or
        already leads in `language`), else a copy whose lead is in `language`."""
        check_language(language)
        if self.explicit_language or language == self.language:
            return self
        localized = copy.copy(self)
        localized.language = language
        return localized

    def _input(self, previous: str, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        head: list[BaseMessage] = []
        if previous.strip():
            lead = memory_texts(self.language).runnable_lead
            head.append(HumanMessage(lead + previous, additional_kwargs={"lc_source": "summarization"}))
        return [*head, *messages]

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return _runnable_result(self._call.invoke(self._input(previous, messages)))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return _runnable_result(await self._call.ainvoke(self._input(previous, messages)))

    def __repr__(self) -> str:
        return f"RunnableSummarizer({self.runnable.get_name()!r})"


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line, without pydantic's and LangChain's trailers."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith(("For help", "For further information"))]
    text = " ".join(kept).split(" [type=")[0]
    return text if len(text) <= 300 else text[:297] + "..."


def init_chat_model(name: str) -> BaseChatModel:
    """The chat model a ``"provider:model"`` string names, built by LangChain's `init_chat_model`
    (the ``agents`` extra), with the provider's own defaults and environment (keys, base URL).

    Raises:
        MissingExtraError: `langchain`, or the provider's integration package, is not installed.
        ConfigurationError: the string names no known provider, or the model cannot be built
            (a missing key...); the cause in one line.
    """
    require("langchain", "agents", feature=f"summarizer={name!r} (a model string)")
    from langchain.chat_models import init_chat_model as init

    try:
        return init(name)
    except ImportError as exc:
        msg = f"summarizer={name!r} needs the provider's package: {_one_line(exc)}"
        raise MissingExtraError(msg) from exc
    except Exception as exc:  # unknown provider, missing key: whatever the integration raises
        msg = f"summarizer={name!r}: LangChain's init_chat_model could not build it: {_one_line(exc)}"
        raise ConfigurationError(msg) from exc


def chat_model_of(obj: object) -> BaseChatModel | None:
    """The chat model inside a summarizer, as far as one can be found: the model itself, the
    model of a `ChatModelSummarizer`, the first chat model of an LCEL chain, or the model a
    binding (``model.bind(...)``, ``.with_retry()``) wraps. None: there is none."""
    if isinstance(obj, BaseChatModel):
        return obj
    for attribute in ("model", "runnable", "bound"):
        inner = getattr(obj, attribute, None)
        if isinstance(inner, Runnable):
            return chat_model_of(inner)
    steps = getattr(obj, "steps", None)
    if isinstance(obj, Runnable) and isinstance(steps, list):
        for step in steps:
            found = chat_model_of(step)
            if found is not None:
                return found
    return None


def context_window(summarizer: object) -> int:
    """The ``max_input_tokens`` of the summarizer's chat model profile (see `chat_model_of`):
    what a ``("fraction", f)`` limit is a fraction of.

    Raises:
        ConfigurationError: the summarizer has no chat model, or its model no such profile.
    """
    model = chat_model_of(summarizer)
    if model is None:
        msg = (
            "a ('fraction', f) limit is a fraction of the summarizer model's context window, and "
            f"this summarizer ({type(summarizer).__name__}) has no chat model: pass ('tokens', N), "
            "or a chat model or model string as summarizer="
        )
        raise ConfigurationError(msg)
    profile = getattr(model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        msg = (
            f"a ('fraction', f) limit needs the context window of the summarizer model "
            f"({type(model).__name__}), and its profile gives no max_input_tokens: pass ('tokens', N), "
            "or build the model with profile={'max_input_tokens': ...}"
        )
        raise ConfigurationError(msg)
    return limit


_PLAIN_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)


def as_summarizer(
    obj: SummarizerLike, *, language: str = "en", max_words: int = DEFAULT_MAX_WORDS, structured: bool = False
) -> Summarizer:
    """Turn a function, an async function, a chat model, a model string, a Runnable or a
    `Summarizer` into a `Summarizer`.

    Args:
        obj: ``(previous_summary, messages) -> str`` (sync or async; `messages` is a list),
            any LangChain `BaseChatModel` (prompted with the default summary prompt), a model
            string such as ``"openai:gpt-4o-mini"`` (built with LangChain's `init_chat_model`,
            then prompted the same way; needs the ``agents`` extra and the provider's),
            any other Runnable (see `RunnableSummarizer`), or a `Summarizer`.
        language: the memory's language (``"en"``, ``"fr"``; anything else is refused): that
            of the default prompt for chat models and model strings, of a Runnable's lead, and
            of a built-in summarizer built without one (`in_memory_language`); a summarizer
            given its own language keeps it, a function writes its own text.
        max_words: word cap of the default prompt for chat models (and of a function's
            answer, which is asked once more when empty: `FunctionSummarizer`).
        structured: ask a chat model or model string for the structured summary (topic,
            preferences, decisions, open questions, facts; see `chat_model_summarizer`); a
            summarizer of another kind is refused with it (`ConfigurationError`), but one
            already built structured.

    Example:
        >>> s = as_summarizer(lambda previous, messages: f"{len(messages)} messages")
        >>> s.summarize("", []).text
        '0 messages'
    """
    check_language(language)
    # Built here for the memory: in its language, and still taking another memory's.
    if isinstance(obj, BaseChatModel):
        return chat_model_summarizer(obj, max_words=max_words, structured=structured).with_language(language)
    if isinstance(obj, str):
        chat = chat_model_summarizer(init_chat_model(obj), max_words=max_words, structured=structured)
        return chat.with_language(language)
    if structured and not getattr(obj, "structured", False):
        msg = (
            f"structured=True needs a chat model or a model string as summarizer (it asks the model "
            f"for the summary's fields), got {type(obj).__name__}; or give "
            "chat_model_summarizer(model, structured=True)"
        )
        raise ConfigurationError(msg)
    if isinstance(obj, _PLAIN_FUNCTIONS):
        # Histories are built at every call of a chain: skip the slow protocol check.
        return FunctionSummarizer(obj, max_words=max_words)
    if isinstance(obj, Summarizer):
        return in_memory_language(obj, language)
    if isinstance(obj, Runnable):
        return RunnableSummarizer(obj).with_language(language)
    if callable(obj):
        return FunctionSummarizer(obj, max_words=max_words)
    msg = (
        "summarizer must be a function (previous_summary, messages) -> str, an async one, "
        "a chat model, a model string ('openai:gpt-4o-mini'), a Runnable or a Summarizer, "
        f"got {type(obj).__name__}"
    )
    raise ConfigurationError(msg)
