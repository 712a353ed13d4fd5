"""One turn's memory step: read the client's facts and the session's state, recall, assemble once.

Owns what every adapter shows the model each turn besides the view: the reads (state first, so
another client's session is refused before anything else is read; then the facts, then the
recall), the query's terms analysed once for both the facts' ranking and the recall, and the
one rule joining the blocks: the recall leaves out what the view holds and what the facts block
shows. Sync and async twins share the pure assembly. How the blocks are rendered is `framing`,
the search and its excerpts `recaller`; where the text goes (a system message, prompt
variables) is the adapters' (`runnable`, `middleware`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.framing import MemoryBlock, memory_block
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.lexical_search import query_terms
from langchain_rolling_memory.core.recall_block import Recalled
from langchain_rolling_memory.core.records import Fact, MemoryRead
from langchain_rolling_memory.engine.recaller import Recaller
from langchain_rolling_memory.stores.api import RollingStore


@dataclass(frozen=True)
class TurnStep:
    """The memory of one turn, as both `with_rolling_memory` and the agent middleware show it.

    Attributes:
        store: where the facts, state (and summary) live.
        max_fact_tokens: token budget of the facts block (None: no budget).
        token_counter: counts the tokens of the fact lines.
        language: the language of the blocks' frame and headers (`texts`).
        recaller: searches the client's memory each turn (None: recall off, nothing searched).

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> _ = store.add_fact("ana", "My cat is called Oscar")
        >>> step = TurnStep(store, recaller=Recaller(store, 500))
        >>> block = step.read("ana", "s1", query="what is my cat called?")
        >>> block.facts, block.recall  # the fact the facts block shows is not recalled again
        ('- "My cat is called Oscar"', '')
    """

    store: RollingStore
    max_fact_tokens: int | None = 400
    token_counter: TokenCounter = count_tokens
    language: str = "en"
    recaller: Recaller | None = None

    def read(
        self,
        client_id: str | None,
        session_id: str | None = None,
        *,
        query: str = "",
        view: Sequence[BaseMessage] = (),
        summary: str | None = "",
        known: MemoryRead | None = None,
    ) -> MemoryBlock:
        """The turn's facts, state and recall (and summary), rendered (see `MemoryBlock`).

        Args:
            client_id: whose facts are shown and memory searched (None: no client, no facts; an
                owned session is refused).
            session_id: whose state is shown; None for facts only.
            query: the user's latest words: they rank the facts over the budget and are searched.
            view: the messages the model is sent besides the memory (not recalled again).
            summary: the summary text if the caller has it ('' leaves it out, the default);
                None reads it from the store.
            known: what the caller read of this session for this client with its view
                (`RollingStore.read_memory`: the same owner check): its state and facts are
                used, nothing more is read but the recall.

        Raises:
            OwnershipError: the session belongs to another client (nothing of it is read).
        """
        client_id = _client(client_id)
        state: Mapping[str, Any] | None
        if known is not None:
            state, facts, summary = _known(known, summary)
        else:
            # Each session read names the client (None: an anonymous run): the store refuses
            # a session that is not that client's in the read itself.
            state = self.store.get_state(session_id, client_id=client_id) if session_id is not None else None
            facts = self.store.facts(client_id) if client_id is not None else []
            if summary is None:
                record = (
                    self.store.summary(session_id, client_id=client_id) if session_id is not None else None
                )
                summary = record.text if record else ""
        terms = query_terms(query) if query else []
        block = self._block(facts, state, summary, query, terms)
        if self.recaller is None:
            return block
        found = self.recaller.recall(
            query,
            client_id=client_id,
            session_id=session_id,
            view=view,
            shown_facts=block.shown_facts,
            terms=terms,
        )
        return _with_recall(block, found)

    async def aread(
        self,
        client_id: str | None,
        session_id: str | None = None,
        *,
        query: str = "",
        view: Sequence[BaseMessage] = (),
        summary: str | None = "",
        known: MemoryRead | None = None,
    ) -> MemoryBlock:
        """Async twin of `read`."""
        client_id = _client(client_id)
        state: Mapping[str, Any] | None
        if known is not None:
            state, facts, summary = _known(known, summary)
        else:
            state = (
                await self.store.aget_state(session_id, client_id=client_id)
                if session_id is not None
                else None
            )
            facts = await self.store.afacts(client_id) if client_id is not None else []
            if summary is None:
                record = (
                    await self.store.asummary(session_id, client_id=client_id)
                    if session_id is not None
                    else None
                )
                summary = record.text if record else ""
        terms = query_terms(query) if query else []
        block = self._block(facts, state, summary, query, terms)
        if self.recaller is None:
            return block
        found = await self.recaller.arecall(
            query,
            client_id=client_id,
            session_id=session_id,
            view=view,
            shown_facts=block.shown_facts,
            terms=terms,
        )
        return _with_recall(block, found)

    def _block(
        self,
        facts: Sequence[Fact],
        state: Mapping[str, Any] | None,
        summary: str,
        query: str,
        terms: Sequence[str],
    ) -> MemoryBlock:
        return memory_block(
            facts,
            state=state,
            summary=summary,
            max_fact_tokens=self.max_fact_tokens,
            token_counter=self.token_counter,
            query=query,
            language=self.language,
            terms=terms,
        )


def _client(client_id: str | None) -> str | None:
    return None if client_id is None else validate_id(client_id, kind="client_id")


def _known(known: MemoryRead, summary: str | None) -> tuple[dict[str, Any], list[Fact], str]:
    """The state, facts and summary text of a read the caller made with its view."""
    if summary is None:
        summary = known.turn.record.text if known.turn.record else ""
    return known.state, known.facts, summary


def _with_recall(block: MemoryBlock, found: Recalled) -> MemoryBlock:
    return dataclasses.replace(block, recall=found.text)
