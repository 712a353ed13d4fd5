"""OpenAI and Gemini summarizer constructors: build the chat model, check extra and key.

Owns the provider defaults (model, the SDK's own retries, timeout) and the errors for a
missing extra or key. The prompting and cleaning are `ChatModelSummarizer`'s.

Why the SDKs retry and not our layer: they know which statuses are worth another attempt
(408, 429, 5xx, dropped connections; never 400, 401, 403 or 404), and the OpenAI client honours
``Retry-After``. The engine's `timeout` bounds the whole call, retries included.
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel

from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, SummaryPrompt
from langchain_rolling_memory.errors import ConfigurationError, MissingCredentialsError, require
from langchain_rolling_memory.summarizers.chat_model import ChatModelSummarizer, chat_model_summarizer

DEFAULT_TIMEOUT = 30.0
"""Seconds one provider request may take (the engine has its own, longer, overall timeout)."""


def _has_key(kwargs: dict[str, Any], names: tuple[str, ...], env: tuple[str, ...]) -> bool:
    if any(kwargs.get(name) for name in names):
        return True
    return any(os.environ.get(var) for var in env)


def _missing_key(feature: str, env: tuple[str, ...], argument: str) -> MissingCredentialsError:
    variables = " or ".join(env)
    msg = (
        f"{feature} needs an API key: none was passed and {variables} is not set; "
        f"set {env[0]} in the environment or pass {argument}=..."
    )
    return MissingCredentialsError(msg)


def _check_retries(retries: int) -> None:
    if retries < 0:
        msg = f"retries must not be negative (0: a single request), got retries={retries!r}"
        raise ConfigurationError(msg)


def openai_summarizer(
    model: str = "gpt-4o-mini",
    *,
    prompt: SummaryPrompt | str | None = None,
    language: str | None = None,
    max_words: int = DEFAULT_MAX_WORDS,
    min_words: int = 20,
    structured: bool = False,
    retries: int = 2,
    **kwargs: Any,
) -> ChatModelSummarizer:
    """A summarizer on an OpenAI chat model (``pip install 'langchain-rolling-memory[openai]'``).

    The key comes from ``OPENAI_API_KEY`` unless ``api_key=`` is passed. Extra keyword
    arguments go to `langchain_openai.ChatOpenAI` (``base_url``, ``temperature``,
    ``timeout``...). Transient errors are retried `retries` times by the OpenAI client itself
    (exponential back-off, ``Retry-After`` honoured); a 400, 401, 403 or 404 is never retried.
    A summary under `min_words` words gets one stricter retry (see `ChatModelSummarizer`).
    Without `language`, the prompt is in the language of the memory it is given to (English
    alone); a `language` given here is kept (see `in_memory_language`). `prompt` is a
    `SummaryPrompt` or a built-in one's name (``"support"``, ``"compact"``; see
    `ChatModelSummarizer`).

    Example:
        >>> s = openai_summarizer("gpt-4o-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1")
        >>> s.model.model_name
        'gpt-4o-mini'
    """
    require("langchain_openai", "openai", feature="openai_summarizer")
    _check_retries(retries)
    env = ("OPENAI_API_KEY",)
    if not _has_key(kwargs, ("api_key", "openai_api_key"), env):
        raise _missing_key("openai_summarizer", env, "api_key")
    from langchain_openai import ChatOpenAI

    kwargs.setdefault("max_retries", retries)
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    chat: BaseChatModel = ChatOpenAI(model=model, **kwargs)
    return chat_model_summarizer(
        chat,
        prompt=prompt,
        language=language,
        max_words=max_words,
        min_words=min_words,
        structured=structured,
        retries=0,  # the client's own
    )


def gemini_summarizer(
    model: str = "gemini-2.5-flash",
    *,
    prompt: SummaryPrompt | str | None = None,
    language: str | None = None,
    max_words: int = DEFAULT_MAX_WORDS,
    min_words: int = 20,
    structured: bool = False,
    retries: int = 2,
    **kwargs: Any,
) -> ChatModelSummarizer:
    """A summarizer on a Gemini model (``pip install 'langchain-rolling-memory[google]'``).

    The key comes from ``GOOGLE_API_KEY`` (or ``GEMINI_API_KEY``) unless ``api_key=`` is
    passed. Extra keyword arguments go to `langchain_google_genai.ChatGoogleGenerativeAI`
    (``base_url``, ``temperature``, ``timeout``...). Transient errors are retried `retries`
    times by the Google client itself (exponential back-off with jitter); a 400, 401, 403 or
    404 is never retried. A summary under `min_words` words gets one stricter retry (see
    `ChatModelSummarizer`). Without `language`, the prompt is in the language of the memory it
    is given to (English alone); a `language` given here is kept (see `in_memory_language`).
    `prompt` is a `SummaryPrompt` or a built-in one's name (``"support"``, ``"compact"``).

    Example:
        >>> s = gemini_summarizer("gemini-2.5-flash", api_key="test", base_url="http://127.0.0.1:9")
        >>> s.model.model
        'gemini-2.5-flash'
    """
    require("langchain_google_genai", "google", feature="gemini_summarizer")
    _check_retries(retries)
    env = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    vertex = bool(kwargs.get("vertexai") or kwargs.get("credentials"))
    if not vertex and not _has_key(kwargs, ("api_key", "google_api_key"), env):
        raise _missing_key("gemini_summarizer", env, "api_key")
    from langchain_google_genai import ChatGoogleGenerativeAI

    # The Google client counts attempts, not retries: 1 means a single request.
    kwargs.setdefault("max_retries", retries + 1)
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    chat: BaseChatModel = ChatGoogleGenerativeAI(model=model, **kwargs)
    return chat_model_summarizer(
        chat,
        prompt=prompt,
        language=language,
        max_words=max_words,
        min_words=min_words,
        structured=structured,
        retries=0,  # the client's own
    )
