"""Drop-in chat histories for `RunnableWithMessageHistory`: a window and a rolling summary.

Adapters only: they append to a store and ask the engine for the view; the plumbing both share
(ids, ownership, the cached view that changes only with the object's own `add_messages`) is
`history_base`. The model calls of a compaction are marked ``nostream`` (`tracing`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.adapters.history_base import StoredHistory
from langchain_rolling_memory.core.cuts import StartOn, TokenCounter, WindowPolicy, count_tokens
from langchain_rolling_memory.core.planner import structured_summary
from langchain_rolling_memory.core.records import MemoryRead, SessionState, StoredMessage, SummaryRecord
from langchain_rolling_memory.core.settings import HistoryOptions, MemorySettings
from langchain_rolling_memory.core.structured_summary import StructuredSummary
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.engine.compaction import UNREAD, Compactor, Unread
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.tracing import unstreamed
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.summarizers.base import SummarizerLike


class WindowedChatMessageHistory(StoredHistory):
    """The last messages word for word, cut so that a tool call never loses its results.

    The store keeps the whole transcript (`.transcript`); `.messages` is the window.

    Args:
        session_id: the conversation (a new uuid if omitted).
        store: a `RollingStore` (default: a fresh in-memory store).
        client_id: the person the session belongs to (optional).
        max_messages: most messages in the window (None: no count limit).
        max_tokens: most tokens in the window (None: no token limit).
        token_counter: counts a message's tokens when it is stored.
        start_on: ``"human"`` (the default, as `trim_messages`' ``start_on``): a window that
            cuts starts on a user message, and always holds the latest one, even past the
            limits (a transcript that fits is sent whole, a leading system message or
            greeting included); None lets it start on any message that is not an orphan
            tool result.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = WindowedChatMessageHistory("s1", max_messages=2)
        >>> history.add_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
        >>> [m.content for m in history.messages], len(history.transcript)
        (['c'], 3)
    """

    _PAGE = 200

    def __init__(
        self,
        session_id: str | None = None,
        *,
        store: RollingStore | None = None,
        client_id: str | None = None,
        max_messages: int | None = 20,
        max_tokens: int | None = None,
        token_counter: TokenCounter = count_tokens,
        start_on: StartOn | None = "human",
    ) -> None:
        self.policy = WindowPolicy(max_messages=max_messages, max_tokens=max_tokens, start_on=start_on)
        super().__init__(session_id, store=store, client_id=client_id, token_counter=token_counter)
        # The rows the window was last cut from (None: not read yet).
        self._rows: list[StoredMessage] | None = None

    def _counts_of(self, rows: Sequence[StoredMessage]) -> list[int]:
        return [r.tokens if r.tokens is not None else self.token_counter([r.message]) for r in rows]

    def _limit(self) -> int:
        return self.policy.max_messages if self.policy.max_messages is not None else self._PAGE

    def _older(self, rows: list[StoredMessage]) -> tuple[int, int] | None:
        """``(after_seq, limit)`` of the page just before `rows`, or None once `rows` cover the
        window: a count window is one read; a token-only window needs more tokens than its
        budget, or the whole transcript. Seqs are gap-free, so a page is addressed by seq."""
        if not rows or rows[0].seq <= 1:
            return None
        covered = self.policy.max_messages is not None or sum(self._counts_of(rows)) > (
            self.policy.max_tokens or 0
        )
        if covered and not self._lacks_user_message(rows):  # else read back to the latest user message
            return None
        size = min(self._PAGE, rows[0].seq - 1)
        return rows[0].seq - 1 - size, size

    def _lacks_user_message(self, rows: Sequence[StoredMessage]) -> bool:
        return self.policy.start_on == "human" and not any(r.message.type == "human" for r in rows)

    def _trim(self, rows: list[StoredMessage]) -> list[StoredMessage]:
        """The shortest suffix of `rows` that a fresh read would cut the same window from
        (from the latest user message on, when the window must hold one)."""
        if self.policy.max_messages is not None:
            suffix = rows[-self.policy.max_messages :]
        else:
            counts, budget = self._counts_of(rows), self.policy.max_tokens or 0
            total, start = sum(counts), 0
            while start < len(rows) and total - counts[start] > budget:
                total -= counts[start]
                start += 1
            suffix = rows[start:]
        if self._lacks_user_message(suffix):
            humans = [i for i, r in enumerate(rows) if r.message.type == "human"]
            if humans:
                return rows[humans[-1] :]
        return suffix

    def _cut(self, rows: list[StoredMessage]) -> list[BaseMessage]:
        """The window of `rows`: all of them when the whole transcript fits (a leading system
        message or greeting included), else cut to start on a user message (`window_cut`).
        Seqs start at 1, so rows from a later seq are a transcript already cut."""
        messages = [r.message for r in rows]
        counts = self._counts_of(rows) if self.policy.max_tokens is not None else None
        backlog = bool(rows) and rows[0].seq > 1
        return messages[self.policy.cut(messages, counts, backlog=backlog) :]

    def _load_view(self) -> list[BaseMessage]:
        sid, cid = self.session_id, self.client_id
        rows = self.store.read(sid, limit=self._limit(), client_id=cid)
        while (page := self._older(rows)) is not None:
            rows = self.store.read(sid, after_seq=page[0], limit=page[1], newest=False, client_id=cid) + rows
        self._rows = self._trim(rows)
        return self._cut(self._rows)

    async def _aload_view(self) -> list[BaseMessage]:
        sid, cid = self.session_id, self.client_id
        rows = await self.store.aread(sid, limit=self._limit(), client_id=cid)
        while (page := self._older(rows)) is not None:
            older = await self.store.aread(sid, after_seq=page[0], limit=page[1], newest=False, client_id=cid)
            rows = older + rows
        self._rows = self._trim(rows)
        return self._cut(self._rows)

    def _extended(self, appended: list[StoredMessage]) -> list[BaseMessage] | None:
        """The window after `appended`, from the rows already read, when it equals a fresh read.

        The rows kept after a read cover the window (see `_older`); with the new rows after
        them they still do, unless another writer's rows sit in between (then None: reload).
        """
        rows = self._rows
        if rows is None or not appended or appended[0].seq != (rows[-1].seq if rows else 0) + 1:
            return None
        self._rows = self._trim([*rows, *appended])
        return self._cut(self._rows)

    def _after_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        view = self._extended(appended)
        return view if view is not None else self._load_view()

    async def _aafter_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        view = self._extended(appended)
        return view if view is not None else await self._aload_view()

    def _forget_rows(self) -> None:
        self._rows = []


_OWN = ("session_id", "summarizer", "store", "client_id", "compactor", "settings")
"""The history's own parameters, beside the settings (suggested for a misspelt keyword)."""


class RollingSummaryChatMessageHistory(StoredHistory):
    """The last turns verbatim, the older ones folded by a summarizer, nothing lost.

    `.messages` is the summary (as one framed message) then the unsummarized messages;
    `.summary` is the summary text; `.transcript` is every message ever added.

    When the unsummarized messages exceed `max_turns` (or `max_tokens`), all but the last
    `keep_last` (or `keep_tokens` worth) are folded into the summary in one call, so the
    summarizer runs about once every ``max_turns - keep_last + 1`` messages.

    Args:
        session_id: the conversation (a new uuid if omitted).
        summarizer: ``(previous_summary, messages) -> str`` (sync or async), a chat model,
            a model string (``"openai:gpt-4o-mini"``), any Runnable, or a `Summarizer`
            (see `as_summarizer`).
        store: a `RollingStore` (default: a fresh in-memory store).
        client_id: the person the session belongs to (optional).
        compactor: a ready `Compactor` (overrides the compaction settings).
        settings: a `MemorySettings` (default: the defaults), e.g. shared with the agent
            middleware.
        **options: any `MemorySettings` field a history reads (``max_turns``, ``keep_last``,
            ``max_tokens``, ``keep_tokens``, ``trigger``, ``keep``, ``hard_cap``, ``language``,
            ``max_words``, ``token_counter``, ``timeout``, ``background``, ``on_error``,
            ``on_compaction``, ``topic_detector``, ``today``...), replacing those of
            `settings`; a misspelt name is refused with the closest one.

    Presets spread in as keyword arguments: ``RollingSummaryChatMessageHistory("s1",
    summarizer=..., **preset("support"))`` (see `preset`).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = RollingSummaryChatMessageHistory(
        ...     "s1", summarizer=lambda previous, msgs: f"{len(msgs)} messages folded",
        ...     max_turns=4, keep_last=2)
        >>> history.add_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c"),
        ...                       AIMessage("d"), HumanMessage("e")])
        >>> history.summary, len(history.messages), len(history.transcript)
        ('3 messages folded', 3, 5)
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        summarizer: SummarizerLike | None = None,
        store: RollingStore | None = None,
        client_id: str | None = None,
        compactor: Compactor | None = None,
        settings: MemorySettings | None = None,
        **options: Unpack[HistoryOptions],
    ) -> None:
        owner = type(self).__name__
        # Checked before the store is touched: a bad setting writes nothing.
        self.settings = MemorySettings.resolve(
            settings, options, owner=owner, accepts=HistoryOptions, others=_OWN
        )
        super().__init__(
            session_id, store=store, client_id=client_id, token_counter=self.settings.token_counter
        )
        if compactor is None:
            if summarizer is None:
                msg = f"{owner} needs summarizer= (a function, a chat model or a Summarizer)"
                raise TypeError(msg)
            compactor = Compactor.build(self.store, summarizer, settings=self.settings)
        elif compactor.store is not self.store and store is not None:
            msg = "compactor.store and store= must be the same store"
            raise ConfigurationError(msg)
        else:
            self.store = compactor.store
        self.compactor = compactor
        self.background = self.settings.background
        self._state: SessionState | None = None
        #: read the session's state and the client's facts with the view (one read:
        #: `RollingStore.read_memory`), kept in `memory_read` for the turn (`with_rolling_memory`)
        self.reads_memory = False
        self.memory_read: MemoryRead | None = None
        # The summary read with the last append (`RollingStore.append_and_summary`).
        self._summary_after: SummaryRecord | Unread | None = UNREAD

    @property
    def summary(self) -> str:
        """The current summary text ('' before the first compaction)."""
        record = self.store.summary(self.session_id, client_id=self.client_id)
        return record.text if record else ""

    async def asummary(self) -> str:
        record = await self.store.asummary(self.session_id, client_id=self.client_id)
        return record.text if record else ""

    @property
    def structured_summary(self) -> StructuredSummary | None:
        """The fields of the current summary when a structured summarizer wrote it (topic,
        preferences, decisions, open questions, facts); None otherwise."""
        return structured_summary(self.store.summary(self.session_id, client_id=self.client_id))

    async def astructured_summary(self) -> StructuredSummary | None:
        return structured_summary(await self.store.asummary(self.session_id, client_id=self.client_id))

    @property
    def usage(self) -> SummaryUsage:
        """What summarizing this session cost (calls, tokens) and saves per call."""
        return self.store.usage(self.session_id, client_id=self.client_id)

    async def ausage(self) -> SummaryUsage:
        return await self.store.ausage(self.session_id, client_id=self.client_id)

    def _shown(self, state: SessionState) -> list[BaseMessage]:
        """Keep `state` as this history's and return its view."""
        self._state = state
        return self.compactor.view(state, self.session_id)

    def _load_view(self) -> list[BaseMessage]:
        if self.reads_memory:
            state, self.memory_read = self.compactor.load_memory(self.session_id, client_id=self.client_id)
            return self._shown(state)
        return self._shown(self.compactor.load(self.session_id, client_id=self.client_id))

    async def _aload_view(self) -> list[BaseMessage]:
        if self.reads_memory:
            state, self.memory_read = await self.compactor.aload_memory(
                self.session_id, client_id=self.client_id
            )
            return self._shown(state)
        return self._shown(await self.compactor.aload(self.session_id, client_id=self.client_id))

    # With a view read, the append brings the summary back with it (one round trip): a
    # compaction that landed meanwhile is seen without a read of its own.

    def _append(self, batch: list[BaseMessage], counts: list[int | None]) -> list[int]:
        if self._state is None:
            return super()._append(batch, counts)
        seqs, self._summary_after = self.store.append_and_summary(
            self.session_id, batch, client_id=self.client_id, token_counts=counts
        )
        return seqs

    async def _aappend(self, batch: list[BaseMessage], counts: list[int | None]) -> list[int]:
        if self._state is None:
            return await super()._aappend(batch, counts)
        seqs, self._summary_after = await self.store.aappend_and_summary(
            self.session_id, batch, client_id=self.client_id, token_counts=counts
        )
        return seqs

    def _taken_summary(self) -> SummaryRecord | Unread | None:
        summary, self._summary_after = self._summary_after, UNREAD
        return summary

    # After a write the engine extends the known state with the rows just written, and after
    # an inline compaction folds the installed result in: one summary read per turn instead
    # of re-reading and re-decoding the tail twice (see `Compactor.advance`). Its model calls
    # (and those of a compaction it hands to the background) are never streamed as the
    # chain's answer: `with_rolling_memory` and `RunnableWithMessageHistory` write from inside the chain's run.

    def _after_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        with unstreamed():
            return self._shown(
                self.compactor.advance(
                    self.session_id,
                    self._state,
                    appended=appended,
                    background=self.background,
                    client_id=self.client_id,
                    summary=self._taken_summary(),
                )
            )

    async def _aafter_append(self, appended: list[StoredMessage]) -> list[BaseMessage]:
        with unstreamed():
            return self._shown(
                await self.compactor.aadvance(
                    self.session_id,
                    self._state,
                    appended=appended,
                    background=self.background,
                    client_id=self.client_id,
                    summary=self._taken_summary(),
                )
            )

    def _forget_rows(self) -> None:
        self._state = SessionState(None, [], False)

    def compact(self, *, force: bool = False) -> bool:
        """Compact now if due (or, with `force`, fold every unsummarized message); True if a
        summary was installed. The cached view is refreshed."""
        self._check_owner()
        with unstreamed():
            done = self.compactor.compact(self.session_id, force=force) is not None
        self._view = self._load_view()
        return done

    async def acompact(self, *, force: bool = False) -> bool:
        await self._acheck_owner()
        with unstreamed():
            done = await self.compactor.acompact(self.session_id, force=force) is not None
        self._view = await self._aload_view()
        return done

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for this session's background compaction, if any; False if it was still
        running after `timeout` seconds.

        The view of this object is not changed (it changes only with its own
        `add_messages`): read `.summary`, or the view of a new history object, to see the
        result.
        """
        return self.compactor.flush(self.session_id, timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        """Async twin of `flush`."""
        return await self.compactor.aflush(self.session_id, timeout)
