"""The pure steps around a store search and a dated append: scope, dates, hits; no I/O.

Owns what `RollingStore.search` and `append(created_at=...)` check before a backend is
called (`api.py` holds those methods) (a scope is required, a session searched with a client must be that client's, dates
are seconds from 1970 to before the year 9999) and turning a backend's ranked rows into
`SearchHit`s. It does not rank (the backends do, each on its own engine) and analyses no
text (`core/lexical_search.py` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langchain_rolling_memory.core.dates import MAX_DATE, seconds
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.lexical_search import SearchHit, query_terms, stored_hit
from langchain_rolling_memory.core.records import SessionInfo
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError
from langchain_rolling_memory.stores.contract import SearchRow

CreatedAt = float | datetime | Sequence[float | datetime] | None
"""``created_at=`` of `append`: one date for the whole batch, one per message, or None (now)."""

MAX_SEARCH_LIMIT = 1000

MAX_CREATED_AT = MAX_DATE
"""A message's date is before this (1 January 9999, in seconds): see `dates.MAX_DATE`."""


def _seconds(value: object) -> float:
    return seconds(value, "created_at")


def dates_of(count: int, created_at: CreatedAt, now: float) -> list[float] | None:
    """The date of each of `count` messages to append (None: all `now`); bad dates raise,
    before any write."""
    if created_at is None:
        return None
    if isinstance(created_at, (int, float, datetime)):
        return [_seconds(created_at)] * count
    if isinstance(created_at, Sequence) and not isinstance(created_at, (str, bytes)):
        if len(created_at) != count:
            msg = (
                f"created_at must have one date per message, got {len(created_at)} "
                f"for {count} messages; pass one date for the batch or one per message"
            )
            raise ConfigurationError(msg)
        return [_seconds(value) for value in created_at]
    return [_seconds(created_at)]  # raises with the message above


def search_scope(client_id: str | None, session_id: str | None, limit: int) -> tuple[str | None, str | None]:
    """The checked ids of a search; one of them is required, so no search spans clients."""
    if client_id is None and session_id is None:
        msg = (
            "a search needs a scope, got client_id=None and session_id=None; "
            "pass client_id= (all of a client's sessions and facts) or session_id= (one session)"
        )
        raise ConfigurationError(msg)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        msg = f"limit must be an int from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}"
        raise ConfigurationError(msg)
    client = None if client_id is None else validate_id(client_id, kind="client_id")
    session = None if session_id is None else validate_id(session_id)
    return client, session


def check_owner(info: SessionInfo | None, session_id: str, client_id: str) -> None:
    """Refuse to search a session with a client that does not own it (an unknown session
    holds nothing, so it is searched, and finds nothing)."""
    if info is None or info.client_id == client_id:
        return
    if info.client_id is None:
        msg = (
            f"session {session_id!r} belongs to no client, so it cannot be searched as "
            f"{client_id!r}'s; search it with session_id= alone, or append to it with client_id="
        )
        raise OwnershipError(msg)
    raise OwnershipError.for_session(session_id, client_id)


def hits_of(rows: Sequence[SearchRow]) -> list[SearchHit]:
    """`SearchHit`s of a backend's ranked rows, in their order."""
    hits = []
    for score, session_id, seq, payload, created_at, fact in rows:
        if fact is not None:
            hits.append(
                SearchHit("fact", None, None, fact.created_at, float(score), fact=fact, text=fact.text)
            )
        elif payload is not None:
            # Decoded when read: a recall reads the messages of the hits it shows only.
            hits.append(stored_hit(session_id, seq, created_at, float(score), payload))
    return hits


def search_request(
    query: object, client_id: str | None, session_id: str | None, limit: int
) -> tuple[list[str], str | None, str | None]:
    """The terms and the checked scope of a search (no terms: nothing to search for)."""
    client, session = search_scope(client_id, session_id, limit)
    if not isinstance(query, str):
        msg = f"query must be a str, got {type(query).__name__}; pass the user's words as text"
        raise TypeError(msg)
    return query_terms(query), client, session
