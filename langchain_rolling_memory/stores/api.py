"""The public store API every backend shares, as sync/async twins over the backend's primitives.

Owns `RollingStore`: its public methods (each checks its arguments, then calls one primitive
of the backend it holds: `_sync`, a `SyncBackend`, or `_async`, an `AsyncBackend`), the
store's settings, its clock (`_now`) and its life (``with``, `setup()`, closing). The fact
plans are in `fact_api.py` (their rules in `fact_rules.py`), the search steps in
`search_api.py`, the argument checks and serialization in `checks.py`, the primitives a
backend implements and the data model in `contract.py`, the export's JSON shape in
`export.py`, opening a store by URL in `urls.py`, the exit hook in `lifecycle.py`. Does no
I/O of its own.

One class rather than one per concern: every public method is a thin twin over one
primitive, and all of them share the same two backend objects, clock and closed state;
split into mixins, each part had to declare the attributes it expected of the others.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

import langchain_rolling_memory.core.fact_rules as fact_rules
import langchain_rolling_memory.stores.checks as checks
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.records import (
    Fact,
    FactPlan,
    MemoryRead,
    Row,
    SessionInfo,
    SessionMark,
    StoredMessage,
    SummaryRecord,
    TurnRead,
)
from langchain_rolling_memory.core.records import (
    FactFilter as FactFilter,  # the old stores.base.FactFilter, for one release
)
from langchain_rolling_memory.core.retention import Retention, retention
from langchain_rolling_memory.core.serde import loads_message
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError, StoreError
from langchain_rolling_memory.stores.contract import (
    OPERATOR,
    AppendBatch,
    AsyncBackend,
    MemoryRows,
    ReadAs,
    Reader,
    SyncBackend,
    ThreadedAsync,
    Unembedded,
    VectorWrite,
)
from langchain_rolling_memory.stores.export import client_export, session_export
from langchain_rolling_memory.stores.fact_api import ExpiresAt, FactOptions, mark_of, plan_add, plan_update
from langchain_rolling_memory.stores.search_api import (
    CreatedAt,
    check_owner,
    dates_of,
    hits_of,
    search_request,
    search_scope,
)
from langchain_rolling_memory.stores.vector_api import check_limit, check_model, check_writes

_S = TypeVar("_S", bound="RollingStore")

STATE_RETRIES = 32
"""How many times `update_state` plans an update (the first time, then again after each lost
race: the state it read changed before its write) before it gives up with `StaleWriteError`."""


def _backoff(attempt: int) -> float:
    """Seconds to wait before the next attempt after `attempt` lost races: none after the
    first, then a random pause of up to 2, 4, 8 ... 50 ms, so that writers racing one state
    stop colliding rather than one of them losing every time."""
    return 0.0 if attempt < 2 else random.uniform(0.0, min(0.05, 0.0005 * 2**attempt))


def _merge_state(raw: str | None, updates: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The state `updates` makes of the raw state read (None: none), and its JSON text."""
    state = checks.merged_state({} if raw is None else json.loads(raw), updates)
    return state, checks.state_json(state)


def _lost_races(session_id: str) -> str:
    return (
        f"update_state refused: the state of session {session_id!r} changed while each of "
        f"{STATE_RETRIES} attempts was planned; nothing was written"
    )


class RollingStore:
    """A store: the public API with validation, over a backend's primitives.

    Built on a `SyncBackend` and, for the async methods, an `AsyncBackend` (None: the sync
    primitives run in a worker thread, `ThreadedAsync`): ``RollingStore(MyBackend())`` is a
    working store; the four shipped ones (`InMemoryRollingStore`...) are subclasses that build
    their backend from a path, URL, pool or client.

    Ownership: a session belongs to the first client that writes to it. Writes (`append`,
    `set_state`) naming another client or none are then refused (`OwnershipError`); session
    reads take an optional `client_id` that is checked the same way, in the read itself (see
    `read`). A read without it is the operator's API (the CLI's ``inspect``, admin scripts)
    and is not checked; every adapter passes its run's client.

    Life: a store is usable from its constructor on (which runs `setup()` unless given
    ``setup=False``) until `close()`; after that every call raises `StoreError`. ``with
    store:`` closes it on exit, ``async with store:`` awaits `aclose()`.

    Args:
        sync: the backend's sync primitives.
        async_: its native async primitives; None runs `sync`'s in a worker thread.
        options: the fact settings (`FactOptions`), kept as the store's attributes:
            max_fact_chars: longest fact text accepted.
            max_facts: most facts kept per client.
            fact_filter: optional ``(text, key) -> text | None`` hook run before a fact is
                stored; return None to refuse it, or a redacted text.
            fact_ttl: seconds a fact is kept after it is written, when its write names no `ttl`
                or `expires_at` (also ``?fact_ttl=`` in a store URL); None keeps facts until
                deleted. See `add_fact`.
    """

    #: URL scheme(s) this store answers to in `open_store`.
    schemes: tuple[str, ...] = ()

    def __init__(
        self, sync: SyncBackend, async_: AsyncBackend | None = None, *, options: FactOptions | None = None
    ) -> None:
        options = options or FactOptions()
        self._sync = sync
        self._async = ThreadedAsync(sync) if async_ is None else async_
        self.max_fact_chars = options.max_fact_chars
        self.max_facts = options.max_facts
        self.fact_filter = options.fact_filter
        self.fact_ttl = options.fact_ttl
        self._closed = False

    @property
    def backend(self) -> SyncBackend:
        """The backend's sync primitives (`contract.SyncBackend`), for conformance checks and
        tests that look under the API: they skip its argument checks, never call them."""
        return self._sync

    @property
    def async_backend(self) -> AsyncBackend:
        """The backend's async primitives: its native ones, or `ThreadedAsync` over `backend`."""
        return self._async

    @staticmethod
    def _now() -> float:
        """The store's clock: every "now" a primitive receives is read here."""
        return time.time()

    # ------------------------------------------------------------------ life

    @property
    def closed(self) -> bool:
        """True once `close()` or `aclose()` was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            msg = f"this {type(self).__name__} is closed; open a new store (closing is final)"
            raise StoreError(msg)

    def setup(self) -> None:
        """Create or migrate the store's tables or keys; safe to call again (idempotent).

        The constructor calls it unless given ``setup=False``, for a process whose database
        role may not create tables: run ``setup()`` once from a deployment step instead.
        """
        self._check_open()
        self._sync.setup()

    def _setup_or_close(self) -> None:
        """`setup` from a constructor: if it fails, what the constructor opened is closed
        before the error goes on, so a store that cannot be set up leaves nothing open."""
        try:
            self.setup()
        except BaseException:
            self.close()
            raise

    async def asetup(self) -> None:
        """`setup` from async code (native on PostgreSQL and Redis, a worker thread elsewhere)."""
        self._check_open()
        await self._async.setup()

    def close(self) -> None:
        """Release the store's connections (never those handed in by the caller); final."""
        self._closed = True
        self._sync.close()

    async def aclose(self) -> None:
        await self._async.close()
        await asyncio.to_thread(self.close)

    def __enter__(self: _S) -> _S:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self: _S) -> _S:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ shared helpers

    @staticmethod
    def _decode(rows: Sequence[Row]) -> list[StoredMessage]:
        return [StoredMessage(seq, loads_message(payload), tokens, at) for seq, payload, tokens, at in rows]

    # ------------------------------------------------------------------ transcript

    def append(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
        created_at: CreatedAt = None,
        rewind: int | None = None,
    ) -> list[int]:
        """Append messages to the session's transcript; return their sequence numbers.

        Everything is validated and serialized before anything is written: bad input raises
        and writes nothing. `created_at` dates the messages (seconds or a datetime, naive
        read as UTC; one for the batch or one per message) for imports and replays; None
        dates them now. Each message is searchable (`search`) once the call returns: a
        backend indexes it in the same write, or (SQLite, in-memory) at its next search.

        `client_id` names whose session it is: the first write naming a client makes the session
        that client's, and from then on an append naming another client, or none, raises
        `OwnershipError` and writes nothing (checked in the same atomic write).

        `rewind` withdraws the session's rows past that seq first, in the same atomic write:
        the message, its search entry and its vectors, never found again (rows a summary
        covers are kept). The agent middleware passes it so that the store holds what a
        checkpointed graph's branch holds, not the turns a fork abandoned or a `RemoveMessage`
        removed. `messages` may then be empty.
        """
        batch = self._append_batch(session_id, messages, client_id, token_counts, created_at, rewind)
        return self._sync.append(batch) if batch else []

    async def aappend(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
        created_at: CreatedAt = None,
        rewind: int | None = None,
    ) -> list[int]:
        batch = self._append_batch(session_id, messages, client_id, token_counts, created_at, rewind)
        return await self._async.append(batch) if batch else []

    def append_and_summary(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
        rewind: int | None = None,
    ) -> tuple[list[int], SummaryRecord | None]:
        """`append`, then the session's summary read as `client_id`'s (did a compaction land
        meanwhile?), pipelined: one round trip on PostgreSQL and Redis. What a turn writes."""
        batch = self._append_batch(session_id, messages, client_id, token_counts, None, rewind)
        reader = Reader(checks.optional_client(client_id))
        if batch is None:
            return [], self._sync.get_summary(session_id, reader)
        return self._sync.append_and_summary(batch, reader)

    async def aappend_and_summary(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
        rewind: int | None = None,
    ) -> tuple[list[int], SummaryRecord | None]:
        batch = self._append_batch(session_id, messages, client_id, token_counts, None, rewind)
        reader = Reader(checks.optional_client(client_id))
        if batch is None:
            return [], await self._async.get_summary(session_id, reader)
        return await self._async.append_and_summary(batch, reader)

    def _append_batch(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        client_id: str | None,
        token_counts: Sequence[int | None] | None,
        created_at: CreatedAt,
        rewind: int | None = None,
    ) -> AppendBatch | None:
        """What `append` hands the backend, all checked and serialized; None: nothing to write."""
        validate_id(session_id)
        client = checks.optional_client(client_id)
        rows = checks.message_rows(messages, token_counts)
        back = checks.rewind_seq(rewind)
        if not rows and back is None:
            return None
        now = self._now()
        return AppendBatch(
            session_id, client, rows, now, dates_of(len(rows), created_at, now), tuple(messages), back
        )

    def read(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        newest: bool = True,
        client_id: ReadAs = OPERATOR,
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, ascending; the last (or first) `limit` of them,
        each with its date (`StoredMessage.created_at`: when it was appended, or the date given
        to `append`).

        `client_id`, on every session read (`summary_and_tail`, `transcript`, `last_seq`,
        `summary`, `usage`, `get_state` and their async twins), says whose run reads: a
        client id, or None for a run that names no client. The session must then be nobody's
        or that client's (else `OwnershipError`), checked by the backend in the same atomic
        read, so a run never sees another client's session even as it is being claimed.
        Without it the read is the operator's (the CLI's ``inspect``, admin scripts) and is
        not checked: adapters always pass it.
        """
        validate_id(session_id)
        checks.check_count("after_seq", after_seq)
        checks.check_limit(limit)
        return self._decode(self._sync.read(session_id, after_seq, limit, newest, checks.reader(client_id)))

    async def aread(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        newest: bool = True,
        client_id: ReadAs = OPERATOR,
    ) -> list[StoredMessage]:
        validate_id(session_id)
        checks.check_count("after_seq", after_seq)
        checks.check_limit(limit)
        return self._decode(
            await self._async.read(session_id, after_seq, limit, newest, checks.reader(client_id))
        )

    def messages_after(
        self, points: Sequence[tuple[str, int]], *, client_id: ReadAs = OPERATOR
    ) -> list[StoredMessage | None]:
        """For each ``(session_id, seq)`` of `points`, the session's first message after `seq`
        (``read(session_id, after_seq=seq, limit=1, newest=False)``), or None when there is
        none. Read at once (one round trip on PostgreSQL and Redis: recall reads the answer
        after each recalled question with it). The scope is a search's: with a `client_id`,
        only that client's own sessions are read (not one that is nobody's, which its search
        never reads either); with None, only sessions that are nobody's. Any other session
        gives None (no `OwnershipError`: the others are still read), checked in the same atomic
        read, so a session erased and written again by someone else after the search gives
        nothing of theirs.

        Example:
            >>> from langchain_core.messages import AIMessage, HumanMessage
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> _ = store.append("s1", [HumanMessage("Where?"), AIMessage("Lyon")], client_id="c1")
            >>> [m and m.message.text for m in store.messages_after([("s1", 1), ("s1", 2)], client_id="c1")]
            ['Lyon', None]
        """
        checked = checks.check_points(points)
        if not checked:
            return []
        return self._after(self._sync.messages_after(checked, checks.search_reader(client_id)))

    async def amessages_after(
        self, points: Sequence[tuple[str, int]], *, client_id: ReadAs = OPERATOR
    ) -> list[StoredMessage | None]:
        """Async twin of `messages_after`."""
        checked = checks.check_points(points)
        if not checked:
            return []
        return self._after(await self._async.messages_after(checked, checks.search_reader(client_id)))

    @classmethod
    def _after(cls, rows: Sequence[Row | None]) -> list[StoredMessage | None]:
        return [None if row is None else cls._decode([row])[0] for row in rows]

    def read_turn(self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR) -> TurnRead:
        """What a turn reads, at one instant: the summary record, the newest `limit` messages it
        does not cover (ascending) and the session's erase generation, owner check included;
        one round trip on server backends. A write planned from it (`install_summary`'s
        `generation`, a fact's `planned_from`) is refused once an erase changed the session."""
        validate_id(session_id)
        checks.check_count("limit", limit)
        record, rows, generation = self._sync.summary_and_tail(session_id, limit, checks.reader(client_id))
        return TurnRead(record, self._decode(rows), generation)

    async def aread_turn(self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR) -> TurnRead:
        validate_id(session_id)
        checks.check_count("limit", limit)
        record, rows, generation = await self._async.summary_and_tail(
            session_id, limit, checks.reader(client_id)
        )
        return TurnRead(record, self._decode(rows), generation)

    def read_memory(self, session_id: str, *, limit: int, client_id: str | None) -> MemoryRead:
        """Everything a turn reads, at one instant and in one round trip on PostgreSQL and
        Redis: `read_turn`'s summary, tail and generation, the session's state and the live
        facts of `client_id` (None: a run naming no client, no facts). The session must be
        nobody's or `client_id`'s (else `OwnershipError`, nothing returned), checked in the
        same read; an erased session reads as empty.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> _ = store.add_fact("c1", "Allergic to peanuts")
            >>> _ = store.append("s1", [HumanMessage("Hi")], client_id="c1")
            >>> read = store.read_memory("s1", limit=10, client_id="c1")
            >>> len(read.turn.messages), read.state, [f.text for f in read.facts]
            (1, {}, ['Allergic to peanuts'])
        """
        session, client, reader = self._memory_request(session_id, limit, client_id)
        return self._memory_read(self._sync.read_memory(session, limit, reader, client, self._now()))

    async def aread_memory(self, session_id: str, *, limit: int, client_id: str | None) -> MemoryRead:
        session, client, reader = self._memory_request(session_id, limit, client_id)
        return self._memory_read(await self._async.read_memory(session, limit, reader, client, self._now()))

    @staticmethod
    def _memory_request(session_id: str, limit: int, client_id: str | None) -> tuple[str, str | None, Reader]:
        validate_id(session_id)
        checks.check_count("limit", limit)
        client = checks.optional_client(client_id)
        return session_id, client, Reader(client)

    def _memory_read(self, rows: MemoryRows) -> MemoryRead:
        record, tail, generation = rows.turn
        state = {} if rows.state is None else dict(json.loads(rows.state))
        return MemoryRead(TurnRead(record, self._decode(tail), generation), state, list(rows.facts))

    def summary_and_tail(
        self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR
    ) -> tuple[SummaryRecord | None, list[StoredMessage]]:
        """`read_turn` without the generation: the summary record and the newest `limit`
        messages it does not cover."""
        turn = self.read_turn(session_id, limit=limit, client_id=client_id)
        return turn.record, turn.messages

    async def asummary_and_tail(
        self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR
    ) -> tuple[SummaryRecord | None, list[StoredMessage]]:
        turn = await self.aread_turn(session_id, limit=limit, client_id=client_id)
        return turn.record, turn.messages

    def transcript(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> list[BaseMessage]:
        """Every message ever appended to the session, in order."""
        return [m.message for m in self.read(session_id, client_id=client_id)]

    async def atranscript(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> list[BaseMessage]:
        return [m.message for m in await self.aread(session_id, client_id=client_id)]

    def last_seq(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> int:
        """Sequence number of the newest message (0 for an empty session)."""
        return self._sync.last_seq(validate_id(session_id), checks.reader(client_id))

    async def alast_seq(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> int:
        return await self._async.last_seq(validate_id(session_id), checks.reader(client_id))

    # ------------------------------------------------------------------ summary & lease

    def summary(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryRecord | None:
        return self._sync.get_summary(validate_id(session_id), checks.reader(client_id))

    async def asummary(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryRecord | None:
        return await self._async.get_summary(validate_id(session_id), checks.reader(client_id))

    def install_summary(
        self,
        session_id: str,
        text: str,
        *,
        covered_seq: int,
        expected_version: int,
        meta: Mapping[str, Any] | None = None,
        lease_owner: str | None = None,
        generation: str | None = None,
    ) -> bool:
        """Compare-and-swap the summary; False if another writer installed one first.

        With `lease_owner`, also False (nothing written) unless that owner still holds the lease
        it took with `claim`: every erase deletes the lease with the data, so a compaction that
        claimed before an erase never installs after it, whatever the new conversation holds.
        With `generation` (`read_turn`'s), also False unless the session still has it: a summary
        planned from a read made before an erase never lands. Never installs on a session
        that has no row (no message, or erased).
        """
        write = checks.summary_args(
            session_id, text, covered_seq, expected_version, meta, lease_owner, self._now(), generation
        )
        return self._sync.cas_summary(write)

    async def ainstall_summary(
        self,
        session_id: str,
        text: str,
        *,
        covered_seq: int,
        expected_version: int,
        meta: Mapping[str, Any] | None = None,
        lease_owner: str | None = None,
        generation: str | None = None,
    ) -> bool:
        write = checks.summary_args(
            session_id, text, covered_seq, expected_version, meta, lease_owner, self._now(), generation
        )
        return await self._async.cas_summary(write)

    def usage(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryUsage:
        """What summarizing the session cost (calls, tokens) and saves per call."""
        return SummaryUsage.from_record(self.summary(session_id, client_id=client_id))

    async def ausage(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryUsage:
        return SummaryUsage.from_record(await self.asummary(session_id, client_id=client_id))

    def claim(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's compaction lease for `ttl` seconds; False if someone holds it."""
        return self._sync.claim(
            validate_id(session_id), checks.lease_owner(owner), checks.lease_ttl(ttl), self._now()
        )

    async def aclaim(self, session_id: str, owner: str, ttl: float) -> bool:
        return await self._async.claim(
            validate_id(session_id), checks.lease_owner(owner), checks.lease_ttl(ttl), self._now()
        )

    def release(self, session_id: str, owner: str) -> None:
        self._sync.release(validate_id(session_id), checks.lease_owner(owner))

    async def arelease(self, session_id: str, owner: str) -> None:
        await self._async.release(validate_id(session_id), checks.lease_owner(owner))

    # ------------------------------------------------------------------ sessions & state

    def session_info(self, session_id: str) -> SessionInfo | None:
        return self._sync.get_session(validate_id(session_id))

    async def asession_info(self, session_id: str) -> SessionInfo | None:
        return await self._async.get_session(validate_id(session_id))

    def sessions(self, client_id: str) -> list[str]:
        """Ids of the sessions that belong to the client."""
        return self._sync.list_sessions(validate_id(client_id, kind="client_id"))

    async def asessions(self, client_id: str) -> list[str]:
        return await self._async.list_sessions(validate_id(client_id, kind="client_id"))

    def clear_session(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> None:
        """Delete the session's transcript, summary and state (the user asked for it).

        With `client_id` (None: a run naming no client), refused (`OwnershipError`, nothing
        erased) unless the session is nobody's or that client's, checked in the erase itself.
        """
        self._sync.delete_session(validate_id(session_id), checks.reader(client_id))

    async def aclear_session(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> None:
        await self._async.delete_session(validate_id(session_id), checks.reader(client_id))

    def get_state(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> dict[str, Any]:
        """The session's structured state (exact business data; never summarized)."""
        raw = self._sync.get_state(validate_id(session_id), checks.reader(client_id))
        return {} if raw is None else dict(json.loads(raw))

    async def aget_state(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> dict[str, Any]:
        raw = await self._async.get_state(validate_id(session_id), checks.reader(client_id))
        return {} if raw is None else dict(json.loads(raw))

    def set_state(self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None) -> None:
        """Replace the session's state with `state` (a JSON-serializable mapping); refused on
        an owned session unless `client_id` names its client, as `append` is."""
        validate_id(session_id)
        self._sync.set_state(
            session_id, checks.optional_client(client_id), checks.state_json(state), self._now()
        )

    async def aset_state(
        self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None
    ) -> None:
        validate_id(session_id)
        await self._async.set_state(
            session_id, checks.optional_client(client_id), checks.state_json(state), self._now()
        )

    def update_state(
        self, session_id: str, updates: Mapping[str, Any], *, client_id: str | None = None
    ) -> dict[str, Any]:
        """Merge `updates` into the session's state and return the state written: a key set to
        None is removed, any other value replaces the key's (a shallow merge). Refused on an
        owned session unless `client_id` names its client (`OwnershipError`), as `set_state` is.

        The state is read as `client_id`'s, merged, then written only if it is still the state
        read: the backend compares it in the same atomic step (statement, script or
        transaction) as the owner check and the write, and the update is planned again from a
        fresh read when it changed meanwhile. So an erase (`clear_session`, `forget`, `purge`)
        landing between the read and the write never has its keys written back: the update is
        then applied to no state (its own keys only), and two updates racing each other keep
        both one's keys (a writer that lost waits a random, growing pause before its next
        attempt). After `STATE_RETRIES` attempts lost in a row, `StaleWriteError` (nothing
        written).
        """
        sid, client = validate_id(session_id), checks.optional_client(client_id)
        reader = checks.reader(client)
        for attempt in range(STATE_RETRIES):
            if attempt:
                time.sleep(_backoff(attempt))
            raw = self._sync.get_state(sid, reader)
            state, text = _merge_state(raw, updates)
            if self._sync.set_state(sid, client, text, self._now(), expected=raw):
                return state
        raise StaleWriteError(_lost_races(sid))

    async def aupdate_state(
        self, session_id: str, updates: Mapping[str, Any], *, client_id: str | None = None
    ) -> dict[str, Any]:
        sid, client = validate_id(session_id), checks.optional_client(client_id)
        reader = checks.reader(client)
        for attempt in range(STATE_RETRIES):
            if attempt:
                await asyncio.sleep(_backoff(attempt))
            raw = await self._async.get_state(sid, reader)
            state, text = _merge_state(raw, updates)
            if await self._async.set_state(sid, client, text, self._now(), expected=raw):
                return state
        raise StaleWriteError(_lost_races(sid))

    def purge(self, *, older_than: float | None = None) -> int:
        """Delete the sessions not written for `older_than` seconds (None: no session) and
        every expired fact (see `add_fact`); return how many sessions and facts it deleted."""
        now = self._now()
        return self._sync.purge(checks.cutoff(older_than, now), now)

    async def apurge(self, *, older_than: float | None = None) -> int:
        now = self._now()
        return await self._async.purge(checks.cutoff(older_than, now), now)

    # ------------------------------------------------------------------ privacy

    def forget(self, client_id: str) -> None:
        """Erase the client's facts and every session, transcript, summary and state."""
        self._sync.delete_client(validate_id(client_id, kind="client_id"))

    async def aforget(self, client_id: str) -> None:
        await self._async.delete_client(validate_id(client_id, kind="client_id"))

    def vacuum(self) -> None:
        """Remove what erased data leaves in the backend's files, where the backend allows it.

        `forget`, `clear_session` and `purge` make data unreachable at once; some backends keep
        its bytes until later: SQLite checkpoints its WAL after each erase (this retries it),
        PostgreSQL keeps dead rows until VACUUM (this runs it on the store's tables), Redis
        and the in-memory store have nothing to do here (see each backend's module docstring).
        """
        self._sync.vacuum()

    async def avacuum(self) -> None:
        await self._async.vacuum()

    def export(self, client_id: str) -> dict[str, Any]:
        """Everything stored about the client, as JSON-serializable data.

        Each session is read as the client's (`Reader`, owner checked in each read): a session
        erased and re-created by another client while the export runs is left out, never read.
        Facts come with their `expires_at`; one that expired is still stored until `purge`, so
        it is exported too (its expiry past), though no read of the memory shows it. What is
        derived from the transcript to search it (the lexical index, the messages' vectors) is
        not exported; `forget` erases it with the rest.
        """
        validate_id(client_id, kind="client_id")
        reader = Reader(client_id, exact=True)
        sessions = []
        for session_id in self._sync.list_sessions(client_id):
            try:
                info = self._sync.get_session(session_id)
                summary = self._sync.get_summary(session_id, reader)
                state = self._sync.get_state(session_id, reader)
                rows = self._sync.read(session_id, 0, None, True, reader)
            except OwnershipError:
                continue
            if info is None or info.client_id != client_id:
                continue
            sessions.append(session_export(info, summary, state, self._decode(rows)))
        return client_export(client_id, self._sync.list_facts(client_id, -math.inf), sessions, self._now())

    async def aexport(self, client_id: str) -> dict[str, Any]:
        validate_id(client_id, kind="client_id")
        reader = Reader(client_id, exact=True)
        sessions = []
        for session_id in await self._async.list_sessions(client_id):
            try:
                info = await self._async.get_session(session_id)
                summary = await self._async.get_summary(session_id, reader)
                state = await self._async.get_state(session_id, reader)
                rows = await self._async.read(session_id, 0, None, True, reader)
            except OwnershipError:
                continue
            if info is None or info.client_id != client_id:
                continue
            sessions.append(session_export(info, summary, state, self._decode(rows)))
        facts = await self._async.list_facts(client_id, -math.inf)
        return client_export(client_id, facts, sessions, self._now())

    # ------------------------------------------------------------------ facts

    def _retention(self, ttl: float | None, expires_at: ExpiresAt) -> tuple[Retention, float]:
        """The checked retention of a fact write, and the `now` it was computed at."""
        now = self._now()
        return retention(ttl, expires_at, now=now, default_ttl=self.fact_ttl), now

    def _add_plan(
        self,
        client_id: str,
        text: object,
        key: str | None,
        source: str,
        pinned: object,
        ttl: float | None,
        expires_at: ExpiresAt,
    ) -> tuple[FactPlan, tuple[str, str | None], float] | None:
        """`add_fact`'s plan, the checked fact and its "now"; None if the filter refused it."""
        validate_id(client_id, kind="client_id")
        keep = self._retention(ttl, expires_at)
        checked = self._check_fact(text, key, source)
        if checked is None:
            return None
        return (
            plan_add(client_id, checked, source, checks.pinned_flag(pinned), keep, self.max_facts),
            checked,
            keep[1],
        )

    def _update_plan(
        self, client_id: str, fact_id: str, text: str, ttl: float | None, expires_at: ExpiresAt
    ) -> tuple[FactPlan, float]:
        """`update_fact`'s plan and its "now"."""
        validate_id(client_id, kind="client_id")
        validate_id(fact_id, kind="fact_id")
        keep = self._retention(ttl, expires_at)
        return plan_update(fact_id, text, keep, self.max_fact_chars, self.fact_filter), keep[1]

    def _check_fact(self, text: object, key: str | None, source: str) -> tuple[str, str | None] | None:
        """Validate and filter a fact; None if the filter refused it."""
        return fact_rules.check_fact(
            text, key, source, max_chars=self.max_fact_chars, fact_filter=self.fact_filter
        )

    def add_fact(
        self,
        client_id: str,
        text: str,
        *,
        key: str | None = None,
        source: str = "code",
        pinned: bool = False,
        planned_from: SessionMark | None = None,
        ttl: float | None = None,
        expires_at: ExpiresAt = None,
    ) -> Fact | None:
        """Store a fact about the client and return it.

        A fact with the `key` of an existing one replaces its text (a team change updates the
        team fact). An exact duplicate is not stored twice: the existing fact is returned.
        Returns None if `fact_filter` refused the fact. A `pinned` fact (an allergy) is sent
        before the others when the client's facts exceed their budget. `planned_from` (a
        fact derived from a session's messages, e.g. by the extractor) makes the write
        conditional on that session still being the client's at the generation read:
        `StaleWriteError`, nothing written, once an erase overtook it.

        Retention: `ttl` (seconds from now) or `expires_at` (a date) makes the fact expire
        then, the store's `fact_ttl` when neither is given; an expired fact is invisible at
        once (no listing, search, prompt or export shows it) and `purge` deletes it. A keyed
        replacement renews the expiry (the one named, else `fact_ttl` from now, else it keeps
        its own); so does a duplicate added with a `ttl` or `expires_at`.

        Example:
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> store.add_fact("client-1", "Allergic to peanuts").text
            'Allergic to peanuts'
        """
        add = self._add_plan(client_id, text, key, source, pinned, ttl, expires_at)
        if add is None:
            return None
        plan, checked, now = add
        existing, fact = self._sync.change_facts(client_id, plan, now, mark_of(planned_from))
        return fact if fact is not None else fact_rules.find_fact(existing, *checked)

    async def aadd_fact(
        self,
        client_id: str,
        text: str,
        *,
        key: str | None = None,
        source: str = "code",
        pinned: bool = False,
        planned_from: SessionMark | None = None,
        ttl: float | None = None,
        expires_at: ExpiresAt = None,
    ) -> Fact | None:
        add = self._add_plan(client_id, text, key, source, pinned, ttl, expires_at)
        if add is None:
            return None
        plan, checked, now = add
        existing, fact = await self._async.change_facts(client_id, plan, now, mark_of(planned_from))
        return fact if fact is not None else fact_rules.find_fact(existing, *checked)

    def facts(self, client_id: str) -> list[Fact]:
        """The client's facts, oldest first (the expired ones left out)."""
        return self._sync.list_facts(validate_id(client_id, kind="client_id"), self._now())

    async def afacts(self, client_id: str) -> list[Fact]:
        return await self._async.list_facts(validate_id(client_id, kind="client_id"), self._now())

    def update_fact(
        self,
        client_id: str,
        fact_id: str,
        text: str,
        *,
        planned_from: SessionMark | None = None,
        ttl: float | None = None,
        expires_at: ExpiresAt = None,
    ) -> Fact | None:
        """Replace the text of one fact; None if the client has no such fact (or the filter
        refused the new text, or the fact expired). Read and write are one step, as in
        `add_fact`, which also says what `planned_from`, `ttl` and `expires_at` do: an update
        renews the fact's expiry as a keyed replacement does."""
        plan, now = self._update_plan(client_id, fact_id, text, ttl, expires_at)
        return self._sync.change_facts(client_id, plan, now, mark_of(planned_from))[1]

    async def aupdate_fact(
        self,
        client_id: str,
        fact_id: str,
        text: str,
        *,
        planned_from: SessionMark | None = None,
        ttl: float | None = None,
        expires_at: ExpiresAt = None,
    ) -> Fact | None:
        plan, now = self._update_plan(client_id, fact_id, text, ttl, expires_at)
        return (await self._async.change_facts(client_id, plan, now, mark_of(planned_from)))[1]

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        """Delete one fact of the client; False if there was none with that id."""
        return self._sync.delete_fact(
            validate_id(client_id, kind="client_id"), validate_id(fact_id, kind="fact_id")
        )

    async def adelete_fact(self, client_id: str, fact_id: str) -> bool:
        client = validate_id(client_id, kind="client_id")
        return await self._async.delete_fact(client, validate_id(fact_id, kind="fact_id"))

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """The messages (and facts) most relevant to `query`, best first, within one scope.

        `client_id` searches every session of the client and its facts; `session_id` one
        session (with `client_id` too, the session must be that client's: `OwnershipError`
        otherwise). One of them is required: a search never crosses clients. The query is
        plain words (`lexical_search.query_terms`): search syntax in it is text, and a query of
        stop words only finds nothing without querying.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> store.append("s1", [HumanMessage("We adopted a cat named Oscar")], client_id="c1")
            [1]
            >>> store.search("what is the cat called?", client_id="c1")[0].seq
            1
        """
        terms, client, session = search_request(query, client_id, session_id, limit)
        if terms and client is not None and session is not None:
            check_owner(self._sync.get_session(session), session, client)
        return hits_of(self._sync.search(terms, client, session, limit, self._now())) if terms else []

    async def asearch(
        self,
        query: str,
        *,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        terms, client, session = search_request(query, client_id, session_id, limit)
        if terms and client is not None and session is not None:
            check_owner(await self._async.get_session(session), session, client)
        return hits_of(await self._async.search(terms, client, session, limit, self._now())) if terms else []

    # ------------------------------------------------------------------ dense vectors

    def unembedded(
        self, model: str, *, client_id: str | None = None, session_id: str | None = None, limit: int = 100
    ) -> list[Unembedded]:
        """Up to `limit` stored messages with no vector of `model` yet (by session, then seq):
        of `session_id` if given, else of the client's sessions, else of every session. What
        `engine.dense.DenseRecall` embeds off the turn path; each comes with its session's
        generation, which `put_vectors` checks."""
        scope = self._vector_scope(model, client_id, session_id)
        return self._sync.unembedded(*scope, check_limit(limit))

    async def aunembedded(
        self, model: str, *, client_id: str | None = None, session_id: str | None = None, limit: int = 100
    ) -> list[Unembedded]:
        scope = self._vector_scope(model, client_id, session_id)
        return await self._async.unembedded(*scope, check_limit(limit))

    @staticmethod
    def _vector_scope(
        model: str, client_id: str | None, session_id: str | None
    ) -> tuple[str, str | None, str | None]:
        client = checks.optional_client(client_id)
        return check_model(model), client, None if session_id is None else validate_id(session_id)

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        """Store each item's vector of `model` (`core.dense.pack`'s bytes), all in one atomic
        step; an item whose message was erased, or whose session was erased and re-created
        since the listing, is not stored. Returns how many were stored.

        Raises `InvalidArgumentError`, and writes nothing, for a vector that is not finite
        float32 of length 1 (`vector_api.vector_problem`) or a message given twice."""
        model, writes = check_model(model), check_writes(items)
        return self._sync.put_vectors(model, writes) if writes else 0

    async def aput_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        model, writes = check_model(model), check_writes(items)
        return await self._async.put_vectors(model, writes) if writes else 0

    def vector_search(
        self,
        vector: Sequence[float],
        *,
        model: str,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """The messages whose `model` vector is closest to `vector` (cosine), best first, in the
        scope of `search` and with its checks: a search never crosses clients. Only messages
        with a vector of `model` are found (`unembedded` lists the others)."""
        query, client, session = self._vector_query(vector, model, client_id, session_id, limit)
        if not query:
            return []
        if client is not None and session is not None:
            check_owner(self._sync.get_session(session), session, client)
        return hits_of(self._sync.vector_search(model, query, client, session, limit))

    async def avector_search(
        self,
        vector: Sequence[float],
        *,
        model: str,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        query, client, session = self._vector_query(vector, model, client_id, session_id, limit)
        if not query:
            return []
        if client is not None and session is not None:
            check_owner(await self._async.get_session(session), session, client)
        return hits_of(await self._async.vector_search(model, query, client, session, limit))

    @staticmethod
    def _vector_query(
        vector: Sequence[float], model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> tuple[bytes, str | None, str | None]:
        check_model(model)
        client, session = search_scope(client_id, session_id, limit)
        return pack(vector), client, session
