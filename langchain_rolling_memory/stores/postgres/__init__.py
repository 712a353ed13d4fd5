"""PostgreSQL backend: `PostgresRollingStore`."""

from langchain_rolling_memory.stores.postgres.store import PostgresRollingStore

__all__ = ["PostgresRollingStore"]
