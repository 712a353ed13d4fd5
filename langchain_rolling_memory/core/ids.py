"""Validation of client and session ids before they reach a key, a path or a query."""

from __future__ import annotations

import re

from langchain_rolling_memory.errors import InvalidIdError

MAX_ID_LENGTH = 128
_ALLOWED = re.compile(r"[A-Za-z0-9._:@-]+")


def validate_id(value: object, *, kind: str = "session_id") -> str:
    """Return `value` if it is a safe id, else raise `InvalidIdError`.

    A safe id is a non-empty string of at most 128 letters, digits and `._:@-`.
    Dots alone (`.`, `..`) are refused so that no id can name a parent path.

    Example:
        >>> validate_id("client-42", kind="client_id")
        'client-42'
    """
    if not isinstance(value, str):
        msg = f"{kind} must be a string, got {type(value).__name__}: {value!r}"
        raise InvalidIdError(msg)
    if not value:
        msg = f"{kind} must not be empty"
        raise InvalidIdError(msg)
    if len(value) > MAX_ID_LENGTH:
        msg = f"{kind} must be at most {MAX_ID_LENGTH} characters, got {len(value)}: {value[:40]!r}..."
        raise InvalidIdError(msg)
    if not _ALLOWED.fullmatch(value) or set(value) == {"."}:
        msg = f"{kind} may only contain letters, digits and '._:@-' (and not only dots), got {value!r}"
        raise InvalidIdError(msg)
    return value
