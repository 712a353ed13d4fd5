"""Storage backends behind one contract, opened by URL.

| URL | backend | extra |
| --- | --- | --- |
| ``memory://`` | `InMemoryRollingStore` (this process only) | none |
| ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:`` | `SQLiteRollingStore` | none |
| ``postgresql://user@host:5432/db`` | `PostgresRollingStore` | ``postgres`` |
| ``redis://host:6379/0`` | `RedisRollingStore` | ``redis`` |

A ``prefix`` query parameter sets the table or key prefix: ``sqlite:///app.db?prefix=app1_``;
``fact_ttl`` the seconds a fact is kept by default: ``redis://host:6379/0?fact_ttl=7776000``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from langchain_rolling_memory.core.records import Fact, FactFilter, SessionInfo, StoredMessage, SummaryRecord
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.stores.urls import BACKENDS, open_store

if TYPE_CHECKING:
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

_LAZY = {"SQLiteRollingStore": "sqlite", "PostgresRollingStore": "postgresql", "RedisRollingStore": "redis"}


def __getattr__(name: str) -> Any:
    # Backends are importable from here without importing their drivers (sqlite3 included) up front.
    if name in _LAZY:
        module_name, class_name = BACKENDS[_LAZY[name]]
        return getattr(importlib.import_module(module_name), class_name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
