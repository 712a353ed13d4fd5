"""Where to cut a message list: pure functions, no I/O, no clock.

Owns the count and token policies (the limits of a rolling summary and of a window, and where
they cut); the tool-pair rule they obey is `tool_pairs`, the ``trigger=`` /
``keep=`` forms that map onto them `trigger_keep`. It does not store, summarize or
decide *when* to run (that is the engine's job).

A *cut* is an index ``c`` into a list of messages: ``messages[:c]`` is folded (or dropped
from a window) and ``messages[c:]`` is kept. A cut is *tool-safe* when the kept part does
not start with a `ToolMessage` and no `ToolMessage` in the kept part answers an
`AIMessage` that was cut away (parallel tool calls included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_rolling_memory.core.tool_pairs import (
    _unsafe_suffix,
    pending_calls,
    tool_safe_cut,
)
from langchain_rolling_memory.errors import ConfigurationError

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens of a list of messages, like `count_tokens_approximately`."""


def count_tokens(messages: Sequence[BaseMessage]) -> int:
    """Default token counter: `langchain_core`'s `count_tokens_approximately`."""
    return count_tokens_approximately(messages)


def _suffix_within(token_counts: Sequence[int], budget: int) -> int:
    """Smallest cut whose kept suffix fits in `budget` tokens."""
    total = 0
    cut = len(token_counts)
    while cut > 0 and total + token_counts[cut - 1] <= budget:
        total += token_counts[cut - 1]
        cut -= 1
    return cut


def latest_human(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the latest `HumanMessage` (the question being answered), None if there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None


def _kept_from(
    n: int,
    due: tuple[bool, bool],
    *,
    keep_by: KeepBy | None,
    keep_last: int,
    budget: int | None,
    token_counts: Sequence[int] | None,
) -> int:
    """Where the kept part starts once a limit is exceeded (``due``: by count, by tokens).

    With `keep_by` the same measure is kept whatever limit was exceeded; without, each
    limit keeps its own (`keep_last` after the count, `budget` tokens after the tokens)."""
    by_count, by_tokens = due
    if not (by_count or by_tokens):
        return 0
    if keep_by == "messages":
        return n - keep_last
    if keep_by == "tokens":
        return _suffix_within(token_counts or [], budget or 0)
    target = n - keep_last if by_count else 0
    if by_tokens and token_counts is not None and budget is not None:
        target = max(target, _suffix_within(token_counts, budget))
    return target


def fold_cut(
    messages: Sequence[BaseMessage],
    *,
    max_turns: int | None = 12,
    keep_last: int = 6,
    max_tokens: int | None = None,
    keep_tokens: int | None = None,
    token_counts: Sequence[int] | None = None,
    keep_by: KeepBy | None = None,
) -> int:
    """How many leading unsummarized messages to fold now (0: no compaction is due).

    Hysteresis: nothing happens until the messages exceed `max_turns` (or `max_tokens`);
    then all but the last `keep_last` (or the last `keep_tokens` worth) are folded, so a
    summary call happens about once every ``max_turns - keep_last + 1`` messages.
    `keep_by` (``"messages"`` or ``"tokens"``) keeps that measure whichever limit was
    exceeded, as `SummarizationMiddleware`'s ``keep=`` does.
    The cut is tool-safe and never folds the latest `HumanMessage`.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> msgs = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d"),
        ...         HumanMessage("e")]
        >>> fold_cut(msgs, max_turns=4, keep_last=2)
        3
    """
    n = len(messages)
    if (max_tokens is not None or keep_by == "tokens") and (token_counts is None or len(token_counts) != n):
        msg = (
            f"token_counts must give one count per message, got "
            f"{None if token_counts is None else len(token_counts)} for {n} messages"
        )
        raise ConfigurationError(msg)
    due = (
        max_turns is not None and n > max_turns,
        max_tokens is not None and token_counts is not None and sum(token_counts) > max_tokens,
    )
    target = _kept_from(
        n,
        due,
        keep_by=keep_by,
        keep_last=keep_last,
        budget=_budget(max_tokens, keep_tokens),
        token_counts=token_counts,
    )
    if target <= 0:
        return 0
    human = latest_human(messages)
    if human is not None:
        target = min(target, human)
    return tool_safe_cut(messages, min(target, pending_calls(messages)), keep_more=True)


def _budget(max_tokens: int | None, keep_tokens: int | None) -> int | None:
    """Tokens kept after a compaction by tokens (default: half the limit)."""
    if keep_tokens is not None:
        return keep_tokens
    return None if max_tokens is None else max_tokens // 2


def question_fold_cut(
    messages: Sequence[BaseMessage],
    *,
    max_turns: int | None = 12,
    keep_last: int = 6,
    max_tokens: int | None = None,
    keep_tokens: int | None = None,
    token_counts: Sequence[int] | None = None,
    keep_by: KeepBy | None = None,
) -> int:
    """The cut past the latest `HumanMessage` when what starts there alone exceeds the limits
    (0: it does not, or nothing after the question would be folded).

    A long tool loop answers one question: `fold_cut` stops at the question, so the loop
    would grow past every limit. This cut folds the question and the oldest tool exchanges
    after it, keeping the last `keep_last` (or `keep_tokens` worth) tool-safe. The caller
    must keep the question itself in the view (see `with_question`): it is folded into the
    summary and still sent verbatim, never dropped.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> msgs = [HumanMessage("q"), *[AIMessage(str(i)) for i in range(5)]]
        >>> fold_cut(msgs, max_turns=4, keep_last=2), question_fold_cut(msgs, max_turns=4, keep_last=2)
        (0, 4)
    """
    human = latest_human(messages)
    if human is None:
        return 0
    n = len(messages)
    counts = token_counts if token_counts is not None and len(token_counts) == n else None
    due = (
        max_turns is not None and n - human > max_turns,
        max_tokens is not None and counts is not None and sum(counts[human:]) > max_tokens,
    )
    if keep_by == "tokens" and counts is None:
        return 0
    target = _kept_from(
        n,
        due,
        keep_by=keep_by,
        keep_last=keep_last,
        budget=_budget(max_tokens, keep_tokens),
        token_counts=counts,
    )
    target = min(target, pending_calls(messages))
    cut = tool_safe_cut(messages, target, keep_more=True) if target > human + 1 else 0
    # Folding the question alone (or less) gains nothing: it is sent either way.
    return cut if cut > human + 1 else 0


def with_question(kept: Sequence[BaseMessage], question: BaseMessage | None) -> list[BaseMessage]:
    """`kept` (a tool-safe suffix of a view) with the latest user message in front if it is
    not already in it: the question is always sent, whatever was folded or cut before it."""
    if question is None or any(m is question for m in kept):
        return list(kept)
    return [question, *kept]


_MARKER = (
    "\n[... {n} characters of this message are not shown here: it is longer than the memory's limit ...]\n"
)


def shorten_message(
    message: BaseMessage, max_tokens: int, token_counter: TokenCounter = count_tokens
) -> BaseMessage:
    """`message` whole if it fits in `max_tokens`, else a copy whose text keeps its start
    and end around a visible marker saying how much was left out (the transcript keeps it
    whole). Only plain-text content is shortened.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> short = shorten_message(HumanMessage("word " * 4000), max_tokens=200)
        >>> "characters of this message are not shown" in short.text, len(short.text) < 1000
        (True, True)
    """
    content = message.content
    if not isinstance(content, str) or token_counter([message]) <= max_tokens:
        return message
    keep = len(content)
    while keep > 1:
        keep = keep * 3 // 4
        head, tail = content[: keep - keep // 4], content[len(content) - keep // 4 :]
        text = head + _MARKER.format(n=len(content) - len(head) - len(tail)) + tail
        shorter = message.model_copy(update={"content": text})
        if token_counter([shorter]) <= max_tokens:
            return shorter
    return message.model_copy(update={"content": _MARKER.format(n=len(content)).strip()})


KeepBy = Literal["messages", "tokens"]
"""What a compaction keeps whichever limit was exceeded (`FoldPolicy.keep_by`)."""

StartOn = Literal["human"]
"""Where a window may start, as in `trim_messages`'s ``start_on``: ``"human"`` (a user message)."""


def _check_start_on(start_on: object) -> None:
    if start_on not in (None, "human"):
        msg = f'start_on must be "human" or None, got start_on={start_on!r}'
        raise ConfigurationError(msg)


def _start_on_human(messages: Sequence[BaseMessage], cut: int) -> int:
    """Move a tool-safe `cut` forward to the first user message of the kept part; if the kept
    part holds none, back to the latest user message (the question is always sent)."""
    lowest = _unsafe_suffix(messages)
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and lowest[i] >= i]
    later = [i for i in humans if i >= cut]
    if later:
        return later[0]
    return humans[-1] if humans else cut


def window_cut(
    messages: Sequence[BaseMessage],
    *,
    max_messages: int | None = 20,
    max_tokens: int | None = None,
    token_counts: Sequence[int] | None = None,
    start_on: StartOn | None = None,
    backlog: bool = False,
) -> int:
    """Where a plain window starts: the last messages within both limits, tool-safe.

    The cut moves forward if needed, so the limits always hold (the window may be shorter
    than `max_messages`, never longer). With ``start_on="human"``, when the window cuts, it
    moves further forward to the first user message, so a cut window never opens on an
    assistant reply; if the window would then hold no user message, it starts at the latest
    one instead, over the limits if need be (the latest user message is always kept). A
    window that fits is sent whole, a leading system message or greeting included; it cuts
    when the limits do, or when `backlog` says earlier messages exist that `messages` (read
    from the end of a transcript) does not hold.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> msgs = [HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d")]
        >>> window_cut(msgs, max_messages=3), window_cut(msgs, max_messages=3, start_on="human")
        (1, 2)
    """
    _check_start_on(start_on)
    n = len(messages)
    cut = 0
    if max_messages is not None:
        cut = max(cut, n - max_messages)
    if max_tokens is not None:
        if token_counts is None or len(token_counts) != n:
            msg = "token_counts must give one count per message when max_tokens is set"
            raise ConfigurationError(msg)
        cut = max(cut, _suffix_within(token_counts, max_tokens))
    cuts = backlog or cut > 0  # dropping an orphan tool result alone is not a cut
    cut = tool_safe_cut(messages, cut, keep_more=False)
    if start_on == "human" and cuts:
        cut = _start_on_human(messages, cut)
    return cut


@dataclass(frozen=True)
class FoldPolicy:
    """Limits of a rolling summary: when to compact and how much to keep.

    Attributes:
        max_turns: compact when the unsummarized messages exceed this count (None: never by count).
        keep_last: messages kept verbatim after a compaction by count.
        max_tokens: compact when the unsummarized messages exceed this many tokens.
        keep_tokens: tokens kept verbatim after a compaction by tokens (default max_tokens // 2).
        hard_cap: if compaction keeps failing and the unsummarized part exceeds this many
            messages, the view falls back to a plain window of `max_turns` messages.
        start_on: where that fallback window starts (``"human"``: on a user message, the
            latest one at least; None: wherever the limits put it).
        keep_by: ``"messages"`` (the last `keep_last`) or ``"tokens"`` (the last `keep_tokens`
            worth) kept whichever limit was exceeded, as `SummarizationMiddleware`'s
            ``keep=``; None: each limit keeps its own (`keep_last` after `max_turns`,
            `keep_tokens` after `max_tokens`). See `trigger_keep` for ``trigger=`` / ``keep=``.
    """

    max_turns: int | None = 12
    keep_last: int = 6
    max_tokens: int | None = None
    keep_tokens: int | None = None
    hard_cap: int | None = None
    start_on: StartOn | None = "human"
    keep_by: KeepBy | None = None

    def __post_init__(self) -> None:
        _check_start_on(self.start_on)
        if self.keep_by not in (None, "messages", "tokens"):
            msg = f'keep_by must be "messages", "tokens" or None, got keep_by={self.keep_by!r}'
            raise ConfigurationError(msg)
        if self.max_turns is None and self.max_tokens is None:
            msg = "set max_turns or max_tokens (or both), got neither"
            raise ConfigurationError(msg)
        if self.keep_last < 1:
            msg = f"keep_last must be at least 1, got keep_last={self.keep_last!r}"
            raise ConfigurationError(msg)
        if self.keep_by == "tokens" and self.keep_tokens is None:
            msg = 'keep_by="tokens" needs keep_tokens'
            raise ConfigurationError(msg)
        if self.max_turns is not None:
            if self.max_turns < 2:
                msg = f"max_turns must be at least 2, got max_turns={self.max_turns!r}"
                raise ConfigurationError(msg)
            if self.keep_by != "tokens" and not 1 <= self.keep_last < self.max_turns:
                msg = (
                    "keep_last must be at least 1 and smaller than max_turns, got "
                    f"keep_last={self.keep_last!r}, max_turns={self.max_turns!r}"
                )
                raise ConfigurationError(msg)
        if self.max_tokens is not None:
            if self.max_tokens < 1:
                msg = f"max_tokens must be positive, got max_tokens={self.max_tokens!r}"
                raise ConfigurationError(msg)
            if self.keep_tokens is not None and not 0 < self.keep_tokens < self.max_tokens:
                msg = (
                    "keep_tokens must be positive and smaller than max_tokens, got "
                    f"keep_tokens={self.keep_tokens!r}, max_tokens={self.max_tokens!r}"
                )
                raise ConfigurationError(msg)
        elif self.keep_tokens is not None and self.keep_by != "tokens":
            msg = f"keep_tokens needs max_tokens, got keep_tokens={self.keep_tokens!r}"
            raise ConfigurationError(msg)
        elif self.keep_tokens is not None and self.keep_tokens < 1:
            msg = f"keep_tokens must be positive, got keep_tokens={self.keep_tokens!r}"
            raise ConfigurationError(msg)
        if self.hard_cap is not None and self.max_turns is not None and self.hard_cap <= self.max_turns:
            msg = (
                f"hard_cap must be larger than max_turns, got hard_cap={self.hard_cap!r}, "
                f"max_turns={self.max_turns!r}"
            )
            raise ConfigurationError(msg)

    @property
    def uses_tokens(self) -> bool:
        return self.max_tokens is not None or self.keep_by == "tokens"

    @property
    def cap(self) -> int:
        """Unsummarized messages allowed in the view before it falls back to a window."""
        if self.hard_cap is not None:
            return self.hard_cap
        return 3 * (self.max_turns if self.max_turns is not None else 20)

    def cut(self, messages: Sequence[BaseMessage], token_counts: Sequence[int] | None = None) -> int:
        """Number of leading messages to fold now: `fold_cut`, or past the latest user
        message when what starts there alone exceeds the limits (`question_fold_cut`; the
        caller keeps that message in the view)."""
        return max(
            fold_cut(
                messages,
                max_turns=self.max_turns,
                keep_last=self.keep_last,
                max_tokens=self.max_tokens,
                keep_tokens=self.keep_tokens,
                token_counts=token_counts,
                keep_by=self.keep_by,
            ),
            question_fold_cut(
                messages,
                max_turns=self.max_turns,
                keep_last=self.keep_last,
                max_tokens=self.max_tokens,
                keep_tokens=self.keep_tokens,
                token_counts=token_counts,
                keep_by=self.keep_by,
            ),
        )

    @property
    def question_tokens(self) -> int | None:
        """Most tokens of the latest user message in a view; beyond, it is shortened with a
        visible marker (`shorten_message`). None: no token limit, never shortened."""
        return None if self.max_tokens is None else 3 * self.max_tokens

    def fallback_cut(
        self,
        messages: Sequence[BaseMessage],
        token_counts: Sequence[int] | None = None,
        *,
        backlog: bool = False,
    ) -> int:
        """Cut of the plain window used while compaction is failing (0 if under the cap).

        `backlog` says that more unsummarized messages exist than `messages` holds.
        """
        over_count = backlog or len(messages) > self.cap
        over_tokens = (
            self.max_tokens is not None
            and token_counts is not None
            and sum(token_counts) > 3 * self.max_tokens
        )
        if not (over_count or over_tokens):
            return 0
        return window_cut(
            messages,
            max_messages=self.max_turns if self.max_turns is not None else None,
            max_tokens=self.max_tokens,
            token_counts=token_counts if self.max_tokens is not None else None,
            start_on=self.start_on,
            backlog=backlog,
        )


@dataclass(frozen=True)
class WindowPolicy:
    """Limits of a plain window: the last `max_messages`, within `max_tokens` if set; a window
    that cuts starts on a user message unless `start_on` is None (see `window_cut`)."""

    max_messages: int | None = 20
    max_tokens: int | None = None
    start_on: StartOn | None = "human"

    def __post_init__(self) -> None:
        _check_start_on(self.start_on)
        if self.max_messages is None and self.max_tokens is None:
            msg = "set max_messages or max_tokens (or both), got neither"
            raise ConfigurationError(msg)
        if self.max_messages is not None and self.max_messages < 1:
            msg = f"max_messages must be at least 1, got max_messages={self.max_messages!r}"
            raise ConfigurationError(msg)
        if self.max_tokens is not None and self.max_tokens < 1:
            msg = f"max_tokens must be positive, got max_tokens={self.max_tokens!r}"
            raise ConfigurationError(msg)

    def cut(
        self,
        messages: Sequence[BaseMessage],
        token_counts: Sequence[int] | None = None,
        *,
        backlog: bool = False,
    ) -> int:
        """`window_cut` with these limits; `backlog`: earlier messages exist than `messages` holds."""
        return window_cut(
            messages,
            max_messages=self.max_messages,
            max_tokens=self.max_tokens,
            token_counts=token_counts,
            start_on=self.start_on,
            backlog=backlog,
        )
