"""Reading a client's memory (facts, session state, summary) from a store for given ids.

The functions of the public API over `turn.TurnStep` without recall, with sync and async twins;
how the memory is rendered is `framing`, where a chain puts it is `runnable` (and the agent
middleware).
"""

from __future__ import annotations

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.framing import MemoryBlock
from langchain_rolling_memory.engine.turn import TurnStep
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
    step = TurnStep(store, max_fact_tokens, token_counter, language)
    return step.read(client_id, session_id, query=query or "", summary=summary)


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
    step = TurnStep(store, max_fact_tokens, token_counter, language)
    return await step.aread(client_id, session_id, query=query or "", summary=summary)
