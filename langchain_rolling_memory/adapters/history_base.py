"""What both chat histories share: ids, the store, ownership, the cached view, the transcript.

A history's view changes only with that object's own `add_messages` (or `clear`), because
`RunnableWithMessageHistory` reads it at the start and the end of a call and slices the input by
its length: the cache that keeps that promise lives here. What the view is (a window, a summary
and a tail) is each history's own (`chat_histories.py`); memory logic is the engine's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import StoredMessage
from langchain_rolling_memory.errors import OwnershipError
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.checks import token_count
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.stores.urls import rolling_store


def _messages_only(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    if isinstance(messages, BaseMessage) or not isinstance(messages, Sequence):
        msg = f"add_messages takes a sequence of BaseMessage, got {type(messages).__name__}"
        raise TypeError(msg)
    bad = [m for m in messages if not isinstance(m, BaseMessage)]
    if bad:
        msg = f"add_messages takes BaseMessage objects only, got {type(bad[0]).__name__}: {bad[0]!r:.80}"
        raise TypeError(msg)
    return list(messages)


class StoredHistory(BaseChatMessageHistory):
    """Shared plumbing: ids, store, token counts on write, the cached view, the transcript."""

    def __init__(
        self,
        session_id: str | None = None,
        *,
        store: RollingStore | None = None,
        client_id: str | None = None,
        token_counter: TokenCounter = count_tokens,
    ) -> None:
        super().__init__()
        self.session_id = validate_id(session_id if session_id is not None else uuid.uuid4().hex)
        self.client_id = None if client_id is None else validate_id(client_id, kind="client_id")
        self.store: RollingStore = (
            InMemoryRollingStore() if store is None else rolling_store(store, owner=type(self).__name__)
        )
        self.token_counter = token_counter
        self._view: list[BaseMessage] | None = None
        self._owner_checked = False

    # Isolation ------------------------------------------------------------
    # Every read and write names `client_id` (None included), and the store checks the owner
    # in that same read or write: a guessed session_id never shows one client another's
    # conversation, and a history naming no client reaches anonymous sessions only. Only
    # `compact` (whose own reads are the compactor's) looks the owner up first.

    def _refuse_other_owner(self, owner: str | None) -> None:
        if owner is not None and owner != self.client_id:
            raise OwnershipError.for_session(self.session_id, self.client_id)
        self._owner_checked = True

    def _check_owner(self) -> None:
        if not self._owner_checked:
            info = self.store.session_info(self.session_id)
            self._refuse_other_owner(info.client_id if info else None)

    async def _acheck_owner(self) -> None:
        if not self._owner_checked:
            info = await self.store.asession_info(self.session_id)
            self._refuse_other_owner(info.client_id if info else None)

    # The view -------------------------------------------------------------

    def _load_view(self) -> list[BaseMessage]:
        raise NotImplementedError

    async def _aload_view(self) -> list[BaseMessage]:
        raise NotImplementedError

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The view: stable until this object's next `add_messages` or `clear`."""
        if self._view is None:
            self._view = self._load_view()
        return list(self._view)

    async def aget_messages(self) -> list[BaseMessage]:
        if self._view is None:
            self._view = await self._aload_view()
        return list(self._view)

    # Writing --------------------------------------------------------------

    def _counts(self, messages: Sequence[BaseMessage]) -> list[int | None]:
        return [
            token_count(self.token_counter([m]), f"token_counter's count of message {i}")
            for i, m in enumerate(messages)
        ]

    def _after_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        """The view once `appended` (possibly empty) is in the transcript."""
        raise NotImplementedError

    async def _aafter_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        raise NotImplementedError

    def _forget_rows(self) -> None:
        """Drop what is known of the stored session (it was just cleared)."""

    @staticmethod
    def _stored(
        seqs: Sequence[int], batch: Sequence[BaseMessage], counts: Sequence[int | None]
    ) -> list[StoredMessage]:
        return [StoredMessage(*row) for row in zip(seqs, batch, counts, strict=True)]

    def _append(self, batch: list[BaseMessage], counts: list[int | None]) -> list[int]:
        """Write the batch (the store's append); return its seqs."""
        return self.store.append(self.session_id, batch, client_id=self.client_id, token_counts=counts)

    async def _aappend(self, batch: list[BaseMessage], counts: list[int | None]) -> list[int]:
        return await self.store.aappend(self.session_id, batch, client_id=self.client_id, token_counts=counts)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages in the transcript, then refresh the view.

        The messages are stored before anything else happens, so whatever fails afterwards
        (summarizer, network) they are in the transcript once this returns or raises.
        """
        batch = _messages_only(messages)
        appended: list[StoredMessage] = []
        if batch:
            counts = self._counts(batch)
            appended = self._stored(self._append(batch, counts), batch, counts)
        self._view = self._after_append(appended)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        batch = _messages_only(messages)
        appended: list[StoredMessage] = []
        if batch:
            counts = self._counts(batch)
            appended = self._stored(await self._aappend(batch, counts), batch, counts)
        self._view = await self._aafter_append(appended)

    def clear(self) -> None:
        """Delete the session: transcript, summary and state."""
        self.store.clear_session(self.session_id, client_id=self.client_id)
        self._forget_rows()
        self._view = []

    async def aclear(self) -> None:
        await self.store.aclear_session(self.session_id, client_id=self.client_id)
        self._forget_rows()
        self._view = []

    @property
    def transcript(self) -> list[BaseMessage]:
        """Every message ever added to the session, in order (never changed by compaction)."""
        return self.store.transcript(self.session_id, client_id=self.client_id)

    async def atranscript(self) -> list[BaseMessage]:
        return await self.store.atranscript(self.session_id, client_id=self.client_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_id={self.session_id!r}, store={type(self.store).__name__})"
