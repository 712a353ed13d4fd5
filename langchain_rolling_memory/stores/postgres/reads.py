"""The owner check of the PostgreSQL session reads: the same statement, with the owner in it.

Owns wrapping a read statement so that its reply carries the session's owner, read by the same
statement (one snapshot, one round trip: a claim committing meanwhile is seen by both parts or
by neither), and checking it; no connection and no driver import, shared by the sync twin in
`sync.py` and the async one in `aio.py`. The statements themselves are in
`sql.py`.
"""

from __future__ import annotations

from typing import Any

import langchain_rolling_memory.stores.postgres.sql as pg
from langchain_rolling_memory.core.records import SummaryRecord
from langchain_rolling_memory.stores.contract import Reader


def owned(prefix: str, sql: str, params: Any, session_id: str) -> tuple[str, Any]:
    """`sql` with the session's owner as the first column of every row, and one row (the owner
    and NULLs) when `sql` has none. Positional parameters get the session id first; named
    ones must already hold it as ``sid``."""
    named = isinstance(params, dict)
    sid = "%(sid)s" if named else "%s"
    wrapped = (
        f"SELECT o.owner, r.* FROM (SELECT (SELECT client_id FROM {prefix}sessions "
        f"WHERE session_id = {sid}) AS owner) AS o LEFT JOIN ({sql}) AS r ON TRUE"
    )
    return wrapped, (params if named else (session_id, *params))


def checked(records: list[tuple[Any, ...]], reader: Reader, session_id: str) -> list[tuple[Any, ...]]:
    """The rows of `sql` from the reply of `owned(sql)`, once `reader` passed the owner check
    (`OwnershipError` otherwise). Every read's first column is never NULL in a real row."""
    reader.check(session_id, None if not records or records[0][0] is None else str(records[0][0]))
    return [record[1:] for record in records if record[1] is not None]


def summary_read(q: pg.Queries, session_id: str, reader: Reader | None) -> tuple[str, Any]:
    """The summary read (`Queries.get_summary`), with the owner in it when `reader` is given."""
    if reader is None:
        return q.get_summary, (session_id,)
    return owned(q.prefix, q.get_summary, (session_id,), session_id)


def summary_found(
    records: list[tuple[Any, ...]], session_id: str, reader: Reader | None
) -> SummaryRecord | None:
    """The summary record from the reply of `summary_read`, once `reader` passed the check."""
    rows = records if reader is None else checked(records, reader, session_id)
    return pg.summary_of(rows[0] if rows else None)
