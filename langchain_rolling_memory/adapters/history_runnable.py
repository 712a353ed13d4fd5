"""`RollingMemoryRunnable`: a chain called with a session's history, on langchain-core's `Runnable` alone.

Owns one turn's plumbing, in the input and output layouts of `RunnableWithMessageHistory` (which
langchain-core 1.x deprecates; this replaces it for `with_rolling_memory`): which messages of the
input are the user's, where the history's view goes in the chain's input, which messages of the
output are the reply, and storing both once the chain has answered, streamed or not. A turn is one
run of its own around the chain's run: the memory's own runs (recall, summaries, extraction) are
its children. It does not decide what the memory adds to the input (`TurnMemory`, see
`runnable.py`) nor what a history shows (the histories).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Protocol, cast

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    message_chunk_to_message,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.utils import ConfigurableFieldSpec, Input, Output, get_unique_config_specs
from langchain_core.utils.pydantic import create_model_v2
from pydantic import BaseModel

import langchain_rolling_memory.engine.shutdown as shutdown
from langchain_rolling_memory.adapters.agent_run import MemoryIds, resolve_ids
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import MemoryRead
from langchain_rolling_memory.engine.shutdown import Drained
from langchain_rolling_memory.errors import ConfigurationError, InvalidArgumentError
from langchain_rolling_memory.runtime.background import SessionJobs

HistoryFactory = Callable[[str, str], BaseChatMessageHistory]
"""``get_session_history(client_id, session_id)``, ``""`` naming no client (`session_history_factory`)."""


def config_ids(configurable: Mapping[str, Any], default_client_id: str | None) -> MemoryIds:
    """The ids of one call, as the agent middleware finds them (`resolve_ids`); an id the
    config gives is checked as it is, so an empty or malformed one is refused, not ignored."""
    for key in ("client_id", "user_id", "session_id"):
        if configurable.get(key) is not None:
            validate_id(configurable[key], kind=key)
    return resolve_ids(None, configurable, default_client_id=default_client_id)


class TurnMemory(Protocol):
    """What the memory adds to the chain's input once the history is in it (facts, state,
    recall); `known` is what the history read with its view, if it read it (`memory_read`)."""

    def inject(self, value: Any, ids: MemoryIds, known: MemoryRead | None = None) -> Any: ...

    async def ainject(self, value: Any, ids: MemoryIds, known: MemoryRead | None = None) -> Any: ...

    def stored(self, ids: MemoryIds) -> None:
        """After the turn's append (background work only: it never delays the turn)."""


def _known(history: BaseChatMessageHistory) -> MemoryRead | None:
    """What the history read with its view besides it (state, facts), if it read them."""
    known = getattr(history, "memory_read", None)
    return known if isinstance(known, MemoryRead) else None


def _key_of(value: Mapping[str, Any], key: str | None, default: str, option: str) -> str:
    """The key of `value` holding messages: `key`, else its only key, else `default`."""
    chosen = key or (next(iter(value)) if len(value) == 1 else default)
    if chosen not in value:
        msg = f"with_rolling_memory: no {chosen!r} key to read messages from, got keys {sorted(value)}; pass {option}="
        raise InvalidArgumentError(msg)
    return chosen


def _messages(value: Any, *, what: str, make: Callable[[str], BaseMessage], hint: str) -> list[BaseMessage]:
    if isinstance(value, str):
        return [make(value)]
    if isinstance(value, BaseMessage):
        return [value]
    if isinstance(value, (list, tuple)):
        if len(value) == 1 and isinstance(value[0], list):  # a chat model's batched form
            value = value[0]
        if all(isinstance(m, BaseMessage) for m in value):
            return list(value)
    # A ValueError, as `RunnableWithMessageHistory` raised: code that caught it still does.
    msg = f"with_rolling_memory: {what} must be a str, a message or a list of messages, got {type(value).__name__}: {value!r:.80}; {hint}"
    raise InvalidArgumentError(msg)


def _whole(message: BaseMessage) -> BaseMessage:
    """A chunk as the message it adds up to (tool call chunks parsed): what a store keeps."""
    return message_chunk_to_message(message) if isinstance(message, BaseMessageChunk) else message


def _sum(chunks: Sequence[Any]) -> Any:
    """What streamed chunks add up to (None when there were none)."""
    return reduce(_add, chunks) if chunks else None


def _add(total: Any, chunk: Any) -> Any:
    if isinstance(total, dict) and isinstance(chunk, dict):
        return {**total, **{k: _add(total[k], v) if k in total else v for k, v in chunk.items()}}
    try:
        return total + chunk
    except TypeError:  # chunks that do not add up (whole values): the latest is the value
        return chunk


@dataclass
class _Turn:
    """One call: whose session, its history, the user's messages, the chunks shown so far."""

    ids: MemoryIds
    history: BaseChatMessageHistory
    user: list[BaseMessage]
    shown: list[Any] = field(default_factory=list)
    stored: bool = False


class RollingMemoryRunnable(Runnable[Input, Output]):
    """What `with_rolling_memory` returns: the wrapped chain with a session's history and memory.

    Called like `RunnableWithMessageHistory` (a message list, or a dict with the keys given), it
    returns what the chain returns, typed as the chain's output. Its ids come from the call's
    ``configurable`` (inside a LangGraph node, a call without one uses the run's); ``drain`` and
    ``adrain`` wait for the background compactions of its store, at shutdown.
    """

    def __init__(
        self,
        runnable: Runnable[Input, Output],
        get_session_history: HistoryFactory,
        *,
        input_messages_key: str | None = None,
        history_messages_key: str | None = None,
        output_messages_key: str | None = None,
        history_factory_config: Sequence[ConfigurableFieldSpec] = (),
        client_id: str | None = None,
        memory: TurnMemory | None = None,
        jobs: SessionJobs | None = None,
    ) -> None:
        self.bound = runnable
        self.get_session_history = get_session_history
        self.input_messages_key = input_messages_key
        self.history_messages_key = history_messages_key
        self.output_messages_key = output_messages_key
        self.history_factory_config = list(history_factory_config)
        self.client_id = client_id
        self.memory = memory
        self._memory_jobs = jobs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bound={self.bound!r})"

    # Types and schemas --------------------------------------------------

    @property
    def InputType(self) -> type[Any]:
        return dict if self.input_messages_key else list

    @property
    def OutputType(self) -> type[Output]:
        return self.bound.OutputType

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        name, module = "RollingMemoryInput", type(self).__module__
        if self.input_messages_key is None:
            return create_model_v2(name, module_name=module, root=(Sequence[BaseMessage], ...))
        held: Any = (
            str | BaseMessage | Sequence[BaseMessage] if self.history_messages_key else Sequence[BaseMessage]
        )
        fields = {self.input_messages_key: (held, ...)}
        return create_model_v2(name, module_name=module, field_definitions=fields)

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        # A chain of pydantic v1 models has a v1 schema: passed on as the chain gives it.
        return cast("type[BaseModel]", self.bound.get_output_schema(config))

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        return get_unique_config_specs([*self.bound.config_specs, *self.history_factory_config])

    # One turn -----------------------------------------------------------

    def _begin(self, value: Any, config: RunnableConfig) -> _Turn:
        """Ids, history and the user's messages: every check before anything is read or sent."""
        ids = config_ids(config.get("configurable") or {}, self.client_id)
        user = self._user_messages(value)
        return _Turn(ids, self.get_session_history(ids.client_id or "", ids.session_id), user)

    def _user_messages(self, value: Any) -> list[BaseMessage]:
        keyed = self.input_messages_key or self.history_messages_key
        if keyed and not isinstance(value, dict):
            msg = (
                f"with_rolling_memory: built with input_messages_key={self.input_messages_key!r} and "
                f"history_messages_key={self.history_messages_key!r}, its input is a dict, got "
                f"{type(value).__name__}: {value!r:.80}; pass {{{keyed!r}: ...}}"
            )
            raise InvalidArgumentError(msg)
        if isinstance(value, dict):
            value = value[_key_of(value, self.input_messages_key, "input", "input_messages_key")]
        return _messages(value, what="the input", make=HumanMessage, hint="or set input_messages_key=")

    def _reply_messages(self, output: Any) -> list[BaseMessage]:
        if isinstance(output, dict):
            output = output[_key_of(output, self.output_messages_key, "output", "output_messages_key")]
        messages = _messages(
            output,
            what="the chain's output",
            make=AIMessage,
            hint="set output_messages_key= to the key holding them",
        )
        return [_whole(m) for m in messages]

    def _chain_input(self, value: Any, turn: _Turn, view: list[BaseMessage]) -> Any:
        """The chain's input: the view under the history key, or before the user's messages."""
        if self.history_messages_key is not None:
            return {**value, self.history_messages_key: view}
        if self.input_messages_key is not None:
            return {**value, self.input_messages_key: view + turn.user}
        return view + turn.user

    def _prepare(self, value: Any, turn: _Turn) -> Any:
        chain_input = self._chain_input(value, turn, turn.history.messages)
        if self.memory is None:
            return chain_input
        return self.memory.inject(chain_input, turn.ids, _known(turn.history))

    async def _aprepare(self, value: Any, turn: _Turn) -> Any:
        chain_input = self._chain_input(value, turn, await turn.history.aget_messages())
        if self.memory is None:
            return chain_input
        return await self.memory.ainject(chain_input, turn.ids, _known(turn.history))

    # The user's messages and the reply are stored in one append, first thing after the answer:
    # whatever fails afterwards (a compaction, a summarizer), both are in the transcript.

    def _store(self, turn: _Turn, output: Any) -> None:
        turn.stored = True
        turn.history.add_messages(turn.user + self._reply_messages(output))
        if self.memory is not None:
            self.memory.stored(turn.ids)

    async def _astore(self, turn: _Turn, output: Any) -> None:
        turn.stored = True
        await turn.history.aadd_messages(turn.user + self._reply_messages(output))
        if self.memory is not None:
            self.memory.stored(turn.ids)

    def invoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Output:
        def turn(value: Input, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> Output:
            begun = self._begin(value, config)
            output = self.bound.invoke(self._prepare(value, begun), config, **kwargs)
            self._store(begun, output)
            return output

        return self._call_with_config(turn, input, config)

    async def ainvoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Output:
        async def turn(
            value: Input, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
        ) -> Output:
            begun = self._begin(value, config)
            output = await self.bound.ainvoke(await self._aprepare(value, begun), config, **kwargs)
            await self._astore(begun, output)
            return output

        return await self._acall_with_config(turn, input, config)

    # Streams ------------------------------------------------------------
    # The chain's chunks reach the reader as they come; the reply stored is their sum. A reader
    # that stops early has been shown part of a reply: the question and that part are stored
    # (a chain that fails stores nothing, as `invoke`).

    def stream(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> Iterator[Output]:
        turns: list[_Turn] = []

        def streamed(
            inputs: Iterator[Input], run_manager: CallbackManagerForChainRun, config: RunnableConfig
        ) -> Iterator[Output]:
            value = next(inputs)
            turns.append(turn := self._begin(value, config))
            for chunk in self.bound.stream(self._prepare(value, turn), config, **kwargs):
                turn.shown.append(chunk)
                yield chunk
            self._store(turn, _sum(turn.shown))

        try:
            yield from self._transform_stream_with_config(iter([input]), streamed, config)
        except GeneratorExit:  # the reader stopped
            if turns and turns[0].shown and not turns[0].stored:
                self._store(turns[0], _sum(turns[0].shown))
            raise

    async def astream(
        self, input: Input, config: RunnableConfig | None = None, **kwargs: Any | None
    ) -> AsyncIterator[Output]:
        turns: list[_Turn] = []

        async def streamed(
            inputs: AsyncIterator[Input], run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
        ) -> AsyncIterator[Output]:
            value = await anext(inputs)
            turns.append(turn := self._begin(value, config))
            async for chunk in self.bound.astream(await self._aprepare(value, turn), config, **kwargs):
                turn.shown.append(chunk)
                yield chunk
            await self._astore(turn, _sum(turn.shown))

        async def one() -> AsyncIterator[Input]:
            yield input

        chunks = self._atransform_stream_with_config(one(), streamed, config)
        try:
            async for chunk in chunks:
                yield chunk
        except GeneratorExit:  # the reader stopped: end the chain's run, then store what it saw
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()
            if turns and turns[0].shown and not turns[0].stored:
                await self._astore(turns[0], _sum(turns[0].shown))
            raise

    # Shutdown -----------------------------------------------------------

    def drain(self, timeout: float | None = None) -> Drained:
        """Wait for the background compactions of this chain's store (and the fact extractions
        they run), up to `timeout` seconds (None: no limit); see `Compactor.drain`. Call it
        when shutting down, before closing the store."""
        return shutdown.drain(self._jobs(), timeout)

    async def adrain(self, timeout: float | None = None) -> Drained:
        """Async twin of `drain`: awaits without blocking the event loop."""
        return await shutdown.adrain(self._jobs(), timeout)

    def _jobs(self) -> SessionJobs:
        if self._memory_jobs is None:
            msg = "this RollingMemoryRunnable was built without jobs= (with_rolling_memory passes its store's): it has nothing to drain"
            raise ConfigurationError(msg)
        return self._memory_jobs
