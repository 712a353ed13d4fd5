"""Opening a store by URL (the scheme picks the backend, our ``prefix`` and ``fact_ttl``
parameters are taken out), and refusing anything else handed to an adapter as its store.

Owns the URL forms in `stores/__init__.py`'s table and the import of the backend a URL names
(only when used, so extras stay optional); the backends own what their URLs mean to the driver.
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores.api import RollingStore

# scheme -> (module, class name); imported only when used, so extras stay optional.
BACKENDS: dict[str, tuple[str, str]] = {
    "memory": ("langchain_rolling_memory.stores.memory", "InMemoryRollingStore"),
    "sqlite": ("langchain_rolling_memory.stores.sqlite", "SQLiteRollingStore"),
    "postgresql": ("langchain_rolling_memory.stores.postgres", "PostgresRollingStore"),
    "postgres": ("langchain_rolling_memory.stores.postgres", "PostgresRollingStore"),
    "redis": ("langchain_rolling_memory.stores.redis", "RedisRollingStore"),
    "rediss": ("langchain_rolling_memory.stores.redis", "RedisRollingStore"),
}


def open_store(url: str, **options: Any) -> RollingStore:
    """Open the backend a URL names.

    Args:
        url: ``memory://``, ``sqlite:///path.db``, ``postgresql://...`` or ``redis://...``.
        **options: passed to the backend (``setup=False``, ``table_prefix`` / ``key_prefix``, fact limits,
            ``fact_filter``...).

    Example:
        >>> store = open_store("memory://")
        >>> type(store).__name__
        'InMemoryRollingStore'
    """
    if not isinstance(url, str) or "://" not in url:
        msg = f"a store URL looks like 'sqlite:///memory.db' or 'memory://', got {url!r}"
        raise ConfigurationError(msg)
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0].lower()
    if scheme not in BACKENDS:
        msg = f"unknown store URL scheme {parts.scheme!r} in {url!r}; use one of {sorted(BACKENDS)}"
        raise ConfigurationError(msg)
    module_name, class_name = BACKENDS[scheme]
    cls = getattr(importlib.import_module(module_name), class_name)
    if scheme == "memory":
        return cls(**url_options(url, options)[1])  # type: ignore[no-any-return]
    if scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            msg = f"a SQLite URL has no host: use 'sqlite:///relative.db' or 'sqlite:////abs.db', got {url!r}"
            raise ConfigurationError(msg)
        if not path:
            msg = f"a SQLite URL needs a path, got {url!r}"
            raise ConfigurationError(msg)
        return cls(path, **url_options(url, options, "table_prefix")[1])  # type: ignore[no-any-return]
    # Server backends take the URL whole (minus our own parameters, see `url_options`).
    return cls.from_url(url, **options)  # type: ignore[no-any-return]


_OURS = ("prefix", "fact_ttl")


def split_prefix(url: str) -> tuple[str, str | None]:
    """Take our own query parameters (``prefix``, ``fact_ttl``) out of a URL: ``(url for the
    driver, prefix or None)``. Drivers would reject or misread them."""
    clean, ours = _split(url)
    return clean, ours.get("prefix")


def url_options(url: str, options: dict[str, Any], prefix_option: str = "") -> tuple[str, dict[str, Any]]:
    """``(url for the driver, options)``: `options` completed by our own query parameters
    (an option passed by name wins): ``prefix`` as `prefix_option` (``table_prefix``,
    ``key_prefix``), ``fact_ttl`` as seconds (checked by the store)."""
    clean, ours = _split(url)
    if prefix_option and "prefix" in ours:
        options.setdefault(prefix_option, ours["prefix"])
    if "fact_ttl" in ours:
        options.setdefault("fact_ttl", _number(ours["fact_ttl"]))
    return clean, options


def _split(url: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in pairs if k in _OURS}  # the last one given wins
    rest = urlencode([(k, v) for k, v in pairs if k not in _OURS])
    return urlunsplit(parts._replace(query=rest)), ours


def _number(text: str) -> float | str:
    """A URL's number as a float; anything else as it is, for the store to refuse by name."""
    try:
        return float(text)
    except ValueError:
        return text


def rolling_store(store: object, *, owner: str) -> RollingStore:
    """`store` if it is a `RollingStore`; else a `ConfigurationError` naming what was passed.

    Checked where an adapter (`owner`) is built, so a wrong object (LangGraph's `BaseStore`, a
    URL string) fails there rather than with an `AttributeError` at the first call.

    Example:
        >>> rolling_store("memory://", owner="with_rolling_memory")
        Traceback (most recent call last):
        ...
        langchain_rolling_memory.errors.ConfigurationError: with_rolling_memory: store must be a RollingStore, got str ('memory://'); open one with open_store('memory://')
    """
    if isinstance(store, RollingStore):
        return store
    kind = type(store)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(store, str):
        hint = f" ({store!r:.80}); open one with open_store({store!r:.80})"
    elif any(base.__module__.startswith("langgraph.store") for base in kind.__mro__):
        hint = (
            "; LangGraph's BaseStore is the graph's store= (long-term items), not a transcript "
            "store: open ours with open_store(url), and wrap it in RollingFactsStore to show "
            "its facts to the graph's store"
        )
    else:
        hint = "; open one with open_store(url), e.g. open_store('sqlite:///memory.db')"
    msg = f"{owner}: store must be a RollingStore, got {name}{hint}"
    raise ConfigurationError(msg)
