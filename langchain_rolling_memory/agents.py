"""LangChain v1 agent middleware over our store, engine and facts; it holds no memory logic.

`RollingMemoryMiddleware` persists each new message of an agent run to the store once, shows
the model the engine's view (summary and unsummarized tail) plus the client's facts, and
offers the `remember` tool bound to the run's client. Cutting, summarizing and storing stay
in `policy`, `engine` and `stores`; the agent's own state (and checkpointer) is never
rewritten.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, cast

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
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.config import get_config  # noqa: E402
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.types import Command  # noqa: E402
from typing_extensions import NotRequired  # noqa: E402

from langchain_rolling_memory.engine import Compactor, ErrorCallback, SessionState  # noqa: E402
from langchain_rolling_memory.extractor import FactExtractor  # noqa: E402
from langchain_rolling_memory.facts import memory_block  # noqa: E402
from langchain_rolling_memory.ids import validate_id  # noqa: E402
from langchain_rolling_memory.policy import FoldPolicy, TokenCounter, count_tokens  # noqa: E402
from langchain_rolling_memory.stores.base import Fact, RollingStore  # noqa: E402
from langchain_rolling_memory.summarizers.base import SummarizerLike, as_summarizer  # noqa: E402
from langchain_rolling_memory.tools import forget_fact_tool, remember_tool, session_state_tool  # noqa: E402

__all__ = ["RollingMemoryMiddleware", "RollingMemoryState", "resolve_ids"]

PERSISTED_KEY = "rolling_memory_persisted"
"""Private state channel: ids of the state's messages already appended to the store."""


class RollingMemoryState(AgentState[Any]):
    """The agent state plus the ids this middleware already persisted (hidden from I/O)."""

    rolling_memory_persisted: NotRequired[Annotated[list[str], PrivateStateAttr]]


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
    ``configurable["client_id"]``, else the middleware's fixed `client_id`. The model has no
    say in either: both come from the code that invokes the agent.

    Raises:
        ConfigurationError: no session id could be found.
        InvalidIdError: an id is not safe (see `validate_id`).
    """
    configurable = configurable or {}
    session = _field(context, "session_id") or configurable.get("session_id") or configurable.get("thread_id")
    session = session or thread_id
    if session is None:
        msg = (
            "RollingMemoryMiddleware needs a session id, found none in the run: pass "
            "context={'session_id': ...} (with context_schema) or "
            "config={'configurable': {'thread_id': ...}}"
        )
        raise ConfigurationError(msg)
    client = _field(context, "client_id") or configurable.get("client_id") or default_client_id
    return MemoryIds(
        validate_id(session),
        None if client is None else validate_id(client, kind="client_id"),
    )


def _run_configurable() -> Mapping[str, Any]:
    try:
        config = get_config()
    except RuntimeError:  # outside a runnable context (a hook called directly)
        return {}
    return config.get("configurable") or {}


def _ids_of(runtime: Any, default_client_id: str | None) -> MemoryIds:
    # A node's `Runtime` carries the thread in `execution_info`; a tool's `ToolRuntime`
    # carries the run's config itself.
    info = getattr(runtime, "execution_info", None)
    config = getattr(runtime, "config", None)
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    return resolve_ids(
        getattr(runtime, "context", None),
        configurable if configurable is not None else _run_configurable(),
        default_client_id=default_client_id,
        thread_id=getattr(info, "thread_id", None),
    )


def _persisted(state: Mapping[str, Any]) -> set[str]:
    return set(state.get(PERSISTED_KEY) or ())


def _unpersisted(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The state's messages not yet in the store, in order.

    Tracked by message id (LangGraph's `add_messages` gives every message one), so the
    answer is right with a checkpointer (the state holds earlier turns, already stored) and
    without one (each run starts from its input only).
    """
    done = _persisted(state)
    return [m for m in state.get("messages", ()) if m.id is None or m.id not in done]


def _persisted_update(state: Mapping[str, Any], new: Sequence[BaseMessage]) -> dict[str, Any]:
    # Only ids still in the state are kept, so the channel never outgrows the state.
    done = _persisted(state) | {m.id for m in new if m.id is not None}
    return {PERSISTED_KEY: [m.id for m in state.get("messages", ()) if m.id in done]}


def _refusing(tool: BaseTool) -> BaseTool:
    """`tool`'s name, description and arguments with a body that writes nothing.

    This is what the model is shown (`middleware.tools`, built before any run); each call
    runs a copy bound to the run's ids instead, or this body when the run has no client.
    """

    def refuse(**_: Any) -> str:
        return "Not saved: no client is bound to this conversation."

    async def arefuse(**_: Any) -> str:
        return refuse()

    return StructuredTool.from_function(
        func=refuse,
        coroutine=arefuse,
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
    )


# name -> builder of the tool bound to a run's (client, session); the model sees no id.
_TOOL_BUILDERS: dict[str, Callable[[RollingStore, str, str], BaseTool]] = {
    "remember": lambda store, client, session: remember_tool(store, client),
    "forget_fact": lambda store, client, session: forget_fact_tool(store, client),
    "update_session_state": lambda store, client, session: session_state_tool(
        store, session, client_id=client
    ),
}
_UNBOUND = "unbound"  # a valid id used only to read the tools' schemas; never written to


def _with_memory(system: SystemMessage | None, block: str) -> SystemMessage | None:
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


def _listener(extractor: FactExtractor | BaseChatModel | None, store: RollingStore, given: Any) -> Any:
    """The engine's `on_compaction` listener: the extractor bound to `store`, or the caller's."""
    if extractor is None:
        return given
    if given is not None:
        msg = "pass either extractor= or on_compaction=, not both"
        raise ConfigurationError(msg)
    if not isinstance(extractor, FactExtractor):
        extractor = FactExtractor(extractor)
    return extractor.bind(store)


class RollingMemoryMiddleware(AgentMiddleware[RollingMemoryState, Any, Any]):
    """The same memory as the histories, for agents built with `create_agent`.

    Each run's new messages (the user's input, AI messages, tool calls and results) are
    appended once to the session's transcript in `store`; the model is sent the system
    prompt, then the client's facts, the session summary and the unsummarized tail, as the
    engine cuts them (count or token policy, tool pairs kept together). The agent state is
    left whole, so a LangGraph checkpointer keeps every message too. `tools` holds the
    `remember` tool, bound at each call to the run's client. Put this middleware first in
    `middleware=[...]` so that the others see its view.

    The session is the run context's ``session_id``, else ``configurable["session_id"]``,
    else the ``thread_id``; the client is the context's ``client_id``, else
    ``configurable["client_id"]``, else `client_id` given here.

    Args:
        store: the `RollingStore` shared with the histories.
        summarizer: ``(previous_summary, messages) -> str`` (sync or async), a chat model,
            or a `Summarizer`.
        max_turns, keep_last: the count policy (hysteresis).
        max_tokens, keep_tokens: the token policy (trigger and kept budget).
        hard_cap: unsummarized messages allowed before the view falls back to a window.
        background: compact in a worker thread (or a task in async runs), off the turn.
        client_id: the client of every run that does not name one.
        extractor: a `FactExtractor` (or a chat model to build one) run on the messages of
            each compaction, writing the facts it finds for the session's client.
        memory_tools: the tools offered to the model, each bound at every call to the run's
            client (and session): any of ``"remember"``, ``"forget_fact"``,
            ``"update_session_state"``; ``()`` for none.
        max_fact_tokens: token budget of the facts block.
        token_counter, language, max_words, timeout, on_error: as for
            `RollingSummaryChatMessageHistory`.
        compactor: a ready `Compactor` (overrides the settings above).

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
        max_turns: int | None = 12,
        keep_last: int = 6,
        max_tokens: int | None = None,
        keep_tokens: int | None = None,
        hard_cap: int | None = None,
        background: bool = False,
        client_id: str | None = None,
        extractor: FactExtractor | BaseChatModel | None = None,
        memory_tools: Sequence[str] = ("remember",),
        max_fact_tokens: int = 400,
        token_counter: TokenCounter = count_tokens,
        language: str = "en",
        max_words: int = 120,
        timeout: float | None = 60.0,
        on_error: ErrorCallback | None = None,
        compactor: Compactor | None = None,
        **compactor_options: Any,
    ) -> None:
        super().__init__()
        unknown = sorted(set(memory_tools) - set(_TOOL_BUILDERS))
        if unknown or isinstance(memory_tools, str):
            msg = f"memory_tools may hold {sorted(_TOOL_BUILDERS)}, got {memory_tools!r}"
            raise ConfigurationError(msg)
        if not isinstance(store, RollingStore):
            msg = f"store must be a RollingStore (see open_store), got {type(store).__name__}"
            raise ConfigurationError(msg)
        if compactor is None:
            if summarizer is None:
                msg = "RollingMemoryMiddleware needs summarizer= (a function, a chat model or a Summarizer)"
                raise TypeError(msg)
            policy = FoldPolicy(
                max_turns=max_turns,
                keep_last=keep_last,
                max_tokens=max_tokens,
                keep_tokens=keep_tokens,
                hard_cap=hard_cap,
            )
            compactor = Compactor(
                store,
                as_summarizer(summarizer, language=language, max_words=max_words),
                policy,
                token_counter=token_counter,
                max_words=max_words,
                timeout=timeout,
                on_error=on_error,
                on_compaction=_listener(extractor, store, compactor_options.pop("on_compaction", None)),
                **compactor_options,
            )
        elif extractor is not None:
            msg = "pass extractor= to the Compactor (on_compaction=) when you give compactor="
            raise ConfigurationError(msg)
        elif compactor.store is not store:
            msg = "compactor.store and store= must be the same store"
            raise ConfigurationError(msg)
        if max_fact_tokens < 1:
            msg = f"max_fact_tokens must be positive, got max_fact_tokens={max_fact_tokens!r}"
            raise ConfigurationError(msg)
        self.store = store
        self.compactor = compactor
        self.token_counter = token_counter
        self.background = background
        self.client_id = None if client_id is None else validate_id(client_id, kind="client_id")
        self.max_fact_tokens = max_fact_tokens
        self.tools: list[BaseTool] = [
            _refusing(_TOOL_BUILDERS[name](store, _UNBOUND, _UNBOUND)) for name in dict.fromkeys(memory_tools)
        ]
        self._tool_names = {t.name for t in self.tools}

    # ------------------------------------------------------------------ shared helpers

    def ids(self, runtime: Runtime[Any] | ToolRuntime[Any, Any] | None) -> MemoryIds:
        """The session and client of the current run (see `resolve_ids`)."""
        return _ids_of(runtime, self.client_id)

    def _counts(self, messages: Sequence[BaseMessage]) -> list[int | None]:
        return [self.token_counter([m]) for m in messages]

    def _memory(self, facts: Sequence[Fact], state: Mapping[str, Any]) -> str:
        # The summary is not here: it is the engine's framed message at the head of the view.
        block = memory_block(
            facts, state=state, max_fact_tokens=self.max_fact_tokens, token_counter=self.token_counter
        )
        return block.render(summary=False)

    def _request(self, request: ModelRequest[Any], session: SessionState, memory: str) -> ModelRequest[Any]:
        done = _persisted(request.state)
        # Messages an outer middleware added to the request (not from the stored state) stay.
        extra = [m for m in request.messages if m.id is None or m.id not in done]
        return request.override(
            messages=cast("list[AnyMessage]", [*self.compactor.view(session), *extra]),
            system_message=_with_memory(request.system_message, memory),
        )

    def _bind(self, request: ToolCallRequest) -> ToolCallRequest | None:
        """The request with our tool bound to the run's ids (None: not our tool, or no client)."""
        name = request.tool_call["name"]
        if name not in self._tool_names:
            return None
        ids = self.ids(request.runtime)
        if ids.client_id is None:
            return None  # the shown tool runs and refuses
        return request.override(tool=_TOOL_BUILDERS[name](self.store, ids.client_id, ids.session_id))

    # ------------------------------------------------------------------ sync hooks

    def _persist(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        new = _unpersisted(state)
        if not new:
            return None
        self.store.append(ids.session_id, new, client_id=ids.client_id, token_counts=self._counts(new))
        return _persisted_update(state, new)

    def _maybe_compact(self, ids: MemoryIds) -> None:
        if self.compactor.in_backoff(ids.session_id):
            return
        session = self.compactor.load(ids.session_id)
        if not self.compactor.due(session):
            return
        if self.background:
            self.compactor.schedule(ids.session_id)
        else:
            self.compactor.compact(ids.session_id, session)

    def before_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the new messages (the input, tool results), then compact if due."""
        ids = self.ids(runtime)
        update = self._persist(state, ids)
        self._maybe_compact(ids)
        return update

    def after_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the model's message at once, so a failing tool cannot lose it."""
        return self._persist(state, self.ids(runtime))

    def after_agent(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store what is left (results of `return_direct` tools), then compact if due."""
        ids = self.ids(runtime)
        update = self._persist(state, ids)
        self._maybe_compact(ids)
        return update

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Send the model our view instead of the state's messages."""
        ids = self.ids(request.runtime)
        session = self.compactor.load(ids.session_id)
        facts = self.store.facts(ids.client_id) if ids.client_id else []
        memory = self._memory(facts, self.store.get_state(ids.session_id))
        return handler(self._request(request, session, memory))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run `remember` bound to the run's client; other tools pass through."""
        bound = self._bind(request)
        return handler(bound if bound is not None else request)

    # ------------------------------------------------------------------ async hooks

    async def _apersist(self, state: Mapping[str, Any], ids: MemoryIds) -> dict[str, Any] | None:
        new = _unpersisted(state)
        if not new:
            return None
        await self.store.aappend(ids.session_id, new, client_id=ids.client_id, token_counts=self._counts(new))
        return _persisted_update(state, new)

    async def _amaybe_compact(self, ids: MemoryIds) -> None:
        if self.compactor.in_backoff(ids.session_id):
            return
        session = await self.compactor.aload(ids.session_id)
        if not self.compactor.due(session):
            return
        if self.background:
            self.compactor.aschedule(ids.session_id)
        else:
            await self.compactor.acompact(ids.session_id, session)

    async def abefore_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        ids = self.ids(runtime)
        update = await self._apersist(state, ids)
        await self._amaybe_compact(ids)
        return update

    async def aafter_model(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await self._apersist(state, self.ids(runtime))

    async def aafter_agent(self, state: RollingMemoryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        ids = self.ids(runtime)
        update = await self._apersist(state, ids)
        await self._amaybe_compact(ids)
        return update

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        ids = self.ids(request.runtime)
        session = await self.compactor.aload(ids.session_id)
        facts = await self.store.afacts(ids.client_id) if ids.client_id else []
        memory = self._memory(facts, await self.store.aget_state(ids.session_id))
        return await handler(self._request(request, session, memory))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        bound = self._bind(request)
        return await handler(bound if bound is not None else request)

    # ------------------------------------------------------------------ utilities

    def flush(self, session_id: str, timeout: float | None = None) -> None:
        """Wait for the session's background compaction (thread), if any."""
        self.compactor.flush(validate_id(session_id), timeout)

    async def aflush(self, session_id: str, timeout: float | None = None) -> None:
        """Wait for the session's background compaction (thread or task), if any."""
        await self.compactor.aflush(validate_id(session_id), timeout)

    def transcript(self, session_id: str) -> list[BaseMessage]:
        """Every message of the session, in order (never changed by compaction)."""
        return self.store.transcript(session_id)

    def __repr__(self) -> str:
        return f"RollingMemoryMiddleware(store={type(self.store).__name__}, background={self.background})"
