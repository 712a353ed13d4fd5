"""Bounded, lossless memory for LangChain: windowed buffers, rolling summaries, client facts.

Quick start::

    from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store

    store = open_store("sqlite:///memory.db")
    history = RollingSummaryChatMessageHistory("session-1", summarizer=model, store=store)

Any chain, with the client's facts and state in the prompt::

    chat = with_rolling_memory(chain, store=store, summarizer=model)
    chat.invoke(messages, config={"configurable": {"client_id": "c-1", "session_id": "s-1"}})
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from langchain_rolling_memory.context import aload_memory, load_memory
from langchain_rolling_memory.engine import (
    SUMMARY_MESSAGE_ID,
    CompactionListener,
    CompactionResult,
    Compactor,
    summary_message,
    summary_text,
)
from langchain_rolling_memory.errors import (
    ConfigurationError,
    ConversationFormatError,
    FactError,
    InvalidIdError,
    MissingCredentialsError,
    MissingExtraError,
    OwnershipError,
    RollingMemoryError,
    SchemaVersionError,
    StoreError,
    SummarizerError,
)
from langchain_rolling_memory.extractor import (
    ExtractionResult,
    FactChanges,
    FactExtractor,
    aextract_facts,
    extract_facts,
)
from langchain_rolling_memory.facts import (
    MEMORY_MESSAGE_ID,
    MemoryBlock,
    insert_memory_message,
    memory_block,
    memory_message,
    memory_text,
    quote_fact,
    render_facts,
    render_state,
)
from langchain_rolling_memory.history import (
    RollingSummaryChatMessageHistory,
    WindowedChatMessageHistory,
)
from langchain_rolling_memory.ids import validate_id
from langchain_rolling_memory.policy import (
    FoldPolicy,
    WindowPolicy,
    count_tokens,
    fold_cut,
    window_cut,
)
from langchain_rolling_memory.presets import PRESETS, Preset, preset
from langchain_rolling_memory.prompts import SummaryPrompt, clean_summary, default_prompt
from langchain_rolling_memory.runnable import (
    client_session_config_specs,
    session_history_factory,
    with_rolling_memory,
)
from langchain_rolling_memory.stores import (
    Fact,
    InMemoryRollingStore,
    RollingStore,
    SQLiteRollingStore,
    StoredMessage,
    SummaryRecord,
    open_store,
)
from langchain_rolling_memory.summarizers import (
    ChatModelSummarizer,
    ExtractiveSummarizer,
    StructuredSummary,
    Summarizer,
    SummaryResult,
    as_summarizer,
    chat_model_summarizer,
    extractive_summarizer,
    gemini_summarizer,
    is_transient_error,
    openai_summarizer,
)
from langchain_rolling_memory.tools import (
    forget_fact_tool,
    memory_tools,
    remember_tool,
    session_state_tool,
)
from langchain_rolling_memory.topics import (
    DEFAULT_TOPIC_PHRASES,
    TopicDetector,
    TopicLabels,
    keyword_topic_shift,
    topic_cut,
)
from langchain_rolling_memory.usage import SummaryUsage

if _TYPE_CHECKING:
    from langchain_rolling_memory.agents import RollingMemoryMiddleware

# Names served on first access, so that importing the package needs only langchain-core.
_LAZY = {"RollingMemoryMiddleware": "langchain_rolling_memory.agents"}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


try:
    __version__ = _version("langchain-rolling-memory")
except _PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "DEFAULT_TOPIC_PHRASES",
    "MEMORY_MESSAGE_ID",
    "PRESETS",
    "SUMMARY_MESSAGE_ID",
    "ChatModelSummarizer",
    "CompactionListener",
    "CompactionResult",
    "Compactor",
    "ConfigurationError",
    "ConversationFormatError",
    "ExtractionResult",
    "ExtractiveSummarizer",
    "Fact",
    "FactChanges",
    "FactError",
    "FactExtractor",
    "FoldPolicy",
    "InMemoryRollingStore",
    "InvalidIdError",
    "MemoryBlock",
    "MissingCredentialsError",
    "MissingExtraError",
    "OwnershipError",
    "Preset",
    "RollingMemoryError",
    "RollingMemoryMiddleware",
    "RollingStore",
    "RollingSummaryChatMessageHistory",
    "SQLiteRollingStore",
    "SchemaVersionError",
    "StoreError",
    "StoredMessage",
    "StructuredSummary",
    "Summarizer",
    "SummarizerError",
    "SummaryPrompt",
    "SummaryRecord",
    "SummaryResult",
    "SummaryUsage",
    "TopicDetector",
    "TopicLabels",
    "WindowPolicy",
    "WindowedChatMessageHistory",
    "__version__",
    "aextract_facts",
    "aload_memory",
    "as_summarizer",
    "chat_model_summarizer",
    "clean_summary",
    "client_session_config_specs",
    "count_tokens",
    "default_prompt",
    "extract_facts",
    "extractive_summarizer",
    "fold_cut",
    "forget_fact_tool",
    "gemini_summarizer",
    "insert_memory_message",
    "is_transient_error",
    "keyword_topic_shift",
    "load_memory",
    "memory_block",
    "memory_message",
    "memory_text",
    "memory_tools",
    "open_store",
    "openai_summarizer",
    "preset",
    "quote_fact",
    "remember_tool",
    "render_facts",
    "render_state",
    "session_history_factory",
    "session_state_tool",
    "summary_message",
    "summary_text",
    "topic_cut",
    "validate_id",
    "window_cut",
    "with_rolling_memory",
]
