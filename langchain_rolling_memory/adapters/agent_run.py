"""What one agent run's memory is: its ids and the messages it still has to store.

Owns the plumbing between a LangGraph run and our store: where `session_id` and `client_id`
come from (context, config, the thread's recorded client), which of the state's messages are
not stored yet (and `DeferredWrites`: those left for the append after the model call, what
the read before it found of them), where the run's state is kept (`GraphRun`: its
checkpointer, whether this is the thread's first run) and where the memory text goes in the
request. The hooks that use them
are `middleware` and `agent_state`; the tools bound to a run are `memory_tools`, the tool-pair
repair `tool_pairs`, the ``nostream``
mark of memory's own model calls `tracing`; memory logic stays in the engine and stores.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID
from langchain_rolling_memory.core.graph_state import as_seeded, fingerprint
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import StoredMessage, TurnRead
from langchain_rolling_memory.errors import ConfigurationError

PERSISTED_KEY = "rolling_memory_persisted"
"""Private state channel: ids of the state's messages already appended to the store."""

HEAD_KEY = "rolling_memory_head"
"""Private state channel, with a checkpointer: the store seq of the newest row the thread's
branch holds (written by its runs, or seeded from the store). Rows past it belong to a branch
the graph left (a fork, a replay) or to a write whose checkpoint never came: the branch's next
append withdraws them in the same atomic write (`RollingStore.append`'s ``rewind``), so the
store's transcript (what recall searches) is the branch's."""

DIGEST_KEY = "rolling_memory_digest"
"""Private state channel, with a checkpointer: a digest of what the state's stored messages
said when the store was last written (`stored_digest`); a state whose messages say something
else (an edit that kept a message's id) has the store's rows rewritten before its next write."""

THREAD_KEY = "rolling_memory_thread"
"""Private state channel: ``{"client_id": ...}``, the client the thread's runs were made for,
recorded at its first run (and when a run names another the store accepted), so that a run
from one of its checkpoints that names none (a replayed `StateSnapshot.config`) is made for
the same client."""

_NS_SEP = "|"  # LangGraph's separator of nested checkpoint namespaces
_MARKED_LOOKBACK = 64  # newest checkpoints of a thread searched for its recorded client
_DEFERRED = 1024  # sessions whose deferred writes are remembered, at most (the oldest are dropped)
_PER_SESSION = 8  # runs in flight per session remembered, at most (the oldest are dropped)

_T = TypeVar("_T")


@dataclass(frozen=True)
class MemoryIds:
    """Whose memory a run uses: the session always, the client when known."""

    session_id: str
    client_id: str | None


def _field(source: Any, name: str) -> Any:
    if source is None:
        return None
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def resolve_ids(
    context: Any,
    configurable: Mapping[str, Any] | None,
    *,
    default_client_id: str | None = None,
    thread_id: str | None = None,
) -> MemoryIds:
    """The session and client of a run, validated.

    `session_id` is the context's ``session_id``, else ``configurable["session_id"]``, else
    the LangGraph ``thread_id``. `client_id` is the context's ``client_id``, else
    ``configurable["client_id"]``, else the middleware's fixed `client_id`; ``user_id`` (as
    LangGraph and mem0 name the person) is read wherever ``client_id`` is. The model has no
    say in either: both come from the code that invokes the agent.

    Raises:
        ConfigurationError: no session id could be found, or one source names two different
            clients (``client_id`` and ``user_id``).
        InvalidIdError: an id is not safe (see `validate_id`).
    """
    configurable = configurable or {}
    session = _field(context, "session_id") or configurable.get("session_id") or configurable.get("thread_id")
    session = session or thread_id
    if session is None:
        msg = (
            "rolling memory needs a session id, found none in the run: pass "
            "config={'configurable': {'session_id': ...}} or {'thread_id': ...} "
            "(an agent may also pass context={'session_id': ...} with context_schema)"
        )
        raise ConfigurationError(msg)
    client = _client(context) or _client(configurable) or default_client_id
    return MemoryIds(
        validate_id(session),
        None if client is None else validate_id(client, kind="client_id"),
    )


def _client(source: Any) -> Any:
    """The client a context or a configurable names, as ``client_id`` or ``user_id``."""
    client, user = _field(source, "client_id"), _field(source, "user_id")
    if client and user and client != user:
        msg = (
            f"the run names two clients, client_id={client!r} and user_id={user!r}; "
            "pass one of them (user_id is read as the client_id)"
        )
        raise ConfigurationError(msg)
    return client or user


def _run_configurable() -> Mapping[str, Any]:
    from langgraph.config import get_config  # the agents extra; only called inside a run

    try:
        config = get_config()
    except RuntimeError:  # outside a runnable context (a hook called directly)
        return {}
    return config.get("configurable") or {}


def run_ids(runtime: Any, default_client_id: str | None, state: Any = None) -> MemoryIds:
    """The run's ids (see `resolve_ids`); a run naming no client is made for the client the
    thread recorded in `state` (`THREAD_KEY`), else for `default_client_id`."""
    # A node's `Runtime` carries the thread in `execution_info`; a tool's `ToolRuntime`
    # carries the run's config itself.
    info = getattr(runtime, "execution_info", None)
    config = getattr(runtime, "config", None)
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    recorded = thread_client(state)
    return resolve_ids(
        getattr(runtime, "context", None),
        configurable if configurable is not None else _run_configurable(),
        default_client_id=recorded if recorded is not None else default_client_id,
        thread_id=getattr(info, "thread_id", None),
    )


def thread_client(state: Any) -> str | None:
    """The client recorded in a state's `THREAD_KEY` channel, if any."""
    mark = state.get(THREAD_KEY) if isinstance(state, Mapping) else None
    client = mark.get("client_id") if isinstance(mark, Mapping) else None
    return client if isinstance(client, str) else None


@dataclass(frozen=True)
class GraphRun:
    """Where the current LangGraph run keeps its state.

    Attributes:
        saver: the graph's checkpointer (None: the state lives for one run only).
        thread_id: the run's thread.
        namespace: the checkpoint namespace of the graph the hook runs in ("" for the root
            graph; a subgraph's state is its parent's to keep).
        step: the superstep the hook runs in.
    """

    saver: Any = None
    thread_id: str | None = None
    namespace: str = ""
    step: int | None = None

    @classmethod
    def current(cls) -> GraphRun:
        """The run the calling hook is part of (an empty `GraphRun` outside of one)."""
        from langgraph.config import get_config
        from langgraph.constants import CONFIG_KEY_CHECKPOINTER

        try:
            config = get_config()
        except RuntimeError:  # a hook called directly, outside a graph
            return cls()
        configurable = config.get("configurable") or {}
        task = str(configurable.get("checkpoint_ns") or "")
        step = (config.get("metadata") or {}).get("langgraph_step")
        thread = configurable.get("thread_id")
        return cls(
            configurable.get(CONFIG_KEY_CHECKPOINTER),
            None if thread is None else str(thread),
            task.rpartition(_NS_SEP)[0],
            step if isinstance(step, int) else None,
        )

    @property
    def kept(self) -> bool:
        """True if a checkpointer keeps this (root) graph's state from run to run."""
        return self.saver is not None and self.namespace == "" and self.thread_id is not None

    def _thread(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": self.namespace}}

    def _first(self, found: int) -> bool:
        # Each checkpoint is one step after its parent: the line from the thread's root to
        # this step holds step + 1 of them; any more belong to another line of the thread.
        return self.step is not None and found <= self.step + 1

    def first_run(self) -> bool:
        """True if the thread holds no checkpoint but this run's own, from its root: its first
        run, not a fork or a replay of an older one (one bounded read of the checkpointer)."""
        if not self.kept or self.step is None:
            return False
        return self._first(sum(1 for _ in self.saver.list(self._thread(), limit=self.step + 2)))

    async def afirst_run(self) -> bool:
        if not self.kept or self.step is None:
            return False
        found = 0
        async for _ in self.saver.alist(self._thread(), limit=self.step + 2):
            found += 1
        return self._first(found)

    def recorded_client(self) -> str | None:
        """The client recorded in the thread's newest checkpoints (for a run from a checkpoint
        older than the record, e.g. a replay of the thread's first turn)."""
        if not self.kept:
            return None
        for found in self.saver.list(self._thread(), limit=_MARKED_LOOKBACK):
            client = thread_client(found.checkpoint.get("channel_values"))
            if client is not None:
                return client
        return None

    async def arecorded_client(self) -> str | None:
        if not self.kept:
            return None
        async for found in self.saver.alist(self._thread(), limit=_MARKED_LOOKBACK):
            client = thread_client(found.checkpoint.get("channel_values"))
            if client is not None:
                return client
        return None


def persisted(state: Mapping[str, Any]) -> set[str]:
    return set(stored_ids(state))


def stored_ids(state: Mapping[str, Any]) -> list[str]:
    """The state's `PERSISTED_KEY`, in order: the ids of its messages in the store (never the
    summary message, which a thread seeded before this was checked could list)."""
    return [i for i in state.get(PERSISTED_KEY) or () if i != SUMMARY_MESSAGE_ID]


def unpersisted(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The state's messages not yet in the store, in order.

    Tracked by message id (LangGraph's `add_messages` gives every message one), so the
    answer is right with a checkpointer (the state holds earlier turns, already stored) and
    without one (each run starts from its input only). The state's summary message is never
    one of them: it was not said, it stands for what was.
    """
    done = persisted(state)
    return [
        m
        for m in state.get("messages", ())
        if (m.id is None or m.id not in done) and m.id != SUMMARY_MESSAGE_ID
    ]


def persisted_update(
    state: Mapping[str, Any], new: Sequence[BaseMessage], head: int | None = None
) -> dict[str, Any]:
    # Only ids still in the state are kept, so the channel never outgrows the state.
    done = persisted(state) | {m.id for m in new if m.id is not None}
    messages = state.get("messages", ())
    update: dict[str, Any] = {PERSISTED_KEY: [m.id for m in messages if m.id in done]}
    if head is not None:
        if head != branch_head(state):
            update[HEAD_KEY] = head
        digest = stored_digest(messages, done)
        if digest != state.get(DIGEST_KEY):
            update[DIGEST_KEY] = digest
    return update


def stored_digest(messages: Sequence[BaseMessage], ids: Collection[str]) -> int:
    """What the `messages` whose id is in `ids` say, as one number: the XOR of a CRC-32 of each
    one's id, kind, content and tool calls (cheap, the same in every process)."""
    digest = 0
    for m in messages:
        if m.id is not None and m.id in ids:
            calls = m.tool_calls if isinstance(m, AIMessage) else getattr(m, "tool_call_id", None)
            said = f"{m.id}\x1f{m.type}\x1f{m.content!r}\x1f{calls!r}"
            digest ^= zlib.crc32(said.encode("utf-8", "surrogatepass"))
    return digest


def edited(state: Mapping[str, Any]) -> bool:
    """True if the state's stored messages say something else than when the store was last
    written (`DIGEST_KEY`; False for a state that has none)."""
    recorded = state.get(DIGEST_KEY)
    if not isinstance(recorded, int):
        return False
    return stored_digest(state.get("messages", ()), set(stored_ids(state))) != recorded


def branch_head(state: Mapping[str, Any]) -> int | None:
    """The state's `HEAD_KEY` (None: not known, a thread begun before it or run without a
    checkpointer)."""
    head = state.get(HEAD_KEY)
    return head if isinstance(head, int) and not isinstance(head, bool) and head >= 0 else None


class Stored(NamedTuple):
    """What a write of a state's new messages did: the messages (stored now or found stored)
    and the branch's head after it (None: not known)."""

    new: list[BaseMessage]
    head: int | None


def removed(state: Mapping[str, Any]) -> set[str]:
    """The ids of stored messages the state no longer holds, though no fold of ours removed
    them (a fold's update drops its ids from `PERSISTED_KEY` with the messages): what a
    `RemoveMessage` of the graph's took out."""
    present = {m.id for m in state.get("messages", ())}
    return {i for i in stored_ids(state) if i not in present}


@dataclass(frozen=True)
class Rewrite:
    """The append that makes the store's rows after some seq the branch's: rewind to
    `rewind`, then append `messages` (with their stored token counts and dates)."""

    rewind: int
    messages: list[BaseMessage]
    tokens: list[int | None]
    dates: list[float] | None


def rewrite(
    rows: Sequence[StoredMessage], state: Mapping[str, Any], base: int, session_id: str
) -> Rewrite | None:
    """What to write so that the store's rows after `base` (`rows`, ascending) are the
    branch's stored messages still in `state` (its `PERSISTED_KEY` ids, in order), as the
    state holds them: the rows they share from the start are kept, the rest is rewound and
    appended again, with the dates stored for them (None: nothing to do). A row stored
    without an id is the message a thread seeded from it holds (`as_seeded`)."""
    rows = [dataclasses.replace(row, message=as_seeded(row, session_id)) for row in rows]
    present = {m.id: m for m in state.get("messages", ()) if m.id is not None}
    target = [present[i] for i in stored_ids(state) if i in present]
    common = 0
    while common < min(len(rows), len(target)) and fingerprint(rows[common].message) == fingerprint(
        target[common]
    ):
        common += 1
    if common == len(rows) == len(target):
        return None
    found = {row.message.id: row for row in rows}
    again = target[common:]
    dates = [found[m.id].created_at if m.id in found else None for m in again]
    return Rewrite(
        rows[common - 1].seq if common else base,
        again,
        [found[m.id].tokens if m.id in found else None for m in again],
        None if any(d is None for d in dates) else [float(d or 0) for d in dates],
    )


def not_stored(new: Sequence[BaseMessage], recent: Sequence[StoredMessage]) -> list[BaseMessage]:
    """`new` without the messages already at the end of the transcript.

    They are there when a run stopped between our write and its checkpoint, or when a client
    without a checkpointer sends earlier messages again with their ids.
    """
    stored = {row.message.id for row in recent if row.message.id is not None}
    return [m for m in new if m.id is None or m.id not in stored]


def with_memory(system: SystemMessage | None, block: str) -> SystemMessage | None:
    """The system message followed by the memory block: one leading system message suits
    every provider, and the developer's prompt stays first so its prefix caches."""
    if not block:
        return system
    if system is None:
        return SystemMessage(block)
    content = system.content
    if isinstance(content, str):
        merged: str | list[str | dict[Any, Any]] = f"{content}\n\n{block}" if content else block
    else:
        merged = [*content, {"type": "text", "text": block}]
    return system.model_copy(update={"content": merged})


# ---------------------------------------------------------------- writes deferred past the model call


@dataclass(frozen=True)
class Pending:
    """The new messages a `before_model` hook left for the write after the model call
    (`stored`: appended since, by a failed call)."""

    client_id: str | None
    messages: tuple[BaseMessage, ...]
    stored: bool = False

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(str(m.id) for m in self.messages)

    def fresh(self, turn: TurnRead, limit: int) -> list[BaseMessage] | None:
        """The pending messages not at the end of the transcript, as `not_stored` finds them
        against the newest ``len(messages)`` rows, told from `turn` (read with `limit`): None
        when its tail may not hold those rows (some are summarized)."""
        rows, want = turn.messages, len(self.messages)
        if len(rows) < want and (turn.record is not None or len(rows) >= limit):
            return None
        return not_stored(self.messages, rows[-want:])


@dataclass(frozen=True)
class Deferred:
    """What the read before the model call settled about a run's pending messages.

    Attributes:
        client_id: the run's client.
        pending: the ids of the pending messages.
        fresh: those of them to append after the model call (none once they were written).
        seen: the ids of the request state's messages; a message of the state after the call
            that is none of them was made by the call (or after it), so is not stored yet.
    """

    client_id: str | None
    pending: frozenset[str]
    fresh: tuple[BaseMessage, ...]
    seen: frozenset[str]

    def batch(self, new: Sequence[BaseMessage]) -> list[BaseMessage] | None:
        """What to append after the model call, `new` being the state's unpersisted messages:
        the fresh pending ones, then the others; None when one of the others may be stored
        already (it was in the request's state: the caller reads the transcript's end)."""
        made = [m for m in new if m.id not in self.pending]
        if any(m.id is None or m.id in self.seen for m in made):
            return None
        return [*self.fresh, *made]


class DeferredWrites:
    """The agent turn's writes moved past the model call, per session (thread-safe, bounded).

    `before_model` leaves its new messages here (`defer`) instead of appending them; the read
    before the model call takes them (`take_pending`), tells from the tail it read which are
    not stored yet and notes that (`note`); the write after the call takes it (`take`) and
    appends them with the call's messages, one append. Whatever is not found here (another
    process resumed the run, a hook called on its own, more than `_DEFERRED` sessions in
    flight) is written as before: the transcript's end read, then the append. Runs are told
    apart by their messages' ids, never by the session alone.
    """

    def __init__(self) -> None:
        self._pending: collections.OrderedDict[str, list[Pending]] = collections.OrderedDict()
        self._deferred: collections.OrderedDict[str, list[Deferred]] = collections.OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _put(table: collections.OrderedDict[str, list[_T]], session_id: str, item: _T) -> None:
        items = table.setdefault(session_id, [])
        items.append(item)
        del items[:-_PER_SESSION]
        table.move_to_end(session_id)
        while len(table) > _DEFERRED:
            table.popitem(last=False)

    @staticmethod
    def _pop(
        table: collections.OrderedDict[str, list[_T]],
        session_id: str,
        fits: Callable[[_T], bool],
        *,
        older: bool = False,
    ) -> _T | None:
        """The session's newest item that `fits`, removed (with every older one if `older`)."""
        items = table.get(session_id) or []
        for i in range(len(items) - 1, -1, -1):
            if fits(items[i]):
                item = items[i]
                if older:
                    del items[: i + 1]
                else:
                    del items[i]
                if not items:
                    del table[session_id]
                return item
        return None

    def defer(self, ids: MemoryIds, new: Sequence[BaseMessage]) -> bool:
        """Leave `new` for the write after the model call; False (nothing left) when there is
        nothing to write or a message has no id to tell it by."""
        if not new or any(m.id is None for m in new):
            return False
        with self._lock:
            self._put(self._pending, ids.session_id, Pending(ids.client_id, tuple(new)))
        return True

    def take_pending(self, ids: MemoryIds, state: Mapping[str, Any]) -> Pending | None:
        """The messages a `before_model` of this run left, if all are still unstored in its `state`."""
        unstored = {m.id for m in unpersisted(state)}
        with self._lock:
            return self._pop(
                self._pending,
                ids.session_id,
                lambda p: p.client_id == ids.client_id and p.ids <= unstored,
            )

    def restore(self, ids: MemoryIds, pending: Pending, *, stored: bool) -> None:
        """Leave `pending` again after a failed model call, for the call's retry."""
        with self._lock:
            self._put(self._pending, ids.session_id, dataclasses.replace(pending, stored=stored))

    def note(
        self,
        ids: MemoryIds,
        pending: Pending | None,
        fresh: Sequence[BaseMessage],
        state: Mapping[str, Any],
    ) -> None:
        """After a model call made on the request's `state`: `fresh`, of the `pending`
        messages (None: none were left), is still to append."""
        seen = frozenset(str(m.id) for m in state.get("messages", ()) if m.id is not None)
        left = pending.ids if pending is not None else frozenset()
        with self._lock:
            self._put(self._deferred, ids.session_id, Deferred(ids.client_id, left, tuple(fresh), seen))

    def take(self, ids: MemoryIds, state: Mapping[str, Any]) -> Deferred | None:
        """What the read before this run's model call settled, if it is this run's: the
        request's messages are all in `state`, its pending ones still unstored there. The
        older notes of the session go with it: what they found unstored may be stored since
        (another run of the session whose note went appends as before, reading first)."""
        messages = state.get("messages", ())
        present = {m.id for m in messages}
        unstored = {m.id for m in unpersisted(state)}
        with self._lock:
            return self._pop(
                self._deferred,
                ids.session_id,
                lambda d: d.client_id == ids.client_id and d.pending <= unstored and d.seen <= present,
                older=True,
            )
