"""Deliberately broken backends, each the in-memory reference with one promise of the contract
dropped, for the conformance kit's self-test (`test_conformance_kit.py`): the kit must fail them.
Each is a store (what the kit's author module opens) over a `MemoryBackend` with one primitive
broken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import SearchRow, SummaryWrite
from langchain_rolling_memory.stores.memory.store import MemoryBackend


class _OwnerBlindSearch(MemoryBackend):
    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        with self._lock:
            found = self._sessions.get(session_id) if session_id is not None else None
        owner = found.client_id if found is not None else client_id
        return super().search(terms, owner, session_id, limit, now)


class OwnerBlindSearch(RollingStore):
    """Searches a named session as its owner, whoever asks (the owner is not checked)."""

    def __init__(self) -> None:
        super().__init__(_OwnerBlindSearch())


class _GenerationBlindInstall(MemoryBackend):
    def cas_summary(self, write: SummaryWrite) -> bool:
        return super().cas_summary(replace(write, generation=None))


class GenerationBlindInstall(RollingStore):
    """Installs a summary without comparing the erase generation it was planned from."""

    def __init__(self) -> None:
        super().__init__(_GenerationBlindInstall())


class _SharedLease(MemoryBackend):
    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        super().claim(session_id, owner, ttl, now)
        return True


class SharedLease(RollingStore):
    """Grants every claim: two compactors may hold a session's lease at once."""

    def __init__(self) -> None:
        super().__init__(_SharedLease())


class _ForgetKeepsFacts(MemoryBackend):
    def delete_client(self, client_id: str) -> None:
        kept = self.list_facts(client_id, float("-inf"))
        super().delete_client(client_id)
        for fact in kept:
            self._put_fact(fact)


class ForgetKeepsFacts(RollingStore):
    """`forget` erases the client's sessions but keeps its facts."""

    def __init__(self) -> None:
        super().__init__(_ForgetKeepsFacts())
