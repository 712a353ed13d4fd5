"""The pure steps around a store search and a dated append: scope, dates, hits; no I/O.

Owns what `RollingStore.search` and `append(created_at=...)` check before a backend is
called (a scope is required, a session searched with a client must be that client's, dates
are seconds from 1970 to before the year 9999) and turning a backend's ranked rows into
`SearchHit`s. It does not rank (the backends do, each on its own engine) and analyses no
text (`core/lexical_search.py` does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone

from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.lexical_search import SearchHit, query_terms
from langchain_rolling_memory.core.records import SessionInfo
from langchain_rolling_memory.core.serde import loads_message
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError
from langchain_rolling_memory.stores.contract import SearchRow, StoreBackend

CreatedAt = float | datetime | Sequence[float | datetime] | None
"""``created_at=`` of `append`: one date for the whole batch, one per message, or None (now)."""

MAX_SEARCH_LIMIT = 1000

MAX_CREATED_AT = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
"""A message's date is before this (1 January 9999, in seconds). A date past the year 9999 (a
date in milliseconds, `datetime.max`) cannot be a `datetime`: stored, it broke every recall
that showed it. The year of margin keeps any time zone's rendering of a date in range."""

_UNITS = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))


def _seconds(value: object) -> float:
    if isinstance(value, datetime):
        # A naive datetime is read as UTC: recalled excerpts are dated in UTC too.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        try:
            seconds = aware.timestamp()
        except OverflowError:  # within a day of datetime.min or datetime.max
            seconds = -math.inf if aware.year == 1 else math.inf
        return _in_range(seconds, value)
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= 2**64:  # no float, and a repr that can be thousands of digits long
            return _in_range(math.inf if value > 0 else -math.inf, f"an int of {value.bit_length()} bits")
        return _in_range(float(value), value)
    if isinstance(value, float) and math.isfinite(value):
        return _in_range(value, value)
    msg = (
        "created_at must be seconds since the epoch (a finite number) or a datetime, "
        f"got {value!r}; pass time.time()-style seconds or a datetime"
    )
    raise ConfigurationError(msg)


def _in_range(seconds: float, value: object) -> float:
    if 0 <= seconds < MAX_CREATED_AT:
        return seconds
    why = "before 1970" if seconds < 0 else "in the year 9999 or later"
    unit = next(((scale, name) for scale, name in _UNITS if seconds / scale < MAX_CREATED_AT), None)
    if seconds > 0 and unit is not None and isinstance(value, (int, float)):
        fix = f"it looks like {unit[1]}: divide it by {unit[0]:,.0f}"
    else:
        fix = "pass time.time()-style seconds or a datetime"
    msg = (
        f"created_at must be seconds from 1970 to before the year 9999 (0 <= t < {MAX_CREATED_AT:.0f}), "
        f"got {value if isinstance(value, str) else repr(value)}, {why}; {fix}"
    )
    raise ConfigurationError(msg)


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
            message = loads_message(payload)
            hits.append(
                SearchHit(
                    "message",
                    session_id,
                    seq,
                    created_at,
                    float(score),
                    message=message,
                    text=str(message.text),
                )
            )
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


class SearchApi(StoreBackend):
    """The public ``search``/``asearch`` of every store, on the backend's `_search` primitive."""

    def search(
        self,
        query: str,
        *,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """The messages (and facts) most relevant to `query`, best first, within one scope.

        `client_id` searches every session of the client and its facts; `session_id` one
        session (with `client_id` too, the session must be that client's: `OwnershipError`
        otherwise). One of them is required: a search never crosses clients. The query is
        plain words (`lexical_search.query_terms`): search syntax in it is text, and a query of
        stop words only finds nothing without querying.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> from langchain_rolling_memory import open_store
            >>> store = open_store("memory://")
            >>> store.append("s1", [HumanMessage("We adopted a cat named Oscar")], client_id="c1")
            [1]
            >>> store.search("what is the cat called?", client_id="c1")[0].seq
            1
        """
        terms, client, session = search_request(query, client_id, session_id, limit)
        if terms and client is not None and session is not None:
            check_owner(self._get_session(session), session, client)
        return hits_of(self._search(terms, client, session, limit)) if terms else []

    async def asearch(
        self,
        query: str,
        *,
        client_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        terms, client, session = search_request(query, client_id, session_id, limit)
        if terms and client is not None and session is not None:
            check_owner(await self._aget_session(session), session, client)
        return hits_of(await self._asearch(terms, client, session, limit)) if terms else []
