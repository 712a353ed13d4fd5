"""The storage contract every backend keeps, and the shared logic on top of it.

Owns: id validation at the boundary, message serialization, fact rules (dedup, keyed
replacement, limits, filter) and the public API with its async twins; the records live in
`records.py` and the export's JSON shape in `export.py`. Does not own any I/O: a backend implements the small
``_primitive`` methods below (sync, and async where its driver is natively async; the
defaults run the sync primitive in a worker thread so the event loop never blocks).

Data model, per backend:

* transcript: append-only rows ``(session_id, seq, message_json, tokens, created_at)``;
  ``seq`` is 1, 2, 3... per session, gap-free, assigned atomically by the backend.
* summary: one row per session ``(text, covered_seq, version, meta_json, updated_at)``;
  replaced only by a compare-and-swap on ``version``.
* lease: one row per session ``(owner, expires_at)`` so one compactor runs at a time.
* session: ``(client_id, created_at, updated_at, state_json)``; a session belongs to at most
  one client, fixed by the first write that names one.
* facts: per client ``(id, text, key, source, created_at, updated_at)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.errors import ConfigurationError, FactError
from langchain_rolling_memory.ids import validate_id
from langchain_rolling_memory.records import (
    FACT_SOURCES,
    Fact,
    FactFilter,
    FactPlan,
    FactSource,
    Row,
    SessionInfo,
    StoredMessage,
    SummaryRecord,
)
from langchain_rolling_memory.serde import dumps_message, loads_message
from langchain_rolling_memory.stores.export import client_export, session_export
from langchain_rolling_memory.usage import SummaryUsage

__all__ = [
    "FACT_SOURCES",
    "SCHEMA_VERSION",
    "Fact",
    "FactFilter",
    "FactPlan",
    "FactSource",
    "RollingStore",
    "Row",
    "SessionInfo",
    "StoredMessage",
    "SummaryRecord",
    "split_prefix",
]

SCHEMA_VERSION = 1
"""Version of the data layout; a store written by a newer version is refused."""

_T = TypeVar("_T")


def _normalize_fact_text(text: object) -> str:
    if not isinstance(text, str):
        msg = f"a fact must be a string, got {type(text).__name__}: {text!r:.80}"
        raise FactError(msg)
    return " ".join(text.split())


class RollingStore(ABC):
    """Base of every backend: public API with validation, backend primitives underneath.

    Args:
        max_fact_chars: longest fact text accepted.
        max_facts: most facts kept per client.
        fact_filter: optional ``(text, key) -> text | None`` hook run before a fact is
            stored; return None to refuse it, or a redacted text.
    """

    #: URL scheme(s) this backend answers to in `open_store`.
    schemes: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        max_fact_chars: int = 500,
        max_facts: int = 200,
        fact_filter: FactFilter | None = None,
    ) -> None:
        if max_fact_chars < 1 or max_facts < 1:
            msg = (
                "max_fact_chars and max_facts must be positive, got "
                f"max_fact_chars={max_fact_chars!r}, max_facts={max_facts!r}"
            )
            raise ConfigurationError(msg)
        self.max_fact_chars = max_fact_chars
        self.max_facts = max_facts
        self.fact_filter = fact_filter

    # ------------------------------------------------------------------ primitives
    # Each receives validated ids. Sync primitives are abstract; async ones default to a
    # worker thread and are overridden by natively async backends.

    @abstractmethod
    def _append(
        self,
        session_id: str,
        client_id: str | None,
        rows: Sequence[tuple[str, int | None]],
        now: float,
    ) -> list[int]:
        """Append rows atomically and return their seqs; raise `OwnershipError` (writing
        nothing) if the session belongs to another client."""

    @abstractmethod
    def _read(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        """Rows with seq > after_seq in ascending order: the last `limit` if `newest`,
        else the first `limit` (all if limit is None)."""

    @abstractmethod
    def _last_seq(self, session_id: str) -> int: ...

    @abstractmethod
    def _get_summary(self, session_id: str) -> SummaryRecord | None: ...

    @abstractmethod
    def _cas_summary(
        self,
        session_id: str,
        text: str,
        covered_seq: int,
        meta: str,
        expected_version: int,
        now: float,
    ) -> bool:
        """Install a summary iff the current version is `expected_version` (0: none)."""

    @abstractmethod
    def _claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        """Take the compaction lease if it is free, expired or already `owner`'s."""

    @abstractmethod
    def _release(self, session_id: str, owner: str) -> None: ...

    @abstractmethod
    def _get_session(self, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    def _list_sessions(self, client_id: str) -> list[str]: ...

    @abstractmethod
    def _get_state(self, session_id: str) -> str | None: ...

    @abstractmethod
    def _set_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None: ...

    @abstractmethod
    def _delete_session(self, session_id: str) -> None:
        """Remove the session's transcript, summary, lease, state and session row."""

    @abstractmethod
    def _list_facts(self, client_id: str) -> list[Fact]:
        """Facts of the client, oldest first (by created_at, then id)."""

    @abstractmethod
    def _put_fact(self, fact: Fact) -> None:
        """Insert the fact, or replace the one with the same id and client."""

    @abstractmethod
    def _delete_fact(self, client_id: str, fact_id: str) -> bool: ...

    @abstractmethod
    def _delete_client(self, client_id: str) -> None:
        """Remove the client's facts and every one of its sessions."""

    @abstractmethod
    def _purge(self, cutoff: float) -> int:
        """Delete sessions not updated since `cutoff`; return how many."""

    def _change_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        """Read the client's facts, let `plan` pick the fact to write (None: nothing), write it;
        return what was read and what was written.

        The default is a read then a write. Backends shared by processes make it one atomic
        step per client, so two processes adding the same fact store it once.
        """
        existing = self._list_facts(client_id)
        fact = plan(existing)
        if fact is not None:
            self._put_fact(fact)
        return existing, fact

    async def _achange_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        return await self._thread(self._change_facts, client_id, plan)

    def close(self) -> None:  # noqa: B027 - a no-op default that backends may override
        """Release connections; the default has nothing to release."""

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    async def _thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.to_thread(fn, *args)

    def _summary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        """The summary and the newest `limit` rows after it, seen at one instant.

        The default reads them one after the other (still consistent: the tail starts after
        the record it read); server backends override it with one round trip, because that
        is most of what a turn costs.
        """
        record = self._get_summary(session_id)
        covered = record.covered_seq if record else 0
        return record, self._read(session_id, covered, limit, True)

    async def _asummary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        return await self._thread(self._summary_and_tail, session_id, limit)

    async def _aappend(
        self,
        session_id: str,
        client_id: str | None,
        rows: Sequence[tuple[str, int | None]],
        now: float,
    ) -> list[int]:
        return await self._thread(self._append, session_id, client_id, rows, now)

    async def _aread(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        return await self._thread(self._read, session_id, after_seq, limit, newest)

    async def _alast_seq(self, session_id: str) -> int:
        return await self._thread(self._last_seq, session_id)

    async def _aget_summary(self, session_id: str) -> SummaryRecord | None:
        return await self._thread(self._get_summary, session_id)

    async def _acas_summary(
        self,
        session_id: str,
        text: str,
        covered_seq: int,
        meta: str,
        expected_version: int,
        now: float,
    ) -> bool:
        return await self._thread(
            self._cas_summary, session_id, text, covered_seq, meta, expected_version, now
        )

    async def _aclaim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        return await self._thread(self._claim, session_id, owner, ttl, now)

    async def _arelease(self, session_id: str, owner: str) -> None:
        await self._thread(self._release, session_id, owner)

    async def _aget_session(self, session_id: str) -> SessionInfo | None:
        return await self._thread(self._get_session, session_id)

    async def _alist_sessions(self, client_id: str) -> list[str]:
        return await self._thread(self._list_sessions, client_id)

    async def _aget_state(self, session_id: str) -> str | None:
        return await self._thread(self._get_state, session_id)

    async def _aset_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        await self._thread(self._set_state, session_id, client_id, state, now)

    async def _adelete_session(self, session_id: str) -> None:
        await self._thread(self._delete_session, session_id)

    async def _alist_facts(self, client_id: str) -> list[Fact]:
        return await self._thread(self._list_facts, client_id)

    async def _aput_fact(self, fact: Fact) -> None:
        await self._thread(self._put_fact, fact)

    async def _adelete_fact(self, client_id: str, fact_id: str) -> bool:
        return await self._thread(self._delete_fact, client_id, fact_id)

    async def _adelete_client(self, client_id: str) -> None:
        await self._thread(self._delete_client, client_id)

    async def _apurge(self, cutoff: float) -> int:
        return await self._thread(self._purge, cutoff)

    # ------------------------------------------------------------------ shared helpers

    @staticmethod
    def _now() -> float:
        return time.time()

    @staticmethod
    def _prepare_rows(
        messages: Sequence[BaseMessage], token_counts: Sequence[int | None] | None
    ) -> list[tuple[str, int | None]]:
        if isinstance(messages, (str, bytes, BaseMessage)) or not isinstance(messages, Sequence):
            msg = f"messages must be a sequence of BaseMessage, got {type(messages).__name__}"
            raise TypeError(msg)
        if token_counts is not None and len(token_counts) != len(messages):
            msg = (
                f"token_counts must have one entry per message, got {len(token_counts)} "
                f"for {len(messages)} messages"
            )
            raise ValueError(msg)
        payloads = [dumps_message(m) for m in messages]
        counts: Sequence[int | None] = token_counts if token_counts is not None else [None] * len(messages)
        return list(zip(payloads, counts, strict=True))

    @staticmethod
    def _decode(rows: Sequence[Row]) -> list[StoredMessage]:
        return [StoredMessage(seq, loads_message(payload), tokens) for seq, payload, tokens in rows]

    @staticmethod
    def _client(client_id: str | None) -> str | None:
        return None if client_id is None else validate_id(client_id, kind="client_id")

    # ------------------------------------------------------------------ transcript

    def append(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
    ) -> list[int]:
        """Append messages to the session's transcript; return their sequence numbers.

        Everything is validated and serialized before anything is written: bad input raises
        and writes nothing.
        """
        validate_id(session_id)
        client = self._client(client_id)
        rows = self._prepare_rows(messages, token_counts)
        if not rows:
            return []
        return self._append(session_id, client, rows, self._now())

    async def aappend(
        self,
        session_id: str,
        messages: Sequence[BaseMessage],
        *,
        client_id: str | None = None,
        token_counts: Sequence[int | None] | None = None,
    ) -> list[int]:
        validate_id(session_id)
        client = self._client(client_id)
        rows = self._prepare_rows(messages, token_counts)
        if not rows:
            return []
        return await self._aappend(session_id, client, rows, self._now())

    def read(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, newest: bool = True
    ) -> list[StoredMessage]:
        """Messages with ``seq > after_seq``, ascending; the last (or first) `limit` of them."""
        validate_id(session_id)
        _check_limit(limit)
        return self._decode(self._read(session_id, after_seq, limit, newest))

    async def aread(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None, newest: bool = True
    ) -> list[StoredMessage]:
        validate_id(session_id)
        _check_limit(limit)
        return self._decode(await self._aread(session_id, after_seq, limit, newest))

    def summary_and_tail(
        self, session_id: str, *, limit: int
    ) -> tuple[SummaryRecord | None, list[StoredMessage]]:
        """What a turn reads: the summary record and the newest `limit` messages it does not
        cover, ascending; one round trip on server backends."""
        validate_id(session_id)
        _check_limit(limit)
        record, rows = self._summary_and_tail(session_id, limit)
        return record, self._decode(rows)

    async def asummary_and_tail(
        self, session_id: str, *, limit: int
    ) -> tuple[SummaryRecord | None, list[StoredMessage]]:
        validate_id(session_id)
        _check_limit(limit)
        record, rows = await self._asummary_and_tail(session_id, limit)
        return record, self._decode(rows)

    def transcript(self, session_id: str) -> list[BaseMessage]:
        """Every message ever appended to the session, in order."""
        return [m.message for m in self.read(session_id)]

    async def atranscript(self, session_id: str) -> list[BaseMessage]:
        return [m.message for m in await self.aread(session_id)]

    def last_seq(self, session_id: str) -> int:
        """Sequence number of the newest message (0 for an empty session)."""
        return self._last_seq(validate_id(session_id))

    async def alast_seq(self, session_id: str) -> int:
        return await self._alast_seq(validate_id(session_id))

    # ------------------------------------------------------------------ summary & lease

    def summary(self, session_id: str) -> SummaryRecord | None:
        return self._get_summary(validate_id(session_id))

    async def asummary(self, session_id: str) -> SummaryRecord | None:
        return await self._aget_summary(validate_id(session_id))

    def install_summary(
        self,
        session_id: str,
        text: str,
        *,
        covered_seq: int,
        expected_version: int,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        """Compare-and-swap the summary; False if another writer installed one first."""
        validate_id(session_id)
        return self._cas_summary(
            session_id,
            text,
            covered_seq,
            json.dumps(dict(meta or {})),
            expected_version,
            self._now(),
        )

    async def ainstall_summary(
        self,
        session_id: str,
        text: str,
        *,
        covered_seq: int,
        expected_version: int,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        validate_id(session_id)
        return await self._acas_summary(
            session_id,
            text,
            covered_seq,
            json.dumps(dict(meta or {})),
            expected_version,
            self._now(),
        )

    def usage(self, session_id: str) -> SummaryUsage:
        """What summarizing the session cost (calls, tokens) and saves per call."""
        return SummaryUsage.from_record(self.summary(session_id))

    async def ausage(self, session_id: str) -> SummaryUsage:
        return SummaryUsage.from_record(await self.asummary(session_id))

    def claim(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's compaction lease for `ttl` seconds; False if someone holds it."""
        return self._claim(validate_id(session_id), owner, ttl, self._now())

    async def aclaim(self, session_id: str, owner: str, ttl: float) -> bool:
        return await self._aclaim(validate_id(session_id), owner, ttl, self._now())

    def release(self, session_id: str, owner: str) -> None:
        self._release(validate_id(session_id), owner)

    async def arelease(self, session_id: str, owner: str) -> None:
        await self._arelease(validate_id(session_id), owner)

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

    def clear_session(self, session_id: str) -> None:
        """Delete the session's transcript, summary and state (the user asked for it)."""
        self._delete_session(validate_id(session_id))

    async def aclear_session(self, session_id: str) -> None:
        await self._adelete_session(validate_id(session_id))

    def get_state(self, session_id: str) -> dict[str, Any]:
        """The session's structured state (exact business data; never summarized)."""
        raw = self._get_state(validate_id(session_id))
        return {} if raw is None else dict(json.loads(raw))

    async def aget_state(self, session_id: str) -> dict[str, Any]:
        raw = await self._aget_state(validate_id(session_id))
        return {} if raw is None else dict(json.loads(raw))

    def set_state(self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None) -> None:
        """Replace the session's state with `state` (a JSON-serializable mapping)."""
        validate_id(session_id)
        self._set_state(session_id, self._client(client_id), _state_json(state), self._now())

    async def aset_state(
        self, session_id: str, state: Mapping[str, Any], *, client_id: str | None = None
    ) -> None:
        validate_id(session_id)
        await self._aset_state(session_id, self._client(client_id), _state_json(state), self._now())

    def purge(self, *, older_than: float) -> int:
        """Delete sessions not written for `older_than` seconds; return how many."""
        if older_than < 0:
            msg = f"older_than must be a number of seconds >= 0, got {older_than!r}"
            raise ConfigurationError(msg)
        return self._purge(self._now() - older_than)

    async def apurge(self, *, older_than: float) -> int:
        if older_than < 0:
            msg = f"older_than must be a number of seconds >= 0, got {older_than!r}"
            raise ConfigurationError(msg)
        return await self._apurge(self._now() - older_than)

    # ------------------------------------------------------------------ facts

    def _check_fact(self, text: object, key: str | None, source: str) -> tuple[str, str | None] | None:
        """Validate and filter a fact; None if the filter refused it."""
        clean = _normalize_fact_text(text)
        if not clean:
            msg = "a fact must not be empty"
            raise FactError(msg)
        if key is not None:
            key = validate_id(key, kind="fact key")
        if source not in FACT_SOURCES:
            msg = f"source must be one of {FACT_SOURCES}, got {source!r}"
            raise FactError(msg)
        if self.fact_filter is not None:
            filtered = self.fact_filter(clean, key)
            if filtered is None:
                return None
            clean = _normalize_fact_text(filtered)
            if not clean:
                return None
        if len(clean) > self.max_fact_chars:
            msg = (
                f"a fact may have at most {self.max_fact_chars} characters, got {len(clean)}: "
                f"{clean[:40]!r}...; shorten it or raise max_fact_chars"
            )
            raise FactError(msg)
        return clean, key

    def _plan_fact(
        self, client_id: str, existing: list[Fact], text: str, key: str | None, source: str
    ) -> Fact | None:
        """The fact to write (new or replacing a keyed one), or None for an exact duplicate."""
        now = self._now()
        for fact in existing:
            if key is not None and fact.key == key:
                if fact.text == text:
                    return None
                return Fact(fact.id, client_id, text, key, source, fact.created_at, now)
        for fact in existing:
            if fact.text.casefold() == text.casefold() and (key is None or fact.key is None):
                return None
        if len(existing) >= self.max_facts:
            msg = (
                f"client {client_id!r} already has {len(existing)} facts (max_facts="
                f"{self.max_facts}); delete some or raise max_facts"
            )
            raise FactError(msg)
        return Fact(uuid.uuid4().hex, client_id, text, key, source, now, now)

    def add_fact(
        self, client_id: str, text: str, *, key: str | None = None, source: str = "code"
    ) -> Fact | None:
        """Store a fact about the client and return it.

        A fact with the `key` of an existing one replaces its text (a team change updates the
        team fact). An exact duplicate is not stored twice: the existing fact is returned.
        Returns None if `fact_filter` refused the fact.

        Example:
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> store.add_fact("client-1", "Allergic to peanuts").text
            'Allergic to peanuts'
        """
        validate_id(client_id, kind="client_id")
        checked = self._check_fact(text, key, source)
        if checked is None:
            return None
        existing, fact = self._change_facts(
            client_id, lambda facts: self._plan_fact(client_id, facts, *checked, source)
        )
        return fact if fact is not None else _find(existing, *checked)

    async def aadd_fact(
        self, client_id: str, text: str, *, key: str | None = None, source: str = "code"
    ) -> Fact | None:
        validate_id(client_id, kind="client_id")
        checked = self._check_fact(text, key, source)
        if checked is None:
            return None
        existing, fact = await self._achange_facts(
            client_id, lambda facts: self._plan_fact(client_id, facts, *checked, source)
        )
        return fact if fact is not None else _find(existing, *checked)

    def facts(self, client_id: str) -> list[Fact]:
        """The client's facts, oldest first."""
        return self._list_facts(validate_id(client_id, kind="client_id"))

    async def afacts(self, client_id: str) -> list[Fact]:
        return await self._alist_facts(validate_id(client_id, kind="client_id"))

    def _plan_update(self, fact_id: str, text: str) -> FactPlan:
        """A plan that rewrites the text of fact `fact_id` (None: no such fact, or filtered)."""

        def plan(existing: list[Fact]) -> Fact | None:
            for fact in existing:
                if fact.id == fact_id:
                    checked = self._check_fact(text, fact.key, fact.source)
                    if checked is None:
                        return None
                    return dataclasses.replace(fact, text=checked[0], updated_at=self._now())
            return None

        return plan

    def update_fact(self, client_id: str, fact_id: str, text: str) -> Fact | None:
        """Replace the text of one fact; None if the client has no such fact (or the filter
        refused the new text). Read and write are one step, as in `add_fact`."""
        validate_id(client_id, kind="client_id")
        return self._change_facts(client_id, self._plan_update(fact_id, text))[1]

    async def aupdate_fact(self, client_id: str, fact_id: str, text: str) -> Fact | None:
        validate_id(client_id, kind="client_id")
        return (await self._achange_facts(client_id, self._plan_update(fact_id, text)))[1]

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        """Delete one fact of the client; False if there was none with that id."""
        return self._delete_fact(validate_id(client_id, kind="client_id"), fact_id)

    async def adelete_fact(self, client_id: str, fact_id: str) -> bool:
        return await self._adelete_fact(validate_id(client_id, kind="client_id"), fact_id)

    # ------------------------------------------------------------------ privacy

    def forget(self, client_id: str) -> None:
        """Erase the client's facts and every session, transcript, summary and state."""
        self._delete_client(validate_id(client_id, kind="client_id"))

    async def aforget(self, client_id: str) -> None:
        await self._adelete_client(validate_id(client_id, kind="client_id"))

    def export(self, client_id: str) -> dict[str, Any]:
        """Everything stored about the client, as JSON-serializable data."""
        validate_id(client_id, kind="client_id")
        sessions = []
        for session_id in self._list_sessions(client_id):
            sessions.append(
                session_export(
                    self._get_session(session_id),
                    self._get_summary(session_id),
                    self._get_state(session_id),
                    self._decode(self._read(session_id, 0, None, True)),
                )
            )
        return client_export(client_id, self._list_facts(client_id), sessions, self._now())

    async def aexport(self, client_id: str) -> dict[str, Any]:
        validate_id(client_id, kind="client_id")
        sessions = []
        for session_id in await self._alist_sessions(client_id):
            sessions.append(
                session_export(
                    await self._aget_session(session_id),
                    await self._aget_summary(session_id),
                    await self._aget_state(session_id),
                    self._decode(await self._aread(session_id, 0, None, True)),
                )
            )
        return client_export(client_id, await self._alist_facts(client_id), sessions, self._now())


def _check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        msg = f"limit must be a non-negative int or None, got {limit!r}"
        raise ValueError(msg)


def _state_json(state: Mapping[str, Any]) -> str:
    if not isinstance(state, Mapping):
        msg = f"state must be a mapping (a JSON object), got {type(state).__name__}"
        raise TypeError(msg)
    try:
        return json.dumps(dict(state), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        msg = f"state must be JSON-serializable: {exc}"
        raise ValueError(msg) from exc


def _find(existing: list[Fact], text: str, key: str | None) -> Fact | None:
    for fact in existing:
        if (key is not None and fact.key == key) or fact.text.casefold() == text.casefold():
            return fact
    return None


def split_prefix(url: str) -> tuple[str, str | None]:
    """Take our own ``prefix`` query parameter out of a server URL: ``(url for the driver,
    prefix or None)``. Drivers would reject or misread it."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((v for k, v in reversed(pairs) if k == "prefix"), None)
    rest = urlencode([(k, v) for k, v in pairs if k != "prefix"])
    return urlunsplit(parts._replace(query=rest)), prefix
