"""Summarizers: functions, chat models and provider constructors behind one interface."""

from langchain_rolling_memory.core.structured_summary import (
    StructuredSummary,
    parse_structured_summary,
    render_structured_summary,
)
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.summarizers.base import Summarizer, SummarizerLike
from langchain_rolling_memory.summarizers.chat_model import ChatModelSummarizer, chat_model_summarizer
from langchain_rolling_memory.summarizers.coerce import FunctionSummarizer, RunnableSummarizer, as_summarizer
from langchain_rolling_memory.summarizers.extractive import ExtractiveSummarizer, extractive_summarizer
from langchain_rolling_memory.summarizers.failures import (
    describe_error,
    is_permanent_error,
    is_transient_error,
)
from langchain_rolling_memory.summarizers.providers import gemini_summarizer, openai_summarizer

__all__ = [
    "ChatModelSummarizer",
    "ExtractiveSummarizer",
    "FunctionSummarizer",
    "RunnableSummarizer",
    "StructuredSummary",
    "Summarizer",
    "SummarizerLike",
    "SummaryResult",
    "as_summarizer",
    "chat_model_summarizer",
    "describe_error",
    "extractive_summarizer",
    "gemini_summarizer",
    "is_permanent_error",
    "is_transient_error",
    "openai_summarizer",
    "parse_structured_summary",
    "render_structured_summary",
]
