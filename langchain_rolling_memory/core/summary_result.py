"""What a summarizer returns: the summary text and what it cost; a record, no logic.

Lives in the core because the pure planner reads it (text, usage, structured fields) when it
plans an install; the summarizer contract that returns it is `summarizers.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SummaryResult:
    """What a summarizer returns: the text, and what it cost when known.

    Attributes:
        text: the summary text.
        input_tokens / output_tokens: tokens billed for the model calls (None: unknown, the
            engine counts them); 0 for a summarizer that calls no model.
        calls: model calls that answered (a retry after an unusable reply counts twice).
        fields: the structured summary's fields (topic, preferences, decisions...) when the
            summarizer produced one; kept in the summary record so they can be read back,
            exported, and updated from at the next compaction.
    """

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    calls: int = 1
    fields: Mapping[str, Any] | None = None
