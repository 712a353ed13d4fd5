"""In-process backend: `InMemoryRollingStore`, over its primitives `MemoryBackend`."""

from langchain_rolling_memory.stores.memory.store import InMemoryRollingStore, MemoryBackend

__all__ = ["InMemoryRollingStore", "MemoryBackend"]
