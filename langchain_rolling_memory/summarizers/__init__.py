"""Summarizers: functions, chat models and provider constructors behind one interface."""

from langchain_rolling_memory.summarizers.base import (
    FunctionSummarizer,
    Summarizer,
    SummarizerLike,
    SummaryResult,
    as_summarizer,
)
from langchain_rolling_memory.summarizers.chat_model import (
    ChatModelSummarizer,
    chat_model_summarizer,
)

__all__ = [
    "ChatModelSummarizer",
    "FunctionSummarizer",
    "Summarizer",
    "SummarizerLike",
    "SummaryResult",
    "as_summarizer",
    "chat_model_summarizer",
]
