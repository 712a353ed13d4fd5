"""SQLite backend: `SQLiteRollingStore`."""

from langchain_rolling_memory.stores.sqlite.store import SQLiteRollingStore

__all__ = ["SQLiteRollingStore"]
