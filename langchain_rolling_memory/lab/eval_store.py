"""The store-backed strategy of the LoCoMo evaluation: the product's own path, measured on what the model is sent.

Owns loading one conversation into a SQLite store (one client, its sessions with their dates)
and asking each question in a new session of that client through `with_rolling_memory` with a
recording chat model, and measuring the memory message's frame so that a budget can hold the
whole message. It does not score (`eval` does) and calls no real model.
"""

from __future__ import annotations

import itertools
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_rolling_memory.framing import MemoryBlock, memory_message
from langchain_rolling_memory.policy import TokenCounter, count_tokens
from langchain_rolling_memory.recall import RECALL_HEADER
from langchain_rolling_memory.runnable import with_rolling_memory
from langchain_rolling_memory.stores.urls import open_store
from langchain_rolling_memory.summarizers import extractive_summarizer

__all__ = ["RecordingChatModel", "memory_frame_tokens", "recall_tokens_within", "store_recall"]

CLIENT = "locomo"


class _Turn(Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def message(self) -> BaseMessage: ...

    @property
    def created_at(self) -> float | None: ...


class _Conversation(Protocol):
    # The eval's `EvalConversation`, named by shape: importing it would make a cycle.
    @property
    def turns(self) -> Sequence[Any]: ...


class RecordingChatModel(BaseChatModel):
    """Answers "ok" and keeps every request it was sent, as the provider would receive it."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


def _load(store: Any, turns: Sequence[_Turn]) -> None:
    for session_id, group in itertools.groupby(turns, key=lambda t: t.session_id):
        batch = list(group)
        dates = [t.created_at if t.created_at is not None else 0.0 for t in batch]
        store.append(session_id, [t.message for t in batch], client_id=CLIENT, created_at=dates)


def store_recall(budget: int) -> Callable[[_Conversation], Callable[[str], list[BaseMessage]]]:
    """A strategy's `prepare`: the conversation in a SQLite store, each question asked through
    ``with_rolling_memory(recall_tokens=budget)`` in a new session; the responder returns what
    the model was sent, the question itself left out."""

    def prepare(conversation: _Conversation) -> Callable[[str], list[BaseMessage]]:
        folder = tempfile.TemporaryDirectory(prefix="lrm-eval-")
        store = open_store(f"sqlite:///{Path(folder.name) / 'eval.db'}")
        _load(store, conversation.turns)
        model = RecordingChatModel()
        chat = with_rolling_memory(
            model, store=store, summarizer=extractive_summarizer(), recall_tokens=budget
        )
        numbers = itertools.count(1)

        def respond(question: str) -> list[BaseMessage]:
            session = f"question-{next(numbers)}"
            chat.invoke(question, config={"configurable": {"client_id": CLIENT, "session_id": session}})
            # A new session per question, erased after it: no question is recalled by the next.
            store.clear_session(session)
            return model.requests[-1][:-1]

        # The responder owns the store: closing it and its folder goes with the responder.
        weakref.finalize(respond, _close, store, folder)
        return respond

    return prepare


def memory_frame_tokens(token_counter: TokenCounter = count_tokens) -> int:
    """The tokens the memory message adds around a recall block of a client with no facts: its
    frame line, role and envelope, measured with the library's own rendering and counter.

    The block is charged to `recall_tokens` as text in a message (`recall.recall_block`); the
    memory message is the frame plus that text. A counter that rounds up per message can make
    the difference vary by one with the block's length: the largest over a few lengths is kept.
    """
    envelope = token_counter([HumanMessage("")])
    frames = []
    for pad in range(8):
        block = f'{RECALL_HEADER}\n- "{"x" * pad}"'
        message = memory_message(MemoryBlock(recall=block).render(summary=False))
        assert message is not None  # a non-empty block always renders
        charged = max(1, token_counter([HumanMessage(block)]) - envelope)
        frames.append(token_counter([message]) - charged)
    return max(frames)


def recall_tokens_within(total: int, token_counter: TokenCounter = count_tokens) -> int:
    """The largest `recall_tokens` whose whole memory message (frame included) fits `total` tokens."""
    return total - memory_frame_tokens(token_counter)


def _close(store: Any, folder: tempfile.TemporaryDirectory[str]) -> None:
    store.close()
    folder.cleanup()
