"""Lossless conversion of messages to JSON text and back; no storage, no policy."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

__all__ = ["dumps_message", "loads_message"]


def dumps_message(message: BaseMessage) -> str:
    """Serialize one message, keeping tool calls, ids, names, usage and content blocks."""
    if not isinstance(message, BaseMessage):
        msg = f"expected a langchain_core BaseMessage, got {type(message).__name__}: {message!r:.80}"
        raise TypeError(msg)
    return json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"))


def loads_message(text: str | bytes) -> BaseMessage:
    """Inverse of `dumps_message`."""
    data: dict[str, Any] = json.loads(text)
    return messages_from_dict([data])[0]
