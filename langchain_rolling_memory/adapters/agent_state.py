"""The agent middleware's memory when a checkpointer keeps the agent state: folds in the state.

Owns what `RollingMemoryMiddleware` does for a run whose state a LangGraph checkpointer keeps
(`GraphRun.kept`): the conversation is the state's messages, the summary its head message
(`graph_state`), and a due fold replaces the folded messages there, inline before the model
call or planned in the background between turns and landed at the next one only if it still
covers a prefix of that turn's state. The store keeps the branch's whole transcript (written by
the middleware: the messages in the state and those folded out of it), the facts and session
state; it holds no summary of such a thread. A thread's first run starts from the store's view
of its session (a session begun by a chain, or by an agent without a checkpointer); a fork or a
replay never does.

The store's transcript follows the branch (what recall searches is what the graph holds): the
state's `HEAD_KEY` is the seq of the branch's newest row, each write rewinds to it (the rows
past it withdrawn in the append's atomic write), and before a run's first write a state whose
head this process did not write last, or from which a `RemoveMessage` took stored messages, is
reconciled: the store's rows after its first unfolded message are read and made the state's.

An erase of the session (`forget`, `clear_session`, `purge`) between planning a fold and
landing it is seen by the session's erase generation, read before and after: such a fold never
lands. Cutting, summarizing and framing stay in `planner`, `compaction` and `framing`.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage

from langchain_rolling_memory.adapters.agent_run import (
    DIGEST_KEY,
    HEAD_KEY,
    PERSISTED_KEY,
    THREAD_KEY,
    GraphRun,
    MemoryIds,
    Stored,
    branch_head,
    edited,
    persisted,
    removed,
    rewrite,
    stored_digest,
    stored_ids,
    thread_client,
)
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID
from langchain_rolling_memory.core.graph_state import (
    REMOVE_ALL,
    Conversation,
    Fold,
    as_seeded,
    conversation,
    is_summary,
    seeded,
)
from langchain_rolling_memory.core.records import CompactionResult, SessionState, StoredMessage
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.stores.api import RollingStore

_HELD = 1024  # background folds held for their next turn, at most (the oldest are dropped)

StoreNew = Callable[[Mapping[str, Any], MemoryIds], Stored]
"""Writes a state's messages not stored yet (checking the session's owner, rewinding to the
state's branch head when known); returns them and the head after."""

AStoreNew = Callable[[Mapping[str, Any], MemoryIds], Awaitable[Stored]]

Defers = Callable[[Mapping[str, Any], MemoryIds], bool]
"""Leaves a state's new messages for the write after the model call; False: write them now."""


def view_head(view: SessionState) -> int:
    """The newest seq a store session's view holds (0: none): a seeded branch's head."""
    if view.tail:
        return view.tail[-1].seq
    return view.record.covered_seq if view.record is not None else 0


def _missing(done: Sequence[str], rows: Sequence[StoredMessage], session_id: str) -> frozenset[str]:
    """The ids of `done` that none of `rows` holds (a row stored without an id as a thread
    seeded from it holds it, `as_seeded`)."""
    held = {as_seeded(row, session_id).id for row in rows}
    return frozenset(i for i in done if i not in held)


def without_erased(
    state: Mapping[str, Any], update: dict[str, Any] | None, gone: frozenset[str]
) -> dict[str, Any] | None:
    """`update`, also removing from the state its messages `gone` from the store (an erased
    conversation the checkpointer kept) and the summary that folded them."""
    if not gone:
        return update
    messages = state.get("messages", ())
    removed = [RemoveMessage(id=str(m.id)) for m in messages if m.id in gone]
    if any(m.id == SUMMARY_MESSAGE_ID for m in messages):
        removed.append(RemoveMessage(id=SUMMARY_MESSAGE_ID))
    update = dict(update or {})
    if "messages" in update:  # a fold of what was erased: never landed
        del update["messages"]
    done = update.get(PERSISTED_KEY, state.get(PERSISTED_KEY) or ())
    update[PERSISTED_KEY] = [i for i in done if i not in gone]
    if DIGEST_KEY in state or DIGEST_KEY in update:
        update[DIGEST_KEY] = stored_digest(messages, set(update[PERSISTED_KEY]))
    if removed:
        update["messages"] = removed
    return update


def _headed(state: Mapping[str, Any], head: int | None) -> Mapping[str, Any]:
    """`state` as the hook's writes see it: with the branch head it now has."""
    if head is None or head == branch_head(state):
        return state
    return {**state, HEAD_KEY: head}


class _Seen:
    """What this process knows of one store's sessions (bounded, thread-safe): per session,
    the branch head it last wrote (`tips`) and the generation under which it last found a
    state's stored messages all in the store (`checked`)."""

    def __init__(self) -> None:
        self.tips: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.checked: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, table: collections.OrderedDict[str, Any], session_id: str) -> Any:
        with self._lock:
            return table.get(session_id)

    def put(self, table: collections.OrderedDict[str, Any], session_id: str, value: Any) -> None:
        with self._lock:
            if value is None:
                table.pop(session_id, None)
                return
            table[session_id] = value
            table.move_to_end(session_id)
            while len(table) > _SEEN:
                table.popitem(last=False)


_SEEN = 16384  # sessions remembered per store, at most (the oldest are dropped)
_SEEN_BY: weakref.WeakKeyDictionary[RollingStore, _Seen] = weakref.WeakKeyDictionary()
_SEEN_LOCK = threading.Lock()


def _seen_by(store: RollingStore) -> _Seen:
    """The `_Seen` of `store`, shared by every middleware on it, dropped with it."""
    with _SEEN_LOCK:
        seen = _SEEN_BY.get(store)
        if seen is None:
            seen = _SEEN_BY[store] = _Seen()
        return seen


class StateKeeper:
    """The state-kept side of the middleware (see the module docstring)."""

    def __init__(self, store: RollingStore, compactor: Compactor, *, background: bool) -> None:
        self.store = store
        self.compactor = compactor
        self.background = background
        self.language = compactor.planner.language
        self._held: collections.OrderedDict[str, Fold] = collections.OrderedDict()
        # What this process knows of the store's sessions, shared by every middleware on the
        # same store (one built per request included): the branch heads it last wrote and the
        # generations under which it last found a state's stored messages (`tip`, `checked`).
        self._seen = _seen_by(store)
        # Per session, the state's messages a model call found erased from the store, for the
        # state update after it (`erased`).
        self._erased: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ shared, pure

    def read(self, messages: Sequence[BaseMessage], generation: str | None = None) -> Conversation:
        return conversation(messages, self.compactor.planner, generation)

    def view(self, messages: Sequence[BaseMessage], session_id: str) -> list[BaseMessage]:
        """What the model is sent of these messages (a request's, from the state): the summary,
        the question if it was folded, the unsummarized messages (a window past the cap)."""
        return self.compactor.view(self.read(messages).state, session_id)

    def _hold(self, session_id: str, planned: Conversation) -> Callable[[CompactionResult], None]:
        def landed(result: CompactionResult) -> None:
            with self._lock:
                self._held[session_id] = Fold.of(planned, result)
                self._held.move_to_end(session_id)
                while len(self._held) > _HELD:
                    self._held.popitem(last=False)

        return landed

    def _held_for(self, session_id: str, current: Conversation, *, take: bool) -> Fold | None:
        with self._lock:
            fold = self._held.pop(session_id, None) if take else self._held.get(session_id)
        return fold if fold is not None and fold.applies_to(current) else None

    def _due(self, current: Conversation, session_id: str, *, inline: bool) -> bool:
        if inline and self.background and not current.state.truncated:
            return False  # folded between turns; inline only past the cap, to bound the state
        return bool(self.compactor.due(current.state)) and not self.compactor.in_backoff(session_id)

    @staticmethod
    def _planned(current: Conversation, generation: str | None) -> Conversation:
        return dataclasses.replace(current, state=dataclasses.replace(current.state, generation=generation))

    def _update(
        self,
        state: Mapping[str, Any],
        ids: MemoryIds,
        seed: list[BaseMessage],
        stored: set[str],
        current: Conversation,
        fold: Fold | None,
        head: int | None,
    ) -> dict[str, Any] | None:
        """The hook's state update: the thread's record, the messages (seeded, folded), the
        ids of the stored messages still in the state, the branch's head."""
        update: dict[str, Any] = {}
        if THREAD_KEY not in state or (ids.client_id is not None and thread_client(state) != ids.client_id):
            update[THREAD_KEY] = {"client_id": ids.client_id}
        messages = [*seed, *state.get("messages", ())]
        if fold is not None:
            update["messages"] = fold.update(current, self.language, whole=bool(seed))
            folded = {m.id for m in current.folded(fold.result)}
            messages = [m for m in messages if m.id not in folded]
        elif seed:
            update["messages"] = [RemoveMessage(id=REMOVE_ALL), *messages]
        stored = stored | {m.id for m in seed if m.id is not None and not is_summary(m)}
        kept = [m.id for m in messages if m.id in stored]
        if kept != list(state.get(PERSISTED_KEY) or ()):
            update[PERSISTED_KEY] = kept
        if head is not None:
            if head != branch_head(state):
                update[HEAD_KEY] = head
            digest = stored_digest(messages, set(kept))
            if digest != state.get(DIGEST_KEY):
                update[DIGEST_KEY] = digest
        return update or None

    @staticmethod
    def _unseen(state: Mapping[str, Any]) -> bool:
        """True for a state no run of this middleware wrote to: a seed candidate."""
        return THREAD_KEY not in state and not persisted(state)

    def _quiet(self, seed: Sequence[BaseMessage], current: Conversation, ids: MemoryIds) -> bool:
        """True if this turn seeds nothing and lands or folds nothing before the model call:
        its new messages may wait for the write after it."""
        if seed or self._held_for(ids.session_id, current, take=False) is not None:
            return False
        return not self._due(current, ids.session_id, inline=True)

    @staticmethod
    def _needs_record(ids: MemoryIds, state: Mapping[str, Any], run: GraphRun) -> bool:
        return ids.client_id is None and run.kept and THREAD_KEY not in state

    # ------------------------------------------------------------------ sync

    def thread_ids(self, ids: MemoryIds, state: Mapping[str, Any], run: GraphRun) -> MemoryIds:
        """`ids`, and for a run that names no client from a checkpoint older than the thread's
        record of its client (a replay of its first turn), the client its newer checkpoints hold."""
        client = run.recorded_client() if self._needs_record(ids, state, run) else None
        return ids if client is None else MemoryIds(ids.session_id, client)

    def _stored(
        self, state: Mapping[str, Any], ids: MemoryIds, store_new: StoreNew
    ) -> tuple[set[str], int | None]:
        """Write the state's new messages; the ids of its stored ones and the branch's head.
        With nothing new, the session's owner is still checked before the model runs."""
        new, head = store_new(state, ids)
        if not new:
            self.store.last_seq(ids.session_id, client_id=ids.client_id)
        return persisted(state) | {m.id for m in new if m.id is not None}, head

    # ------------------------------------------------------------------ the branch in the store

    def erased(
        self, state: Mapping[str, Any], rows: Sequence[StoredMessage], session_id: str
    ) -> frozenset[str]:
        """The state's stored messages the store no longer holds, `rows` being the session's
        newest rows (as many as the state has stored messages): those of a conversation
        erased since they were written (`clear_session`, `forget`, `purge`, an expiry; the
        checkpointer still holds them). Only for a state with a branch head."""
        if branch_head(state) is None:
            return frozenset()
        return _missing(stored_ids(state), rows, session_id)

    def checked(self, session_id: str) -> str | None:
        """The session's generation under which this process last found the state's stored
        messages all in the store (None: none): the same generation, nothing erased since."""
        found = self._seen.get(self._seen.checked, session_id)
        return found if isinstance(found, str) else None

    def note_checked(self, session_id: str, generation: str | None) -> None:
        self._seen.put(self._seen.checked, session_id, generation)

    def note_erased(self, session_id: str, gone: frozenset[str]) -> None:
        """Leave `gone` (see `erased`) for the state update after the model call."""
        with self._lock:
            self._erased[session_id] = gone

    def take_erased(self, session_id: str) -> frozenset[str]:
        with self._lock:
            return self._erased.pop(session_id, frozenset())

    def tip(self, session_id: str) -> int | None:
        """The head this process last wrote or found for the session (None: not known)."""
        found = self._seen.get(self._seen.tips, session_id)
        return found if isinstance(found, int) else None

    def note_tip(self, session_id: str, head: int | None) -> None:
        """Record the session's head after a write of ours (None: not known any more)."""
        self._seen.put(self._seen.tips, session_id, head)

    def _suspect(self, state: Mapping[str, Any], ids: MemoryIds) -> int | None:
        """The seq `base` after which the store's rows may not be the branch's: a
        `RemoveMessage` took stored messages out of the state, an edit changed one, or the state's head is not the
        one this process last wrote (a fork, a replay, another branch written since, a
        write whose checkpoint never came, another process). None: they are."""
        head = branch_head(state)
        if head is None or (not removed(state) and self.tip(ids.session_id) == head and not edited(state)):
            return None
        return max(0, head - len(stored_ids(state)))

    def _tipped(self, ids: MemoryIds, head: int) -> int:
        self.note_tip(ids.session_id, head)
        return head

    def _reconcile(self, state: Mapping[str, Any], ids: MemoryIds) -> int | None:
        """Make the store's rows the branch's when they may not be (`_suspect`): read the
        rows after the branch's first stored message in the state, keep what they share with
        it, rewind the rest and append the state's messages again (as they were stored), in
        one atomic write; the branch's head after (None: not known)."""
        base = self._suspect(state, ids)
        if base is None:
            return branch_head(state)
        rows = self.store.read(ids.session_id, after_seq=base, newest=False, client_id=ids.client_id)
        plan = rewrite(rows, state, base, ids.session_id)
        if plan is None:  # the rows are the branch's: its head is the last of them
            return self._tipped(ids, rows[-1].seq if rows else base)
        seqs = self.store.append(
            ids.session_id,
            plan.messages,
            client_id=ids.client_id,
            token_counts=plan.tokens,
            created_at=plan.dates,
            rewind=plan.rewind,
        )
        return self._tipped(ids, seqs[-1] if seqs else plan.rewind)

    def before_model(
        self, state: Mapping[str, Any], ids: MemoryIds, run: GraphRun, store_new: StoreNew, defers: Defers
    ) -> dict[str, Any] | None:
        """Seed a new thread, store the new messages (or leave them for the write after the
        model call when nothing else happens now), land a background fold that still
        applies, else fold inline if due."""
        seed: list[BaseMessage] = []
        head = self._reconcile(state, ids)
        if self._unseen(state) and run.first_run():
            view = self.compactor.load(ids.session_id, client_id=ids.client_id)
            seed = seeded(view, ids.session_id, self.language)
            head = self._tipped(ids, view_head(view))
        given, state = state, _headed(state, head)
        current = self.read([*seed, *state.get("messages", ())])
        if self._quiet(seed, current, ids) and defers(state, ids):
            return self._update(given, ids, seed, persisted(state), current, None, head)
        stored, head = self._stored(state, ids, store_new)
        fold = self._land(current, ids) or self._fold_now(current, ids, self._done(state, stored, head))
        update = self._update(given, ids, seed, stored, current, fold, head)
        return without_erased(given, update, self.take_erased(ids.session_id))

    @staticmethod
    def _done(state: Mapping[str, Any], stored: set[str], head: int | None) -> list[str] | None:
        """The state's stored messages in order, with a branch head (None: not known)."""
        if head is None:
            return None
        return [m.id for m in state.get("messages", ()) if m.id is not None and m.id in stored]

    def _generation(self, ids: MemoryIds) -> str | None:
        return self.store.read_turn(ids.session_id, limit=0, client_id=ids.client_id).generation

    def _land(self, current: Conversation, ids: MemoryIds) -> Fold | None:
        fold = self._held_for(ids.session_id, current, take=True)
        if fold is None or self._generation(ids) != fold.result.generation:
            return None  # an erase came after it was planned
        return fold

    def _read_stored(self, ids: MemoryIds, done: Sequence[str]) -> str | None:
        """The session's generation, read with its newest rows: the state's stored messages
        (`done`) it no longer holds are left for the hook's update (`note_erased`)."""
        turn = self.store.read_turn(ids.session_id, limit=len(done), client_id=ids.client_id)
        self._check_held(ids, done, turn.messages)
        return turn.generation

    def _check_held(self, ids: MemoryIds, done: Sequence[str], rows: Sequence[StoredMessage]) -> None:
        gone = _missing(done, rows, ids.session_id)
        if gone:
            self.note_erased(ids.session_id, gone)

    def _fold_now(
        self, current: Conversation, ids: MemoryIds, kept: Sequence[str] | None = None
    ) -> Fold | None:
        """Fold inline if due; never a conversation erased from the store (`kept`: the state's
        stored messages, checked with the read a fold makes anyway; None: not checked)."""
        if not self._due(current, ids.session_id, inline=True):
            return None
        generation = self._generation(ids) if kept is None else self._read_stored(ids, kept)
        if kept is not None and self._erased.get(ids.session_id):
            return None
        planned = self._planned(current, generation)

        def still(done: CompactionResult) -> bool:
            return self._generation(ids) == done.generation

        done = self.compactor.fold(ids.session_id, planned.state, planned.oldest, still=still)
        return None if done is None else Fold.of(planned, done)

    def schedule(self, state: Mapping[str, Any], ids: MemoryIds) -> None:
        """Between turns (background mode): plan a due fold of the state and summarize it on a
        worker; it lands at the next turn whose state it still covers."""
        current = self.read(state.get("messages", ()))
        if not self._due(current, ids.session_id, inline=False):
            return
        if self._held_for(ids.session_id, current, take=False) is not None:
            return  # one that applies waits for the next turn already
        planned = self._planned(current, self._generation(ids))
        self.compactor.schedule_fold(
            ids.session_id, planned.state, planned.oldest, self._hold(ids.session_id, planned)
        )

    # ------------------------------------------------------------------ async twins

    async def athread_ids(self, ids: MemoryIds, state: Mapping[str, Any], run: GraphRun) -> MemoryIds:
        client = await run.arecorded_client() if self._needs_record(ids, state, run) else None
        return ids if client is None else MemoryIds(ids.session_id, client)

    async def _astored(
        self, state: Mapping[str, Any], ids: MemoryIds, store_new: AStoreNew
    ) -> tuple[set[str], int | None]:
        new, head = await store_new(state, ids)
        if not new:
            await self.store.alast_seq(ids.session_id, client_id=ids.client_id)
        return persisted(state) | {m.id for m in new if m.id is not None}, head

    async def _areconcile(self, state: Mapping[str, Any], ids: MemoryIds) -> int | None:
        base = self._suspect(state, ids)
        if base is None:
            return branch_head(state)
        rows = await self.store.aread(ids.session_id, after_seq=base, newest=False, client_id=ids.client_id)
        plan = rewrite(rows, state, base, ids.session_id)
        if plan is None:
            return self._tipped(ids, rows[-1].seq if rows else base)
        seqs = await self.store.aappend(
            ids.session_id,
            plan.messages,
            client_id=ids.client_id,
            token_counts=plan.tokens,
            created_at=plan.dates,
            rewind=plan.rewind,
        )
        return self._tipped(ids, seqs[-1] if seqs else plan.rewind)

    async def abefore_model(
        self, state: Mapping[str, Any], ids: MemoryIds, run: GraphRun, store_new: AStoreNew, defers: Defers
    ) -> dict[str, Any] | None:
        seed: list[BaseMessage] = []
        head = await self._areconcile(state, ids)
        if self._unseen(state) and await run.afirst_run():
            view = await self.compactor.aload(ids.session_id, client_id=ids.client_id)
            seed = seeded(view, ids.session_id, self.language)
            head = self._tipped(ids, view_head(view))
        given, state = state, _headed(state, head)
        current = self.read([*seed, *state.get("messages", ())])
        if self._quiet(seed, current, ids) and defers(state, ids):
            return self._update(given, ids, seed, persisted(state), current, None, head)
        stored, head = await self._astored(state, ids, store_new)
        fold = await self._aland(current, ids) or await self._afold_now(
            current, ids, self._done(state, stored, head)
        )
        update = self._update(given, ids, seed, stored, current, fold, head)
        return without_erased(given, update, self.take_erased(ids.session_id))

    async def _ageneration(self, ids: MemoryIds) -> str | None:
        turn = await self.store.aread_turn(ids.session_id, limit=0, client_id=ids.client_id)
        return turn.generation

    async def _aland(self, current: Conversation, ids: MemoryIds) -> Fold | None:
        fold = self._held_for(ids.session_id, current, take=True)
        if fold is None or await self._ageneration(ids) != fold.result.generation:
            return None
        return fold

    async def _aread_stored(self, ids: MemoryIds, done: Sequence[str]) -> str | None:
        turn = await self.store.aread_turn(ids.session_id, limit=len(done), client_id=ids.client_id)
        self._check_held(ids, done, turn.messages)
        return turn.generation

    async def _afold_now(
        self, current: Conversation, ids: MemoryIds, kept: Sequence[str] | None = None
    ) -> Fold | None:
        if not self._due(current, ids.session_id, inline=True):
            return None
        generation = await self._ageneration(ids) if kept is None else await self._aread_stored(ids, kept)
        if kept is not None and self._erased.get(ids.session_id):
            return None
        planned = self._planned(current, generation)

        async def still(done: CompactionResult) -> bool:
            return await self._ageneration(ids) == done.generation

        done = await self.compactor.afold(ids.session_id, planned.state, planned.oldest, still=still)
        return None if done is None else Fold.of(planned, done)

    async def aschedule(self, state: Mapping[str, Any], ids: MemoryIds) -> None:
        current = self.read(state.get("messages", ()))
        if not self._due(current, ids.session_id, inline=False):
            return
        if self._held_for(ids.session_id, current, take=False) is not None:
            return
        planned = self._planned(current, await self._ageneration(ids))
        self.compactor.aschedule_fold(
            ids.session_id, planned.state, planned.oldest, self._hold(ids.session_id, planned)
        )
