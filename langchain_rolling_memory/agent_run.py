"""What one agent run's memory is: its ids, the messages it still has to store, its tools.

Owns the plumbing between a LangGraph run and our store: where `session_id` and `client_id`
come from (context, config, thread), which of the state's messages are not stored yet, the
ownership check, where the memory text goes in the request, and the memory tools bound to
the run. The hooks that use them are `agents`; memory logic stays in the engine and stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langchain_rolling_memory.errors import ConfigurationError, OwnershipError
from langchain_rolling_memory.ids import validate_id
from langchain_rolling_memory.records import SessionInfo, StoredMessage
from langchain_rolling_memory.stores.base import RollingStore
from langchain_rolling_memory.tools import forget_fact_tool, remember_tool, session_state_tool

__all__ = [
    "PERSISTED_KEY",
    "TOOL_BUILDERS",
    "UNBOUND",
    "MemoryIds",
    "not_stored",
    "pair_tool_calls",
    "persisted",
    "persisted_update",
    "refuse_other_owner",
    "refusing",
    "resolve_ids",
    "run_ids",
    "unpersisted",
    "unstreamed",
    "with_memory",
]

PERSISTED_KEY = "rolling_memory_persisted"
"""Private state channel: ids of the state's messages already appended to the store."""


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
    from langgraph.config import get_config  # the agents extra; only called inside a run

    try:
        config = get_config()
    except RuntimeError:  # outside a runnable context (a hook called directly)
        return {}
    return config.get("configurable") or {}


def run_ids(runtime: Any, default_client_id: str | None) -> MemoryIds:
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


def persisted(state: Mapping[str, Any]) -> set[str]:
    return set(state.get(PERSISTED_KEY) or ())


def unpersisted(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The state's messages not yet in the store, in order.

    Tracked by message id (LangGraph's `add_messages` gives every message one), so the
    answer is right with a checkpointer (the state holds earlier turns, already stored) and
    without one (each run starts from its input only).
    """
    done = persisted(state)
    return [m for m in state.get("messages", ()) if m.id is None or m.id not in done]


def persisted_update(state: Mapping[str, Any], new: Sequence[BaseMessage]) -> dict[str, Any]:
    # Only ids still in the state are kept, so the channel never outgrows the state.
    done = persisted(state) | {m.id for m in new if m.id is not None}
    return {PERSISTED_KEY: [m.id for m in state.get("messages", ()) if m.id in done]}


def refusing(tool: BaseTool) -> BaseTool:
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
TOOL_BUILDERS: dict[str, Callable[[RollingStore, str, str], BaseTool]] = {
    "remember": lambda store, client, session: remember_tool(store, client),
    "forget_fact": lambda store, client, session: forget_fact_tool(store, client),
    "update_session_state": lambda store, client, session: session_state_tool(
        store, session, client_id=client
    ),
}
UNBOUND = "unbound"  # a valid id used only to read the tools' schemas; never written to


def not_stored(new: Sequence[BaseMessage], recent: Sequence[StoredMessage]) -> list[BaseMessage]:
    """`new` without the messages already at the end of the transcript.

    They are there when a run stopped between our write and its checkpoint, or when a client
    without a checkpointer sends earlier messages again with their ids.
    """
    stored = {row.message.id for row in recent if row.message.id is not None}
    return [m for m in new if m.id is None or m.id not in stored]


def refuse_other_owner(ids: MemoryIds, info: SessionInfo | None) -> None:
    # The store refuses writes to another client's session; reads must be refused too, or
    # a run with a guessed session id would show one client another's conversation.
    if info is not None and info.client_id is not None and info.client_id != ids.client_id:
        msg = (
            f"session {ids.session_id!r} belongs to another client than {ids.client_id!r}; "
            "use a session id of this client"
        )
        raise OwnershipError(msg)


_NO_RESULT = "No result was recorded for this tool call (it was interrupted or its arguments were malformed)."


def _call_ids(message: AIMessage) -> dict[str, str]:
    # Providers send invalid tool calls as calls too (OpenAI requires an answer to each).
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    return {str(c["id"]): str(c.get("name") or "unknown") for c in calls if c.get("id")}


def pair_tool_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with every tool call answered right after its `AIMessage`, and no orphan
    tool result, so that providers accept the request.

    A call left without a result (a run interrupted between the call and its result, or a
    call whose arguments were malformed) gets an error result; a tool result that does not
    follow its call (LangChain's own answer to a malformed call, stored after the next user
    message) is left out. Well-formed lists come back unchanged.
    """
    out: list[BaseMessage] = []
    pending: dict[str, str] = {}

    def close() -> None:
        out.extend(
            ToolMessage(_NO_RESULT, tool_call_id=call_id, name=name, status="error")
            for call_id, name in pending.items()
        )
        pending.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if pending.pop(message.tool_call_id, None) is not None:
                out.append(message)
            continue
        close()
        out.append(message)
        if isinstance(message, AIMessage):
            pending.update(_call_ids(message))
    close()
    return out


@contextmanager
def unstreamed() -> Iterator[None]:
    """Inside: model calls (summarizer, extractor) carry LangGraph's ``nostream`` tag.

    They inherit the hook's run config through a context variable, and with it the stream
    handler of ``stream_mode="messages"``, which would show the summary as if the agent said
    it. Tagged, they are still traced as child runs but not streamed. Tasks started inside
    (background compaction) copy the tagged context.
    """
    from langchain_core.runnables.config import var_child_runnable_config
    from langgraph.constants import TAG_NOSTREAM

    current = var_child_runnable_config.get() or {}
    token = var_child_runnable_config.set({**current, "tags": [*current.get("tags", []), TAG_NOSTREAM]})
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


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
