"""Dense recall: embed the stored messages off the turn path, and search them by a question's vector.

Owns what `embeddings=` adds to recall: the model's name under which the store keeps its
vectors (`model_name`), the catch-up that lists a scope's messages without a vector, embeds
them in batches and stores them (`DenseRecall.index`, `aindex`; the public
`index_vectors`), its background run after each append (`schedule`: a worker thread, one job
per session in flight, shared with the store's compactions so ``drain`` waits for it), and the
turn's one embedding call, the question's (`search`, `asearch`). Fusing this ranking with the
lexical one is the recaller's (`recaller`, `core.dense.fuse_confident`); keeping and scoring vectors,
the stores'.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.embeddings import Embeddings

from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.serde import loads_message
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.background import jobs_of
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.contract import Unembedded, VectorWrite

logger = logging.getLogger("langchain_rolling_memory")

EMBED_CHARS = 4000
"""The characters of a message that are embedded (its start): about 1,000 tokens, within every
common embedding model's input limit; a longer message (a tool's output) is found by its start."""

BATCH = 64
"""Messages embedded per call of the model (`embed_documents`) and stored per write."""

_NAME_ATTRIBUTES = ("model", "model_name", "deployment", "size")


def model_name(embeddings: Embeddings) -> str:
    """The name a store keeps the vectors of `embeddings` under: its class and the first of
    its ``model``, ``model_name``, ``deployment`` or ``size`` attributes that is set, so that
    two models never mix their vectors (and switching models re-embeds under the new name).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> model_name(DeterministicFakeEmbedding(size=8))
        'DeterministicFakeEmbedding:8'
    """
    name = type(embeddings).__name__
    for attribute in _NAME_ATTRIBUTES:
        value = getattr(embeddings, attribute, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return f"{name}:{value}"[:200]
    return name[:200]


def embedded_text(payload: str) -> str:
    """What is embedded of a stored message: the start of its text, after its speaker's name
    when it has one (``"Melanie: I took up pottery"``), as the lexical index holds it; '' for
    a message with no text.

    The speaker is part of what a message means to a question about a person ("what does
    Melanie do to relax?"). Chosen on the LoCoMo dev split (the held-out one measured after):
    see `docs/recall.md`.
    """
    message = loads_message(payload)
    text = str(message.text).strip()
    if not text:
        return ""
    name = getattr(message, "name", None)
    said = f"{name}: {text}" if isinstance(name, str) and name.strip() else text
    return said[:EMBED_CHARS].strip()


def _writes(
    pending: Sequence[Unembedded], texts: Sequence[str], vectors: Sequence[Sequence[float]]
) -> list[VectorWrite]:
    found = iter(vectors)
    return [
        VectorWrite(item.session_id, item.seq, item.generation, pack(next(found)) if text else b"")
        for item, text in zip(pending, texts, strict=True)
    ]


@dataclass(frozen=True)
class DenseRecall:
    """A store's messages as vectors of one embedding model: indexed off the turn path, searched
    with the question's vector.

    Attributes:
        store: keeps the vectors beside the messages (and erases them with them).
        embeddings: any LangChain `Embeddings`.
        model: the name the vectors are kept under (`model_name` by default).
        batch: messages per embedding call and per store write.
        exit_timeout: seconds a background job in flight may delay the process's exit.
    """

    store: RollingStore
    embeddings: Embeddings
    model: str = ""
    batch: int = BATCH
    exit_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.embeddings, Embeddings):
            msg = (
                f"embeddings must be a LangChain Embeddings (OpenAIEmbeddings(), "
                f"DeterministicFakeEmbedding(size=...)...), got {type(self.embeddings).__name__}"
            )
            raise ConfigurationError(msg)
        if not self.model:
            object.__setattr__(self, "model", model_name(self.embeddings))

    # ------------------------------------------------------------------ indexing

    def index(self, *, client_id: str | None = None, session_id: str | None = None) -> int:
        """Embed and store every message of the scope without a vector yet (a session, a
        client's sessions, or with neither every session); return how many were stored."""
        stored = 0
        while pending := self.store.unembedded(
            self.model, client_id=client_id, session_id=session_id, limit=self.batch
        ):
            texts = [embedded_text(item.payload) for item in pending]
            wanted = [text for text in texts if text]
            vectors = self.embeddings.embed_documents(wanted) if wanted else []
            done = self.store.put_vectors(self.model, _writes(pending, texts, vectors))
            if not done:  # every one erased meanwhile; the next listing would give others
                break
            stored += done
        return stored

    async def aindex(self, *, client_id: str | None = None, session_id: str | None = None) -> int:
        """Async twin of `index` (the model's `aembed_documents`)."""
        stored = 0
        while pending := await self.store.aunembedded(
            self.model, client_id=client_id, session_id=session_id, limit=self.batch
        ):
            texts = [embedded_text(item.payload) for item in pending]
            wanted = [text for text in texts if text]
            vectors = await self.embeddings.aembed_documents(wanted) if wanted else []
            done = await self.store.aput_vectors(self.model, _writes(pending, texts, vectors))
            if not done:
                break
            stored += done
        return stored

    def schedule(self, session_id: str) -> bool:
        """Index the session's new messages on a worker thread, after an append: never on the
        turn path. False if a job of the session was already in flight (it lists the session
        until nothing is left, so it takes these too, or the next append's job does)."""
        return jobs_of(self.store).submit(
            f"vectors {session_id}", lambda: self._background(session_id), exit_timeout=self.exit_timeout
        )

    def _background(self, session_id: str) -> None:
        if self.store.closed:
            return
        try:
            self.index(session_id=session_id)
        except Exception as exc:  # a failing model must not fail the app: the next append retries
            if self.store.closed:  # closed under the job (shutdown without drain): nothing to say
                return
            logger.warning(
                "rolling memory: embedding session %s with %s failed (%s: %s); its messages are "
                "embedded after its next append, or by index_vectors()",
                session_id,
                self.model,
                type(exc).__name__,
                exc,
            )

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, *, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchHit]:
        """The scope's messages closest to `query`: the one embedding call of a turn."""
        vector = self.embeddings.embed_query(query)
        return self.store.vector_search(
            vector, model=self.model, client_id=client_id, session_id=session_id, limit=limit
        )

    async def asearch(
        self, query: str, *, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchHit]:
        vector = await self.embeddings.aembed_query(query)
        return await self.store.avector_search(
            vector, model=self.model, client_id=client_id, session_id=session_id, limit=limit
        )


def index_vectors(
    store: RollingStore,
    embeddings: Embeddings,
    *,
    client_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Embed and store the messages that have no vector of `embeddings` yet: those written
    before ``embeddings=`` was set, or whose background job failed. A session, a client's
    sessions, or (with neither) every session; returns how many vectors were stored.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> _ = store.append("s1", [HumanMessage("We adopted a cat")], client_id="ana")
        >>> index_vectors(store, DeterministicFakeEmbedding(size=16), client_id="ana")
        1
    """
    return DenseRecall(store, embeddings).index(client_id=client_id, session_id=session_id)


async def aindex_vectors(
    store: RollingStore,
    embeddings: Embeddings,
    *,
    client_id: str | None = None,
    session_id: str | None = None,
) -> int:
    """Async twin of `index_vectors`."""
    return await DenseRecall(store, embeddings).aindex(client_id=client_id, session_id=session_id)
