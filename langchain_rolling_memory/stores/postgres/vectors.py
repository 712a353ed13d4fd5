"""Dense vectors on PostgreSQL without an extension: ``REAL[]`` rows scored in SQL (schema 6).

Owns the statements and parameters of `unembedded`, `put_vectors` and `vector_search` for both
twins (`sync.py`, `aio.py`), with no connection. The vectors table (migration 6 in `sql.py`)
has a foreign key to its message with ``ON DELETE CASCADE``: every erase, which deletes the
messages, deletes their vectors in the same statement, as does an append's rewind. A write locks the sessions it writes
for (``FOR KEY SHARE``, as a summary install does) only while they have the generation the
listing gave, so an erase is wholly before it (nothing written) or after it (erasing it).

The search is brute force: the cosine of each of the scope's vectors with the query, in the
statement that filters by owner. When the database has the pgvector extension (``CREATE
EXTENSION vector``, by its administrator: never by this package), each ``REAL[]`` is cast to
pgvector's type and scored by its inner product operator, in C: ~30x faster (10,000 vectors of
384 dimensions: ~17 ms against ~490 ms). Without it, a sum over ``unnest`` of the two arrays. The
backend asks once which schema holds the extension (`PGVECTOR_PROBE`). pgvector sums in float32
(within about 1e-7 of the exact cosine), so it only ranks: the vectors whose score is within
`rescore_margin` of the ``limit``-th are scored again by ``unnest``, in the same statement, and
the hits, scores and ties are the plain statement's exactly. No pgvector index is built: the
search stays exact, and the table's layout is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import langchain_rolling_memory.stores.vector_sql as vector_sql
from langchain_rolling_memory.core.dense import unpack
from langchain_rolling_memory.stores.contract import SearchRow, Unembedded, VectorWrite

_SCORE = "(SELECT sum(a::float8 * b) FROM unnest(v.vector, %(q)s::real[]) AS t(a, b))"
PGVECTOR_PROBE = (
    "SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace "
    "WHERE e.extname = 'vector'"
)
"""The schema of the database's pgvector extension: one row, or none without it."""


def pgvector_schema(rows: Sequence[Sequence[Any]]) -> str | None:
    """`PGVECTOR_PROBE`'s answer: the schema's name, or None for no pgvector."""
    return str(rows[0][0]) if rows else None


def _pgvector_score(schema: str) -> str:
    # Qualified, so that a schema off the search_path works; the operator's result is the negative
    # inner product, the cosine of unit vectors.
    name = '"' + schema.replace('"', '""') + '"'
    return f"(-(v.vector::{name}.vector OPERATOR({name}.<#>) %(qv)s::{name}.vector))"


def rescore_margin(dims: int) -> float:
    """How far below the ``limit``-th fast score a vector may be and still be among the exact best:
    pgvector sums ``dims`` float32 products of unit vectors, each sum within ``dims`` units of
    float32 rounding (2**-24) of the exact one, taken twice (the cut's score and the vector's),
    plus the in-process ranking's margin (`stores.vector_rank`)."""
    return 1e-4 + 2 * dims * 2.0**-24


_SIZE = "cardinality(v.vector) = %(dim)s"


def _named(name: str) -> str:
    return f"%({name})s"


BYTE_ORDER = ' COLLATE "C"'
"""Session ids ordered by code point, as every other backend orders them, whatever the
database's default collation (an ICU or ``en_US`` one puts ``_x`` before ``A``)."""


def unembedded(
    prefix: str, model: str, client_id: str | None, session_id: str | None, limit: int
) -> tuple[str, dict[str, Any]]:
    sql = vector_sql.unembedded(prefix, _named, client_id, session_id, BYTE_ORDER)
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
    prefix: str,
    model: str,
    vector: bytes,
    client_id: str | None,
    session_id: str | None,
    limit: int,
    pgvector: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The search statement: by ``unnest`` (exact), or, with pgvector in `pgvector` (its schema),
    ranked by its operator and the vectors near the cut rescored by ``unnest``: either way the
    exact scores, hits and ties."""
    query = list(unpack(vector))
    if pgvector is None:
        sql = vector_sql.search(prefix, _named, _SCORE, _SIZE, client_id, session_id, BYTE_ORDER)
    else:
        margin = repr(rescore_margin(len(query)))
        approx = _pgvector_score(pgvector)
        sql = vector_sql.search_rescored(
            prefix, _named, approx, _SCORE, _SIZE, margin, client_id, session_id, BYTE_ORDER
        )
    params = {
        "model": model,
        "q": query,
        "dim": len(query),
        "cid": client_id,
        "sid": session_id,
        "limit": limit,
    }
    if pgvector is not None:
        params["qv"] = "[" + ",".join(map(repr, query)) + "]"
    return sql, params


def search_rows(rows: Sequence[Sequence[Any]]) -> list[SearchRow]:
    return [(float(score), str(s), int(n), str(m), float(at), None) for score, s, n, m, at in rows]
