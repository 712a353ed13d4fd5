"""In-process backend: `InMemoryRollingStore`."""

from langchain_rolling_memory.stores.memory.store import InMemoryRollingStore

__all__ = ["InMemoryRollingStore"]
