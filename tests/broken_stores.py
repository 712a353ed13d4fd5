"""Deliberately broken backends, each the in-memory reference with one promise of the contract
dropped, for the conformance kit's self-test (`test_conformance_kit.py`): the kit must fail them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from langchain_rolling_memory.stores import InMemoryRollingStore
from langchain_rolling_memory.stores.contract import SearchRow, SummaryWrite


class OwnerBlindSearch(InMemoryRollingStore):
    """Searches a named session as its owner, whoever asks (the owner is not checked)."""

    def _search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        with self._lock:
            found = self._sessions.get(session_id) if session_id is not None else None
        owner = found.client_id if found is not None else client_id
        return super()._search(terms, owner, session_id, limit)


class GenerationBlindInstall(InMemoryRollingStore):
    """Installs a summary without comparing the erase generation it was planned from."""

    def _cas_summary(self, write: SummaryWrite) -> bool:
        return super()._cas_summary(replace(write, generation=None))


class SharedLease(InMemoryRollingStore):
    """Grants every claim: two compactors may hold a session's lease at once."""

    def _claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        super()._claim(session_id, owner, ttl, now)
        return True


class ForgetKeepsFacts(InMemoryRollingStore):
    """`forget` erases the client's sessions but keeps its facts."""

    def _delete_client(self, client_id: str) -> None:
        kept = self._list_facts(client_id)
        super()._delete_client(client_id)
        for fact in kept:
            self._put_fact(fact)
