"""Lossless conversion of messages to JSON text and back, and the check that text can be stored
exactly on every backend; no storage, no policy."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from langchain_rolling_memory.errors import InvalidTextError


def odd_character(text: str, *, allow_nul: bool) -> str | None:
    """Why `text` cannot be stored exactly everywhere (None: it can).

    A lone surrogate has no UTF-8 form, so SQLite, PostgreSQL and Redis cannot hold it; a NUL
    is refused by PostgreSQL's TEXT. JSON written by this package escapes NUL (``\\u0000``),
    so only raw text columns (summary, fact) need `allow_nul=False`.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"an unpaired surrogate {text[exc.start]!r} at character {exc.start} "
            "(UTF-8 cannot encode it; decode the source bytes with errors='replace', or remove it)"
        )
    if not allow_nul and "\x00" in text:
        return (
            f"a NUL character at character {text.index(chr(0))} (remove it, e.g. text.replace('\\x00', ''))"
        )
    return None


def check_storable(text: str, *, what: str, allow_nul: bool = False) -> str:
    """Return `text` if every backend stores it exactly, else raise `InvalidTextError`."""
    why = odd_character(text, allow_nul=allow_nul)
    if why is not None:
        msg = f"{what} cannot be stored: it contains {why}"
        raise InvalidTextError(msg)
    return text


def dumps_message(message: BaseMessage) -> str:
    """Serialize one message, keeping tool calls, ids, names, usage and content blocks.

    Control characters (NUL included) are escaped by JSON, so any content round-trips;
    a lone surrogate anywhere in the message raises `InvalidTextError`.
    """
    if not isinstance(message, BaseMessage):
        msg = f"expected a langchain_core BaseMessage, got {type(message).__name__}: {message!r:.80}"
        raise TypeError(msg)
    text = json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"))
    return check_storable(text, what=f"{type(message).__name__} (as JSON)", allow_nul=True)


def loads_message(text: str | bytes) -> BaseMessage:
    """Inverse of `dumps_message`."""
    data: dict[str, Any] = json.loads(text)
    return message_of(data)


def message_of(data: dict[str, Any]) -> BaseMessage:
    """The message of `dumps_message`'s JSON once parsed (`loads_message` is both steps)."""
    return messages_from_dict([data])[0]
