"""What summarizing a session cost and saved, read from its summary record; no I/O of its own.

The engine adds to the counters in the summary record's ``meta`` at each compaction; this
module only reads them (through `RollingStore.usage` or a history's ``usage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_rolling_memory.records import SummaryRecord

__all__ = ["SummaryUsage"]


def _int(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class SummaryUsage:
    """Summarizing cost and savings of one session, since its first compaction.

    Attributes:
        compactions: summaries installed.
        summarizer_calls: calls to the summarizer that led to an installed summary.
        model_calls: model requests those summaries took (a retry after an unusable reply
            counts; 0 for a summarizer that calls no model, like `extractive_summarizer`).
        input_tokens / output_tokens: tokens the summarizer was billed (from the provider's
            usage metadata, else counted).
        folded_messages: messages folded into the summary.
        folded_tokens: tokens of those messages (counted when they were stored).
        summary_tokens: tokens of the current summary, as sent with every call.

    Example:
        >>> SummaryUsage(folded_tokens=900, summary_tokens=100).saved_tokens_per_call
        800
    """

    compactions: int = 0
    summarizer_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    folded_messages: int = 0
    folded_tokens: int = 0
    summary_tokens: int = 0

    @property
    def summarizer_tokens(self) -> int:
        """Everything the summarizer cost, input and output."""
        return self.input_tokens + self.output_tokens

    @property
    def saved_tokens_per_call(self) -> int:
        """Tokens no longer sent with each chat call: folded messages minus the summary."""
        return self.folded_tokens - self.summary_tokens

    @classmethod
    def from_record(cls, record: SummaryRecord | None) -> SummaryUsage:
        """Read the counters of a summary record (all zero without one)."""
        if record is None:
            return cls()
        meta = record.meta if isinstance(record.meta, dict) else {}
        return cls(
            compactions=_int(meta, "compactions"),
            summarizer_calls=_int(meta, "summarizer_calls"),
            model_calls=_int(meta, "model_calls"),
            input_tokens=_int(meta, "summarizer_input_tokens"),
            output_tokens=_int(meta, "summarizer_output_tokens"),
            folded_messages=_int(meta, "folded_messages"),
            folded_tokens=_int(meta, "folded_tokens"),
            summary_tokens=_int(meta, "summary_tokens"),
        )
