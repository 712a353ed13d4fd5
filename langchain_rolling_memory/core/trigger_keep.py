"""`trigger=` / `keep=` in LangChain's `SummarizationMiddleware` forms, turned into our limits.

Owns reading those forms (``("messages", N)``, ``("tokens", N)``, ``("fraction", f)`` of the
summarizer model's context window, a list of them, a one-key dict) and mapping them onto the
`FoldPolicy` settings beside today's names (`max_turns`, `keep_last`, `max_tokens`,
`keep_tokens`), refusing a mix of both. Pure: the context window is asked of a callable.
Where to cut is `cuts`'s; finding the summarizer's model is `summarizers.coerce`'s.

As in the middleware, a trigger fires when the count *reaches* its threshold: ``("messages",
N)`` is ``max_turns=N - 1`` (ours fires when the count *exceeds* `max_turns`), ``("tokens",
N)`` is ``max_tokens=N - 1``; several triggers in a list fire at the first one reached.
`keep` keeps its measure whichever trigger fired (`FoldPolicy.keep_by`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from langchain_rolling_memory.core.cuts import FoldPolicy, KeepBy
from langchain_rolling_memory.errors import ConfigurationError

ContextSize = Union[
    tuple[Literal["messages"], int],
    tuple[Literal["tokens"], int],
    tuple[Literal["fraction"], float],
]
"""``("messages", N)``, ``("tokens", N)`` or ``("fraction", f)``, as in `SummarizationMiddleware`."""

Trigger = Union[ContextSize, Mapping[str, float], list[Union[ContextSize, Mapping[str, float]]]]
"""One `ContextSize`, a one-key dict (``{"tokens": 4000}``), or a list of them (the first reached fires)."""


class _Default(int):
    """A default that can be told apart from the same number passed on purpose."""

    __slots__ = ()


HALF: Literal["half"] = "half"
"""``keep_last="half"``: the summary-memory lesson's rule, when `max_turns` messages are
unsummarized fold the oldest half and keep the newest half (`max_turns // 2`)."""

KeepLast = int | Literal["half"]
"""Messages a count compaction keeps: a number, or ``"half"`` of `max_turns`."""

DEFAULT_MAX_TURNS: int = _Default(12)
DEFAULT_KEEP_LAST: int = _Default(6)


def _given(value: object) -> bool:
    return value is not None and not isinstance(value, _Default)


def _size(item: object, name: str) -> tuple[str, float]:
    """One ``(kind, value)`` checked as the middleware checks it, but as a `ConfigurationError`."""
    if isinstance(item, Mapping):
        if len(item) != 1:
            msg = (
                f"{name}={dict(item)!r}: a dict with several limits means all of them at once (AND), "
                "which rolling memory does not support; pass a list of them (the first reached fires)"
            )
            raise ConfigurationError(msg)
        item = next(iter(item.items()))
    if not isinstance(item, tuple) or len(item) != 2:
        msg = f"{name} takes ('messages', N), ('tokens', N) or ('fraction', f), got {item!r}"
        raise ConfigurationError(msg)
    kind, value = item
    if kind not in ("messages", "tokens", "fraction"):
        msg = f"{name}={item!r}: the kind must be 'messages', 'tokens' or 'fraction', got {kind!r}"
        raise ConfigurationError(msg)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"{name}={item!r}: the value must be a number, got {type(value).__name__}"
        raise ConfigurationError(msg)
    if kind == "fraction" and not 0 < value <= 1:
        msg = f"{name}={item!r}: a fraction must be in (0, 1]"
        raise ConfigurationError(msg)
    if kind != "fraction" and (not isinstance(value, int) or value < 1):
        msg = f"{name}={item!r}: {kind} must be a positive integer"
        raise ConfigurationError(msg)
    return kind, value


def _tokens(kind: str, value: float, window: Callable[[], int]) -> int:
    return int(value) if kind == "tokens" else max(1, int(window() * value))


def _trigger_limits(trigger: object, window: Callable[[], int]) -> tuple[int | None, int | None]:
    """``(max_turns, max_tokens)`` of a trigger: each fires when its threshold is reached."""
    items = trigger if isinstance(trigger, list) else [trigger]
    if not items:
        msg = "trigger=[] sets no limit; pass ('messages', N), ('tokens', N) or ('fraction', f)"
        raise ConfigurationError(msg)
    sizes = [_size(item, "trigger") for item in items]
    messages = [int(v) for k, v in sizes if k == "messages"]
    tokens = [_tokens(k, v, window) for k, v in sizes if k != "messages"]
    if messages and min(messages) < 3:
        msg = f"trigger={trigger!r}: a messages trigger must be at least 3 (fold some, keep at least one)"
        raise ConfigurationError(msg)
    if tokens and min(tokens) < 2:
        msg = f"trigger={trigger!r}: a tokens trigger must be at least 2"
        raise ConfigurationError(msg)
    return (min(messages) - 1 if messages else None, min(tokens) - 1 if tokens else None)


def _keep_limits(keep: object, window: Callable[[], int]) -> tuple[KeepBy, int]:
    if isinstance(keep, list):
        msg = f"keep={keep!r}: keep takes one ('messages', N), ('tokens', N) or ('fraction', f), not a list"
        raise ConfigurationError(msg)
    kind, value = _size(keep, "keep")
    if kind == "messages":
        return "messages", int(value)
    return "tokens", _tokens(kind, value, window)


def fold_policy(
    *,
    trigger: Trigger | None = None,
    keep: ContextSize | None = None,
    max_turns: int | None = DEFAULT_MAX_TURNS,
    keep_last: KeepLast = DEFAULT_KEEP_LAST,
    max_tokens: int | None = None,
    keep_tokens: int | None = None,
    hard_cap: int | None = None,
    context_window: Callable[[], int] | None = None,
) -> FoldPolicy:
    """The `FoldPolicy` of either today's names or `SummarizationMiddleware`'s forms.

    Args:
        trigger: when to compact (see `Trigger`); replaces `max_turns` and `max_tokens`.
        keep: what a compaction keeps (a `ContextSize`); replaces `keep_last` and `keep_tokens`.
        max_turns, keep_last, max_tokens, keep_tokens, hard_cap: today's names (`FoldPolicy`);
            ``keep_last="half"`` keeps half of `max_turns` (the oldest half is folded), as
            `keep_tokens` keeps half of `max_tokens` when it is not given.
        context_window: the summarizer model's ``max_input_tokens``, asked only for a
            ``("fraction", f)``; it raises `ConfigurationError` when the model has no profile.

    Raises:
        ConfigurationError: a form is malformed, a new form is mixed with the old name it
            replaces, or the limits contradict each other (keep as much as the trigger...).

    Example:
        >>> policy = fold_policy(trigger=("messages", 10), keep=("messages", 4))
        >>> policy.max_turns, policy.keep_last, policy.keep_by
        (9, 4, 'messages')
        >>> fold_policy(max_turns=20, keep_last="half").keep_last
        10
    """
    keep_last = _kept_half(keep_last, max_turns)
    if trigger is not None or keep is not None:
        old = {
            "max_turns": max_turns,
            "keep_last": keep_last,
            "max_tokens": max_tokens,
            "keep_tokens": keep_tokens,
        }
        mixed = {name: value for name, value in old.items() if _given(value)}
        if mixed:
            names = ", ".join(f"{name}={value!r}" for name, value in mixed.items())
            msg = (
                f"pass trigger=/keep= (SummarizationMiddleware's forms) or max_turns/keep_last/"
                f"max_tokens/keep_tokens, not both: got trigger={trigger!r}, keep={keep!r} and {names}"
            )
            raise ConfigurationError(msg)
    window = context_window or _no_window
    settings: dict[str, Any] = {
        "max_turns": max_turns,
        "keep_last": keep_last,
        "max_tokens": max_tokens,
        "keep_tokens": keep_tokens,
        "hard_cap": hard_cap,
    }
    if trigger is not None:
        settings["max_turns"], settings["max_tokens"] = _trigger_limits(trigger, window)
    if keep is not None:
        keep_by, amount = _keep_limits(keep, window)
        settings["keep_by"] = keep_by
        settings["keep_last" if keep_by == "messages" else "keep_tokens"] = amount
    try:
        return FoldPolicy(**settings)
    except ConfigurationError as exc:
        if trigger is None and keep is None:
            raise
        shown = {k: v for k, v in settings.items() if v is not None and k != "hard_cap"}
        msg = (
            f"trigger={trigger!r}, keep={keep!r} contradict each other or the defaults "
            f"(read as {', '.join(f'{k}={v!r}' for k, v in shown.items())}): {exc}"
        )
        raise ConfigurationError(msg) from None


def _kept_half(keep_last: KeepLast, max_turns: int | None) -> int:
    if keep_last != HALF:
        return keep_last  # an int, or FoldPolicy refuses it
    if max_turns is None or isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 2:
        msg = f"keep_last='half' keeps half of max_turns, which must then be a whole number >= 2, got max_turns={max_turns!r}"
        raise ConfigurationError(msg)
    return max_turns // 2


def _no_window() -> int:
    msg = "a ('fraction', f) limit needs the summarizer model's context window, and none was given"
    raise ConfigurationError(msg)
