"""The records stores and the engine pass around (messages, summaries, sessions, facts, compactions); no logic."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple

from langchain_core.messages import BaseMessage

FactSource = Literal["code", "tool", "extractor"]
FACT_SOURCES: tuple[str, ...] = ("code", "tool", "extractor")

FactFilter = Callable[[str, "str | None"], "str | None"]
"""``(text, key) -> text to store, or None to refuse the fact`` (e.g. to drop health data)."""

FactPlan = Callable[[list["Fact"]], "Fact | None"]
"""Given a client's facts, the fact to write (new or replacing one), or None."""

Row = tuple[int, str, "int | None", "float | None"]
"""A transcript row as backends return it: ``(seq, message_json, tokens, created_at)``
(created_at None: a message stored without a date, by a release before schema 2 on Redis)."""


@dataclass(frozen=True)
class StoredMessage:
    """One transcript message with its sequence number, the token count stored with it and its
    date (`created_at`, seconds since the epoch: when it was appended, or the date an import
    gave it; None where the store has none, e.g. a message just appended by a history)."""

    seq: int
    message: BaseMessage
    tokens: int | None = None
    created_at: float | None = None


@dataclass(frozen=True)
class SummaryRecord:
    """The rolling summary of one session.

    Attributes:
        text: the summary text (already cleaned).
        covered_seq: the last transcript `seq` folded into `text`.
        version: incremented at each install; the compare-and-swap key.
        meta: free JSON (usage accounting, topic sections...).
        updated_at: wall-clock seconds of the last install.
    """

    text: str
    covered_seq: int
    version: int
    meta: dict[str, Any] = field(default_factory=dict)
    updated_at: float = 0.0


@dataclass(frozen=True)
class SessionMark:
    """A session as a read saw it: its id and erase generation.

    Every session row carries a generation that no later row of the same id ever reuses, so an
    erase (clear, purge, forget, expiry) changes it. A write planned from that read (a summary
    install, facts extracted from its messages) carries the mark and the store refuses it, in
    the same atomic step as the write, unless the session still has that generation.
    """

    session_id: str
    generation: str


@dataclass(frozen=True)
class SessionState:
    """What one turn reads: the summary record and the unsummarized tail (bounded)."""

    record: SummaryRecord | None
    tail: list[StoredMessage]
    truncated: bool
    """True if more unsummarized messages exist than were read (backlog beyond the cap)."""
    question: StoredMessage | None = None
    """The latest user message when the tail holds none (folded with the tool exchanges after
    it, or beyond the cap): the view still sends it."""
    generation: str | None = None
    """The session's erase generation read with the tail (None: the session had no row); a
    write planned from this state carries it and is refused once an erase changed it."""

    @property
    def summary(self) -> str:
        return self.record.text if self.record else ""

    @property
    def covered_seq(self) -> int:
        return self.record.covered_seq if self.record else 0

    @property
    def version(self) -> int:
        return self.record.version if self.record else 0

    @functools.cached_property
    def messages(self) -> list[BaseMessage]:
        return [m.message for m in self.tail]


class TurnRead(NamedTuple):
    """What `RollingStore.read_turn` returns: the summary record, the unsummarized tail read
    with it and the session's erase generation (None: the session has no row)."""

    record: SummaryRecord | None
    messages: list[StoredMessage]
    generation: str | None


class MemoryRead(NamedTuple):
    """What `RollingStore.read_memory` returns, read at one instant with the owner check: the
    turn's summary and tail (`TurnRead`), the session's state (``{}``: none) and the client's
    live facts, oldest first (``[]``: no client)."""

    turn: TurnRead
    state: dict[str, Any]
    facts: list[Fact]


@dataclass(frozen=True)
class CompactionResult:
    """One installed compaction; `messages` are the ones folded into `summary`, `meta` the
    summary record's usage accounting."""

    session_id: str
    folded: int
    covered_seq: int
    version: int
    summary: str
    messages: tuple[BaseMessage, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    generation: str | None = None
    """The session's erase generation the folded messages were read at (see `SessionMark`)."""

    @property
    def mark(self) -> SessionMark | None:
        """Where the folded messages were read, for writes derived from them (extracted facts)."""
        return None if self.generation is None else SessionMark(self.session_id, self.generation)

    @property
    def record(self) -> SummaryRecord:
        """The summary record this compaction installed (its `updated_at` is not known here)."""
        return SummaryRecord(self.summary, self.covered_seq, self.version, dict(self.meta))


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    client_id: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Fact:
    """A durable fact about one client."""

    id: str
    client_id: str
    text: str
    key: str | None
    source: str
    created_at: float
    updated_at: float
    pinned: bool = False
    """Sent before the other facts when a client's facts exceed their budget."""
    expires_at: float | None = None
    """When the fact expires, in seconds (None: never): from then on no read shows it and
    `purge` deletes it (see `retention`)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
