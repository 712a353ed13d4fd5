"""Reading one turn's memory (facts, session state, summary) from a store for given ids.

Owns only the reads, with sync and async twins; how the memory is rendered is `framing`, where a
chain puts it is `runnable` (and the agent middleware).
"""

from __future__ import annotations

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.framing import MemoryBlock, memory_block
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.stores.api import RollingStore


def load_memory(
    store: RollingStore,
    client_id: str | None,
    session_id: str | None = None,
    *,
    summary: str | None = None,
    max_fact_tokens: int | None = 400,
    token_counter: TokenCounter = count_tokens,
    query: str | None = None,
    language: str = "en",
) -> MemoryBlock:
    """The client's facts, the session's state and summary, rendered (see `MemoryBlock`).

    Args:
        store: where the memory lives.
        client_id: whose facts to show (None: no client, no facts; an owned session is refused).
        session_id: whose state (and summary) to show; None for facts only.
        summary: the summary text if the caller already has it (a history's view); None
            reads it from the store, '' leaves it out.
        max_fact_tokens: token budget of the facts block (None: no budget).
        token_counter: counts the tokens of the fact lines.
        query: the user's latest words; facts over the budget are then ranked by relevance.
        language: the language of the block's frame and headers (`texts`).

    Raises:
        OwnershipError: the session belongs to another client (nothing of it is read).

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> _ = store.add_fact("client-1", "Delivers on Saturdays")
        >>> load_memory(store, "client-1").facts
        '- "Delivers on Saturdays"'
    """
    if client_id is not None:
        validate_id(client_id, kind="client_id")
    # Each session read names the client (None: an anonymous run): the store refuses a
    # session that is not that client's in the read itself.
    state = store.get_state(session_id, client_id=client_id) if session_id is not None else None
    facts = store.facts(client_id) if client_id is not None else []
    if summary is None:
        record = store.summary(session_id, client_id=client_id) if session_id is not None else None
        summary = record.text if record else ""
    return memory_block(
        facts,
        state=state,
        summary=summary,
        max_fact_tokens=max_fact_tokens,
        token_counter=token_counter,
        query=query,
        language=language,
    )


async def aload_memory(
    store: RollingStore,
    client_id: str | None,
    session_id: str | None = None,
    *,
    summary: str | None = None,
    max_fact_tokens: int | None = 400,
    token_counter: TokenCounter = count_tokens,
    query: str | None = None,
    language: str = "en",
) -> MemoryBlock:
    """Async twin of `load_memory`."""
    if client_id is not None:
        validate_id(client_id, kind="client_id")
    state = await store.aget_state(session_id, client_id=client_id) if session_id is not None else None
    facts = await store.afacts(client_id) if client_id is not None else []
    if summary is None:
        record = await store.asummary(session_id, client_id=client_id) if session_id is not None else None
        summary = record.text if record else ""
    return memory_block(
        facts,
        state=state,
        summary=summary,
        max_fact_tokens=max_fact_tokens,
        token_counter=token_counter,
        query=query,
        language=language,
    )
