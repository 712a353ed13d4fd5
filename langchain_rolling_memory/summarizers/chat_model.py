"""A summarizer on top of any LangChain chat model: prompt, call with retries, read usage, clean.

Owns the request/reply cycle of one summary: the prompt, the retries of transient provider
errors (through `Runnable.with_retry`; which errors, `failures` says), the structured (opt-in)
answer, one stricter retry after an unusable (empty, title-only, too short or too long) reply,
and the token usage. Sync and async share every step but the model call. It does not decide
when to summarize nor enforce the overall timeout (that is the engine's).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.prompts import (
    DEFAULT_MAX_WORDS,
    SummaryPrompt,
    clean_summary,
    default_prompt,
)
from langchain_rolling_memory.core.structured_summary import (
    StructuredSummary,
    parse_structured_summary,
    render_structured_summary,
)
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.core.texts import check_language
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.tracing import SUMMARIZE, traced
from langchain_rolling_memory.summarizers.base import (
    check_token_cap,
    check_word_limits,
    merged_results,
    usable_summary,
)
from langchain_rolling_memory.summarizers.failures import is_transient_error

if TYPE_CHECKING:  # tenacity (and what it imports) only once a retrying summarizer is built
    from langchain_core.runnables.retry import RunnableRetry


@functools.cache
def _first_wait_parameter() -> str:
    """The name `tenacity.wait_exponential_jitter` gives the first wait: ``multiplier`` from
    tenacity 9.2 (where ``initial`` warns as deprecated), ``initial`` before it.

    tenacity is langchain-core's dependency (its `with_retry`), imported here only to read the
    signature of the installed release.
    """
    from tenacity import wait_exponential_jitter

    return (
        "multiplier" if "multiplier" in inspect.signature(wait_exponential_jitter).parameters else "initial"
    )


def _is_parse_failure(exc: BaseException) -> bool:
    """True if a structured call failed on the answer's shape (the SDK's own parser or a
    refusal), not on the provider: the caller then asks again for JSON in plain text."""
    if isinstance(exc, ValueError):
        return True
    return any(cls.__name__ == "ModelRefusalError" for cls in type(exc).__mro__)


class ChatModelOptions(TypedDict, total=False):
    """The keywords of `ChatModelSummarizer` (and `chat_model_summarizer`), each documented
    there; a missing one takes the class's default."""

    prompt: SummaryPrompt | str | None
    max_words: int
    min_words: int
    structured: bool
    language: str | None
    retries: int
    backoff: float
    max_backoff: float
    max_summary_tokens: int | None
    is_transient: Callable[[BaseException], bool]


@dataclass(frozen=True)
class _Reply:
    message: BaseMessage
    parsed: StructuredSummary | None


class ChatModelSummarizer:
    """Prompts a chat model for the summary; sync and async share the prepare/finish steps.

    * Transient provider errors (rate limits, 5xx, timeouts, dropped connections) are
      retried up to `retries` times through `Runnable.with_retry` (exponential back-off from
      `backoff` seconds with jitter, at most `max_backoff`); permanent ones (HTTP 400, 401,
      403, 404) are raised at once, never retried. Pass ``retries=0`` for a client that
      retries itself (`openai_summarizer` and `gemini_summarizer` leave it to the SDK). The
      engine's `timeout` bounds the call, retries included.
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
        prompt: your `SummaryPrompt`, or the name of a built-in one (`prompts.PROMPT_KINDS`:
            ``"general"``, the default; ``"support"``, which also keeps products, references
            and quantities; ``"compact"``, about five lines), in the summarizer's language.
        max_words: word cap of the summary.
        max_summary_tokens: the token cap stated in the prompt (the memory's
            ``max_summary_tokens`` when None, see `with_token_cap`; the memory enforces it).
        min_words: a shorter cleaned reply is retried once (lesson 2 validates at 20 words);
            never more than `max_words`; 0 accepts any non-empty reply.
        structured: ask for a structured summary.
        language: language of the built-in prompt and of the structured summary's labels
            (``"en"``, ``"fr"``); None (the default): the language of the memory that uses it
            (`with_language`), English when used alone. Given explicitly, it is kept.
        retries: retries of a transient error per model call (0: none).
        backoff: seconds before the first retry (doubling, plus up to as much jitter).
        max_backoff: longest wait between two retries.
        is_transient: decides which errors are retried (default `is_transient_error`).
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompt: SummaryPrompt | str | None = None,
        max_words: int = DEFAULT_MAX_WORDS,
        min_words: int = 20,
        structured: bool = False,
        language: str | None = None,
        retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_summary_tokens: int | None = None,
        is_transient: Callable[[BaseException], bool] = is_transient_error,
    ) -> None:
        check_word_limits(min_words, max_words)
        if retries < 0 or backoff < 0 or max_backoff < 0:
            msg = (
                "retries, backoff and max_backoff must not be negative, got "
                f"retries={retries!r}, backoff={backoff!r}, max_backoff={max_backoff!r}"
            )
            raise ConfigurationError(msg)
        self.model = model
        self.language = check_language(language) if language is not None else "en"
        self.explicit_language = language is not None
        # A built-in prompt (by name or by default) follows the memory's language.
        self.prompt_kind: str | None = None
        if isinstance(prompt, SummaryPrompt):
            self.prompt = prompt
        else:
            self.prompt_kind = "general" if prompt is None else prompt
            self.prompt = default_prompt(self.language, self.prompt_kind)
        self.max_summary_tokens = check_token_cap(max_summary_tokens)
        self.explicit_token_cap = max_summary_tokens is not None
        self.max_words = max_words
        self.min_words = min_words
        self.structured = structured
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.is_transient = is_transient
        # Every call is retried on transient errors only, and named and tagged as the
        # memory's (see `tracing`): each attempt is a model run of that name.
        self._call: Runnable[Any, Any] = self._retrying(traced(model, SUMMARIZE))
        self._structured_model: Runnable[Any, Any] | None = None
        if structured:
            try:
                structured_model = model.with_structured_output(StructuredSummary, include_raw=True)
                self._structured_model = self._retrying(traced(structured_model, SUMMARIZE))
            except NotImplementedError:
                self._structured_model = None  # the prompt asks for JSON, parsed from the text

    def with_language(self, language: str) -> ChatModelSummarizer:
        """This summarizer in a memory of `language`: itself if it was given a language (or
        already writes in `language`), else a copy with that language's prompt (unless a
        prompt was given) and structured labels, sharing the model (see `in_memory_language`).

        Raises:
            ConfigurationError: `language` has no catalogue (`texts.LANGUAGES`).
        """
        check_language(language)
        if self.explicit_language or language == self.language:
            return self
        localized = copy.copy(self)
        localized.language = language
        if self.prompt_kind is not None:
            localized.prompt = default_prompt(language, self.prompt_kind)
        return localized

    def with_token_cap(self, max_summary_tokens: int | None) -> ChatModelSummarizer:
        """This summarizer in a memory whose summaries are capped at `max_summary_tokens`: a
        copy whose prompt states the cap, unless it was given one (then itself)."""
        if self.explicit_token_cap or max_summary_tokens == self.max_summary_tokens:
            return self
        capped = copy.copy(self)
        capped.max_summary_tokens = check_token_cap(max_summary_tokens)
        return capped

    def _retrying(self, runnable: Runnable[Any, Any]) -> Runnable[Any, Any]:
        """`runnable` retried on transient errors only; itself when `retries` is 0."""
        if not self.retries:
            return runnable
        # `Runnable.with_retry`, not the binding's own: a binding (see `traced`) would move its
        # run name onto the retry wrapper; here each attempt is the named model run.
        retrying = Runnable.with_retry(
            runnable,
            retry_if_exception_type=self.is_transient,
            wait_exponential_jitter=True,
            stop_after_attempt=self.retries + 1,
        )
        # The wait, set past validation (pydantic's model_copy does not validate an update):
        # tenacity 9.2 calls the first wait `multiplier` (`initial` warns as deprecated), a key
        # langchain-core's ExponentialJitterParams lacks and its validation would drop.
        params = {_first_wait_parameter(): self.backoff, "max": self.max_backoff, "jitter": self.backoff}
        return cast("RunnableRetry[Any, Any]", retrying).model_copy(
            update={"exponential_jitter_params": params}
        )

    # ------------------------------------------------------------------ shared steps

    def _request(self, previous: str, messages: Sequence[BaseMessage], strict: bool) -> list[BaseMessage]:
        # The stricter retry asks for plain sentences: the fallback when structure fails.
        return self.prompt.messages(
            previous,
            messages,
            max_words=self.max_words,
            strict=strict,
            structured=self.structured and not strict,
            max_tokens=self.max_summary_tokens,
        )

    def _prepared(
        self, previous: str, messages: Sequence[BaseMessage], strict: bool
    ) -> tuple[list[BaseMessage], Runnable[Any, Any] | None]:
        """The request, and the schema-bound model to ask it of first (None: the plain call
        only, as on the stricter retry); a parse failure of that model falls to the plain call."""
        return self._request(previous, messages, strict), None if strict else self._structured_model

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
        usable = (
            usable_summary(result, self.min_words, self.max_words) and len(raw.split()) <= 2 * self.max_words
        )
        return result, usable

    # ------------------------------------------------------------------ sync

    def _ask(
        self, previous: str, messages: Sequence[BaseMessage], strict: bool
    ) -> tuple[SummaryResult, bool]:
        request, schema_model = self._prepared(previous, messages, strict)
        if schema_model is not None:
            try:
                return self._finish(request, self._reply(schema_model.invoke(request), True))
            except Exception as exc:
                if not _is_parse_failure(exc):
                    raise
        output = self._call.invoke(request)
        return self._finish(request, self._reply(output, self.structured and not strict))

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        result, usable = self._ask(previous, messages, strict=False)
        if usable:
            return result
        second, _ = self._ask(previous, messages, strict=True)
        return merged_results(result, second)

    # ------------------------------------------------------------------ async

    async def _aask(
        self, previous: str, messages: Sequence[BaseMessage], strict: bool
    ) -> tuple[SummaryResult, bool]:
        request, schema_model = self._prepared(previous, messages, strict)
        if schema_model is not None:
            try:
                return self._finish(request, self._reply(await schema_model.ainvoke(request), True))
            except Exception as exc:
                if not _is_parse_failure(exc):
                    raise
        output = await self._call.ainvoke(request)
        return self._finish(request, self._reply(output, self.structured and not strict))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        result, usable = await self._aask(previous, messages, strict=False)
        if usable:
            return result
        second, _ = await self._aask(previous, messages, strict=True)
        return merged_results(result, second)

    def __repr__(self) -> str:
        mode = ", structured" if self.structured else ""
        return f"ChatModelSummarizer({type(self.model).__name__}{mode})"


def chat_model_summarizer(model: BaseChatModel, **options: Unpack[ChatModelOptions]) -> ChatModelSummarizer:
    """A summarizer that prompts `model` with the default (or your) summary prompt.

    Args:
        model: any LangChain chat model.
        prompt: your `SummaryPrompt`, or a built-in one's name (``"general"``, the default;
            ``"support"``; ``"compact"``; see `ChatModelSummarizer`) in `language`.
        language: ``"en"`` or ``"fr"`` (prompt and structured labels); None (the default):
            the language of the memory it is given to, English alone (see `in_memory_language`).
        max_words: word cap of the summary.
        min_words: a reply shorter than this gets the one stricter retry (0: no minimum).
        structured: ask for a `StructuredSummary` rendered compactly (see `ChatModelSummarizer`).
        retries, backoff: bounded retries of transient provider errors (``retries=0`` when
            `model` retries itself, as the OpenAI and Google clients do by default).
        max_backoff, max_summary_tokens, is_transient: as for `ChatModelSummarizer`, whose
            keywords (`ChatModelOptions`) these all are, with its defaults.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Summary: Ana likes tea.")]))
        >>> chat_model_summarizer(model, min_words=0).summarize("", [HumanMessage("I'm Ana, I like tea")]).text
        'Ana likes tea.'
    """
    return ChatModelSummarizer(model, **options)
