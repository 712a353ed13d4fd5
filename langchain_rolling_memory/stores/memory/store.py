"""In-process backend: the reference implementation of the store contract (no persistence).

An erase drops the objects at once; nothing is written anywhere, so `vacuum()` has nothing to do.

Search ranks with one `lexical_search.Bm25Index` per owner: a client's (its sessions' messages and its
facts) or, for a session that is nobody's, that session's; so a score depends on its owner's
text only. A session that a client comes to own moves its entries into the client's index.
The indexes are caught up at the first search after writes (a message's words are read from
its stored JSON then), so a turn without recall does not pay for indexing. A fact that expired
is left out of its client's index at the next search (so no score counts it), and out of
every listing at once; `purge` drops it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langchain_rolling_memory.core.lexical_search import Bm25Index, index_text, payload_index_text
from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError, StoreError
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.contract import (
    ANY_STATE,
    AppendBatch,
    ExpectedState,
    Reader,
    SearchRow,
    SummaryWrite,
    SyncBackend,
    TurnRows,
    Unembedded,
    VectorWrite,
    new_generation,
)
from langchain_rolling_memory.stores.fact_api import FactOptions
from langchain_rolling_memory.stores.vector_rank import closest


@dataclass
class _Session:
    client_id: str | None
    created_at: float
    updated_at: float
    rows: list[Row] = field(default_factory=list)
    summary: SummaryRecord | None = None
    state: str | None = None
    generation: str = field(default_factory=new_generation)
    # Dense vectors by (seq, model): erased with the session object itself.
    vectors: dict[tuple[int, str], bytes] = field(default_factory=dict)


# An index's owner: ("c", client_id) for a client's entries, ("s", session_id) for a session
# that is nobody's. A document: ("m", session_id, seq) or ("f", client_id, fact_id).
_Scope = tuple[str, str]
_Doc = tuple[str, str, Any]


class _Closed:
    """Stands in for the lock of a closed store: every primitive takes the lock first."""

    def __enter__(self) -> None:
        msg = "this InMemoryRollingStore is closed; open a new store (closing is final)"
        raise StoreError(msg)

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - __enter__ never succeeds
        return None


class MemoryBackend(SyncBackend):
    """The primitives on dicts guarded by one lock; safe with several threads."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._sessions: dict[str, _Session] = {}
        self._facts: dict[str, dict[str, Fact]] = {}
        # Compaction leases by session id, (owner, expires_at); every erase drops the session's.
        self._leases: dict[str, tuple[str, float]] = {}
        # One index per owner (`_Scope`), and where each indexed document is.
        self._indexes: dict[_Scope, Bm25Index] = {}
        self._where: dict[_Doc, _Scope] = {}
        # Written but not yet indexed, in write order: an index breaks ties by the order of
        # its additions, so catching up in this order ranks as indexing at each write did.
        # A message waits as its stored JSON, a fact as its indexed text.
        self._pending: dict[_Doc, str] = {}

    def close(self) -> None:
        """Drop the data and refuse every later call, as the other backends do once closed."""
        if isinstance(self._lock, _Closed):
            return
        with self._lock:
            self._lock = _Closed()  # type: ignore[assignment]
            self._sessions.clear()
            self._facts.clear()
            self._leases.clear()
            self._pending.clear()
            self._indexes.clear()
            self._where.clear()

    def _to_index(self, doc: _Doc, source: str) -> None:
        self._pending.pop(doc, None)  # a rewrite goes to the end, as `Bm25Index.add` moves it
        self._pending[doc] = source

    def _unindex(self, doc: _Doc) -> None:
        # Both: a rewritten fact can be pending while its old text is still indexed.
        self._pending.pop(doc, None)
        scope = self._where.pop(doc, None)
        if scope is not None:
            index = self._indexes[scope]
            index.remove(doc)
            if not len(index):
                del self._indexes[scope]

    def _scope_of(self, doc: _Doc) -> _Scope:
        if doc[0] == "f":
            return ("c", doc[1])
        owner = self._sessions[doc[1]].client_id
        return ("c", owner) if owner is not None else ("s", doc[1])

    def _catch_up(self) -> None:
        """Index what was written since the last search (called under the lock)."""
        for doc, source in self._pending.items():
            scope = self._scope_of(doc)
            self._indexes.setdefault(scope, Bm25Index()).add(
                doc, payload_index_text(source) if doc[0] == "m" else source
            )
            self._where[doc] = scope
        self._pending.clear()

    def _adopt(self, session_id: str, session: _Session) -> None:
        """Move the entries of a session that was nobody's to its new owner's index."""
        for seq, payload, _, _ in session.rows:
            doc = ("m", session_id, seq)
            if doc in self._where:
                self._unindex(doc)
                self._to_index(doc, payload)

    def _session(self, session_id: str, client_id: str | None, now: float) -> _Session:
        """The session a write on `client_id`'s behalf (None: an anonymous one) goes to, created
        if missing: refused unless it is `client_id`'s or nobody's, and claimed if nobody's."""
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session(client_id, now, now)
        elif session.client_id is not None and session.client_id != client_id:
            raise OwnershipError.for_session(session_id, client_id)
        elif session.client_id is None and client_id is not None:
            session.client_id = client_id
            self._adopt(session_id, session)
        return session

    def append(self, batch: AppendBatch) -> list[int]:
        session_id, rows, now = batch.session_id, batch.rows, batch.now
        with self._lock:
            session = self._session(session_id, batch.client_id, now)
            if batch.rewind is not None:
                self._withdraw(session_id, session, batch.rewind)
            start = len(session.rows) + 1
            seqs = list(range(start, start + len(rows)))
            session.rows.extend(
                (seq, payload, tokens, at)
                for seq, (payload, tokens), at in zip(seqs, rows, batch.created_at(), strict=True)
            )
            for seq, (payload, _) in zip(seqs, rows, strict=True):
                self._to_index(("m", session_id, seq), payload)
            session.updated_at = now
            return seqs

    def _withdraw(self, session_id: str, session: _Session, after: int) -> None:
        """Withdraw the rows past `after` (never a summary's), their entries and vectors."""
        keep = max(after, session.summary.covered_seq if session.summary is not None else 0)
        gone = session.rows[keep:]
        if not gone:
            return
        del session.rows[keep:]
        for seq, _, _, _ in gone:
            self._unindex(("m", session_id, seq))
        session.vectors = {key: v for key, v in session.vectors.items() if key[0] <= keep}
        session.generation = new_generation()

    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        with self._lock:
            self._catch_up()
            # The owner is checked here, under the lock that every erase and write takes.
            if session_id is not None:
                found = self._sessions.get(session_id)
                sessions = {session_id} if found is not None and found.client_id == client_id else set()
            else:
                sessions = {sid for sid, s in self._sessions.items() if s.client_id == client_id}
            if client_id is not None:
                scope: _Scope = ("c", client_id)
            elif session_id is not None:
                scope = ("s", session_id)
            else:  # pragma: no cover - `search_scope` refuses a search without a scope
                return []
            if client_id is not None:
                for fact in self._expired(client_id, now):
                    self._unindex(("f", client_id, fact.id))
            index = self._indexes.get(scope)
            out: list[SearchRow] = []
            for doc, score in index.search(terms, limit=max(len(index), 1)) if index else ():
                kind, owner, item = cast("_Doc", doc)
                if kind == "m" and owner in sessions:
                    session = self._sessions[owner]
                    seq, payload, _, at = session.rows[item - 1]
                    out.append((score, owner, seq, payload, at, None))
                elif kind == "f" and client_id is not None and owner == client_id:
                    out.append((score, None, None, None, None, self._facts[owner][item]))
                if len(out) >= limit:
                    break
            return out

    def _in_scope(self, client_id: str | None, session_id: str | None) -> list[tuple[str, _Session]]:
        """The sessions a search sees (call with the lock held): `session_id` if its owner is
        `client_id` (None: nobody), else the sessions `client_id` owns."""
        if session_id is not None:
            found = self._sessions.get(session_id)
            return [(session_id, found)] if found is not None and found.client_id == client_id else []
        return sorted((sid, s) for sid, s in self._sessions.items() if s.client_id == client_id)

    def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        with self._lock:
            if session_id is not None:
                found = self._sessions.get(session_id)
                listed = [(session_id, found)] if found is not None else []
            elif client_id is not None:
                listed = self._in_scope(client_id, None)
            else:
                listed = sorted(self._sessions.items())
            out: list[Unembedded] = []
            for sid, session in listed:
                for seq, payload, _, _ in session.rows:
                    if (seq, model) not in session.vectors:
                        out.append(Unembedded(sid, seq, session.generation, payload))
                        if len(out) >= limit:
                            return out
            return out

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        with self._lock:
            stored = 0
            for session_id, seq, generation, vector in items:
                session = self._sessions.get(session_id)
                if session is None or session.generation != generation or seq > len(session.rows):
                    continue
                session.vectors[(seq, model)] = vector
                stored += 1
            return stored

    def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        with self._lock:
            found = sorted(
                (sid, seq, stored, session)
                for sid, session in self._in_scope(client_id, session_id)
                for (seq, name), stored in session.vectors.items()
                if name == model
            )
            best = closest(vector, [stored for _, _, stored, _ in found], limit)
            rows: list[SearchRow] = []
            for i, score in best:
                sid, seq, _, session = found[i]
                _, payload, _, at = session.rows[seq - 1]
                rows.append((score, sid, seq, payload, at, None))
            return rows

    def _forget_entries(self, session_id: str) -> None:
        """Unindex the session's messages and drop its lease (called by every erase)."""
        self._leases.pop(session_id, None)
        session = self._sessions.get(session_id)
        for seq in range(1, len(session.rows) + 1) if session else ():
            self._unindex(("m", session_id, seq))

    def _seen(self, session_id: str, reader: Reader | None) -> _Session | None:
        """The session, for a read (call with the lock held); `reader` checked against its owner."""
        session = self._sessions.get(session_id)
        if reader is not None:
            reader.check(session_id, session.client_id if session else None)
        return session

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        with self._lock:
            session = self._seen(session_id, reader)
            if session is None:
                return []
            rows = session.rows
            start = bisect.bisect_right(rows, after_seq, key=lambda r: r[0]) if rows else 0
            if limit is None:
                return rows[start:]
            if newest:
                return rows[max(start, len(rows) - limit) :]
            return rows[start : start + limit]

    def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        with self._lock:
            session = self._seen(session_id, reader)
            return session.rows[-1][0] if session and session.rows else 0

    def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        with self._lock:
            session = self._seen(session_id, reader)
            return session.summary if session else None

    def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        with self._lock:  # the reads, the owner check and the generation at one instant
            session = self._seen(session_id, reader)
            if session is None:
                return TurnRows(None, [], None)
            record = session.summary
            rows = self.read(session_id, record.covered_seq if record else 0, limit, True)
            return TurnRows(record, rows, session.generation)

    def cas_summary(self, write: SummaryWrite) -> bool:
        import json

        with self._lock:
            session = self._sessions.get(write.session_id)
            if session is None or write.generation not in (None, session.generation):
                return False
            lease = self._leases.get(write.session_id)
            if write.lease_owner is not None and (lease is None or lease[0] != write.lease_owner):
                return False
            current = session.summary.version if session.summary else 0
            if current != write.expected_version:
                return False
            meta = json.loads(write.meta_json)
            session.summary = SummaryRecord(write.text, write.covered_seq, current + 1, meta, write.now)
            return True

    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        with self._lock:  # a lease is kept apart: taking one creates no session
            lease = self._leases.get(session_id)
            if lease and lease[0] != owner and lease[1] > now:
                return False
            self._leases[session_id] = (owner, now + ttl)
            return True

    def release(self, session_id: str, owner: str) -> None:
        with self._lock:
            lease = self._leases.get(session_id)
            if lease and lease[0] == owner:
                del self._leases[session_id]

    def get_session(self, session_id: str) -> SessionInfo | None:
        with self._lock:
            s = self._sessions.get(session_id)
            return SessionInfo(session_id, s.client_id, s.created_at, s.updated_at) if s else None

    def list_sessions(self, client_id: str) -> list[str]:
        with self._lock:
            return sorted(sid for sid, s in self._sessions.items() if s.client_id == client_id)

    def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        with self._lock:
            session = self._seen(session_id, reader)
            return session.state if session else None

    def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        with self._lock:
            current = self._sessions.get(session_id)
            if current is not None and current.client_id not in (None, client_id):
                raise OwnershipError.for_session(session_id, client_id)
            if expected is not ANY_STATE and (current.state if current else None) != expected:
                return False
            session = self._session(session_id, client_id, now)
            session.state = state
            session.updated_at = now
            return True

    def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        with self._lock:
            if self._seen(session_id, reader) is None and reader is not None:
                return  # no row yet: a claim racing it is not this run's to erase
            self._forget_entries(session_id)
            self._sessions.pop(session_id, None)

    def list_facts(self, client_id: str, at: float) -> list[Fact]:
        """Facts of the client live at `at`, oldest first."""
        with self._lock:
            facts = [
                f
                for f in self._facts.get(client_id, {}).values()
                if f.expires_at is None or f.expires_at > at
            ]
            return sorted(facts, key=lambda f: (f.created_at, f.id))

    def _expired(self, client_id: str, now: float) -> list[Fact]:
        """The client's facts expired at `now` (call with the lock held)."""
        facts = self._facts.get(client_id, {}).values()
        return [f for f in facts if f.expires_at is not None and f.expires_at <= now]

    def _put_fact(self, fact: Fact) -> None:
        with self._lock:
            self._facts.setdefault(fact.client_id, {})[fact.id] = replace(fact)
            self._to_index(("f", fact.client_id, fact.id), index_text(fact.text))

    def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        with self._lock:
            if mark is not None:
                session = self._sessions.get(mark.session_id)
                if session is None or session.client_id != client_id or session.generation != mark.generation:
                    raise StaleWriteError.for_session(mark.session_id, "fact write")
            existing = self.list_facts(client_id, now)
            fact = plan(existing)
            if fact is not None:
                self._put_fact(fact)
            return existing, fact

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        with self._lock:
            self._unindex(("f", client_id, fact_id))
            return self._facts.get(client_id, {}).pop(fact_id, None) is not None

    def delete_client(self, client_id: str) -> None:
        with self._lock:
            for fact_id in self._facts.pop(client_id, {}):
                self._unindex(("f", client_id, fact_id))
            for session_id in self.list_sessions(client_id):
                self._forget_entries(session_id)
                del self._sessions[session_id]

    def purge(self, cutoff: float, now: float) -> int:
        with self._lock:
            old = [sid for sid, s in self._sessions.items() if s.updated_at < cutoff]
            for sid in old:
                self._forget_entries(sid)
                del self._sessions[sid]
            expired = [fact for client_id in list(self._facts) for fact in self._expired(client_id, now)]
            for fact in expired:
                self.delete_fact(fact.client_id, fact.id)
            return len(old) + len(expired)


class InMemoryRollingStore(RollingStore):
    """Keeps everything in dicts guarded by one lock (`MemoryBackend`); lost when the process ends.

    Opened by ``open_store("memory://")``. Safe with several threads.
    """

    schemes = ("memory",)

    def __init__(self, **options: Any) -> None:
        super().__init__(MemoryBackend(), options=FactOptions(**options))
