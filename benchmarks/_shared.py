"""What the performance benchmarks share: LoCoMo conversations as one long session, a fake
summarizer of fixed output length, request accounting, Markdown tables. No measurements here."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.agent_middleware import RecordingModel
from langchain_rolling_memory_lab.conversations import ConversationMessage, load_locomo
from langchain_rolling_memory_lab.locomo import find_locomo

LOCOMO_IDS = ("26", "30", "41", "42", "43", "44", "47", "48", "49", "50")
SYSTEM = "You are a friendly assistant who keeps up with the user's life. Answer briefly."
SUMMARY_WORDS = 100

RESULTS = Path(__file__).resolve().parent / "results"


def locomo_path() -> Path:
    """``shared/data/locomo/locomo10.zip`` seen from this checkout (read at run time, never copied)."""
    found = find_locomo(Path(__file__).resolve().parent)
    if found is None:
        msg = "LoCoMo not found: expected shared/data/locomo/locomo10.zip beside the checkout"
        raise SystemExit(msg)
    return found


def one_session(messages: Sequence[ConversationMessage]) -> list[ConversationMessage]:
    """The conversation's sessions run together as one long session (what a chat app that
    never resets its memory would see)."""
    return [replace(m, session="long", client="client-1") for m in messages if m.role != "system"]


def long_conversation(start: int, length: int) -> tuple[str, list[ConversationMessage]]:
    """`length` messages from LoCoMo conversation number `start` (0-9), continued with the
    next conversations when one is too short (1,000 messages need two of them)."""
    path = locomo_path()
    out: list[ConversationMessage] = []
    used: list[str] = []
    index = start
    while len(out) < length:
        conversation = LOCOMO_IDS[index % len(LOCOMO_IDS)]
        out.extend(one_session(load_locomo(path, conversation)))
        used.append(conversation)
        index += 1
    return "+".join(used), out[:length]


def fixed_summary(messages: list[BaseMessage]) -> str:
    """A summary of exactly `SUMMARY_WORDS` words whatever it is asked (fixed output length)."""
    return " ".join(f"point{i}" for i in range(SUMMARY_WORDS))


def summary_model() -> RecordingModel:
    """The same fake summarizer for every strategy: records each request, fixed-length reply."""
    return RecordingModel(reply_fn=fixed_summary)


def tokens(messages: Sequence[BaseMessage]) -> int:
    return count_tokens_approximately(messages)


@dataclass
class Bill:
    """Requests sent to the chat model and what they cost."""

    requests: int = 0
    input_tokens: int = 0
    cacheable_tokens: int = 0
    peak: int = 0
    _previous: tuple[tuple[str, str, int], ...] = ()

    def add(self, request: Sequence[BaseMessage]) -> None:
        """Count one request; its cacheable part is the longest run of leading messages equal
        to the previous request's (a provider's prompt cache serves an exact prefix)."""
        shape = tuple((m.type, m.text, tokens([m])) for m in request)
        prefix = 0
        for old, new in zip(self._previous, shape, strict=False):
            if old[:2] != new[:2]:
                break
            prefix += new[2]
        total = sum(item[2] for item in shape)
        self.requests += 1
        self.input_tokens += total
        self.cacheable_tokens += prefix
        self.peak = max(self.peak, total)
        self._previous = shape

    @property
    def cacheable_share(self) -> float:
        return self.cacheable_tokens / self.input_tokens if self.input_tokens else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=1000, method="inclusive")[max(0, min(998, round(q * 1000) - 1))]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> str:
    """A GitHub table; `align` gives one of l/r per column (default: first left, others right)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" if a == "l" else "---:" for a in align) + " |",
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
