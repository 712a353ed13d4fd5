"""One object for a rolling memory's settings (`MemorySettings`) and their keywords; pure.

Owns the settings' names, their defaults (each written once: here, or beside what applies it,
the policy's in `trigger_keep`, the word cap in `prompts`), their checks (run once, when a
`MemorySettings` is made) and the `**options` keywords the entry points take
(`MemoryOptions` and its parts), refused with a did-you-mean when misspelt. It builds
nothing: the fold policy is `trigger_keep`'s, the compactor the engine's, the summarizer
`summarizers.coerce`'s; the clocks are the engine's (``today="utc"`` names its UTC date).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Protocol, TypedDict, Unpack, runtime_checkable

from langchain_core.embeddings import Embeddings

from langchain_rolling_memory.core.cuts import FoldPolicy, TokenCounter, count_tokens
from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, check_max_words
from langchain_rolling_memory.core.records import CompactionResult
from langchain_rolling_memory.core.texts import check_language
from langchain_rolling_memory.core.topics import TopicDetector, TopicLabels
from langchain_rolling_memory.core.trigger_keep import (
    DEFAULT_KEEP_LAST,
    DEFAULT_MAX_TURNS,
    HALF,
    ContextSize,
    KeepLast,
    Trigger,
    fold_policy,
)
from langchain_rolling_memory.errors import ConfigurationError

# The defaults, written once: every signature that shows one takes it from here.
DEFAULT_LANGUAGE = "en"
DEFAULT_MAX_SUMMARY_CHARS = 4000
DEFAULT_MAX_TOPIC_SECTIONS = 5
DEFAULT_TIMEOUT: float | None = 60.0
DEFAULT_LEASE_TTL = 120.0
DEFAULT_BACKOFF = 2.0
DEFAULT_MAX_BACKOFF = 300.0
DEFAULT_EXIT_TIMEOUT = 30.0
DEFAULT_START_DELAY = 0.05
DEFAULT_MAX_FACT_TOKENS: int | None = 400

ErrorCallback = Callable[[str, BaseException], None]
"""Called as ``on_error(session_id, exception)`` when a compaction fails."""


@runtime_checkable
class CompactionListener(Protocol):
    """An object told about each installed compaction, with sync and async twins."""

    def on_compaction(self, result: CompactionResult) -> None: ...

    async def aon_compaction(self, result: CompactionResult) -> None: ...


CompactionCallback = Callable[[CompactionResult], Any]
"""Called as ``on_compaction(result)`` (sync or async) after a summary is installed."""


class CompactionOptions(TypedDict, total=False):
    """The keywords of `Compactor.build`: the `MemorySettings` fields a compaction reads."""

    max_turns: int | None
    keep_last: KeepLast
    max_tokens: int | None
    keep_tokens: int | None
    hard_cap: int | None
    trigger: Trigger | None
    keep: ContextSize | None
    language: str
    max_words: int
    structured: bool
    summary_ack: bool
    max_summary_tokens: int | None
    max_summary_chars: int
    max_topic_sections: int
    topic_detector: TopicDetector | None
    topic_labels: TopicLabels | None
    token_counter: TokenCounter
    timeout: float | None
    on_error: ErrorCallback | None
    on_compaction: CompactionListener | CompactionCallback | None
    today: Callable[[], date] | Literal["utc"] | None
    clock: Callable[[], float] | None
    backoff: float
    max_backoff: float
    lease_ttl: float
    exit_timeout: float
    start_delay: float


class HistoryOptions(CompactionOptions, total=False):
    """The keywords of `RollingSummaryChatMessageHistory` and `session_history_factory`."""

    background: bool


class MemoryOptions(HistoryOptions, total=False):
    """The keywords of `with_rolling_memory` and `RollingMemoryMiddleware`: every field of
    `MemorySettings` (a test keeps the two the same)."""

    recall_tokens: int | None
    max_fact_tokens: int | None
    embeddings: Embeddings | None


def check_summary_limits(
    *, max_summary_tokens: int | None, max_summary_chars: int, max_topic_sections: int
) -> None:
    """The caps on a summary's length and sections (`Planner` checks them too, built alone)."""
    if max_summary_tokens is not None and max_summary_tokens < 1:
        msg = (
            "max_summary_tokens must be positive (or None for no token cap), "
            f"got max_summary_tokens={max_summary_tokens!r}"
        )
        raise ConfigurationError(msg)
    if max_summary_chars < 100:
        msg = f"max_summary_chars must be at least 100, got max_summary_chars={max_summary_chars!r}"
        raise ConfigurationError(msg)
    if max_topic_sections < 1:
        msg = f"max_topic_sections must be at least 1, got max_topic_sections={max_topic_sections!r}"
        raise ConfigurationError(msg)


def check_options(
    options: Mapping[str, object],
    *,
    owner: str,
    accepts: type[Any] = MemoryOptions,
    others: Collection[str] = (),
) -> None:
    """Refuse a keyword that is not one of `accepts`'s (a `TypedDict` above), naming `owner`
    and the closest known name (`others`: the owner's own parameters, also suggested)."""
    known: frozenset[str] = accepts.__optional_keys__
    for name in options:
        if name in known:
            continue
        if name in _FIELDS:
            users = ", ".join(o for o, kind in _USED_BY if name in kind.__optional_keys__)
            msg = f"option {name!r} is not one of {owner}'s: it is read by {users} (see MemorySettings)"
            raise ConfigurationError(msg)
        close = difflib.get_close_matches(name, [*known, *others], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; see MemorySettings for the options"
        msg = f"unknown option {name!r} for {owner}{hint}"
        raise ConfigurationError(msg)


class _NeedsWindow(Exception):
    """A ``("fraction", f)`` limit: checked when the summarizer (its model's window) is known."""


def _unknown_window() -> int:
    raise _NeedsWindow


def _check_at_least(name: str, value: float | None, least: float, *, optional: bool, strict: bool) -> None:
    if value is None and optional:
        return
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (value > least if strict else value >= least)
    )
    if not ok:
        positive = (strict and least == 0) or (not strict and least == 1)
        bound = "positive" if positive else f"more than {least:g}" if strict else f">= {least:g}"
        msg = f"{name} must be {bound}{' (or None)' if optional else ''}, got {name}={value!r}"
        raise ConfigurationError(msg)


@dataclass(frozen=True)
class MemorySettings:
    """Every setting of a rolling memory, checked once, shared by the histories, the chains,
    the agent middleware and the compactor.

    Each entry point takes ``settings=`` and/or the same names as keywords (keywords win over
    `settings`: ``settings + options`` is `settings` with those replaced); a misspelt keyword
    is refused with the closest name (``max_turn=12``: "did you mean 'max_turns'?"), and
    mypy flags it too (`MemoryOptions`). A preset (`preset`) gives the same keywords.

    What to keep and when to fold:
        max_turns, keep_last: the count policy (hysteresis): when more than `max_turns`
            messages are unsummarized, all but the last `keep_last` are folded in one call;
            ``keep_last="half"`` keeps ``max_turns // 2`` (the summary-memory lesson's rule: fold
            the oldest half when the buffer is full).
        max_tokens, keep_tokens: the token policy: fold when the unsummarized messages exceed
            `max_tokens`, keep `keep_tokens` worth (default ``max_tokens // 2``).
        trigger, keep: instead of those four, `SummarizationMiddleware`'s forms:
            ``trigger=("messages", 12)`` (fold when 12 are unsummarized), ``("tokens", 4000)``,
            ``("fraction", 0.5)`` (of the summarizer model's context window, from its profile)
            or a list of them (the first reached); ``keep=("messages", 6)``, ``("tokens", 1500)``
            or ``("fraction", 0.2)``, kept whichever trigger fired (see `trigger_keep`).
        hard_cap: unsummarized messages allowed, while compaction is failing, before the view
            falls back to a plain window (default ``3 * max_turns``).

    The summary:
        language: the memory's language (``"en"``, ``"fr"``; anything else is refused): every
            text it writes for a model (summary prompt of a summarizer built without its own
            language, the summary's frame, section labels, and the facts, state and recall
            blocks of `with_rolling_memory` and the middleware).
        max_words: word cap of every summary (and of a chat-model summarizer's prompt).
        structured: a chat-model (or model string) summarizer asks for the structured summary
            (topic, preferences, decisions, open questions, facts; `structured_summary` on the
            history reads them back); another kind of summarizer is refused with it.
        summary_ack: the summary (a user message) is followed by a short assistant
            acknowledgement in its language, for providers that require user and assistant
            turns to alternate (the short-memory lesson's placement).
        max_summary_tokens: token cap of every summary, counted with `token_counter` (None: none).
        max_summary_chars: character cap of every summary.
        topic_detector: ``(message) -> bool`` (e.g. `keyword_topic_shift()`): fold the finished
            topic as soon as the user changes topic, one summary section per topic.
        topic_labels: the section labels (None: those of `language`).
        max_topic_sections: finished sections kept; beyond, the two oldest are joined.
        today: the date of a finished topic section: ``"utc"`` (today's date in UTC), a
            ``() -> date``, or None (sections not dated).

    Running compactions:
        token_counter: counts a message's tokens when it is stored (and for the budgets).
        timeout: seconds a summarizer call may take before it counts as failed (None: no limit).
        background: compact in a worker thread (or a task, for async) instead of inline.
        on_error: ``(session_id, exception)`` callback for failed compactions.
        on_compaction: told of each installed summary (a function, sync or async, or a
            `CompactionListener` such as a `FactExtractor`); its failures never undo it.
        backoff, max_backoff: seconds before the first retry after a failure (doubling), and
            the longest wait.
        lease_ttl: seconds a compaction lease lasts (a crashed compactor blocks no longer).
        clock: monotonic clock of the back-off (None: `time.monotonic`; for tests).
        exit_timeout: seconds the interpreter waits at exit for a background compaction.
        start_delay: seconds a background compaction waits before it starts (the end of the
            turn that scheduled it goes first).

    What the model is sent beside the conversation (`with_rolling_memory`, the middleware):
        recall_tokens: budget of the excerpts recalled before each call (None or 0: off).
        max_fact_tokens: token budget of the client's facts block (None: no budget).
        embeddings: any LangChain `Embeddings`: recall also searches the client's messages by
            the question's vector, fused with the lexical search (reciprocal rank); the
            messages are embedded in the background after each append (None: lexical only).

    Raises:
        ConfigurationError: a value out of range, or two that contradict each other
            (``keep_last >= max_turns``...), in one line naming them.

    Example:
        >>> settings = MemorySettings(max_turns=8, keep_last=4, language="fr")
        >>> settings.replace(keep_last=2).keep_last, settings.max_words
        (2, 120)
        >>> MemorySettings(max_turns=4, keep_last=4)
        Traceback (most recent call last):
        ...
        langchain_rolling_memory.errors.ConfigurationError: keep_last must be at least 1 and smaller than max_turns, got keep_last=4, max_turns=4
    """

    max_turns: int | None = DEFAULT_MAX_TURNS
    keep_last: KeepLast = DEFAULT_KEEP_LAST
    max_tokens: int | None = None
    keep_tokens: int | None = None
    hard_cap: int | None = None
    trigger: Trigger | None = None
    keep: ContextSize | None = None
    language: str = DEFAULT_LANGUAGE
    max_words: int = DEFAULT_MAX_WORDS
    structured: bool = False
    summary_ack: bool = False
    max_summary_tokens: int | None = None
    max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS
    max_topic_sections: int = DEFAULT_MAX_TOPIC_SECTIONS
    topic_detector: TopicDetector | None = None
    topic_labels: TopicLabels | None = None
    today: Callable[[], date] | Literal["utc"] | None = "utc"
    token_counter: TokenCounter = count_tokens
    timeout: float | None = DEFAULT_TIMEOUT
    background: bool = False
    on_error: ErrorCallback | None = None
    on_compaction: CompactionListener | CompactionCallback | None = None
    backoff: float = DEFAULT_BACKOFF
    max_backoff: float = DEFAULT_MAX_BACKOFF
    lease_ttl: float = DEFAULT_LEASE_TTL
    clock: Callable[[], float] | None = None
    exit_timeout: float = DEFAULT_EXIT_TIMEOUT
    start_delay: float = DEFAULT_START_DELAY
    recall_tokens: int | None = None
    max_fact_tokens: int | None = DEFAULT_MAX_FACT_TOKENS
    embeddings: Embeddings | None = None

    def __post_init__(self) -> None:
        for name in _WHOLE_NUMBERS:
            value = getattr(self, name)
            if name == "keep_last" and value == HALF:
                continue
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                msg = f"{name} must be a whole number{' or None' if name in _OPTIONAL else ''}, got {name}={value!r}"
                raise ConfigurationError(msg)
        check_language(self.language)
        _policy_unless_fractions(self)
        check_max_words(self.max_words)
        check_summary_limits(
            max_summary_tokens=self.max_summary_tokens,
            max_summary_chars=self.max_summary_chars,
            max_topic_sections=self.max_topic_sections,
        )
        _check_at_least("timeout", self.timeout, 0, optional=True, strict=True)
        _check_at_least("lease_ttl", self.lease_ttl, 0, optional=False, strict=True)
        _check_at_least("backoff", self.backoff, 0, optional=False, strict=False)
        _check_at_least("max_backoff", self.max_backoff, 0, optional=False, strict=False)
        _check_at_least("exit_timeout", self.exit_timeout, 0, optional=False, strict=False)
        _check_at_least("start_delay", self.start_delay, 0, optional=False, strict=False)
        _check_at_least("max_fact_tokens", self.max_fact_tokens, 1, optional=True, strict=False)
        if self.recall_tokens is not None and (
            not isinstance(self.recall_tokens, int)
            or isinstance(self.recall_tokens, bool)
            or self.recall_tokens < 0
        ):
            msg = f"recall_tokens must be None or an int >= 0, got recall_tokens={self.recall_tokens!r}"
            raise ConfigurationError(msg)
        if self.embeddings is not None and not isinstance(self.embeddings, Embeddings):
            msg = f"embeddings must be a LangChain Embeddings or None, got {type(self.embeddings).__name__}"
            raise ConfigurationError(msg)
        for name in ("background", "structured", "summary_ack"):
            if not isinstance(getattr(self, name), bool):
                msg = f"{name} must be True or False, got {name}={getattr(self, name)!r}"
                raise ConfigurationError(msg)
        for name in ("token_counter", "topic_detector", "on_error", "on_compaction", "clock", "today"):
            value = getattr(self, name)
            if value is not None and value != "utc" and not callable(value) and not _is_listener(value):
                msg = f"{name} must be callable (or None), got {name}={value!r}"
                raise ConfigurationError(msg)

    @classmethod
    def resolve(
        cls,
        settings: MemorySettings | None,
        options: Mapping[str, Any],
        *,
        owner: str,
        accepts: type[Any] = MemoryOptions,
        others: Collection[str] = (),
    ) -> MemorySettings:
        """`settings` (default: the defaults) with `options` replaced, after `check_options`:
        what an entry point (`owner`) does with its ``settings=`` and ``**options``."""
        if settings is not None and not isinstance(settings, MemorySettings):
            msg = f"{owner}: settings must be a MemorySettings, got {type(settings).__name__}"
            raise ConfigurationError(msg)
        check_options(options, owner=owner, accepts=accepts, others=others)
        base = settings if settings is not None else _DEFAULTS
        return dataclasses.replace(base, **options) if options else base

    def replace(self, **options: Unpack[MemoryOptions]) -> MemorySettings:
        """These settings with `options` replaced (names checked as by every entry point)."""
        return MemorySettings.resolve(self, options, owner="MemorySettings.replace")

    def fold_policy(self, context_window: Callable[[], int] | None = None) -> FoldPolicy:
        """The `FoldPolicy` of the count, token or ``trigger`` / ``keep`` settings;
        `context_window` gives the summarizer model's window for a ``("fraction", f)``."""
        return fold_policy(
            trigger=self.trigger,
            keep=self.keep,
            max_turns=self.max_turns,
            keep_last=self.keep_last,
            max_tokens=self.max_tokens,
            keep_tokens=self.keep_tokens,
            hard_cap=self.hard_cap,
            context_window=context_window,
        )


_WHOLE_NUMBERS = (
    "max_turns",
    "keep_last",
    "max_tokens",
    "keep_tokens",
    "hard_cap",
    "max_words",
    "max_summary_tokens",
    "max_summary_chars",
    "max_topic_sections",
    "recall_tokens",
    "max_fact_tokens",
)
_OPTIONAL = {
    "max_turns",
    "max_tokens",
    "keep_tokens",
    "hard_cap",
    "max_summary_tokens",
    "recall_tokens",
    "max_fact_tokens",
}


def _policy_unless_fractions(settings: MemorySettings) -> FoldPolicy | None:
    """The policy, checked; None for a ``("fraction", f)`` limit, checked by `Compactor.build`
    once the summarizer model's window is known."""
    try:
        return settings.fold_policy(_unknown_window)
    except _NeedsWindow:
        return None


def _is_listener(value: object) -> bool:
    return isinstance(value, CompactionListener)


_FIELDS = frozenset(f.name for f in dataclasses.fields(MemorySettings))
_USED_BY: tuple[tuple[str, type[Any]], ...] = (
    ("Compactor.build", CompactionOptions),
    ("RollingSummaryChatMessageHistory", HistoryOptions),
    ("with_rolling_memory", MemoryOptions),
    ("RollingMemoryMiddleware", MemoryOptions),
)
_DEFAULTS = MemorySettings()
