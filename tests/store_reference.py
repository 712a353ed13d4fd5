"""The reference model of the store contract, pure Python: what every backend must answer.

Owns the expected state of a store after a sequence of calls (each session's owner, erase
epoch, transcript, summary, state and lease; each client's facts and their expiry; the clock) and, for every
text ever written, who wrote it and where, so that a check can tell a leak (another client's
text), an erased text and a lost one apart. `tests/test_store_model.py` runs it against every
backend and `benchmarks/store_model_long.py` runs it longer. No I/O, no store.

Each operation updates the model and returns what the store must answer: a value, or the
exception class it must raise (then the model is left unchanged, as the store must be).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.stores.contract import OPERATOR

__all__ = ["ANON", "OPERATOR", "VOCAB", "Mark", "Reference", "Violation", "tag"]

VOCAB = ("apple", "river", "stone")
"""Words every client writes, so a search of one client could match another's text."""

ANON = "anon"
"""The tag of text written by a run naming no client."""

Viewer = Any  # a client id, None (a run naming no client) or OPERATOR


def tag(client: str | None) -> str:
    return ANON if client is None else client


class Violation(AssertionError):
    """A broken invariant: `invariant` names which (leak, erased, lost, stale-install, ...)."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"[{invariant}] {detail}")
        self.invariant = invariant


@dataclass
class Summary:
    text: str
    covered: int
    version: int


@dataclass
class Session:
    owner: str | None
    epoch: int
    updated: float
    texts: list[str] = field(default_factory=list)
    summary: Summary | None = None
    state: dict[str, Any] | None = None
    lease: tuple[str, float] | None = None


@dataclass(frozen=True)
class Written:
    """Where a text was written: `author` is its writer's tag; `place` a session id (epoch
    -1: the write was refused) or, for a fact, its client (`fact_id` None: refused)."""

    author: str
    kind: str  # "message", "summary", "state" or "fact"
    place: str
    epoch: int = -1
    fact_id: str | None = None


@dataclass(frozen=True)
class Mark:
    """What a `read_turn` saw: the session, its generation, the model's epoch and owner tag."""

    session_id: str
    generation: str
    epoch: int
    author: str


class Reference:
    """The expected store. `now` is the clock every store of the run reads (`_now`)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now
        self.sessions: dict[str, Session] = {}
        self.facts: dict[str, dict[str, str]] = defaultdict(dict)  # client -> fact id -> text
        self.expiry: dict[str, float] = {}  # fact id -> expires_at (none: never)
        # Expired facts, invisible but not yet purged: client -> fact id -> text.
        self.expired: dict[str, dict[str, str]] = defaultdict(dict)
        self.keys: dict[str, dict[str, str]] = defaultdict(dict)  # client -> key -> fact id
        self.written: dict[str, Written] = {}
        self.generations: dict[tuple[str, int], str] = {}  # (session id, epoch) -> generation
        self.versions: dict[str | None, int] = defaultdict(int)  # search scope -> change count
        self._texts = itertools.count(1)
        self._epochs = itertools.count(1)

    # ------------------------------------------------------------------ texts and scopes

    def new_text(self, author: str, word: str, kind: str, place: str) -> str:
        """A text no one wrote before: ``"<author> <word> <author><n>"``, registered as refused
        until an operation of the model accepts it."""
        text = f"{author} {word} {author}{next(self._texts)}"
        self.written[text] = Written(author, kind, place)
        return text

    def _accept(self, text: str, **where: Any) -> None:
        self.written[text] = replace(self.written[text], **where)

    def touch(self, *owners: str | None) -> None:
        """The search scopes whose statistics may change: a client's, or (None) the sessions
        that are nobody's."""
        for owner in set(owners):
            self.versions[owner] += 1

    def live(self, w: Written) -> bool:
        if w.kind == "fact":
            return w.fact_id is not None and self.facts[w.place].get(w.fact_id) is not None
        session = self.sessions.get(w.place)
        return session is not None and session.epoch == w.epoch

    def foreign(self, viewer: Viewer, text: str) -> str | None:
        """Why `viewer` must not see `text`, or None: "leak" (another client's), "refused"
        (a write the store had to refuse landed), "erased", "unknown" (never written)."""
        w = self.written.get(text)
        if w is None:
            return "unknown"
        live = self.live(w)
        if viewer is not OPERATOR:
            if w.author not in (tag(viewer), ANON):
                return "leak"
            session = self.sessions.get(w.place) if w.kind != "fact" else None
            if live and session is not None and session.owner not in (None, viewer):
                return "leak"
        if (w.fact_id is None) if w.kind == "fact" else (w.epoch == -1):
            return "refused"
        return None if live else "erased"

    # ------------------------------------------------------------------ sessions

    def _visible(self, reader: Viewer, sid: str) -> bool:
        session = self.sessions.get(sid)
        return reader is OPERATOR or session is None or session.owner in (None, reader)

    def _writable(self, client: str | None, sid: str) -> Session | type[OwnershipError]:
        """The session a write of `client` lands in (created, or adopted if nobody's)."""
        session = self.sessions.get(sid)
        if session is None:
            session = self.sessions[sid] = Session(client, next(self._epochs), self.now)
        elif session.owner is not None and session.owner != client:
            return OwnershipError
        elif session.owner is None and client is not None:
            session.owner = client
            self.touch(None)
        self.touch(client)
        session.updated = self.now
        return session

    def append(self, client: str | None, sid: str, texts: list[str]) -> list[int] | type[OwnershipError]:
        session = self._writable(client, sid)
        if not isinstance(session, Session):
            return session
        start = len(session.texts) + 1
        session.texts += texts
        for text in texts:
            self._accept(text, epoch=session.epoch)
        return list(range(start, start + len(texts)))

    def rewind(
        self, client: str | None, sid: str, back: int, texts: list[str]
    ) -> list[int] | type[OwnershipError]:
        """`append(..., rewind=back)`: the rows past `back` (never a summary's) withdrawn, then
        the append; a withdrawal gives the session a new epoch (generation), which the texts
        it keeps (rows, summary, state) carry on: the withdrawn ones read as erased."""
        session = self._writable(client, sid)
        if not isinstance(session, Session):
            return session
        keep = max(back, session.summary.covered if session.summary else 0)
        if keep < len(session.texts):
            old = session.epoch
            kept = set(session.texts[:keep])
            gone = set(session.texts[keep:])
            session.texts = session.texts[:keep]
            session.epoch = next(self._epochs)
            for text, w in list(self.written.items()):
                if w.place == sid and w.kind != "fact" and w.epoch == old and text not in gone:
                    assert w.kind != "message" or text in kept
                    self._accept(text, epoch=session.epoch)
        return self.append(client, sid, texts)

    def set_state(self, client: str | None, sid: str, text: str) -> type[OwnershipError] | None:
        session = self._writable(client, sid)
        if not isinstance(session, Session):
            return session
        session.state = {"note": text}
        self._accept(text, epoch=session.epoch)
        return None

    def update_state(
        self, client: str | None, sid: str, updates: dict[str, str | None]
    ) -> dict[str, Any] | type[OwnershipError]:
        """`update_state`: read as `client`, merged (None deletes the key), written."""
        if not self._visible(client, sid):
            return OwnershipError
        session = self._writable(client, sid)
        assert isinstance(session, Session)
        merged = dict(session.state or {})
        for key, value in updates.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
                self._accept(value, epoch=session.epoch)
        session.state = dict(sorted(merged.items()))  # the stored JSON's key order
        return dict(session.state)

    def read(self, reader: Viewer, sid: str) -> list[str] | type[OwnershipError]:
        if not self._visible(reader, sid):
            return OwnershipError
        session = self.sessions.get(sid)
        return list(session.texts) if session else []

    def get_state(self, reader: Viewer, sid: str) -> dict[str, Any] | type[OwnershipError]:
        if not self._visible(reader, sid):
            return OwnershipError
        session = self.sessions.get(sid)
        return dict(session.state or {}) if session else {}

    def read_turn(
        self, reader: Viewer, sid: str, limit: int
    ) -> tuple[str | None, list[str], Session | None] | type[OwnershipError]:
        """The summary text, the newest `limit` texts it does not cover, and the session."""
        if not self._visible(reader, sid):
            return OwnershipError
        session = self.sessions.get(sid)
        if session is None:
            return None, [], None
        covered = session.summary.covered if session.summary else 0
        tail = session.texts[covered:]
        return (session.summary.text if session.summary else None), tail[-limit:], session

    def observe_generation(self, sid: str, generation: str | None) -> str | None:
        """Check a generation a read returned: the broken invariant, or None."""
        session = self.sessions.get(sid)
        if session is None:
            return None if generation is None else "erased"
        if generation is None:
            return "lost"
        known = self.generations.get((sid, session.epoch))
        if known is None:
            if generation in {g for (s, _), g in self.generations.items() if s == sid}:
                return "generation-reused"
            self.generations[(sid, session.epoch)] = generation
        elif known != generation:
            return "generation-changed"
        return None

    def sessions_of(self, client: str) -> list[str]:
        return sorted(sid for sid, s in self.sessions.items() if s.owner == client)

    def _erase(self, sid: str) -> None:
        self.touch(self.sessions.pop(sid).owner)

    def clear(self, reader: Viewer, sid: str) -> type[OwnershipError] | None:
        session = self.sessions.get(sid)
        if session is None:
            return None
        if reader is not OPERATOR and session.owner not in (None, reader):
            return OwnershipError
        self._erase(sid)
        return None

    def forget(self, client: str) -> None:
        for sid in self.sessions_of(client):
            self._erase(sid)
        self.facts.pop(client, None)
        self.expired.pop(client, None)
        self.keys.pop(client, None)
        self.touch(client)

    def advance(self, seconds: float) -> None:
        """The clock moves: the facts whose expiry came are hidden at once (kept until `purge`)."""
        self.now += seconds
        for client, facts in self.facts.items():
            gone = [f for f in facts if self.expiry.get(f, math.inf) <= self.now]
            for fact_id in gone:
                self.expired[client][fact_id] = facts.pop(fact_id)
                self.keys[client] = {k: f for k, f in self.keys[client].items() if f != fact_id}
            if gone:
                self.touch(client)

    def purge(self, older_than: float | None) -> int:
        """Sessions not written since the cutoff, and every expired fact: how many of both."""
        cutoff = -math.inf if older_than is None else self.now - older_than
        old = [sid for sid, s in self.sessions.items() if s.updated < cutoff]
        for sid in old:
            self._erase(sid)
        facts = sum(len(f) for f in self.expired.values())
        self.expired.clear()
        return len(old) + facts

    # ------------------------------------------------------------------ leases and summaries

    def claim(self, sid: str, worker: str, ttl: float) -> bool:
        session = self.sessions[sid]
        if session.lease and session.lease[0] != worker and session.lease[1] > self.now:
            return False
        session.lease = (worker, self.now + ttl)
        return True

    def release(self, sid: str, worker: str) -> None:
        session = self.sessions.get(sid)
        if session and session.lease and session.lease[0] == worker:
            session.lease = None

    def install(
        self, sid: str, text: str, covered: int, expected: int, worker: str | None, mark: Mark | None
    ) -> tuple[bool, str]:
        """Whether the install lands, and why not ("no-row", "generation", "lease", "version")."""
        session = self.sessions.get(sid)
        if session is None:
            return False, "no-row"
        if mark is not None and mark.epoch != session.epoch:
            return False, "generation"
        if worker is not None and (session.lease is None or session.lease[0] != worker):
            return False, "lease"
        version = session.summary.version if session.summary else 0
        if version != expected:
            return False, "version"
        session.summary = Summary(text, covered, version + 1)
        self._accept(text, epoch=session.epoch)
        return True, "installed"

    # ------------------------------------------------------------------ facts

    def _stale(self, client: str, mark: Mark | None) -> bool:
        session = self.sessions.get(mark.session_id) if mark else None
        return mark is not None and (
            session is None or session.epoch != mark.epoch or session.owner != client
        )

    def add_fact(
        self, client: str, text: str, key: str | None, mark: Mark | None, ttl: float | None = None
    ) -> str | type[StaleWriteError] | None:
        """The id of the keyed fact the text replaces (its expiry renewed by a `ttl`, else
        kept), None for a new fact (`learn_fact`)."""
        if self._stale(client, mark):
            return StaleWriteError
        fact_id = self.keys[client].get(key) if key else None
        if fact_id is not None:
            self.facts[client][fact_id] = text
            if ttl is not None:
                self.expiry[fact_id] = self.now + ttl
            self._accept(text, fact_id=fact_id)
            self.touch(client)
        return fact_id

    def learn_fact(
        self, client: str, fact_id: str, text: str, key: str | None, ttl: float | None = None
    ) -> None:
        """A new fact, under the id the store gave it."""
        self.facts[client][fact_id] = text
        if ttl is not None:
            self.expiry[fact_id] = self.now + ttl
        if key:
            self.keys[client][key] = fact_id
        self._accept(text, fact_id=fact_id)
        self.touch(client)

    def update_fact(
        self, client: str, fact_id: str, text: str, mark: Mark | None
    ) -> bool | type[StaleWriteError]:
        if self._stale(client, mark):
            return StaleWriteError
        if fact_id not in self.facts[client]:
            return False
        self.facts[client][fact_id] = text
        self._accept(text, fact_id=fact_id)
        self.touch(client)
        return True

    def delete_fact(self, client: str, fact_id: str) -> bool:
        if self.expired[client].pop(fact_id, None) is not None:
            return True  # invisible, but its row was there to delete
        if self.facts[client].pop(fact_id, None) is None:
            return False
        self.keys[client] = {k: f for k, f in self.keys[client].items() if f != fact_id}
        self.touch(client)
        return True

    def fact_ids(self) -> list[str]:
        return sorted(f for facts in self.facts.values() for f in facts)

    def fact_owner(self, fact_id: str) -> str | None:
        return next(
            (c for every in (self.facts, self.expired) for c, facts in every.items() if fact_id in facts),
            None,
        )

    # ------------------------------------------------------------------ search

    def search(self, client: str | None, sid: str | None, terms: set[str]) -> set[str] | type[OwnershipError]:
        """The texts a search must return (every match: the limit is above what a run writes)."""
        if client is not None and sid is not None:
            session = self.sessions.get(sid)
            if session is not None and session.owner != client:
                return OwnershipError
        docs: list[str] = []
        for name, session in self.sessions.items():
            if session.owner == client and sid in (None, name) and (client is not None or sid is not None):
                docs += session.texts
        if client is not None:
            docs += self.facts[client].values()
        return {d for d in docs if terms & set(d.split())}
