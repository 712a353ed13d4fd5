"""Redis backend: `RedisRollingStore`."""

from langchain_rolling_memory.stores.redis.store import RedisRollingStore

__all__ = ["RedisRollingStore"]
