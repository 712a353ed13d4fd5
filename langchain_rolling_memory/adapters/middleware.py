"""LangChain v1 agent middleware over our store, engine and facts; it holds no memory logic.

`RollingMemoryMiddleware` persists each new message of an agent run to the store once, shows
the model the summary and unsummarized messages plus the client's facts, and offers memory
tools bound to the run's client. With a checkpointer the conversation is the graph state's:
folds replace messages there (`agent_state`, `graph_state`), so forks, edits and removals
follow it; without one it is the store's (`Compactor.advance`, as for the histories). The run
plumbing (ids, what is stored yet, the checkpointer) is `agent_run`, the tool builders
`memory_tools`; cutting, summarizing and storing stay in `cuts`, `compaction` and `stores`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Unpack, cast

from langchain_rolling_memory.errors import ConfigurationError, require

require("langchain", "agents", feature="RollingMemoryMiddleware")
require("langgraph", "agents", feature="RollingMemoryMiddleware")

from langchain.agents.middleware.types import (  # noqa: E402 - after the extra check
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.tools import BaseTool  # noqa: E402
from typing_extensions import NotRequired  # noqa: E402

from langchain_rolling_memory.adapters.agent_run import (  # noqa: E402
    DeferredWrites,
    GraphRun,
    MemoryIds,
    Pending,
    Stored,
    branch_head,
    not_stored,
    persisted,
    persisted_update,
    run_ids,
    stored_ids,
    unpersisted,
    with_memory,
)
from langchain_rolling_memory.adapters.agent_state import StateKeeper, without_erased  # noqa: E402
from langchain_rolling_memory.adapters.memory_tools import TOOL_BUILDERS, UNBOUND, refusing  # noqa: E402
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, with_summary_ack  # noqa: E402
from langchain_rolling_memory.core.graph_state import state_summary  # noqa: E402
from langchain_rolling_memory.core.ids import validate_id  # noqa: E402
from langchain_rolling_memory.core.records import MemoryRead, SessionState, StoredMessage, TurnRead  # noqa: E402
from langchain_rolling_memory.core.serde import loads_message  # noqa: E402
from langchain_rolling_memory.core.settings import MemoryOptions, MemorySettings  # noqa: E402
from langchain_rolling_memory.core.tool_pairs import pair_tool_calls  # noqa: E402
from langchain_rolling_memory.core.usage import SummaryUsage  # noqa: E402
from langchain_rolling_memory.engine.compaction import Compactor  # noqa: E402
from langchain_rolling_memory.engine.fact_extractor import FactExtractor, compaction_listener  # noqa: E402
from langchain_rolling_memory.engine.recaller import Recaller, latest_user_text  # noqa: E402
from langchain_rolling_memory.engine.shutdown import Drained  # noqa: E402
from langchain_rolling_memory.engine.turn import TurnStep  # noqa: E402
from langchain_rolling_memory.runtime.tracing import unstreamed  # noqa: E402
from langchain_rolling_memory.stores.api import RollingStore  # noqa: E402
from langchain_rolling_memory.stores.checks import message_rows, token_count  # noqa: E402
from langchain_rolling_memory.stores.urls import rolling_store  # noqa: E402
from langchain_rolling_memory.summarizers.base import SummarizerLike  # noqa: E402

if TYPE_CHECKING:  # where these live moved between langchain / langgraph 1.x releases
    from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
    from langgraph.runtime import Runtime
    from langgraph.types import Command


class RollingMemoryState(AgentState[Any]):
    """The agent state plus the ids this middleware already persisted and the thread's client
    (both hidden from I/O)."""

    rolling_memory_persisted: NotRequired[Annotated[list[str], PrivateStateAttr]]
    rolling_memory_thread: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]
    rolling_memory_head: NotRequired[Annotated[int, PrivateStateAttr]]
    rolling_memory_digest: NotRequired[Annotated[int, PrivateStateAttr]]


_OWN = ("store", "summarizer", "client_id", "extractor", "memory_tools", "recall", "compactor", "settings")
"""The middleware's own parameters, beside the settings (suggested for a misspelt keyword)."""


class RollingMemoryMiddleware(AgentMiddleware[RollingMemoryState, Any]):
    """The same memory as the histories, for agents built with `create_agent`.

    Each run's new messages (the user's input, AI messages, tool calls and results) are
    appended once to the session's transcript in `store`, which keeps every message: the user's
    input and tool results with the model's reply that follows them, so that a model call costs
    one read before it and one append after it (they are appended before the call when it
    fails or when a compaction is due with them; recall, when on, searches between the two). The
    model is sent the system prompt followed by the client's facts and the session state
    (quoted data), then the summary and the unsummarized messages, as the policy cuts them
    (count or token policy, tool pairs kept together, the latest user message always sent).

    With a checkpointer, the conversation is the graph state's messages: a due fold replaces
    the folded messages in the state by one summary message (id ``rolling-memory-summary``,
    recording what it covers), inline before the model call or, with `background`, planned
    between turns and landed at the next turn only if the state still starts with what it
    covers. Forks, time travel, ``RemoveMessage``, ``update_state`` and human edits therefore
    change what the model is sent, and each checkpoint stays bounded by the policy. A
    thread's first run starts from the store's view of its session (one begun by a chain or
    without a checkpointer). Without a checkpointer, the store's summary and tail are the
    conversation, as for the histories. In ``stream_mode="messages"`` a thread's first fold
    shows as the state update it is (a ``RemoveMessage`` and the summary message, from the
    ``before_model`` node), as `SummarizationMiddleware`'s folds do; the summarizer's own
    calls are never streamed. `tools` holds the memory tools (`remember` by default), each
    bound at every call to the run's client. Put this middleware first in
    `middleware=[...]` so that the others see its view.

    The session is the run context's ``session_id``, else ``configurable["session_id"]``,
    else the ``thread_id``; the client is the context's ``client_id`` (or ``user_id``), else
    ``configurable["client_id"]`` (or ``user_id``), else the client the thread recorded at its
    first run (so
    a run from a `StateSnapshot.config`, which names none, is made for the same client),
    else `client_id` given here.

    Args:
        store: the `RollingStore` shared with the histories.
        summarizer: ``(previous_summary, messages) -> str`` (sync or async), a chat model,
            a model string (``"openai:gpt-4o-mini"``), any Runnable, or a `Summarizer`
            (see `as_summarizer`).
        client_id: the client of every run that does not name one.
        extractor: a `FactExtractor` (or a chat model to build one) run on the messages of
            each compaction, writing the facts it finds for the session's client.
        memory_tools: the tools offered to the model, each bound at every call to the run's
            client (and session): any of ``"remember"``, ``"forget_fact"``,
            ``"update_session_state"``, ``"search_memory"``; ``()`` for none.
        recall: a LangChain `BaseRetriever` searched instead of the store.
        compactor: a ready `Compactor` (overrides the compaction settings; its language is
            the memory's unless ``language=`` is given, and then must be the same).
        settings: a `MemorySettings` (default: the defaults), e.g. shared with a history.
        **options: any `MemorySettings` field, replacing that of `settings`: the policy
            (``max_turns``, ``keep_last``, ``trigger``, ``keep``...), ``background`` (compact
            in a worker thread, or a task of the running loop in async runs, off the turn;
            `flush` / `aflush` wait for it; with a checkpointer a fold done in the background
            lands at the next turn, inline only once the state holds more unsummarized
            messages than the cap), ``language`` (every text the memory writes for a model:
            the summary prompt of a summarizer built without a language, the summary's frame,
            the facts, state and recall blocks), ``max_fact_tokens`` (the facts block's
            budget), ``recall_tokens`` (budget of the excerpts recalled before each model
            call, the client's sessions and facts searched with the latest user input, what
            the view holds skipped; None or 0, the default: off, nothing more is read)...;
            a misspelt name is refused with the closest one.

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> memory = RollingMemoryMiddleware(
        ...     store=open_store("memory://"), summarizer=lambda previous, msgs: "summary",
        ...     max_turns=8, keep_last=4)
        >>> [tool.name for tool in memory.tools]
        ['remember']
    """

    state_schema = RollingMemoryState

    def __init__(
        self,
        *,
        store: RollingStore,
        summarizer: SummarizerLike | None = None,
        client_id: str | None = None,
        extractor: FactExtractor | BaseChatModel | None = None,
        memory_tools: Sequence[str] = ("remember",),
        recall: BaseRetriever | None = None,
        compactor: Compactor | None = None,
        settings: MemorySettings | None = None,
        **options: Unpack[MemoryOptions],
    ) -> None:
        super().__init__()
        if options.get("language", "") is None:  # None: the compactor's, as before settings
            del options["language"]
        chosen = MemorySettings.resolve(settings, options, owner="RollingMemoryMiddleware", others=_OWN)
        store = rolling_store(store, owner="RollingMemoryMiddleware")
        language = chosen.language
        if compactor is not None:
            if "language" in options and language != compactor.language:
                msg = (
                    f"language={language!r} differs from the compactor's ({compactor.language!r}): "
                    "pass language= to the Compactor, or leave it out here"
                )
                raise ConfigurationError(msg)
            language = compactor.language
        self.language = language
        self.settings = chosen
        self.recaller = Recaller.build(
            store,
            chosen.recall_tokens,
            recall,
            token_counter=chosen.token_counter,
            language=language,
            embeddings=chosen.embeddings,
        )
        unknown = sorted(set(memory_tools) - set(TOOL_BUILDERS))
        if unknown or isinstance(memory_tools, str):
            msg = f"memory_tools may hold {sorted(TOOL_BUILDERS)}, got {memory_tools!r}"
            raise ConfigurationError(msg)
        if compactor is None:
            if summarizer is None:
                msg = "RollingMemoryMiddleware needs summarizer= (a function, a chat model or a Summarizer)"
                raise TypeError(msg)
            listener = compaction_listener(extractor, store, chosen.on_compaction, language)
            compactor = Compactor.build(store, summarizer, settings=chosen, on_compaction=listener)
        elif extractor is not None:
            msg = "pass extractor= to the Compactor (on_compaction=) when you give compactor="
            raise ConfigurationError(msg)
        elif compactor.store is not store:
            msg = "compactor.store and store= must be the same store"
            raise ConfigurationError(msg)
        background = chosen.background
        self.store = store
        self.compactor = compactor
        self.token_counter = chosen.token_counter
        self.background = background
        self.client_id = None if client_id is None else validate_id(client_id, kind="client_id")
        self.max_fact_tokens = chosen.max_fact_tokens
        self.keeper = StateKeeper(store, compactor, background=background)
        self._writes = DeferredWrites()
        self.tools: list[BaseTool] = [
            refusing(TOOL_BUILDERS[name](store, UNBOUND, UNBOUND)) for name in dict.fromkeys(memory_tools)
        ]
        self._tool_names = {t.name for t in self.tools}

    # ------------------------------------------------------------------ shared helpers

    def ids(self, runtime: Runtime[Any] | ToolRuntime[Any, Any] | None, state: Any = None) -> MemoryIds:
        """The session and client of the current run (see `resolve_ids`); `state`, the
        agent state, gives the client the thread recorded."""
        return run_ids(runtime, self.client_id, state)

    @staticmethod
    def usage_of(messages: Sequence[BaseMessage]) -> SummaryUsage:
        """What summarizing cost and saved so far for a checkpointed thread, read from its
        state's messages (``agent.get_state(config).values["messages"]``)."""
        return SummaryUsage.from_record(state_summary(messages))

    def _counts(self, messages: Sequence[BaseMessage]) -> list[int | None]:
        return [
            token_count(self.token_counter([m]), f"token_counter's count of message {i}")
            for i, m in enumerate(messages)
        ]

    def _step(self) -> TurnStep:
        # The summary is not the step's here: it is the engine's framed message at the head of the view.
        return TurnStep(self.store, self.max_fact_tokens, self.token_counter, self.language, self.recaller)

    def _view(
        self, request: ModelRequest[Any], session: SessionState, session_id: str, pending: Pending | None
    ) -> list[BaseMessage]:
        """Without a checkpointer: the store's view (with the `pending` messages, written or
        to be written), then the messages an outer middleware added to the request (not from
        the stored state)."""
        done = persisted(request.state) | (pending.ids if pending is not None else frozenset())
        extra = [m for m in request.messages if m.id is None or m.id not in done]
        return [*self.compactor.view(session, session_id), *extra]

    # ------------------------------------------------------------------ writes past the model call
    #
    # A turn's new messages (the user's input, tool results) are not appended by `before_model`
    # but with the model's reply by `after_model`, one append: the read before the model call
    # (`RollingStore.read_memory`: view, state, facts, owner check) tells from the tail it read
    # which of them are stored already, and the view is what a read after their append would
    # give (`Planner.extend`). When it cannot tell, when a compaction is due with them or when
    # the model call fails, they are appended before the call returns, as they were before.
    # With recall on, the search runs on the store as the read found it, before the turn's
    # input is appended (as a chain's turn does): the view shows the input, and the recall
    # leaves out what the view shows. Either way the append after the call reads nothing first.

    def _defers(self, state: Mapping[str, Any], ids: MemoryIds) -> bool:
        return self._writes.defer(ids, unpersisted(state))

    def _rows(self, messages: Sequence[BaseMessage]) -> list[tuple[str, int | None]]:
        """The rows an append of `messages` writes (checked now, as the append would)."""
        return message_rows(messages, self._counts(messages))

    def _extended(self, turn: TurnRead, fresh: Sequence[BaseMessage], session_id: str) -> SessionState | None:
        """The session's state once `fresh` is appended, from `turn`, read before: what a read
        after the append gives (None: not sure, or a compaction is due: append first)."""
        planner = self.compactor.planner
        read = planner.state(*turn)
        state: SessionState | None = read
        if fresh:
            last = read.tail[-1].seq if read.tail else read.covered_seq
            rows = [
                StoredMessage(last + 1 + i, loads_message(payload), tokens)
                for i, (payload, tokens) in enumerate(self._rows(fresh))
            ]
            state = planner.extend(read, rows, read.record)
        elif planner.lacks_question(read):
            state = None
        if state is None or (self.compactor.due(state) and not self.compactor.in_backoff(session_id)):
            return None
        return state

    def _append_now(self, ids: MemoryIds, messages: Sequence[BaseMessage]) -> None:
        if messages:
            self.store.append(
                ids.session_id, messages, client_id=ids.client_id, token_counts=self._counts(messages)
            )
            self._stored(ids)
            self.keeper.note_tip(ids.session_id, None)  # written past the state's head

    async def _aappend_now(self, ids: MemoryIds, messages: Sequence[BaseMessage]) -> None:
        if messages:
            await self.store.aappend(
                ids.session_id, messages, client_id=ids.client_id, token_counts=self._counts(messages)
            )
            self._stored(ids)
            self.keeper.note_tip(ids.session_id, None)  # written past the state's head

    def _write_pending(self, ids: MemoryIds, pending: Pending, fresh: Sequence[BaseMessage] | None) -> None:
        """Append the pending messages now (those of them not stored: `fresh`, or read)."""
        if fresh is None:
            recent = self.store.read(
                ids.session_id, limit=len(pending.messages), newest=True, client_id=ids.client_id
            )
            fresh = not_stored(pending.messages, recent)
        self._append_now(ids, fresh)

    async def _awrite_pending(
        self, ids: MemoryIds, pending: Pending, fresh: Sequence[BaseMessage] | None
    ) -> None:
        if fresh is None:
            recent = await self.store.aread(
                ids.session_id, limit=len(pending.messages), newest=True, client_id=ids.client_id
            )
            fresh = not_stored(pending.messages, recent)
        await self._aappend_now(ids, fresh)

    def _settled(
        self, pending: Pending | None, turn: TurnRead, limit: int, state: Mapping[str, Any]
    ) -> list[BaseMessage] | None:
        """With a checkpointer: the pending messages to append after the call (None: not
        known from `turn`, append them now); all of them with a branch head (its append
        rewinds to it, whatever was stored since)."""
        if pending is None or pending.stored:
            return []
        fresh = list(pending.messages) if branch_head(state) is not None else pending.fresh(turn, limit)
        if fresh is not None:
            self._rows(fresh)  # refused now, before the call, as their append would be
        return fresh

    def _after_call(
        self,
        ids: MemoryIds,
        pending: Pending | None,
        fresh: Sequence[BaseMessage],
        state: Mapping[str, Any],
        error: BaseException | None,
    ) -> None:
        """After the model call: note what the write after it appends; after a failed call,
        the pending messages are appended now (what was said is kept) and left for a retry."""
        if error is None:
            self._writes.note(ids, pending, fresh, state)
            return
        if pending is None:
            return
        written = isinstance(error, Exception)
        if written:
            self._append_now(ids, fresh)
        self._writes.restore(ids, pending, stored=written or not fresh)

    async def _aafter_call(
        self,
        ids: MemoryIds,
        pending: Pending | None,
        fresh: Sequence[BaseMessage],
        state: Mapping[str, Any],
        error: BaseException | None,
    ) -> None:
        if error is None:
            self._writes.note(ids, pending, fresh, state)
            return
        if pending is None:
            return
        written = isinstance(error, Exception)
        if written:
            await self._aappend_now(ids, fresh)
        self._writes.restore(ids, pending, stored=written or not fresh)

    def _store_after_call(self, state: Mapping[str, Any], ids: MemoryIds) -> Stored:
        """`_store_new` after a model call whose read settled the pending messages: one
        append, without reading the transcript's end again (with a branch head, `_store_new`
        reads nothing either)."""
        new = unpersisted(state)
        deferred = self._writes.take(ids, state) if new else None
        batch = None if deferred is None else deferred.batch(new)
        if batch is None or self._head(state) is not None:
            return self._store_new(state, ids)
        if not batch:
            return Stored(new, None)
        seqs = self.store.append(
            ids.session_id, batch, client_id=ids.client_id, token_counts=self._counts(batch)
        )
        return self._stored_at(ids, new, seqs[-1])

    async def _astore_after_call(self, state: Mapping[str, Any], ids: MemoryIds) -> Stored:
        new = unpersisted(state)
        deferred = self._writes.take(ids, state) if new else None
        batch = None if deferred is None else deferred.batch(new)
        if batch is None or self._head(state) is not None:
            return await self._astore_new(state, ids)
        if not batch:
            return Stored(new, None)
        seqs = await self.store.aappend(
            ids.session_id, batch, client_id=ids.client_id, token_counts=self._counts(batch)
        )
        return self._stored_at(ids, new, seqs[-1])

    def _request(self, request: ModelRequest[Any], view: list[BaseMessage], memory: str) -> ModelRequest[Any]:
        messages = pair_tool_calls(view)
        if self.compactor.planner.summary_ack:  # the state's summary message, acknowledged
            messages = with_summary_ack(messages, self.language)
        return request.override(
            messages=cast("list[AnyMessage]", messages),
            system_message=with_memory(request.system_message, memory),
        )

    def _bind(self, request: ToolCallRequest) -> ToolCallRequest | None:
        """The request with our tool bound to the run's ids (None: not our tool, or no client)."""
        name = request.tool_call["name"]
        if name not in self._tool_names:
            return None
        ids = self.ids(request.runtime, request.state)
        if ids.client_id is None:
            return None  # the shown tool runs and refuses
        return request.override(tool=TOOL_BUILDERS[name](self.store, ids.client_id, ids.session_id))

    # ------------------------------------------------------------------ sync hooks

    @staticmethod
    def _head(state: Mapping[str, Any]) -> int | None:
        """The branch head a write of `state` rewinds to: only a checkpointed thread has one."""
        head = branch_head(state)
        return head if head is not None and GraphRun.current().kept else None

    def _store_new(self, state: Mapping[str, Any], ids: MemoryIds) -> Stored:
        """Append the state's new messages; return them ([] if there were none) and the head.

        With a checkpointer and the branch's head known, the append rewinds to it: what the
        store holds past it (a branch the graph left, a write whose checkpoint never came) is
        withdrawn in the same atomic write and the new messages follow the head, so nothing
        is read first. Without, the transcript's end is read to skip what is stored already.
        Every read and append names the run's client (None included), and the store checks
        the session's owner in that same read or write: no check-then-act.
        """
        new, head = unpersisted(state), self._head(state)
        if head is not None:
            if not new:
                return Stored(new, head)
            seqs = self.store.append(
                ids.session_id, new, client_id=ids.client_id, token_counts=self._counts(new), rewind=head
            )
            return self._stored_at(ids, new, seqs[-1] if seqs else head)
        if not new:
            return Stored(new, None)
        recent = self.store.read(ids.session_id, limit=len(new), newest=True, client_id=ids.client_id)
        fresh = not_stored(new, recent)
        if fresh:
            seqs = self.store.append(
                ids.session_id, fresh, client_id=ids.client_id, token_counts=self._counts(fresh)
            )
            return self._stored_at(ids, new, seqs[-1])
        return Stored(new, recent[-1].seq if recent else None)

    def _stored(self, ids: MemoryIds) -> None:
        """After an append: with ``embeddings=``, its messages are embedded in the background."""
        if self.recaller is not None:
            self.recaller.stored(ids.session_id)

    def _stored_at(self, ids: MemoryIds, new: list[BaseMessage], head: int) -> Stored:
        """After a write of the state's new messages ending at `head`: the keeper's tip."""
        self._stored(ids)
        if GraphRun.current().kept:
            self.keeper.note_tip(ids.session_id, head)
        return Stored(new, head)

    def _persist(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        """Append the state's new messages; the persisted-ids update, None if there were none."""
        return self._persisted(state, self._store_new(state, ids))

    def _persisted(self, state: Mapping[str, Any], stored: Stored) -> dict[str, Any] | None:
        head = stored.head if GraphRun.current().kept else None
        return persisted_update(state, stored.new, head) if stored.new else None

    def _advanced(self, ids: MemoryIds) -> SessionState:
        """The session's state once a due compaction ran (inline) or was handed off.

        Memory's own model calls are not streamed as the agent's (see `unstreamed`).
        """
        with unstreamed():
            return self.compactor.advance(ids.session_id, background=self.background, client_id=ids.client_id)

    def _persist_checked(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        """`_persist`, or leave the new messages for the write after the model call (whose
        read before it checks the owner); with nothing written, nothing checked whose session
        this is: refuse another client's (or, naming none, an owned one) before the model runs."""
        if self._defers(state, ids):
            return None
        update = self._persist(state, ids)
        if update is None:
            self.store.last_seq(ids.session_id, client_id=ids.client_id)
        return update

    def before_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the new messages (the user's input, tool results) before the model runs; with
        a checkpointer, fold the state if due (or land a background fold)."""
        run = GraphRun.current()
        ids = self.ids(runtime, state)
        if run.kept:
            ids = self.keeper.thread_ids(ids, state, run)
            with unstreamed():  # memory's own model calls are not the agent's
                return self.keeper.before_model(state, ids, run, self._store_new, self._defers)
        return self._persist_checked(state, ids)

    def after_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the model's message at once (with the turn's new messages before it), so a
        failing tool cannot lose it."""
        ids = self.ids(runtime, state)
        update = self._persisted(state, self._store_after_call(state, ids))
        return self._without_erased(state, ids, update) if GraphRun.current().kept else update

    def after_agent(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store what is left (results of `return_direct` tools); in the background mode,
        start a due compaction now, between turns."""
        ids = self.ids(runtime, state)
        update = self._persist(state, ids)
        if self.background:
            if GraphRun.current().kept:
                with unstreamed():  # the worker runs in a copy of this context
                    self.keeper.schedule(state, ids)
            else:
                self._advanced(ids)  # its first read checks the owner
        return update

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Send the model the view (with a checkpointer, of the request's messages; else the
        store's, compacted first if due) and the memory block."""
        ids = self.ids(request.runtime, request.state)
        pending = self._writes.take_pending(ids, request.state)
        known: MemoryRead | None
        fresh: list[BaseMessage]
        if GraphRun.current().kept:
            limit = self._kept_limit(request.state, ids, pending)
            known = self.store.read_memory(ids.session_id, limit=limit, client_id=ids.client_id)
            view = self._kept_view(request, ids, known, self._rows_to_check(request.state, ids, known))
            settled = self._settled(pending, known.turn, limit, request.state)
            if settled is None and pending is not None:
                self._write_pending(ids, pending, None)
            fresh = settled or []
        else:
            view, known, fresh = self._store_view(request, ids, pending)
        # The query is the question, even when it was folded (pinned).
        query = latest_user_text(view)
        block = self._step().read(ids.client_id, ids.session_id, query=query, view=view, known=known)
        sent = self._request(request, view, block.render(summary=False))
        try:
            response = handler(sent)
        except BaseException as error:
            self._after_call(ids, pending, fresh, request.state, error)
            raise
        self._after_call(ids, pending, fresh, request.state, None)
        return response

    def _kept_limit(self, state: Mapping[str, Any], ids: MemoryIds, pending: Pending | None) -> int:
        """With a checkpointer, the rows the turn's read takes: the pending messages' (which
        of them are stored), and the state's stored messages' while this process has not
        checked the session's generation (`_rows_to_check`: then they are checked in this read)."""
        limit = 0 if pending is None else len(pending.messages)
        if branch_head(state) is not None and self.keeper.checked(ids.session_id) is None:
            limit = max(limit, len(stored_ids(state)))
        return limit

    def _checked(self, ids: MemoryIds, known: MemoryRead) -> bool:
        """True while the session's generation is the one under which this process last found
        the state's stored messages in the store: nothing erased or withdrawn since."""
        generation = known.turn.generation
        return generation is not None and self.keeper.checked(ids.session_id) == generation

    def _to_read(self, state: Mapping[str, Any], known: MemoryRead) -> int:
        """How many newest rows a check needs beyond the turn's read (0: it holds them)."""
        done = len(stored_ids(state)) if branch_head(state) is not None else 0
        if known.turn.generation is None or len(known.turn.messages) >= done:
            return 0
        return done

    def _rows_to_check(
        self, state: Mapping[str, Any], ids: MemoryIds, known: MemoryRead
    ) -> Sequence[StoredMessage] | None:
        """With a checkpointer, the store's newest rows to check the state's stored messages
        against (`_kept_view`): None while `_checked`, else the turn's read's, or as many
        as the state has stored messages when it holds fewer (one more read)."""
        if self._checked(ids, known):
            return None
        more = self._to_read(state, known)
        if not more:
            return known.turn.messages
        return self.store.read_turn(ids.session_id, limit=more, client_id=ids.client_id).messages

    async def _arows_to_check(
        self, state: Mapping[str, Any], ids: MemoryIds, known: MemoryRead
    ) -> Sequence[StoredMessage] | None:
        if self._checked(ids, known):
            return None
        more = self._to_read(state, known)
        if not more:
            return known.turn.messages
        return (await self.store.aread_turn(ids.session_id, limit=more, client_id=ids.client_id)).messages

    def _kept_view(
        self,
        request: ModelRequest[Any],
        ids: MemoryIds,
        known: MemoryRead,
        rows: Sequence[StoredMessage] | None,
    ) -> list[BaseMessage]:
        """With a checkpointer, the view of the request's messages, without those the store no
        longer holds (`rows`: its newest, None: nothing to check; an erased conversation the
        checkpointer kept) nor the summary that folded them; the state update after the call
        removes them (`_without_erased`)."""
        if rows is None:
            return self.keeper.view(request.messages, ids.session_id)
        gone = self.keeper.erased(request.state, rows, ids.session_id)
        if not gone:
            self.keeper.note_checked(ids.session_id, known.turn.generation)
            return self.keeper.view(request.messages, ids.session_id)
        self.keeper.note_erased(ids.session_id, gone)
        left = [m for m in request.messages if m.id not in gone and m.id != SUMMARY_MESSAGE_ID]
        return self.keeper.view(left, ids.session_id)

    def _without_erased(
        self, state: Mapping[str, Any], ids: MemoryIds, update: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """After the model call: `update`, also removing from the state the messages the call
        found erased from the store (and the summary that folded them)."""
        return without_erased(state, update, self.keeper.take_erased(ids.session_id))

    def _store_view(
        self, request: ModelRequest[Any], ids: MemoryIds, pending: Pending | None
    ) -> tuple[list[BaseMessage], MemoryRead | None, list[BaseMessage]]:
        """Without a checkpointer: the view, what was read with it, the pending messages still
        to append (compacted first if due, the pending ones appended first)."""
        limit = self.compactor.planner.read_limit
        if pending is not None and not pending.stored:
            read = self.store.read_memory(ids.session_id, limit=limit, client_id=ids.client_id)
            fresh = pending.fresh(read.turn, limit)
            extended = None if fresh is None else self._extended(read.turn, fresh, ids.session_id)
            if extended is not None and fresh is not None:
                return self._view(request, extended, ids.session_id, pending), read, fresh
            self._write_pending(ids, pending, fresh)
        session, known = self.compactor.load_memory(ids.session_id, client_id=ids.client_id)
        with unstreamed():
            advanced = self.compactor.advance(
                ids.session_id, session, background=self.background, client_id=ids.client_id, current=True
            )
        return (
            self._view(request, advanced, ids.session_id, pending),
            _unchanged(known, session, advanced),
            [],
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run our memory tools bound to the run's ids; other tools pass through."""
        bound = self._bind(request)
        return handler(bound if bound is not None else request)

    # ------------------------------------------------------------------ async hooks

    async def _astore_new(self, state: Mapping[str, Any], ids: MemoryIds) -> Stored:
        new, head = unpersisted(state), self._head(state)
        if head is not None:
            if not new:
                return Stored(new, head)
            seqs = await self.store.aappend(
                ids.session_id, new, client_id=ids.client_id, token_counts=self._counts(new), rewind=head
            )
            return self._stored_at(ids, new, seqs[-1] if seqs else head)
        if not new:
            return Stored(new, None)
        recent = await self.store.aread(ids.session_id, limit=len(new), newest=True, client_id=ids.client_id)
        fresh = not_stored(new, recent)
        if fresh:
            seqs = await self.store.aappend(
                ids.session_id, fresh, client_id=ids.client_id, token_counts=self._counts(fresh)
            )
            return self._stored_at(ids, new, seqs[-1])
        return Stored(new, recent[-1].seq if recent else None)

    async def _apersist(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        return self._persisted(state, await self._astore_new(state, ids))

    async def _apersist_checked(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        if self._defers(state, ids):
            return None
        update = await self._apersist(state, ids)
        if update is None:
            await self.store.alast_seq(ids.session_id, client_id=ids.client_id)
        return update

    async def _aadvanced(self, ids: MemoryIds) -> SessionState:
        with unstreamed():
            return await self.compactor.aadvance(
                ids.session_id, background=self.background, client_id=ids.client_id
            )

    async def abefore_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        run = GraphRun.current()
        ids = self.ids(runtime, state)
        if run.kept:
            ids = await self.keeper.athread_ids(ids, state, run)
            with unstreamed():
                return await self.keeper.abefore_model(state, ids, run, self._astore_new, self._defers)
        return await self._apersist_checked(state, ids)

    async def aafter_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        # As `after_model`: the turn's owner was checked before the model ran.
        ids = self.ids(runtime, state)
        update = self._persisted(state, await self._astore_after_call(state, ids))
        return self._without_erased(state, ids, update) if GraphRun.current().kept else update

    async def aafter_agent(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        ids = self.ids(runtime, state)
        update = await self._apersist(state, ids)
        if self.background:
            if GraphRun.current().kept:
                with unstreamed():
                    await self.keeper.aschedule(state, ids)
            else:
                await self._aadvanced(ids)
        return update

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        ids = self.ids(request.runtime, request.state)
        pending = self._writes.take_pending(ids, request.state)
        known: MemoryRead | None
        fresh: list[BaseMessage]
        if GraphRun.current().kept:
            limit = self._kept_limit(request.state, ids, pending)
            known = await self.store.aread_memory(ids.session_id, limit=limit, client_id=ids.client_id)
            rows = await self._arows_to_check(request.state, ids, known)
            view = self._kept_view(request, ids, known, rows)
            settled = self._settled(pending, known.turn, limit, request.state)
            if settled is None and pending is not None:
                await self._awrite_pending(ids, pending, None)
            fresh = settled or []
        else:
            view, known, fresh = await self._astore_view(request, ids, pending)
        block = await self._step().aread(
            ids.client_id, ids.session_id, query=latest_user_text(view), view=view, known=known
        )
        sent = self._request(request, view, block.render(summary=False))
        try:
            response = await handler(sent)
        except BaseException as error:
            await self._aafter_call(ids, pending, fresh, request.state, error)
            raise
        await self._aafter_call(ids, pending, fresh, request.state, None)
        return response

    async def _astore_view(
        self, request: ModelRequest[Any], ids: MemoryIds, pending: Pending | None
    ) -> tuple[list[BaseMessage], MemoryRead | None, list[BaseMessage]]:
        limit = self.compactor.planner.read_limit
        if pending is not None and not pending.stored:
            read = await self.store.aread_memory(ids.session_id, limit=limit, client_id=ids.client_id)
            fresh = pending.fresh(read.turn, limit)
            extended = None if fresh is None else self._extended(read.turn, fresh, ids.session_id)
            if extended is not None and fresh is not None:
                return self._view(request, extended, ids.session_id, pending), read, fresh
            await self._awrite_pending(ids, pending, fresh)
        session, known = await self.compactor.aload_memory(ids.session_id, client_id=ids.client_id)
        with unstreamed():
            advanced = await self.compactor.aadvance(
                ids.session_id, session, background=self.background, client_id=ids.client_id, current=True
            )
        return (
            self._view(request, advanced, ids.session_id, pending),
            _unchanged(known, session, advanced),
            [],
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        bound = self._bind(request)
        return await handler(bound if bound is not None else request)

    # ------------------------------------------------------------------ utilities

    def flush(self, session_id: str, timeout: float | None = None) -> None:
        """Wait for the session's background compaction (thread), if any. With a checkpointer
        its fold is then held for the thread's next turn, which lands it in the state."""
        self.compactor.flush(validate_id(session_id), timeout)

    async def aflush(self, session_id: str, timeout: float | None = None) -> None:
        """Wait for the session's background compaction (thread or task), if any."""
        await self.compactor.aflush(validate_id(session_id), timeout)

    def drain(self, timeout: float | None = None) -> Drained:
        """Wait for the background compactions of this store (and the fact extractions they
        run), up to `timeout` seconds (None: no limit); see `Compactor.drain`. Call it when
        shutting down, before closing the store."""
        return self.compactor.drain(timeout)

    async def adrain(self, timeout: float | None = None) -> Drained:
        """Async twin of `drain`: awaits without blocking the event loop."""
        return await self.compactor.adrain(timeout)

    def transcript(self, session_id: str) -> list[BaseMessage]:
        """Every message of the session, in order (never changed by compaction)."""
        return self.store.transcript(session_id)

    async def atranscript(self, session_id: str) -> list[BaseMessage]:
        return await self.store.atranscript(session_id)

    def usage(self, session_id: str) -> SummaryUsage:
        """What summarizing the session cost and saved so far (see `SummaryUsage`), from the
        store's summary record: without a checkpointer (with one, see `usage_of`)."""
        return self.store.usage(session_id)

    async def ausage(self, session_id: str) -> SummaryUsage:
        return await self.store.ausage(session_id)

    def __repr__(self) -> str:
        return f"RollingMemoryMiddleware(store={type(self.store).__name__}, background={self.background})"


def _unchanged(known: MemoryRead, read: SessionState, advanced: SessionState) -> MemoryRead | None:
    """`known` while the session is as it was read; None once an inline compaction ran (its
    fact extraction may have changed the facts: they are read again)."""
    return known if advanced is read else None
