"""Dense vectors on PostgreSQL without an extension: ``REAL[]`` rows scored in SQL (schema 6).

Owns the statements and parameters of `unembedded`, `put_vectors` and `vector_search` for both
twins (`sync.py`, `aio.py`), with no connection. The vectors table (migration 6 in `sql.py`)
has a foreign key to its message with ``ON DELETE CASCADE``: every erase, which deletes the
messages, deletes their vectors in the same statement, as does an append's rewind. A write locks the sessions it writes
for (``FOR KEY SHARE``, as a summary install does) only while they have the generation the
listing gave, so an erase is wholly before it (nothing written) or after it (erasing it).

The search is brute force: the cosine of each of the scope's vectors with the query, a sum
over ``unnest`` of the two arrays, in the statement that filters by owner. pgvector would index
and score in C; it is not used (this package's test server has no pgvector, and a path that no
test runs is not shipped): the table's layout is what a pgvector column would be filled from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import langchain_rolling_memory.stores.vector_sql as vector_sql
from langchain_rolling_memory.core.dense import unpack
from langchain_rolling_memory.stores.contract import SearchRow, Unembedded, VectorWrite

_SCORE = "(SELECT sum(a::float8 * b) FROM unnest(v.vector, %(q)s::real[]) AS t(a, b))"
_SIZE = "cardinality(v.vector) = %(dim)s"


def _named(name: str) -> str:
    return f"%({name})s"


def unembedded(
    prefix: str, model: str, client_id: str | None, session_id: str | None, limit: int
) -> tuple[str, dict[str, Any]]:
    sql = vector_sql.unembedded(prefix, _named, client_id, session_id)
    return sql, {"model": model, "cid": client_id, "sid": session_id, "limit": limit}


def unembedded_rows(rows: Sequence[Sequence[Any]]) -> list[Unembedded]:
    return [Unembedded(str(s), int(n), str(g), str(m)) for s, n, g, m in rows]


def put(prefix: str, model: str, items: Sequence[VectorWrite]) -> tuple[str, dict[str, Any]]:
    """One statement writing every item whose message and session generation still exist."""
    p = prefix
    sql = (
        "WITH items AS (SELECT * FROM unnest(%(sids)s::text[], %(seqs)s::bigint[], %(gens)s::text[], "
        "%(vecs)s::text[]) AS i(session_id, seq, generation, vector)), "
        f"live AS (SELECT s.session_id, s.generation FROM {p}sessions AS s "
        "WHERE s.session_id IN (SELECT session_id FROM items) ORDER BY s.session_id FOR KEY SHARE) "
        f"INSERT INTO {p}vectors (session_id, seq, model, vector) "
        "SELECT i.session_id, i.seq, %(model)s, i.vector::real[] FROM items AS i "
        "JOIN live AS l ON l.session_id = i.session_id AND l.generation = i.generation "
        f"JOIN {p}messages AS m ON m.session_id = i.session_id AND m.seq = i.seq "
        "ON CONFLICT (session_id, seq, model) DO UPDATE SET vector = excluded.vector"
    )
    params = {
        "model": model,
        "sids": [item.session_id for item in items],
        "seqs": [item.seq for item in items],
        "gens": [item.generation for item in items],
        "vecs": ["{" + ",".join(repr(x) for x in unpack(item.vector)) + "}" for item in items],
    }
    return sql, params


def search(
    prefix: str, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
) -> tuple[str, dict[str, Any]]:
    sql = vector_sql.search(prefix, _named, _SCORE, _SIZE, client_id, session_id)
    query = list(unpack(vector))
    params = {
        "model": model,
        "q": query,
        "dim": len(query),
        "cid": client_id,
        "sid": session_id,
        "limit": limit,
    }
    return sql, params


def search_rows(rows: Sequence[Sequence[Any]]) -> list[SearchRow]:
    return [(float(score), str(s), int(n), str(m), float(at), None) for score, s, n, m, at in rows]
