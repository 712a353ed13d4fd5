"""What summarizing a session cost and saved, as counters kept in its summary record; no I/O.

Owns the counters and the only place their ``meta`` keys are read (`SummaryUsage.from_meta`)
and written (`SummaryUsage.to_meta`). The engine adds one compaction's cost at each install
(`SummaryUsage.added`); it does not count tokens itself nor read a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_rolling_memory.core.records import SummaryRecord

# attribute -> key in the summary record's meta (the names stored since the first release)
_META_KEYS = {
    "compactions": "compactions",
    "summarizer_calls": "summarizer_calls",
    "model_calls": "model_calls",
    "input_tokens": "summarizer_input_tokens",
    "output_tokens": "summarizer_output_tokens",
    "folded_messages": "folded_messages",
    "folded_tokens": "folded_tokens",
    "summary_tokens": "summary_tokens",
}


def _int(meta: Mapping[str, Any], key: str) -> int:
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
    def from_meta(cls, meta: Mapping[str, Any] | None) -> SummaryUsage:
        """Read the counters kept in a summary record's ``meta`` (a missing or malformed one is 0)."""
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(**{name: _int(meta, key) for name, key in _META_KEYS.items()})

    @classmethod
    def from_record(cls, record: SummaryRecord | None) -> SummaryUsage:
        """Read the counters of a summary record (all zero without one)."""
        return cls.from_meta(record.meta if record is not None else None)

    def added(
        self,
        *,
        model_calls: int,
        input_tokens: int,
        output_tokens: int,
        folded_messages: int,
        folded_tokens: int,
        summary_tokens: int,
    ) -> SummaryUsage:
        """These counters after one more installed compaction (one summarizer call); the new
        summary's size replaces the old one's."""
        return SummaryUsage(
            compactions=self.compactions + 1,
            summarizer_calls=self.summarizer_calls + 1,
            model_calls=self.model_calls + model_calls,
            input_tokens=self.input_tokens + input_tokens,
            output_tokens=self.output_tokens + output_tokens,
            folded_messages=self.folded_messages + folded_messages,
            folded_tokens=self.folded_tokens + folded_tokens,
            summary_tokens=summary_tokens,
        )

    def to_meta(self, meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`meta` (the record's other keys, e.g. topic sections, kept) with these counters."""
        return {**(meta or {}), **{key: getattr(self, name) for name, key in _META_KEYS.items()}}
