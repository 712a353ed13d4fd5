"""The fact half of the public store API: add, list, update and delete a client's facts (sync/async twins).

Owns turning a call into a checked fact and a plan that a backend runs inside its atomic
read-then-write step (`_change_facts`); the rules themselves (limits, duplicates, keys) are
in `fact_rules.py`, when a fact expires in `retention.py`, the transcript, summary and
session API in `api.py`. No I/O of its own.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime

import langchain_rolling_memory.core.fact_rules as fact_rules
import langchain_rolling_memory.stores.checks as checks
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import Fact, FactFilter, FactPlan, SessionMark
from langchain_rolling_memory.core.retention import Retention, retention
from langchain_rolling_memory.stores.contract import StoreBackend

ExpiresAt = float | datetime | None
"""``expires_at=`` of a fact write: seconds since the epoch or a datetime (naive: UTC)."""


class FactApi(StoreBackend):
    """The public fact methods of every store, on the backend's fact primitives."""

    max_fact_chars: int
    max_facts: int
    fact_filter: FactFilter | None
    fact_ttl: float | None

    def _retention(self, ttl: float | None, expires_at: ExpiresAt) -> tuple[Retention, float]:
        """The checked retention of a fact write, and the `now` it was computed at."""
        now = self._now()
        return retention(ttl, expires_at, now=now, default_ttl=self.fact_ttl), now

    def _check_fact(self, text: object, key: str | None, source: str) -> tuple[str, str | None] | None:
        """Validate and filter a fact; None if the filter refused it."""
        return fact_rules.check_fact(
            text, key, source, max_chars=self.max_fact_chars, fact_filter=self.fact_filter
        )

    def _plan_add(
        self,
        client_id: str,
        checked: tuple[str, str | None],
        source: str,
        pinned: bool,
        keep: tuple[Retention, float],
    ) -> FactPlan:
        """A plan that writes the checked fact (new or replacing a keyed one), or nothing for a
        duplicate; its time and id are fixed here, so a backend may run it more than once.
        A pinned fact stays pinned; `pinned=True` pins a new, replaced or duplicate fact."""
        (text, key), (kept, now), new_id = checked, keep, uuid.uuid4().hex

        def plan(existing: list[Fact]) -> Fact | None:
            fact = plan_unpinned(existing)
            if fact is None:
                same = fact_rules.find_fact(existing, text, key) if pinned else None
                return dataclasses.replace(same, pinned=True) if same and not same.pinned else None
            was = next((f.pinned for f in existing if f.id == fact.id), False)
            return dataclasses.replace(fact, pinned=pinned or was)

        def plan_unpinned(existing: list[Fact]) -> Fact | None:
            return fact_rules.plan_add(
                existing,
                client_id=client_id,
                text=text,
                key=key,
                source=source,
                max_facts=self.max_facts,
                now=now,
                new_id=new_id,
                retention=kept,
            )

        return plan

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
        validate_id(client_id, kind="client_id")
        keep = self._retention(ttl, expires_at)
        checked = self._check_fact(text, key, source)
        if checked is None:
            return None
        plan = self._plan_add(client_id, checked, source, checks.pinned_flag(pinned), keep)
        existing, fact = self._change_facts(client_id, plan, _mark(planned_from))
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
        validate_id(client_id, kind="client_id")
        keep = self._retention(ttl, expires_at)
        checked = self._check_fact(text, key, source)
        if checked is None:
            return None
        plan = self._plan_add(client_id, checked, source, checks.pinned_flag(pinned), keep)
        existing, fact = await self._achange_facts(client_id, plan, _mark(planned_from))
        return fact if fact is not None else fact_rules.find_fact(existing, *checked)

    def facts(self, client_id: str) -> list[Fact]:
        """The client's facts, oldest first (the expired ones left out)."""
        return self._list_facts(validate_id(client_id, kind="client_id"))

    async def afacts(self, client_id: str) -> list[Fact]:
        return await self._alist_facts(validate_id(client_id, kind="client_id"))

    def _plan_update(self, fact_id: str, text: str, keep: tuple[Retention, float]) -> FactPlan:
        """A plan that rewrites the text of fact `fact_id` (None: no such fact, or filtered)."""
        kept, now = keep

        def plan(existing: list[Fact]) -> Fact | None:
            return fact_rules.plan_update(
                existing,
                fact_id=fact_id,
                text=text,
                max_chars=self.max_fact_chars,
                fact_filter=self.fact_filter,
                now=now,
                retention=kept,
            )

        return plan

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
        validate_id(client_id, kind="client_id")
        validate_id(fact_id, kind="fact_id")
        plan = self._plan_update(fact_id, text, self._retention(ttl, expires_at))
        return self._change_facts(client_id, plan, _mark(planned_from))[1]

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
        validate_id(client_id, kind="client_id")
        validate_id(fact_id, kind="fact_id")
        plan = self._plan_update(fact_id, text, self._retention(ttl, expires_at))
        return (await self._achange_facts(client_id, plan, _mark(planned_from)))[1]

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        """Delete one fact of the client; False if there was none with that id."""
        return self._delete_fact(
            validate_id(client_id, kind="client_id"), validate_id(fact_id, kind="fact_id")
        )

    async def adelete_fact(self, client_id: str, fact_id: str) -> bool:
        client = validate_id(client_id, kind="client_id")
        return await self._adelete_fact(client, validate_id(fact_id, kind="fact_id"))


def _mark(mark: object) -> SessionMark | None:
    """`planned_from` checked: None or a `SessionMark` of a valid session id."""
    if mark is None:
        return None
    if not isinstance(mark, SessionMark) or not isinstance(mark.generation, str):
        msg = f"planned_from must be a SessionMark (a read's session and generation) or None, got {mark!r}"
        raise TypeError(msg)
    validate_id(mark.session_id)
    return mark
