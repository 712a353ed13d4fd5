"""SQLite backend: `SQLiteRollingStore`, over its primitives `SQLiteBackend`."""

from langchain_rolling_memory.stores.sqlite.store import SQLiteBackend, SQLiteRollingStore

__all__ = ["SQLiteBackend", "SQLiteRollingStore"]
