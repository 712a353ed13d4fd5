"""What a storage backend implements: two objects of primitives, sync and async, that a store holds.

Owns the contract between `RollingStore` (validation, serialization, fact rules, the clock, in
`api.py`) and a backend: a `SyncBackend` (every primitive abstract) and an `AsyncBackend` (the
same primitives, awaited). A backend with no native async driver (SQLite, in-memory; PostgreSQL
and Redis handed a sync pool or client) is given `ThreadedAsync(sync)`, which runs each sync
primitive in a worker thread, so the event loop never blocks. A store is
``RollingStore(sync, async_)``: which primitive runs is fixed when it is built, never swapped
later. Does no validation: every primitive receives checked ids, and the time ("now") from the
store's clock (`RollingStore._now`), never reading one itself.

Data model, per backend:

* transcript: append-only rows ``(session_id, seq, message_json, tokens, created_at)``;
  ``seq`` is 1, 2, 3... per session, gap-free, assigned atomically by the backend. The one
  exception is an append's *rewind* (`AppendBatch.rewind`, a checkpointed graph's branch):
  rows past a seq are withdrawn, with everything derived from them, before the append.
* summary: one row per session ``(text, covered_seq, version, meta_json, updated_at)``;
  replaced only by a compare-and-swap on ``version``.
* lease: one row per session ``(owner, expires_at)`` so one compactor runs at a time.
* session: ``(client_id, created_at, updated_at, state_json, generation)``; a session belongs to
  at most one client, fixed by the first write that names one; from then on a write (append,
  state) naming no client or another one is refused. `generation` is an opaque string set when
  the row is created and never reused by a later row of the same id (a random token or a
  counter that only grows), so every erase (clear, purge, forget, expiry) changes it.
* facts: per client ``(id, text, key, source, created_at, updated_at, pinned, expires_at)``;
  ``expires_at`` (schema 5; None: never) hides a fact from every read at the store's clock
  (the `now` or `at` a primitive is given), in the statement or script that reads it, and
  `purge` deletes it.
* search index (schema 2): one entry per message and per fact, its `lexical_search.index_text`,
  erased with its row; `search` ranks the entries of one scope. A message is found by any
  search that starts after its append returns: a backend may index it with the append or
  (SQLite, in-memory) catch up at the next search.

The invariants every backend enforces inside the atomic step (statement, script or
transaction) that reads or writes the rows, never by a look-up before it:

* **ownership**: a read or search returns a session's rows only to the session's owner (a run
  naming no client: only sessions that are nobody's); a client's listing, export and erase
  reach only the sessions it owns at that instant (an expired or re-created session id
  listed under an old owner is skipped, not read or erased).
* **erase generation**: a write planned from an earlier read carries the session's
  generation it read (`SummaryWrite.generation`, the `mark` of `change_facts`) and is
  refused unless the session row still exists with it; a summary is never installed on a
  session that has no row.
* **statistics per scope**: a search's scores depend only on the entries of its scope, never
  on another client's text.
* **rewind**: an append with `AppendBatch.rewind` = r first withdraws the session's rows with
  ``seq > max(r, the summary's covered_seq)`` (a summary's rows are never withdrawn), their
  index entries (and the statistics counting them) and their vectors, in the same atomic write
  as the owner check and the append; its rows then follow the last row kept (their seqs are
  reused), and when a row was withdrawn the session gets a new erase generation, so a write
  planned before (a vector, a fold) never lands on the rows that replaced them. Nothing
  withdrawn is found by any read, search or export that starts after the append returns.

Dense vectors (schema 6, issue 23): per message and embedding model, at most one vector
(`core.dense.pack`'s bytes), written by `put_vectors` only while the message and its
session's generation still exist (checked in the write), erased with the message by every
erase in the same atomic step, and searched (`vector_search`) with the owner filter of
`search`. A backend without them keeps the defaults, which refuse (`ConfigurationError`).
"""

from __future__ import annotations

import asyncio
import enum
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import (
    ConfigurationError,
    InvalidArgumentError,
    OwnershipError,
    SchemaVersionError,
)

SCHEMA_VERSION = 8
"""Version of the data layout; a store written by a newer version is refused.
2: per-message dates, the search index, pinned facts. 3: SQLite indexes messages at the
first search after their append (the other backends have nothing to convert). 4: every
session row carries its erase generation (rows written before read as ``''``). 5: a fact's
expiry (facts written before never expire; Redis: their JSON lacks the field). 6: dense vectors
(a table or a key per session; nothing to convert: a message without one is listed by
`unembedded`). 7: PostgreSQL's search indexes write each row into the index itself, with no
pending list (the other backends have nothing to convert). 8: SQLite keeps the vectors in a
rowid table, each on its row's page (the other backends have nothing to convert)."""


def new_generation() -> str:
    """A fresh erase generation for a new session row: 64 random bits, never meant to repeat."""
    return secrets.token_hex(8)


def newer_schema(where: str, found: int) -> SchemaVersionError:
    """The error for data a newer release wrote: `where` names it ("PostgreSQL tables lrm_*")."""
    msg = (
        f"{where}: written by a newer version of langchain-rolling-memory (schema {found}, "
        f"this one knows {SCHEMA_VERSION}); upgrade the package"
    )
    return SchemaVersionError(msg)


class _Unchecked(enum.Enum):
    OPERATOR = "operator"
    ANY_STATE = "any state"


OPERATOR: Final = _Unchecked.OPERATOR
"""The default `client_id` of the session reads: the operator's read (the CLI, admin scripts),
with no owner check. An adapter always names its run's client, None included."""

ReadAs = str | None | Literal[_Unchecked.OPERATOR]
"""Whose read it is: a client id, None for a run that names no client, or `OPERATOR`."""

ANY_STATE: Final = _Unchecked.ANY_STATE
"""The default `expected` of a backend's `set_state`: replace whatever state the session has."""

ExpectedState = str | None | Literal[_Unchecked.ANY_STATE]
"""What `set_state` compares the session's state with before writing: the raw JSON text the
caller read, None for no state (no session row, or a row with no state), or `ANY_STATE`."""


@dataclass(frozen=True, slots=True)
class Reader:
    """The run a session read is made for, checked by the backend in the read itself: the
    session must be nobody's or `client_id`'s (None: a run naming no client reads only
    sessions that are nobody's); with `exact`, `client_id`'s only (a client's export)."""

    client_id: str | None
    exact: bool = False

    def check(self, session_id: str, owner: str | None) -> None:
        """Raise `OwnershipError` unless `owner` (the session's, read with the data) allows it."""
        if owner != self.client_id and (owner is not None or self.exact):
            raise OwnershipError.for_session(session_id, self.client_id)


class IndexedRow(NamedTuple):
    """What an appended row adds beside its payload: its date and its indexed text."""

    created_at: float
    text: str


@dataclass(frozen=True, slots=True)
class SummaryWrite:
    """One summary install as `cas_summary` receives it: checked, its meta already JSON.

    Built once by `checks.summary_args`, so the sync and async primitives of every backend
    read the same named fields instead of repeating a seven-argument list.
    """

    session_id: str
    text: str
    covered_seq: int
    meta_json: str
    expected_version: int
    #: when it is installed (the record's ``updated_at``)
    now: float
    #: the owner that must still hold the session's lease, or None for no lease check
    lease_owner: str | None = None
    #: the session's erase generation the summary was planned from; None: not checked (the
    #: session row must exist all the same)
    generation: str | None = None


class TurnRows(NamedTuple):
    """What `summary_and_tail` reads at one instant: the summary record, the newest rows after
    it (ascending) and the session's erase generation (None: the session has no row)."""

    record: SummaryRecord | None
    rows: list[Row]
    generation: str | None


class MemoryRows(NamedTuple):
    """What `read_memory` reads at one instant: the session's `TurnRows`, its state JSON (None:
    none) and the live facts of the client named (``[]`` for none), oldest first."""

    turn: TurnRows
    state: str | None
    facts: list[Fact]


SearchRow = tuple[float, "str | None", "int | None", "str | None", "float | None", "Fact | None"]
"""A ranked entry as `search` returns it: ``(score, session_id, seq, message_json,
created_at, fact)``; a message has a session, a seq and its JSON, a fact only the fact."""


class Unembedded(NamedTuple):
    """A stored message with no vector of a model yet, as `unembedded` lists it: where it is,
    its session's generation at the listing (`put_vectors` checks it) and its stored JSON."""

    session_id: str
    seq: int
    generation: str
    payload: str


class VectorWrite(NamedTuple):
    """One vector for `put_vectors`: the message, the generation it was listed under, and
    `core.dense.pack`'s bytes (b'': the message has no text to embed)."""

    session_id: str
    seq: int
    generation: str
    vector: bytes


def no_vectors(backend: object) -> ConfigurationError:
    """The refusal of a backend that keeps no dense vectors."""
    msg = (
        f"{type(backend).__name__} keeps no dense vectors (put_vectors, vector_search, unembedded); "
        "use a shipped store (memory, sqlite, postgresql, redis) for embeddings=, or implement them"
    )
    return ConfigurationError(msg)


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """Messages to append to one session as `append` receives them: ids checked, each row
    ``(payload_json, tokens)`` serialized, each message's date checked (`dates`; None: all `now`).

    The indexed text is not computed here: a backend that indexes at append asks `entries()`
    (from `messages`, the objects just serialized, when the caller kept them), one that indexes
    lazily (SQLite, in-memory) reads it from the stored payload at its first search, so a turn
    without recall does not pay for it.
    """

    session_id: str
    client_id: str | None
    rows: Sequence[tuple[str, int | None]]
    now: float
    dates: Sequence[float] | None = None
    messages: Sequence[BaseMessage] | None = None
    #: None, or withdraw the rows past this seq first (see the module's **rewind** invariant);
    #: `rows` may then be empty (a withdrawal alone)
    rewind: int | None = None

    def created_at(self) -> list[float]:
        """The date of each row (`now` for a caller that gave none)."""
        if self.dates is None:
            return [self.now] * len(self.rows)
        if len(self.dates) != len(self.rows):  # pragma: no cover - a caller's mistake, not a user's
            msg = f"one date per row is needed, got {len(self.dates)} for {len(self.rows)}"
            raise InvalidArgumentError(msg)
        return list(self.dates)

    def entries(self) -> list[IndexedRow]:
        """The date and indexed text of each row, for a backend that indexes at append."""
        from langchain_rolling_memory.core.lexical_search import message_index_text, payload_index_text

        if self.messages is not None and len(self.messages) == len(self.rows):
            texts = [message_index_text(message) for message in self.messages]
        else:
            texts = [payload_index_text(payload) for payload, _ in self.rows]
        return [IndexedRow(at, text) for at, text in zip(self.created_at(), texts, strict=True)]


def rows_after(records: Sequence[Sequence[Any]], n: int) -> list[Row | None]:
    """A native `messages_after`'s reply, one (place from 1, seq, message, tokens, date) per
    point that has a row, -> the row after each of the `n` points (None: none)."""
    out: list[Row | None] = [None] * n
    for i, seq, message, tokens, at in records:
        out[int(i) - 1] = (int(seq), str(message), None if tokens is None else int(tokens), float(at))
    return out


def _first_after(
    read: Callable[[str, int, int | None, bool, Reader | None], list[Row]],
    session_id: str,
    seq: int,
    reader: Reader | None,
) -> Row | None:
    """`messages_after`'s default for one point: the first row after `seq`, None when there
    is none or the reader may not read the session."""
    try:
        rows = read(session_id, seq, 1, False, reader)
    except OwnershipError:
        return None
    return rows[0] if rows else None


class SyncBackend(ABC):
    """The primitives a backend implements, sync; `RollingStore` builds the public API on them.

    Each receives checked ids and, where time matters, the store's "now". The session reads
    take a `reader` (None: the operator's, unchecked): with one, the session's owner is read in
    the same atomic step as the data (one statement, script or transaction: one round trip on
    server backends) and `reader.check` refuses another's.
    """

    @abstractmethod
    def append(self, batch: AppendBatch) -> list[int]:
        """Append the batch's rows atomically and return their seqs; raise `OwnershipError`
        (writing nothing) if the session belongs to a client other than `batch.client_id`
        (None included: an anonymous append never lands in an owned session), checked in the
        same atomic write. Each row is stored with its entry of `batch.entries()` (date,
        indexed text). With `batch.rewind`, the rows past it are withdrawn first, in the same
        atomic write (the module's **rewind** invariant)."""

    @abstractmethod
    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        """The best `limit` entries holding any of `terms` (never empty), best first: the
        messages of `session_id` if given, else of the sessions `client_id` owns, and the
        facts of `client_id` live at `now` if given. Owner filtered in the same statement or
        script that returns the rows: `session_id`'s messages come back only if the session's
        owner is `client_id` (None: only if it is nobody's), so a session erased and
        re-created by another client between a caller's check and this search yields nothing.
        Scores use statistics (document count, term frequencies, lengths) of the scope's
        entries only."""

    @abstractmethod
    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        """Rows with seq > after_seq in ascending order: the last `limit` if `newest`,
        else the first `limit` (all if limit is None); each with its stored date (`Row`), read
        by the same statement or script (the turn's `summary_and_tail` too)."""

    @abstractmethod
    def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        """The summary, the newest `limit` rows after it and the session's generation, seen at
        one instant with the owner check (one round trip on server backends: it is most of
        what a turn costs)."""

    @abstractmethod
    def last_seq(self, session_id: str, reader: Reader | None = None) -> int: ...

    @abstractmethod
    def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None: ...

    @abstractmethod
    def cas_summary(self, write: SummaryWrite) -> bool:
        """Install `write` iff, in one atomic step: the session row exists (never create one),
        its generation is `write.generation` when that is given, the current version is
        `expected_version` (0: none) and, when it names a `lease_owner`, the session's lease
        row names that owner. Every erase deletes the row and the lease with the data, so a
        compaction planned from a read before an erase never installs after it."""

    @abstractmethod
    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        """Take the compaction lease if it is free, expired or already `owner`'s."""

    @abstractmethod
    def release(self, session_id: str, owner: str) -> None: ...

    @abstractmethod
    def get_session(self, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    def list_sessions(self, client_id: str) -> list[str]:
        """Ids of the sessions whose row names `client_id` as owner now, sorted."""

    @abstractmethod
    def get_state(self, session_id: str, reader: Reader | None = None) -> str | None: ...

    @abstractmethod
    def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        """Replace the state; `OwnershipError` (writing nothing) on the terms of `append`.

        With `expected` (not `ANY_STATE`), a compare-and-swap: write only if the session's raw
        state is `expected` (None: no session row, or a row with no state), compared in the
        same atomic step as the owner check and the write, and return False (nothing written)
        if it is not. An erase deletes the state with the row, so an update planned from a
        state read before an erase never writes the erased keys back. The owner refusal wins
        over a mismatch. Returns True when it wrote."""

    @abstractmethod
    def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        """Remove the session's transcript, summary, lease, state and session row, atomically
        and serialized with appends: an append racing it lands wholly before (and is erased)
        or wholly after (a fresh session). With a `reader`, its owner check is made in the
        same atomic step, and a session with no row yet is left alone (a claim racing it
        must not be erased by a run that is not the claimer's)."""

    @abstractmethod
    def list_facts(self, client_id: str, at: float) -> list[Fact]:
        """The client's facts live at `at`, oldest first (by created_at, then id): a fact whose
        `expires_at` is at or before it is left out by the statement or script that reads
        them. ``at=-inf``: every stored fact (the export's)."""

    @abstractmethod
    def delete_fact(self, client_id: str, fact_id: str) -> bool: ...

    @abstractmethod
    def delete_client(self, client_id: str) -> None:
        """Remove the client's facts and every session it owns at that instant (owner checked
        in the erase itself: a session id now owned by another client is left alone)."""

    @abstractmethod
    def purge(self, cutoff: float, now: float) -> int:
        """Delete the sessions not updated since `cutoff` (``-inf``: none) and the facts expired
        at `now` (``expires_at <= now``), every client's; return how many of both."""

    @abstractmethod
    def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        """Read the client's facts live at `now`, let `plan` pick the fact to write (None:
        nothing), write it; return what was read and what was written. One atomic step per
        client, so two processes adding the same fact store it once.

        With `mark` (the facts are derived from that session's messages), raise
        `StaleWriteError` and write nothing unless, in the same atomic step, the session row
        exists, is `client_id`'s and has `mark.generation`.
        """

    # ------------------------------------------------------------------ a turn's I/O (defaults)

    def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        """What a turn reads, in one atomic step on the server backends (one statement or
        script: one round trip): `summary_and_tail`, the session's state and, if `facts_of`
        names a client, its facts live at `now`. The owner check is `summary_and_tail`'s, made
        in the same step as the reads: with a `reader` that the session's owner does not allow,
        `OwnershipError` and nothing returned; an erased session reads as empty (no summary,
        rows, state nor generation). This default composes the three primitives (each checking
        the owner itself); PostgreSQL and Redis override it."""
        turn = self.summary_and_tail(session_id, limit, reader)
        state = self.get_state(session_id, reader)
        return MemoryRows(turn, state, self.list_facts(facts_of, now) if facts_of is not None else [])

    def messages_after(self, points: Sequence[tuple[str, int]], reader: Reader | None) -> list[Row | None]:
        """For each (session, seq) of `points`, the session's first row after that seq (what
        `read(session, seq, 1, False, reader)` returns), None when there is none or `reader`
        may not read the session: a batched read leaves such a session out, as a search does,
        rather than refusing the others. One atomic step on the server backends (one statement
        or script, the owner checked in it: one round trip). This default makes one `read` per
        point, so a backend needs nothing more."""
        return [_first_after(self.read, sid, seq, reader) for sid, seq in points]

    def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        """`append`, then the session's summary as `get_summary` reads it (what a turn checks
        after its write: did a compaction land?), sent together (pipelined: one round trip on
        the server backends). The append's ownership refusal wins: `OwnershipError`, nothing
        written. This default makes the two calls."""
        seqs = self.append(batch)
        return seqs, self.get_summary(batch.session_id, reader)

    # ------------------------------------------------------------------ dense vectors (defaults refuse)

    def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        """Up to `limit` stored messages with no vector of `model`, by session then seq: those of
        `session_id` if given, else of the sessions `client_id` owns, else (both None, the
        operator's catch-up) of every session."""
        raise no_vectors(self)

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        """Store (or replace) each item's vector of `model`, in one atomic step, each only if its
        message exists and its session still has the item's generation; return how many."""
        raise no_vectors(self)

    def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        """The `limit` messages whose `model` vector is closest to `vector` (a packed query of
        the same length; the score is the cosine), best first, in the scope and with the owner
        filter of `search`, in the same statement or script; messages only, never facts."""
        raise no_vectors(self)

    # ------------------------------------------------------------------ lifecycle (defaults)

    def setup(self) -> None:  # noqa: B027 - a no-op default that backends may override
        """Create or migrate the schema, idempotently; the default has none."""

    def vacuum(self) -> None:  # noqa: B027
        """Remove the bytes of erased data where the backend keeps them; the default keeps none."""

    def close(self) -> None:  # noqa: B027
        """Release every connection the backend opened (never one handed in); final."""


class AsyncBackend(ABC):
    """The async twins of `SyncBackend`'s primitives (same names, arguments and rules),
    natively async: PostgreSQL on psycopg's async pools, Redis on `redis.asyncio`. Any other
    backend is given `ThreadedAsync`."""

    @abstractmethod
    async def append(self, batch: AppendBatch) -> list[int]: ...

    @abstractmethod
    async def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]: ...

    @abstractmethod
    async def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]: ...

    @abstractmethod
    async def summary_and_tail(
        self, session_id: str, limit: int, reader: Reader | None = None
    ) -> TurnRows: ...

    @abstractmethod
    async def last_seq(self, session_id: str, reader: Reader | None = None) -> int: ...

    @abstractmethod
    async def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None: ...

    @abstractmethod
    async def cas_summary(self, write: SummaryWrite) -> bool: ...

    @abstractmethod
    async def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool: ...

    @abstractmethod
    async def release(self, session_id: str, owner: str) -> None: ...

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    async def list_sessions(self, client_id: str) -> list[str]: ...

    @abstractmethod
    async def get_state(self, session_id: str, reader: Reader | None = None) -> str | None: ...

    @abstractmethod
    async def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool: ...

    @abstractmethod
    async def delete_session(self, session_id: str, reader: Reader | None = None) -> None: ...

    @abstractmethod
    async def list_facts(self, client_id: str, at: float) -> list[Fact]: ...

    @abstractmethod
    async def delete_fact(self, client_id: str, fact_id: str) -> bool: ...

    @abstractmethod
    async def delete_client(self, client_id: str) -> None: ...

    @abstractmethod
    async def purge(self, cutoff: float, now: float) -> int: ...

    @abstractmethod
    async def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]: ...

    async def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        """Async twin of `SyncBackend.read_memory` (this default composes the primitives)."""
        turn = await self.summary_and_tail(session_id, limit, reader)
        state = await self.get_state(session_id, reader)
        facts = await self.list_facts(facts_of, now) if facts_of is not None else []
        return MemoryRows(turn, state, facts)

    async def messages_after(
        self, points: Sequence[tuple[str, int]], reader: Reader | None
    ) -> list[Row | None]:
        """Async twin of `SyncBackend.messages_after` (this default makes one `read` per point)."""
        out: list[Row | None] = []
        for sid, seq in points:
            try:
                rows = await self.read(sid, seq, 1, False, reader)
            except OwnershipError:
                rows = []
            out.append(rows[0] if rows else None)
        return out

    async def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        """Async twin of `SyncBackend.append_and_summary`."""
        seqs = await self.append(batch)
        return seqs, await self.get_summary(batch.session_id, reader)

    @abstractmethod
    async def setup(self) -> None: ...

    @abstractmethod
    async def vacuum(self) -> None: ...

    async def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        raise no_vectors(self)

    async def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        raise no_vectors(self)

    async def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        raise no_vectors(self)

    async def close(self) -> None:  # noqa: B027 - a no-op default that backends may override
        """Close what belongs to the running event loop (its pool or client); the store's sync
        `close` then releases the rest."""


class ThreadedAsync(AsyncBackend):
    """The async primitives of a backend without a native async driver: each runs its sync
    twin in a worker thread (`asyncio.to_thread`), so the event loop never blocks."""

    def __init__(self, sync: SyncBackend) -> None:
        self.sync = sync

    async def append(self, batch: AppendBatch) -> list[int]:
        return await asyncio.to_thread(self.sync.append, batch)

    async def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        return await asyncio.to_thread(self.sync.search, terms, client_id, session_id, limit, now)

    async def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        return await asyncio.to_thread(self.sync.read, session_id, after_seq, limit, newest, reader)

    async def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        return await asyncio.to_thread(self.sync.summary_and_tail, session_id, limit, reader)

    async def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        return await asyncio.to_thread(self.sync.last_seq, session_id, reader)

    async def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        return await asyncio.to_thread(self.sync.read_memory, session_id, limit, reader, facts_of, now)

    async def messages_after(
        self, points: Sequence[tuple[str, int]], reader: Reader | None
    ) -> list[Row | None]:
        return await asyncio.to_thread(self.sync.messages_after, points, reader)

    async def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        return await asyncio.to_thread(self.sync.append_and_summary, batch, reader)

    async def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        return await asyncio.to_thread(self.sync.get_summary, session_id, reader)

    async def cas_summary(self, write: SummaryWrite) -> bool:
        return await asyncio.to_thread(self.sync.cas_summary, write)

    async def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        return await asyncio.to_thread(self.sync.claim, session_id, owner, ttl, now)

    async def release(self, session_id: str, owner: str) -> None:
        await asyncio.to_thread(self.sync.release, session_id, owner)

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return await asyncio.to_thread(self.sync.get_session, session_id)

    async def list_sessions(self, client_id: str) -> list[str]:
        return await asyncio.to_thread(self.sync.list_sessions, client_id)

    async def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        return await asyncio.to_thread(self.sync.get_state, session_id, reader)

    async def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        return await asyncio.to_thread(self.sync.set_state, session_id, client_id, state, now, expected)

    async def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        await asyncio.to_thread(self.sync.delete_session, session_id, reader)

    async def list_facts(self, client_id: str, at: float) -> list[Fact]:
        return await asyncio.to_thread(self.sync.list_facts, client_id, at)

    async def delete_fact(self, client_id: str, fact_id: str) -> bool:
        return await asyncio.to_thread(self.sync.delete_fact, client_id, fact_id)

    async def delete_client(self, client_id: str) -> None:
        await asyncio.to_thread(self.sync.delete_client, client_id)

    async def purge(self, cutoff: float, now: float) -> int:
        return await asyncio.to_thread(self.sync.purge, cutoff, now)

    async def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        return await asyncio.to_thread(self.sync.change_facts, client_id, plan, now, mark)

    async def setup(self) -> None:
        await asyncio.to_thread(self.sync.setup)

    async def vacuum(self) -> None:
        await asyncio.to_thread(self.sync.vacuum)

    async def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        return await asyncio.to_thread(self.sync.unembedded, model, client_id, session_id, limit)

    async def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        return await asyncio.to_thread(self.sync.put_vectors, model, items)

    async def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        return await asyncio.to_thread(self.sync.vector_search, model, vector, client_id, session_id, limit)
