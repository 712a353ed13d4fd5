"""The engine: compaction, fact extraction, a turn's reads and recall, draining at shutdown.

Does the I/O around the core's decisions, on a store, a summarizer and the runtime's workers;
never imports the adapters (tests/test_layout.py checks this).
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    # ``langchain_rolling_memory.engine`` was the module now at `engine.compaction`: its names
    # are served from there, with a DeprecationWarning, for one release.
    from langchain_rolling_memory._compat import moved_attribute

    return moved_attribute(__name__, name)
