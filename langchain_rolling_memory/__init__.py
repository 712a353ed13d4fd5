"""Bounded, lossless memory for LangChain: windowed buffers, rolling summaries, client facts.

Quick start::

    from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store

    store = open_store("sqlite:///memory.db")
    history = RollingSummaryChatMessageHistory("session-1", summarizer=model, store=store)

Any chain, with the client's facts and state in the prompt::

    chat = with_rolling_memory(chain, store=store, summarizer=model)
    chat.invoke(messages, config={"configurable": {"client_id": "c-1", "session_id": "s-1"}})

Every module logs to the ``"langchain_rolling_memory"`` logger; memory's own model calls are
named ``rolling_memory.summarize`` / ``rolling_memory.extract_facts`` in traces (see `tracing`).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from langchain_rolling_memory import _compat

if _TYPE_CHECKING:
    from langchain_rolling_memory.adapters.chat_histories import (
        RollingSummaryChatMessageHistory,
        WindowedChatMessageHistory,
    )
    from langchain_rolling_memory.adapters.erasure import Erased, aforget_user, forget_user
    from langchain_rolling_memory.adapters.history_runnable import RollingMemoryRunnable
    from langchain_rolling_memory.adapters.langgraph_store import RollingFactsStore
    from langchain_rolling_memory.adapters.memory_tools import (
        forget_fact_tool,
        memory_tools,
        remember_tool,
        search_memory_tool,
        session_state_tool,
    )
    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
    from langchain_rolling_memory.adapters.runnable import (
        client_session_config_specs,
        session_history_factory,
        with_rolling_memory,
    )
    from langchain_rolling_memory.core.cuts import count_tokens
    from langchain_rolling_memory.core.framing import (
        MEMORY_MESSAGE_ID,
        insert_memory_message,
        memory_message,
        memory_text,
        render_facts,
        render_state,
    )
    from langchain_rolling_memory.core.presets import PRESETS, preset, preset_prompt
    from langchain_rolling_memory.core.prompts import SummaryPrompt
    from langchain_rolling_memory.core.settings import MemorySettings
    from langchain_rolling_memory.core.topics import keyword_topic_shift
    from langchain_rolling_memory.core.usage import SummaryUsage
    from langchain_rolling_memory.engine.compaction import Compactor
    from langchain_rolling_memory.engine.dense import aindex_vectors, index_vectors
    from langchain_rolling_memory.engine.fact_extractor import FactExtractor, aextract_facts, extract_facts
    from langchain_rolling_memory.engine.memory_reads import aload_memory, load_memory
    from langchain_rolling_memory.engine.shutdown import Drained
    from langchain_rolling_memory.errors import (
        OwnershipError,
        RollingMemoryError,
        SchemaVersionError,
        StoreError,
    )
    from langchain_rolling_memory.stores import (
        InMemoryRollingStore,
        RollingStore,
        SQLiteRollingStore,
        open_store,
    )
    from langchain_rolling_memory.summarizers import (
        Summarizer,
        chat_model_summarizer,
        extractive_summarizer,
        gemini_summarizer,
        openai_summarizer,
    )

    __version__: str

# Every public name is served on first access (PEP 562): importing the package loads only this
# module (no langsmith, argparse, multiprocessing, sqlite3, nor the lab), and using a name imports
# what that name needs: langchain-core's Runnable (which loads langsmith), sqlite3 once a SQLite
# store is opened, the `agents` extra for RollingMemoryMiddleware; never the lab.
_LAZY = {  # name: the module defining it, relative to this package
    "RollingSummaryChatMessageHistory": ".adapters.chat_histories",
    "WindowedChatMessageHistory": ".adapters.chat_histories",
    "Erased": ".adapters.erasure",
    "aforget_user": ".adapters.erasure",
    "forget_user": ".adapters.erasure",
    "RollingMemoryRunnable": ".adapters.history_runnable",
    "RollingFactsStore": ".adapters.langgraph_store",
    "forget_fact_tool": ".adapters.memory_tools",
    "memory_tools": ".adapters.memory_tools",
    "remember_tool": ".adapters.memory_tools",
    "search_memory_tool": ".adapters.memory_tools",
    "session_state_tool": ".adapters.memory_tools",
    "RollingMemoryMiddleware": ".adapters.middleware",
    "client_session_config_specs": ".adapters.runnable",
    "session_history_factory": ".adapters.runnable",
    "with_rolling_memory": ".adapters.runnable",
    "count_tokens": ".core.cuts",
    "MEMORY_MESSAGE_ID": ".core.framing",
    "insert_memory_message": ".core.framing",
    "memory_message": ".core.framing",
    "memory_text": ".core.framing",
    "render_facts": ".core.framing",
    "render_state": ".core.framing",
    "PRESETS": ".core.presets",
    "preset": ".core.presets",
    "preset_prompt": ".core.presets",
    "SummaryPrompt": ".core.prompts",
    "MemorySettings": ".core.settings",
    "keyword_topic_shift": ".core.topics",
    "SummaryUsage": ".core.usage",
    "Compactor": ".engine.compaction",
    "aindex_vectors": ".engine.dense",
    "index_vectors": ".engine.dense",
    "FactExtractor": ".engine.fact_extractor",
    "aextract_facts": ".engine.fact_extractor",
    "extract_facts": ".engine.fact_extractor",
    "aload_memory": ".engine.memory_reads",
    "load_memory": ".engine.memory_reads",
    "Drained": ".engine.shutdown",
    "OwnershipError": ".errors",
    "RollingMemoryError": ".errors",
    "SchemaVersionError": ".errors",
    "StoreError": ".errors",
    "InMemoryRollingStore": ".stores.memory",
    "RollingStore": ".stores.api",
    "SQLiteRollingStore": ".stores.sqlite",
    "open_store": ".stores.urls",
    "Summarizer": ".summarizers",
    "chat_model_summarizer": ".summarizers",
    "extractive_summarizer": ".summarizers",
    "gemini_summarizer": ".summarizers",
    "openai_summarizer": ".summarizers",
}
# The subpackages, reachable as attributes as when this module imported them all.
_SUBPACKAGES = frozenset({"adapters", "core", "engine", "errors", "runtime", "stores", "summarizers"})


def __getattr__(name: str) -> _Any:
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f".{name}", __name__)
    elif name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("langchain-rolling-memory")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            value = "0.0.0"
    else:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | _SUBPACKAGES | {"__version__"})


_compat.install()  # the module paths before issue 21, for one release

__all__ = [
    "MEMORY_MESSAGE_ID",
    "PRESETS",
    "Compactor",
    "Drained",
    "Erased",
    "FactExtractor",
    "InMemoryRollingStore",
    "MemorySettings",
    "OwnershipError",
    "RollingFactsStore",
    "RollingMemoryError",
    "RollingMemoryMiddleware",
    "RollingMemoryRunnable",
    "RollingStore",
    "RollingSummaryChatMessageHistory",
    "SQLiteRollingStore",
    "SchemaVersionError",
    "StoreError",
    "Summarizer",
    "SummaryPrompt",
    "SummaryUsage",
    "WindowedChatMessageHistory",
    "__version__",
    "aextract_facts",
    "aforget_user",
    "aindex_vectors",
    "aload_memory",
    "chat_model_summarizer",
    "client_session_config_specs",
    "count_tokens",
    "extract_facts",
    "extractive_summarizer",
    "forget_fact_tool",
    "forget_user",
    "gemini_summarizer",
    "index_vectors",
    "insert_memory_message",
    "keyword_topic_shift",
    "load_memory",
    "memory_message",
    "memory_text",
    "memory_tools",
    "open_store",
    "openai_summarizer",
    "preset",
    "preset_prompt",
    "remember_tool",
    "render_facts",
    "render_state",
    "search_memory_tool",
    "session_history_factory",
    "session_state_tool",
    "with_rolling_memory",
]
