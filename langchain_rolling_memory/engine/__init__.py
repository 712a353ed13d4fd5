"""The engine: compaction, fact extraction, a turn's reads and recall, shutdown."""

from __future__ import annotations


def __getattr__(name: str) -> object:
    # ``langchain_rolling_memory.engine`` was the module now at `engine.compaction`: its names
    # are served from there, with a DeprecationWarning, for one release.
    from langchain_rolling_memory._compat import moved_attribute

    return moved_attribute(__name__, name)
