"""The public store API every backend shares, as sync/async twins over the backend's primitives.

Owns the public methods (each checks its arguments, then calls one primitive) and the
store's settings; the fact methods are in `fact_api.py` (their rules in `fact_rules.py`),
search in `search_api.py`, the argument checks and serialization in `checks.py`, the
primitives a backend implements and the data model in `contract.py`, the records in
`records.py`, the export's JSON shape in `export.py`, opening a store by URL in
`urls.py`, ``with``, `setup()` and closing in `lifecycle.py`. Does no I/O of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

import langchain_rolling_memory.core.fact_rules as fact_rules
import langchain_rolling_memory.stores.checks as checks
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import (
    FactFilter,
    Row,
    SessionInfo,
    StoredMessage,
    SummaryRecord,
    TurnRead,
)
from langchain_rolling_memory.core.retention import check_ttl
from langchain_rolling_memory.core.serde import loads_message
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError
from langchain_rolling_memory.stores.contract import OPERATOR, AppendBatch, ReadAs, Reader
from langchain_rolling_memory.stores.export import client_export, session_export
from langchain_rolling_memory.stores.fact_api import FactApi
from langchain_rolling_memory.stores.lifecycle import Lifecycle
from langchain_rolling_memory.stores.search_api import CreatedAt, SearchApi, dates_of


class RollingStore(Lifecycle, SearchApi, FactApi):
    """Base of every backend: public API with validation, backend primitives underneath.

    Ownership: a session belongs to the first client that writes to it. Writes (`append`,
    `set_state`) naming another client or none are then refused (`OwnershipError`); session
    reads take an optional `client_id` that is checked the same way, in the read itself (see
    `read`). A read without it is the operator's API (the CLI's ``inspect``, admin scripts)
    and is not checked; every adapter passes its run's client.

    Args:
        max_fact_chars: longest fact text accepted.
        max_facts: most facts kept per client.
        fact_filter: optional ``(text, key) -> text | None`` hook run before a fact is
            stored; return None to refuse it, or a redacted text.
        fact_ttl: seconds a fact is kept after it is written, when its write names no `ttl`
            or `expires_at` (also ``?fact_ttl=`` in a store URL); None keeps facts until
            deleted. See `add_fact`.
    """

    def __init__(
        self,
        *,
        max_fact_chars: int = 500,
        max_facts: int = 200,
        fact_filter: FactFilter | None = None,
        fact_ttl: float | None = None,
    ) -> None:
        fact_rules.check_limits(max_fact_chars, max_facts)
        self.max_fact_chars = max_fact_chars
        self.max_facts = max_facts
        self.fact_filter = fact_filter
        self.fact_ttl = (
            None if fact_ttl is None else check_ttl(fact_ttl, name="fact_ttl", error=ConfigurationError)
        )

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
        """
        batch = self._append_batch(session_id, messages, client_id, token_counts, created_at)
        return self._append(batch) if batch else []

    async def aappend(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
        created_at: CreatedAt = None,
    ) -> list[int]:
        batch = self._append_batch(session_id, messages, client_id, token_counts, created_at)
        return await self._aappend(batch) if batch else []

    def _append_batch(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        client_id: str | None,
        token_counts: Sequence[int | None] | None,
        created_at: CreatedAt,
    ) -> AppendBatch | None:
        """What `append` hands the backend, all checked and serialized; None: nothing to write."""
        validate_id(session_id)
        client = checks.optional_client(client_id)
        rows = checks.message_rows(messages, token_counts)
        if not rows:
            return None
        now = self._now()
        return AppendBatch(
            session_id, client, rows, now, dates_of(len(rows), created_at, now), tuple(messages)
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
        return self._decode(self._read(session_id, after_seq, limit, newest, checks.reader(client_id)))

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
        return self._decode(await self._aread(session_id, after_seq, limit, newest, checks.reader(client_id)))

    def read_turn(self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR) -> TurnRead:
        """What a turn reads, at one instant: the summary record, the newest `limit` messages it
        does not cover (ascending) and the session's erase generation, owner check included;
        one round trip on server backends. A write planned from it (`install_summary`'s
        `generation`, a fact's `planned_from`) is refused once an erase changed the session."""
        validate_id(session_id)
        checks.check_count("limit", limit)
        record, rows, generation = self._summary_and_tail(session_id, limit, checks.reader(client_id))
        return TurnRead(record, self._decode(rows), generation)

    async def aread_turn(self, session_id: str, *, limit: int, client_id: ReadAs = OPERATOR) -> TurnRead:
        validate_id(session_id)
        checks.check_count("limit", limit)
        record, rows, generation = await self._asummary_and_tail(session_id, limit, checks.reader(client_id))
        return TurnRead(record, self._decode(rows), generation)

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
        return self._last_seq(validate_id(session_id), checks.reader(client_id))

    async def alast_seq(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> int:
        return await self._alast_seq(validate_id(session_id), checks.reader(client_id))

    # ------------------------------------------------------------------ summary & lease

    def summary(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryRecord | None:
        return self._get_summary(validate_id(session_id), checks.reader(client_id))

    async def asummary(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryRecord | None:
        return await self._aget_summary(validate_id(session_id), checks.reader(client_id))

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
        return self._cas_summary(write)

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
        return await self._acas_summary(write)

    def usage(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryUsage:
        """What summarizing the session cost (calls, tokens) and saves per call."""
        return SummaryUsage.from_record(self.summary(session_id, client_id=client_id))

    async def ausage(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SummaryUsage:
        return SummaryUsage.from_record(await self.asummary(session_id, client_id=client_id))

    def claim(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's compaction lease for `ttl` seconds; False if someone holds it."""
        return self._claim(
            validate_id(session_id), checks.lease_owner(owner), checks.lease_ttl(ttl), self._now()
        )

    async def aclaim(self, session_id: str, owner: str, ttl: float) -> bool:
        return await self._aclaim(
            validate_id(session_id), checks.lease_owner(owner), checks.lease_ttl(ttl), self._now()
        )

    def release(self, session_id: str, owner: str) -> None:
        self._release(validate_id(session_id), checks.lease_owner(owner))

    async def arelease(self, session_id: str, owner: str) -> None:
        await self._arelease(validate_id(session_id), checks.lease_owner(owner))

    # ------------------------------------------------------------------ sessions & state

    def session_info(self, session_id: str) -> SessionInfo | None:
        return self._get_session(validate_id(session_id))

    async def asession_info(self, session_id: str) -> SessionInfo | None:
        return await self._aget_session(validate_id(session_id))

    def sessions(self, client_id: str) -> list[str]:
        """Ids of the sessions that belong to the client."""
        return self._list_sessions(validate_id(client_id, kind="client_id"))

    async def asessions(self, client_id: str) -> list[str]:
        return await self._alist_sessions(validate_id(client_id, kind="client_id"))

    def clear_session(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> None:
        """Delete the session's transcript, summary and state (the user asked for it).

        With `client_id` (None: a run naming no client), refused (`OwnershipError`, nothing
        erased) unless the session is nobody's or that client's, checked in the erase itself.
        """
        self._delete_session(validate_id(session_id), checks.reader(client_id))

    async def aclear_session(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> None:
        await self._adelete_session(validate_id(session_id), checks.reader(client_id))

    def get_state(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> dict[str, Any]:
        """The session's structured state (exact business data; never summarized)."""
        raw = self._get_state(validate_id(session_id), checks.reader(client_id))
        return {} if raw is None else dict(json.loads(raw))

    async def aget_state(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> dict[str, Any]:
        raw = await self._aget_state(validate_id(session_id), checks.reader(client_id))
        return {} if raw is None else dict(json.loads(raw))

    def set_state(self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None) -> None:
        """Replace the session's state with `state` (a JSON-serializable mapping); refused on
        an owned session unless `client_id` names its client, as `append` is."""
        validate_id(session_id)
        self._set_state(session_id, checks.optional_client(client_id), checks.state_json(state), self._now())

    async def aset_state(
        self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None
    ) -> None:
        validate_id(session_id)
        await self._aset_state(
            session_id, checks.optional_client(client_id), checks.state_json(state), self._now()
        )

    def purge(self, *, older_than: float | None = None) -> int:
        """Delete the sessions not written for `older_than` seconds (None: no session) and
        every expired fact (see `add_fact`); return how many sessions and facts it deleted."""
        now = self._now()
        return self._purge(checks.cutoff(older_than, now), now)

    async def apurge(self, *, older_than: float | None = None) -> int:
        now = self._now()
        return await self._apurge(checks.cutoff(older_than, now), now)

    # ------------------------------------------------------------------ privacy

    def forget(self, client_id: str) -> None:
        """Erase the client's facts and every session, transcript, summary and state."""
        self._delete_client(validate_id(client_id, kind="client_id"))

    async def aforget(self, client_id: str) -> None:
        await self._adelete_client(validate_id(client_id, kind="client_id"))

    def vacuum(self) -> None:
        """Remove what erased data leaves in the backend's files, where the backend allows it.

        `forget`, `clear_session` and `purge` make data unreachable at once; some backends keep
        its bytes until later: SQLite checkpoints its WAL after each erase (this retries it),
        PostgreSQL keeps dead rows until VACUUM (this runs it on the store's tables), Redis
        and the in-memory store have nothing to do here (see each backend's module docstring).
        """
        self._vacuum()

    async def avacuum(self) -> None:
        await self._avacuum()

    def export(self, client_id: str) -> dict[str, Any]:
        """Everything stored about the client, as JSON-serializable data.

        Each session is read as the client's (`Reader`, owner checked in each read): a session
        erased and re-created by another client while the export runs is left out, never read.
        Facts come with their `expires_at`; one that expired is still stored until `purge`, so
        it is exported too (its expiry past), though no read of the memory shows it.
        """
        validate_id(client_id, kind="client_id")
        reader = Reader(client_id, exact=True)
        sessions = []
        for session_id in self._list_sessions(client_id):
            try:
                info = self._get_session(session_id)
                summary = self._get_summary(session_id, reader)
                state = self._get_state(session_id, reader)
                rows = self._read(session_id, 0, None, True, reader)
            except OwnershipError:
                continue
            if info is None or info.client_id != client_id:
                continue
            sessions.append(session_export(info, summary, state, self._decode(rows)))
        return client_export(client_id, self._list_facts(client_id, -math.inf), sessions, self._now())

    async def aexport(self, client_id: str) -> dict[str, Any]:
        validate_id(client_id, kind="client_id")
        reader = Reader(client_id, exact=True)
        sessions = []
        for session_id in await self._alist_sessions(client_id):
            try:
                info = await self._aget_session(session_id)
                summary = await self._aget_summary(session_id, reader)
                state = await self._aget_state(session_id, reader)
                rows = await self._aread(session_id, 0, None, True, reader)
            except OwnershipError:
                continue
            if info is None or info.client_id != client_id:
                continue
            sessions.append(session_export(info, summary, state, self._decode(rows)))
        facts = await self._alist_facts(client_id, -math.inf)
        return client_export(client_id, facts, sessions, self._now())
