"""`with_rolling_memory`: any chain gets a rolling-summary history plus the client's facts and state.

Owns the wiring only: `RollingMemoryRunnable` (`history_runnable`) does the history plumbing, the
histories do the memory, `turn` reads and assembles the facts, state and recall and `framing`
renders them. This module
decides where the memory goes in the chain's input (a leading system message and/or prompt
variables).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder, SystemMessagePromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableSequence
from langchain_core.runnables.utils import ConfigurableFieldSpec, Input, Output

from langchain_rolling_memory.adapters.agent_run import MemoryIds
from langchain_rolling_memory.adapters.chat_histories import RollingSummaryChatMessageHistory
from langchain_rolling_memory.adapters.history_runnable import RollingMemoryRunnable
from langchain_rolling_memory.core.cuts import TokenCounter
from langchain_rolling_memory.core.framing import (
    SUMMARY_MESSAGE_ID,
    MemoryBlock,
    insert_memory_message,
    memory_message,
    summary_text,
)
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import MemoryRead
from langchain_rolling_memory.core.settings import HistoryOptions, MemoryOptions, MemorySettings
from langchain_rolling_memory.engine.fact_extractor import FactExtractor, compaction_listener
from langchain_rolling_memory.engine.recaller import Recaller, latest_user_text
from langchain_rolling_memory.engine.turn import TurnStep
from langchain_rolling_memory.runtime.background import jobs_of
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.urls import rolling_store
from langchain_rolling_memory.summarizers.base import SummarizerLike
from langchain_rolling_memory.summarizers.coerce import as_summarizer

MEMORY_VARIABLES = ("facts", "state", "summary", "memory", "recall")
"""Prompt variables added to dict inputs (see `MemoryBlock.variables`)."""


def _shared_spec(key: str, name: str, description: str, default: str | None) -> ConfigurableFieldSpec:
    """A string field of the run's ``configurable`` shared by every runnable of the run."""
    return ConfigurableFieldSpec(
        id=key, annotation=str, name=name, description=description, default=default, is_shared=True
    )


def client_session_config_specs() -> list[ConfigurableFieldSpec]:
    """`history_factory_config` for a ``get_session_history(client_id, session_id)`` factory."""
    return [
        _shared_spec("client_id", "Client ID", "The person whose facts and sessions are used.", ""),
        _shared_spec("session_id", "Session ID", "One conversation of that client.", ""),
    ]


_THREAD_SPEC = _shared_spec(
    "thread_id", "Thread ID", "The session, when session_id is not given (as for the agent middleware).", None
)

_USER_SPEC = _shared_spec(
    "user_id",
    "User ID",
    "The client, as LangGraph and mem0 name it (refused if a different client_id is given).",
    None,
)


_FACTORY_OWN = ("store", "summarizer", "extractor", "settings")
_CHAIN_OWN = (
    *_FACTORY_OWN,
    "input_messages_key",
    "history_messages_key",
    "output_messages_key",
    "memory_message",
    "recall",
    "client_id",
)
"""Their own parameters, beside the settings (suggested for a misspelt keyword)."""


def session_history_factory(
    store: RollingStore,
    summarizer: SummarizerLike,
    *,
    extractor: FactExtractor | BaseChatModel | None = None,
    settings: MemorySettings | None = None,
    **options: Unpack[HistoryOptions],
) -> Callable[[str, str], RollingSummaryChatMessageHistory]:
    """A ``get_session_history(client_id, session_id)`` for `RunnableWithMessageHistory`.

    Each call returns a `RollingSummaryChatMessageHistory` of that session, owned by that
    client (a session of another client is refused). An empty `client_id` (the config
    spec's default) names no client: such a history uses anonymous sessions only, and an
    owned session raises `OwnershipError` before anything is read. Pass it with
    ``history_factory_config=client_session_config_specs()``.

    Args:
        store: where transcripts, summaries and facts live.
        summarizer: a function, chat model, model string, Runnable or `Summarizer` (see `as_summarizer`).
        extractor: a `FactExtractor` (or a chat model to build one) run after each
            compaction on the folded messages, writing the client's facts.
        settings, **options: the histories' `MemorySettings` (as for
            `RollingSummaryChatMessageHistory`).

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> get_history = session_history_factory(open_store("memory://"), lambda p, m: "s", max_turns=4, keep_last=2)
        >>> get_history("client-1", "session-1").client_id
        'client-1'
    """
    owner = "session_history_factory"
    chosen = MemorySettings.resolve(
        settings, options, owner=owner, accepts=HistoryOptions, others=_FACTORY_OWN
    )
    store = rolling_store(store, owner=owner)
    listener = compaction_listener(extractor, store, chosen.on_compaction, chosen.language)
    if listener is not chosen.on_compaction:
        chosen = dataclasses.replace(chosen, on_compaction=listener)
    # Built once (a model string is a client), not at every turn's history.
    summarizer = as_summarizer(summarizer, language=chosen.language, max_words=chosen.max_words)
    # Building a history does no I/O: what the settings cannot check alone (a fraction of the
    # summarizer model's context window) fails here, once, not at the first turn.
    RollingSummaryChatMessageHistory("settings-check", store=store, summarizer=summarizer, settings=chosen)

    def get_session_history(client_id: str, session_id: str) -> RollingSummaryChatMessageHistory:
        return RollingSummaryChatMessageHistory(
            session_id, client_id=client_id or None, store=store, summarizer=summarizer, settings=chosen
        )

    return get_session_history


def _leading_prompt(runnable: Runnable[Any, Any]) -> ChatPromptTemplate | None:
    """The chat prompt the chain starts with, if it starts with one."""
    first = runnable.first if isinstance(runnable, RunnableSequence) else runnable
    return first if isinstance(first, ChatPromptTemplate) else None


def _check_placement(runnable: Runnable[Any, Any], messages_key: str | None) -> None:
    """Warn when the memory message would follow a non-system message of the prompt.

    langchain-google-genai drops a `SystemMessage` that is not first unless the request
    starts with one: behind a leading human or AI message the facts would silently vanish.
    """
    prompt = _leading_prompt(runnable)
    if prompt is None or messages_key is None:
        return
    for part in prompt.messages:
        if isinstance(part, MessagesPlaceholder) and part.variable_name == messages_key:
            return
        if not isinstance(part, (SystemMessage, SystemMessagePromptTemplate)):
            warnings.warn(
                f"with_rolling_memory: the prompt has a non-system message before the "
                f"{{{messages_key}}} placeholder, so the memory system message would not lead the "
                "request (Gemini drops such a message). Put {memory} or {facts} in the prompt's "
                "system message, or move the placeholder first.",
                UserWarning,
                stacklevel=3,
            )
            return


def _prompt_variables(runnable: Runnable[Any, Any]) -> set[str]:
    """Which of our variables the chain's input (usually its prompt) asks for."""
    try:
        properties = runnable.get_input_jsonschema().get("properties", {})
    except Exception:  # an input schema is optional in LangChain; assume none asked for
        return set()
    return set(MEMORY_VARIABLES) & set(properties)


class _Injector:
    """Puts one turn's memory into the chain input that `RollingMemoryRunnable` built (a `TurnMemory`)."""

    def __init__(
        self,
        store: RollingStore,
        *,
        messages_key: str | None,
        add_message: bool,
        wanted: set[str],
        max_fact_tokens: int | None,
        token_counter: TokenCounter,
        recaller: Recaller | None = None,
        input_key: str | None = None,
        language: str = "en",
    ) -> None:
        self.language = language
        self.recaller = recaller
        self.input_key = input_key
        self.store = store
        self.messages_key = messages_key
        self.add_message = add_message
        self.wanted = wanted
        self.max_fact_tokens = max_fact_tokens
        self.token_counter = token_counter

    def _messages(self, value: Any) -> list[BaseMessage]:
        if isinstance(value, dict):
            return list(value.get(self.messages_key, [])) if self.messages_key else []
        return list(value)

    @staticmethod
    def _summary(messages: list[BaseMessage]) -> str:
        for message in messages:
            text = summary_text(message)
            if text is not None:
                return text
        return ""

    def _apply(self, value: Any, block: MemoryBlock) -> Any:
        messages = self._messages(value)
        if self.wanted & {"summary", "memory"}:
            # The prompt places the summary itself: do not send it twice.
            messages = [m for m in messages if m.id != SUMMARY_MESSAGE_ID]
        if self.add_message or not isinstance(value, dict):
            text = block.render(
                state="state" not in self.wanted, summary=False, recall="recall" not in self.wanted
            )
            messages = insert_memory_message(messages, memory_message(text))
        if not isinstance(value, dict):
            return messages
        out = {
            **block.variables(),
            **({"recall": block.recall} if self.recaller or "recall" in self.wanted else {}),
            **value,
        }
        if self.messages_key:
            out[self.messages_key] = messages
        return out

    def _step(self) -> TurnStep:
        return TurnStep(self.store, self.max_fact_tokens, self.token_counter, self.language, self.recaller)

    def _turn(self, value: Any) -> dict[str, Any]:
        """What the turn step reads for this input: the latest user words, the view, its summary."""
        view = self._messages(value)
        return {
            "query": latest_user_text(value, self.input_key),
            "view": view,
            "summary": self._summary(view),
        }

    def inject(self, value: Any, ids: MemoryIds, known: MemoryRead | None = None) -> Any:
        block = self._step().read(ids.client_id, ids.session_id, known=known, **self._turn(value))
        return self._apply(value, block)

    async def ainject(self, value: Any, ids: MemoryIds, known: MemoryRead | None = None) -> Any:
        block = await self._step().aread(ids.client_id, ids.session_id, known=known, **self._turn(value))
        return self._apply(value, block)

    def stored(self, ids: MemoryIds) -> None:
        if self.recaller is not None:
            self.recaller.stored(ids.session_id)


def with_rolling_memory(
    runnable: Runnable[Input, Output],
    *,
    store: RollingStore,
    summarizer: SummarizerLike,
    input_messages_key: str | None = None,
    history_messages_key: str | None = None,
    output_messages_key: str | None = None,
    extractor: FactExtractor | BaseChatModel | None = None,
    memory_message: bool | None = None,
    recall: BaseRetriever | None = None,
    client_id: str | None = None,
    settings: MemorySettings | None = None,
    **options: Unpack[MemoryOptions],
) -> RollingMemoryRunnable[Input, Output]:
    """Wrap a chain like `RunnableWithMessageHistory`, adding the client's facts and state.

    Call it with ``config={"configurable": {"client_id": ..., "session_id": ...}}``; as for the
    agent middleware, ``thread_id`` names the session when ``session_id`` is not given,
    ``user_id`` the client as ``client_id`` does (both, different: `ConfigurationError`), and
    `client_id` given here is the client of every call that names none (without either, the
    session is anonymous: no facts, and a session owned by a client is refused). Inside a
    LangGraph node (any run), a call without a ``configurable`` uses the run's. Each
    turn the history gives the summary (framed as a record) and the recent messages, and
    the client's facts and the session's state are put where the model sees them:

    * message-list input: one `SystemMessage` first (after the chain's own leading system
      messages, if the list has some), so it reaches OpenAI and Gemini intact;
    * dict input: the same message at the front of the history (or input) messages, and the
      prompt variables ``facts``, ``state``, ``summary`` and ``memory`` (the whole framed
      text). If the chain's prompt uses ``{facts}`` or ``{memory}``, the message is left out
      (the prompt places the facts); if it uses ``{summary}`` or ``{memory}``, the history's
      summary message is left out (it would be sent twice).

    Args:
        runnable: the chain; what it takes and returns is as for `RunnableWithMessageHistory`.
        store: where transcripts, summaries, facts and state live.
        summarizer: a function, chat model, model string, Runnable or `Summarizer`.
        input_messages_key, history_messages_key, output_messages_key: as for
            `RunnableWithMessageHistory`.
        extractor: a `FactExtractor` (or a chat model) run after each compaction.
        memory_message: force the memory system message on (True) or off (False); None
            decides from the prompt's variables as above.
        recall: a LangChain `BaseRetriever` searched instead of the store (its documents
            quoted the same way); without ``recall_tokens`` it gets `DEFAULT_RECALL_TOKENS`.
        client_id: the client of every call whose config names none.
        settings: a `MemorySettings` (default: the defaults), e.g. shared with the agent
            middleware.
        **options: any `MemorySettings` field, replacing that of `settings`: the histories'
            (``max_turns``, ``keep_last``, ``background``...; a misspelt name is refused
            with the closest one), ``language`` (also the facts, state and recall blocks put
            in the chain's input), ``token_counter`` (also the facts budget),
            ``max_fact_tokens`` (the facts block's budget: keyed and pinned facts first, then
            the most relevant to the user's input, then the newest) and ``recall_tokens``
            (budget of the recalled excerpts, `recaller.Recaller`: each turn the client's
            sessions and facts are searched with the latest user input and the best excerpts
            the view does not hold are added to the memory, and to the ``recall`` variable of
            a dict input; None or 0, the default: off, nothing more is read) and ``embeddings``
            (any LangChain `Embeddings`: the recall also searches by the question's vector,
            fused with the lexical search; messages are embedded in the background after
            each turn's append, the question once per turn; `engine.dense`).

    Returns:
        a `RollingMemoryRunnable`, a `Runnable` typed as `runnable` (``invoke`` returns its
        output type; ``stream`` streams its chunks and stores the whole reply), whose
        ``drain(timeout=...)`` and ``await adrain(timeout=...)`` wait for the store's background
        compactions, to be called at shutdown before the store is closed. It is not a
        `RunnableWithMessageHistory` (deprecated in langchain-core 1.x): built on `Runnable`
        alone, with the same input and output layouts and ``configurable`` fields.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> _ = store.add_fact("client-1", "Delivers on Saturdays")
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Noted.")]))
        >>> chat = with_rolling_memory(model, store=store, summarizer=lambda p, m: "s")
        >>> chat.invoke([HumanMessage("Hi")],
        ...             config={"configurable": {"client_id": "client-1", "session_id": "s1"}}).content
        'Noted.'
    """
    chosen = MemorySettings.resolve(settings, options, owner="with_rolling_memory", others=_CHAIN_OWN)
    store = rolling_store(store, owner="with_rolling_memory")
    default_client = None if client_id is None else validate_id(client_id, kind="client_id")
    # The memory's language: the histories' (summary prompt, frame) and the injected blocks'.
    language, token_counter = chosen.language, chosen.token_counter
    factory = session_history_factory(store, summarizer, extractor=extractor, settings=chosen)

    def by_client(client: str, session: str) -> RollingSummaryChatMessageHistory:
        # The view's read brings the state and facts the memory shows (one read a turn).
        history = factory(client, session)
        history.reads_memory = True
        return history

    wanted = _prompt_variables(runnable)
    add_message = memory_message if memory_message is not None else not (wanted & {"facts", "memory"})
    if add_message:
        _check_placement(runnable, history_messages_key or input_messages_key)
    injector = _Injector(
        store,
        messages_key=history_messages_key or input_messages_key,
        add_message=add_message,
        wanted=wanted,
        max_fact_tokens=chosen.max_fact_tokens,
        token_counter=token_counter,
        recaller=Recaller.build(
            store,
            chosen.recall_tokens,
            recall,
            token_counter=token_counter,
            language=language,
            embeddings=chosen.embeddings,
        ),
        input_key=input_messages_key,
        language=language,
    )
    return RollingMemoryRunnable(
        runnable,
        by_client,
        input_messages_key=input_messages_key,
        history_messages_key=history_messages_key,
        output_messages_key=output_messages_key,
        history_factory_config=[*client_session_config_specs(), _THREAD_SPEC, _USER_SPEC],
        client_id=default_client,
        memory=injector,
        jobs=jobs_of(store),
    )
