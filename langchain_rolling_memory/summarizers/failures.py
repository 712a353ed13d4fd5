"""What a provider failure is: worth retrying or not, and how to say it in one line.

Owns the reading of the exceptions chat model clients raise: LangChain's `ModelError` types
(with their ``is_retryable``), the HTTP status an SDK attaches, the provider that raised, and
the provider's own message. It retries nothing (the SDKs and `Runnable.with_retry` do) and
decides no back-off (that is the engine's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
)

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
"""Statuses a retry of the same request may get past (the SDKs retry the same ones)."""

PERMANENT_STATUS = frozenset({400, 401, 403, 404, 422})
"""Statuses the same request will always get again: bad key, no access, no such model, bad request."""

_PERMANENT_TYPES = (
    ModelAuthenticationError,
    ModelPermissionDeniedError,
    ModelNotFoundError,
    ModelInvalidRequestError,
)

_PROVIDERS = {
    "openai": "OpenAI",
    "langchain_openai": "OpenAI",
    "google": "Gemini",
    "langchain_google_genai": "Gemini",
    "anthropic": "Anthropic",
    "langchain_anthropic": "Anthropic",
}

_HINTS = {
    401: "check the API key",
    403: "check the key's access to this model",
    404: "check the model name and base URL",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its causes (explicit or implicit), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK attached to `exc` or to one of its causes, if any."""
    for current in _chain(exc):
        for attribute in ("status_code", "code", "status"):
            status = getattr(current, attribute, None)
            if isinstance(status, int) and 100 <= status <= 599:
                return status
    return None


def is_transient_error(exc: BaseException) -> bool:
    """True if retrying the same request may succeed (rate limit, 5xx, timeout, connection).

    Reads LangChain's ``ModelError.is_retryable`` first (every current provider integration
    raises those), then the builtin timeout and connection errors and the HTTP status along
    the ``__cause__`` chain.
    """
    for current in _chain(exc):
        if isinstance(current, ModelError):
            return current.is_retryable
        if isinstance(current, (TimeoutError, ConnectionError)):
            return True
    return status_of(exc) in TRANSIENT_STATUS


def is_permanent_error(exc: BaseException) -> bool:
    """True if the same request will fail the same way (HTTP 400, 401, 403, 404, 422)."""
    if any(isinstance(current, _PERMANENT_TYPES) for current in _chain(exc)):
        return True
    return status_of(exc) in PERMANENT_STATUS


def is_provider_error(exc: BaseException) -> bool:
    """True if `exc` came from a model provider's client (not from our code or a store)."""
    return any(isinstance(current, ModelError) for current in _chain(exc)) or _provider(exc) is not None


def _provider(exc: BaseException) -> str | None:
    for current in _chain(exc):
        root = type(current).__module__.split(".", 1)[0]
        if root in _PROVIDERS:
            return _PROVIDERS[root]
    return None


def _message(exc: BaseException) -> str:
    """The provider's own words: the error body's message when the SDK kept it, else the
    SDK's message with the deepest cause ("Connection error. ([Errno 111] Connection refused)")."""
    chain = list(_chain(exc))
    for current in chain:
        body: Any = getattr(current, "body", None)
        if isinstance(body, dict):
            inner = body.get("error", body)
            if isinstance(inner, dict) and isinstance(inner.get("message"), str):
                return str(inner["message"])
    said = next(
        (m for c in chain[1:] if isinstance(m := getattr(c, "message", None), str) and m),
        str(exc),
    )
    deepest = str(chain[-1])
    if deepest and deepest not in said:
        said = f"{said} ({deepest})" if said else deepest
    return said or type(exc).__name__


def describe_error(exc: BaseException, *, hint: bool = True) -> str:
    """One line that names the provider, the HTTP status and the cause (and, with `hint`,
    what to check for a 401, 403 or 404).

    Example:
        ``"OpenAI: HTTP 401: Incorrect API key provided (check the API key)"``
    """
    provider = _provider(exc)
    status = status_of(exc)
    parts = [provider] if provider else [type(exc).__name__]
    if status is not None:
        parts.append(f"HTTP {status}")
    message = " ".join(_message(exc).split())
    if len(message) > 300:
        message = message[:297] + "..."
    parts.append(message)
    line = ": ".join(parts)
    advice = _HINTS.get(status or 0) if hint else None
    return f"{line} ({advice})" if advice else line
