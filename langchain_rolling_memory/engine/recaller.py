"""One turn's recall: search the client's memory with the user's latest words and render the excerpts.

Owns the I/O step around `recall_block.recall_block` (sync and async twins over shared pure helpers):
the scope of the search (the client, else the session), which hits the view already holds,
fetching the answer that followed a recalled question, a LangChain `BaseRetriever` in place
of the store's search, and reporting the excerpts shown to the recall's traced run (`tracing`). It does not rank (the stores and `lexical_search` do), choose or quote excerpts
(`recall_block`), or place the block in a prompt (`runnable`, `middleware`).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.dense import fuse_confident
from langchain_rolling_memory.core.lexical_search import SearchHit, expanded_query, query_terms
from langchain_rolling_memory.core.quoting import one_line, quote_text
from langchain_rolling_memory.core.recall_block import (
    LANGUAGE_HEADER,
    Header,
    Recalled,
    is_question,
    recall_block,
    repeats_of,
    resolve_header,
)
from langchain_rolling_memory.core.records import Fact, StoredMessage
from langchain_rolling_memory.core.texts import check_language, memory_texts
from langchain_rolling_memory.engine.dense import DenseRecall
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.tracing import arecall_run, recall_run
from langchain_rolling_memory.stores.api import RollingStore

DEFAULT_RECALL_TOKENS = 2000
"""The budget used when `recall=` is given without `recall_tokens=`: on LoCoMo, through
`with_rolling_memory` on SQLite, the smallest one measured that reaches the 60% answer-in-context
target (1,000: 55.5%, 2,000: 61.2%; `benchmarks/results/recall_eval.md`)."""

NOTHING = Recalled("", (), 0)

TOKENS_PER_HIT = 25
"""What one recalled line is assumed to cost when sizing the search (`recall_limit`). Hits past
what the budget can show are decoded only to be passed over, and decoding is most of a
search's cost. On LoCoMo (`benchmarks.recall_eval`, SQLite, 2,000 and 1,944 tokens) 25 (80 hits)
keeps the answer-in-context of 100 hits exactly (61.2%, 61.0%); 30 (67 hits) loses 0.2 point
at 1,944 and 40 (50 hits) 0.5 point at both."""

_LIMITS = (10, 100)


def recall_limit(max_tokens: int) -> int:
    """Hits asked of the search for a block of `max_tokens`: as many as can fit at
    `TOKENS_PER_HIT` each, at least 10 and at most 100.

    Example:
        >>> recall_limit(2000), recall_limit(100), recall_limit(10_000)
        (80, 10, 100)
    """
    lowest, highest = _LIMITS
    return max(lowest, min(highest, -(-max_tokens // TOKENS_PER_HIT)))


_MAX_SOURCE = 60  # a longer source is left out: a label, not a message


def latest_user_text(value: Any, input_key: str | None = None) -> str:
    """The text of the latest user input in a chain's input ('' when there is none).

    `value` is what `with_rolling_memory` (as `RunnableWithMessageHistory`) hands the chain: a
    message list, or a dict whose `input_key` holds a string, a message or a list of messages.

    Example:
        >>> latest_user_text({"question": "Where is Oscar?", "history": []}, "question")
        'Where is Oscar?'
    """
    if isinstance(value, dict):
        value = value.get(input_key) if input_key is not None else None
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        value = [value]
    if isinstance(value, Sequence):
        for message in reversed(value):
            if isinstance(message, HumanMessage):
                return str(message.text)
    return ""


def _view_keys(
    hits: Sequence[SearchHit],
    session_id: str | None,
    seqs: Collection[int] | None,
    view: Sequence[BaseMessage],
) -> set[Hashable]:
    """The keys of hits the view already shows: by seq when the caller knows the tail's seqs,
    else by kind and text (a history's view carries no seqs)."""
    shown = {(m.type, m.text) for m in view}
    keys: set[Hashable] = set()
    for hit in hits:
        if hit.kind != "message" or hit.session_id != session_id or session_id is None:
            continue
        if seqs is not None:
            if hit.seq in seqs:
                keys.add(hit.key)
        elif hit.message is not None and (hit.message.type, hit.message.text) in shown:
            keys.add(hit.key)
    return keys


@dataclass(frozen=True)
class _Shown:
    """What a turn's prompt already shows, so the recall does not repeat it: the session's
    view (by seq when known, else by kind and text) and the facts of the facts block."""

    session_id: str | None
    seqs: Collection[int] | None
    view: Sequence[BaseMessage]
    facts: Collection[Fact]

    def keys(self, hits: Sequence[SearchHit]) -> set[Hashable]:
        return _view_keys(hits, self.session_id, self.seqs, self.view) | repeats_of(hits, self.facts)


def _wanted_neighbours(hits: Sequence[SearchHit], skip: Collection[Hashable], most: int) -> list[SearchHit]:
    """The recalled questions whose answer is read (the best `most` of them, in one read);
    a message hit has a session and a seq."""
    wanted = [h for h in hits if h.kind == "message" and h.key not in skip and is_question(h)]
    return [h for h in wanted if h.session_id is not None and h.seq is not None][:most]


def _points(hits: Sequence[SearchHit]) -> list[tuple[str, int]]:
    """The (session, seq) of each wanted hit, for `messages_after`."""
    return [(str(h.session_id), int(h.seq or 0)) for h in hits]


def _neighbours(hits: Sequence[SearchHit], rows: Sequence[StoredMessage | None]) -> dict[Hashable, SearchHit]:
    """Each hit's answer (the message after it, as `messages_after` read it), by hit key."""
    out: dict[Hashable, SearchHit] = {}
    for hit, row in zip(hits, rows, strict=True):
        if row is not None and hit.session_id is not None:
            # A reply is dated like the question it answers (rows carry no date of their own).
            out[hit.key] = SearchHit(
                "message", hit.session_id, row.seq, hit.created_at, 0.0, row.message, text=row.message.text
            )
    return out


def document_block(
    documents: Sequence[Document],
    *,
    max_tokens: int,
    token_counter: TokenCounter = count_tokens,
    header: Header = LANGUAGE_HEADER,
    language: str = "en",
) -> Recalled:
    """A retriever's documents as quoted lines within `max_tokens`, in the retriever's order.

    Each line is ``- "source": "text"``, both quoted like facts (`quoting.quote_text`); the
    source only when `metadata["source"]` is a string of at most 60 visible characters. A
    document that does not fit is passed over. The header (by default) and the separator
    are `language`'s.

    Example:
        >>> print(document_block([Document("Oscar is a cat", metadata={"source": "notes"})],
        ...                      max_tokens=50, header=None).text)
        - "notes": "Oscar is a cat"
    """
    return _fit_documents(
        documents, max_tokens=max_tokens, token_counter=token_counter, header=header, language=language
    )[0]


def _fit_documents(
    documents: Sequence[Document],
    *,
    max_tokens: int,
    token_counter: TokenCounter,
    header: Header,
    language: str,
) -> tuple[Recalled, list[Document]]:
    """`document_block` and the documents it shows."""
    separator = memory_texts(language).separator
    first = resolve_header(header, language)
    envelope = token_counter([HumanMessage("")])
    lines: list[str] = []
    shown: list[Document] = []
    for doc in documents:
        source = doc.metadata.get("source") if isinstance(doc.metadata, Mapping) else None
        label = ""
        if isinstance(source, str) and 0 < len(one_line(source)) <= _MAX_SOURCE:
            label = f"{quote_text(source)}{separator}"
        line = f"- {label}{quote_text(doc.page_content)}"
        text = "\n".join([first, *lines, line] if first else [*lines, line])
        if max(1, token_counter([HumanMessage(text)]) - envelope) <= max_tokens:
            lines.append(line)
            shown.append(doc)
    if not lines:
        return NOTHING, []
    text = "\n".join([first, *lines] if first else lines)
    return Recalled(text, (), max(1, token_counter([HumanMessage(text)]) - envelope)), shown


def hit_document(hit: SearchHit) -> Document:
    """A shown excerpt as the document its recall run reports (the text unquoted: a trace is
    read by people, the prompt gets the quoted line).

    Example:
        >>> hit_document(SearchHit("message", "s1", 4, 0.0, 2.5, HumanMessage("hi"), text="hi")).metadata
        {'kind': 'message', 'score': 2.5, 'created_at': 0.0, 'session_id': 's1', 'seq': 4, 'role': 'human'}
    """
    metadata: dict[str, Any] = {"kind": hit.kind, "score": hit.score, "created_at": hit.created_at}
    if hit.kind == "fact" and hit.fact is not None:
        return Document(hit.fact.text, metadata={**metadata, "fact_id": hit.fact.id})
    metadata |= {"session_id": hit.session_id, "seq": hit.seq}
    if hit.message is None:
        return Document(hit.text, metadata=metadata)
    return Document(hit.message.text, metadata={**metadata, "role": hit.message.type})


@dataclass(frozen=True)
class Recaller:
    """What an adapter needs to recall for a turn: the store (or a retriever) and a budget.

    Build it with `Recaller.build`, which returns None when recall is off: then an adapter
    reads and searches nothing more than it did without recall.

    Attributes:
        store: searched with ``client_id`` (all the client's sessions and facts), or with the
            session alone when the run has no client.
        max_tokens: the budget of the recalled block, header included.
        retriever: searched instead of the store when given.
        token_counter: counts the block's tokens.
        limit: hits asked of the search; None (the default) sizes it to the budget
            (`recall_limit`).
        max_neighbours: recalled questions whose answer is read (all in one read).
        language: the language of the block's header, dates and speakers (`texts`).
        expand: search the store for every regular form of the query's words
            (`lexical_search.expanded_query`: "activities" finds "activity"), in the one
            search; False searches the words as written. Not applied to a `retriever`.
        dense: also searches the store by the question's vector (`engine.dense`): the
            lexical hits near the best one fused by rank with the dense ones
            (`core.dense.fuse_confident`); None: lexical only.
    """

    store: RollingStore
    max_tokens: int
    retriever: BaseRetriever | None = None
    token_counter: TokenCounter = count_tokens
    limit: int | None = None
    max_neighbours: int = 8
    language: str = "en"
    expand: bool = True
    dense: DenseRecall | None = None

    @classmethod
    def build(
        cls,
        store: RollingStore,
        recall_tokens: int | None,
        recall: BaseRetriever | None = None,
        *,
        token_counter: TokenCounter = count_tokens,
        language: str = "en",
        embeddings: Embeddings | None = None,
    ) -> Recaller | None:
        """The recaller of an adapter's settings; None when recall is off.

        ``recall_tokens`` None or 0 with no ``recall`` is off; a ``recall`` retriever or
        ``embeddings`` without ``recall_tokens`` uses `DEFAULT_RECALL_TOKENS`;
        ``recall_tokens=0`` is always off. ``embeddings`` adds the dense search to the
        store's (it cannot be combined with a retriever, which replaces the store's search).
        """
        if embeddings is not None and recall is not None:
            msg = (
                "embeddings= adds a dense search to the store's and recall= replaces the store's "
                "search with a retriever: pass one of them"
            )
            raise ConfigurationError(msg)
        if recall is not None and not isinstance(recall, BaseRetriever):
            msg = (
                f"recall must be None or a LangChain BaseRetriever, got {type(recall).__name__}; "
                "pass recall_tokens=N to search the store, or a retriever (vector_store.as_retriever())"
            )
            raise ConfigurationError(msg)
        if recall_tokens is not None and (
            not isinstance(recall_tokens, int) or isinstance(recall_tokens, bool) or recall_tokens < 0
        ):
            msg = f"recall_tokens must be None or an int >= 0, got recall_tokens={recall_tokens!r}"
            raise ConfigurationError(msg)
        check_language(language)
        chosen = recall is not None or embeddings is not None
        budget = DEFAULT_RECALL_TOKENS if recall_tokens is None and chosen else recall_tokens
        if not budget:
            return None
        dense = DenseRecall(store, embeddings) if embeddings is not None else None
        return cls(store, budget, recall, token_counter, language=language, dense=dense)

    def _limit(self) -> int:
        return self.limit if self.limit is not None else recall_limit(self.max_tokens)

    def _query(self, query: str) -> str:
        # The store stems nothing: the forms of the words find what their stems would.
        return expanded_query(query) if self.expand else query

    def _scope(self, client_id: str | None, session_id: str | None) -> dict[str, Any]:
        # A client sees all its sessions and facts; without one, only the run's own session.
        return {"client_id": client_id} if client_id is not None else {"session_id": session_id}

    @staticmethod
    def _dense_scope(scope: Mapping[str, Any]) -> dict[str, Any]:
        return {"client_id": scope.get("client_id"), "session_id": scope.get("session_id")}

    def stored(self, session_id: str) -> None:
        """After an append to `session_id`: its new messages are embedded in the background
        (with ``embeddings=``; nothing otherwise)."""
        if self.dense is not None:
            self.dense.schedule(session_id)

    def _render(
        self,
        hits: Sequence[SearchHit],
        skip: Collection[Hashable],
        neighbours: Mapping[Hashable, SearchHit],
    ) -> Recalled:
        return recall_block(
            hits,
            max_tokens=self.max_tokens,
            token_counter=self.token_counter,
            skip=skip,
            neighbours=neighbours,
            language=self.language,
        )

    def recall(
        self,
        query: str,
        *,
        client_id: str | None,
        session_id: str | None,
        view_seqs: Collection[int] | None = None,
        view: Sequence[BaseMessage] = (),
        shown_facts: Collection[Fact] = (),
        terms: Sequence[str] | None = None,
    ) -> Recalled:
        """The excerpts of the client's memory for `query` that the view and the facts block do
        not hold.

        Traced as a retriever run (`tracing.RECALL`, a child of the current run) whose
        documents are the excerpts shown; a query without words searches nothing and is not
        traced.

        Args:
            query: the user's latest words; empty or stop words only recalls nothing.
            client_id: whose memory is searched (None: the session's only).
            session_id: the current session, whose view is skipped.
            view_seqs: the seqs of the session's messages the view shows, when known.
            view: else the view's messages, matched by kind and text.
            shown_facts: the facts the prompt's facts block shows: neither they nor an
                excerpt (or document) of the same words is recalled again.
            terms: `query_terms` of `query`, when the caller already has them.
        """
        if not (query_terms(query) if terms is None else terms):
            return NOTHING
        run = recall_run(query)
        shown = _Shown(session_id, view_seqs, view, shown_facts)
        try:
            found, documents = self._recall(query, client_id, shown, run.get_child(), bool(run.handlers))
        except Exception as exc:
            run.on_retriever_error(exc)
            raise
        run.on_retriever_end(documents)
        return found

    def _recall(
        self, query: str, client_id: str | None, shown: _Shown, callbacks: Callbacks, traced: bool
    ) -> tuple[Recalled, list[Document]]:
        if self.retriever is not None:
            docs = self.retriever.invoke(query, config={"callbacks": callbacks})
            return self._documents(docs, shown.facts)
        scope = self._scope(client_id, shown.session_id)
        hits = self.store.search(self._query(query), limit=self._limit(), **scope)
        if self.dense is not None:
            near = self.dense.search(query, limit=self._limit(), **self._dense_scope(scope))
            hits = fuse_confident(hits, near)[: self._limit()]
        skip = shown.keys(hits)
        wanted = _wanted_neighbours(hits, skip, self.max_neighbours)
        rows = self.store.messages_after(_points(wanted), client_id=client_id) if wanted else []
        neighbours = _neighbours(wanted, rows)
        skip |= shown.keys(list(neighbours.values()))
        return self._shown(self._render(hits, skip, neighbours), traced)

    async def arecall(
        self,
        query: str,
        *,
        client_id: str | None,
        session_id: str | None,
        view_seqs: Collection[int] | None = None,
        view: Sequence[BaseMessage] = (),
        shown_facts: Collection[Fact] = (),
        terms: Sequence[str] | None = None,
    ) -> Recalled:
        """Async twin of `recall`."""
        if not (query_terms(query) if terms is None else terms):
            return NOTHING
        run = await arecall_run(query)
        shown = _Shown(session_id, view_seqs, view, shown_facts)
        try:
            found, documents = await self._arecall(
                query, client_id, shown, run.get_child(), bool(run.handlers)
            )
        except Exception as exc:
            await run.on_retriever_error(exc)
            raise
        await run.on_retriever_end(documents)
        return found

    async def _arecall(
        self, query: str, client_id: str | None, shown: _Shown, callbacks: Callbacks, traced: bool
    ) -> tuple[Recalled, list[Document]]:
        if self.retriever is not None:
            docs = await self.retriever.ainvoke(query, config={"callbacks": callbacks})
            return self._documents(docs, shown.facts)
        scope = self._scope(client_id, shown.session_id)
        hits = await self.store.asearch(self._query(query), limit=self._limit(), **scope)
        if self.dense is not None:
            near = await self.dense.asearch(query, limit=self._limit(), **self._dense_scope(scope))
            hits = fuse_confident(hits, near)[: self._limit()]
        skip = shown.keys(hits)
        wanted = _wanted_neighbours(hits, skip, self.max_neighbours)
        rows = await self.store.amessages_after(_points(wanted), client_id=client_id) if wanted else []
        neighbours = _neighbours(wanted, rows)
        skip |= shown.keys(list(neighbours.values()))
        return self._shown(self._render(hits, skip, neighbours), traced)

    def _documents(
        self, docs: Sequence[Document], facts: Collection[Fact]
    ) -> tuple[Recalled, list[Document]]:
        said = {one_line(fact.text) for fact in facts}
        return _fit_documents(
            [doc for doc in docs if one_line(doc.page_content) not in said],
            max_tokens=self.max_tokens,
            token_counter=self.token_counter,
            header=LANGUAGE_HEADER,
            language=self.language,
        )

    @staticmethod
    def _shown(found: Recalled, traced: bool) -> tuple[Recalled, list[Document]]:
        # The documents go to the run's handlers only: none, none built.
        return found, [hit_document(hit) for hit in found.hits] if traced else []
