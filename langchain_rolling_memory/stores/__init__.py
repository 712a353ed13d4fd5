"""Storage backends behind one contract, opened by URL.

| URL | backend | extra |
| --- | --- | --- |
| ``memory://`` | `InMemoryRollingStore` (this process only) | none |
| ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:`` | `SQLiteRollingStore` | none |
| ``postgresql://user@host:5432/db`` | `PostgresRollingStore` | ``postgres`` |
| ``redis://host:6379/0`` | `RedisRollingStore` | ``redis`` |

A ``prefix`` query parameter sets the table or key prefix: ``sqlite:///app.db?prefix=app1_``.
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.records import Fact, FactFilter, SessionInfo, StoredMessage, SummaryRecord
from langchain_rolling_memory.stores.base import RollingStore
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.stores.sqlite import SQLiteRollingStore

__all__ = [
    "Fact",
    "FactFilter",
    "InMemoryRollingStore",
    "RollingStore",
    "SQLiteRollingStore",
    "SessionInfo",
    "StoredMessage",
    "SummaryRecord",
    "open_store",
]

# scheme -> (module, class name); imported only when used, so extras stay optional.
_BACKENDS: dict[str, tuple[str, str]] = {
    "memory": ("langchain_rolling_memory.stores.memory", "InMemoryRollingStore"),
    "sqlite": ("langchain_rolling_memory.stores.sqlite", "SQLiteRollingStore"),
    "postgresql": ("langchain_rolling_memory.stores.postgres", "PostgresRollingStore"),
    "postgres": ("langchain_rolling_memory.stores.postgres", "PostgresRollingStore"),
    "redis": ("langchain_rolling_memory.stores.redis", "RedisRollingStore"),
    "rediss": ("langchain_rolling_memory.stores.redis", "RedisRollingStore"),
}


_LAZY = {"PostgresRollingStore": "postgresql", "RedisRollingStore": "redis"}


def __getattr__(name: str) -> Any:
    # Server backends are importable from here without importing their drivers up front.
    if name in _LAZY:
        module_name, class_name = _BACKENDS[_LAZY[name]]
        return getattr(importlib.import_module(module_name), class_name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def open_store(url: str, **options: Any) -> RollingStore:
    """Open the backend a URL names.

    Args:
        url: ``memory://``, ``sqlite:///path.db``, ``postgresql://...`` or ``redis://...``.
        **options: passed to the backend (``table_prefix`` / ``key_prefix``, fact limits,
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
    if scheme not in _BACKENDS:
        msg = f"unknown store URL scheme {parts.scheme!r} in {url!r}; use one of {sorted(_BACKENDS)}"
        raise ConfigurationError(msg)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    module_name, class_name = _BACKENDS[scheme]
    cls = getattr(importlib.import_module(module_name), class_name)
    if scheme == "memory":
        return cls(**options)  # type: ignore[no-any-return]
    if scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            msg = f"a SQLite URL has no host: use 'sqlite:///relative.db' or 'sqlite:////abs.db', got {url!r}"
            raise ConfigurationError(msg)
        if not path:
            msg = f"a SQLite URL needs a path, got {url!r}"
            raise ConfigurationError(msg)
        if "prefix" in query:
            options.setdefault("table_prefix", query["prefix"])
        return cls(path, **options)  # type: ignore[no-any-return]
    # Server backends take the URL whole (minus our own `prefix` parameter).
    return cls.from_url(url, **options)  # type: ignore[no-any-return]
