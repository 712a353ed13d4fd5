"""Bounded, lossless memory for LangChain: windowed buffers, rolling summaries, client facts.

Quick start::

    from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store

    store = open_store("sqlite:///memory.db")
    history = RollingSummaryChatMessageHistory("session-1", summarizer=model, store=store)
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from langchain_rolling_memory.engine import (
    SUMMARY_MESSAGE_ID,
    CompactionResult,
    Compactor,
    summary_message,
)
from langchain_rolling_memory.errors import (
    ConfigurationError,
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
from langchain_rolling_memory.prompts import SummaryPrompt, clean_summary, default_prompt
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
    "SUMMARY_MESSAGE_ID",
    "ChatModelSummarizer",
    "CompactionResult",
    "Compactor",
    "ConfigurationError",
    "ExtractiveSummarizer",
    "Fact",
    "FactError",
    "FoldPolicy",
    "InMemoryRollingStore",
    "InvalidIdError",
    "MissingCredentialsError",
    "MissingExtraError",
    "OwnershipError",
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
    "WindowPolicy",
    "WindowedChatMessageHistory",
    "__version__",
    "as_summarizer",
    "chat_model_summarizer",
    "clean_summary",
    "count_tokens",
    "default_prompt",
    "extractive_summarizer",
    "fold_cut",
    "gemini_summarizer",
    "is_transient_error",
    "open_store",
    "openai_summarizer",
    "summary_message",
    "validate_id",
    "window_cut",
]
