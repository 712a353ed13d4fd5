"""The SQL of dense vectors shared by the SQLite and PostgreSQL backends: the listing of messages
without a vector, and the brute-force search, each with the owner filter in its statement.

Owns statement text only (no driver, no connection); each backend gives its placeholder style
and writes vectors with its own statement. PostgreSQL scores in SQL (`search`, a sum over
``unnest`` of two ``REAL[]``); SQLite reads the scope's vectors (`scope_vectors`), ranks them in
the process (`stores.vector_rank.closest`) and reads the best ones' messages (`rows_at`), in one
snapshot. The scope is the
lexical search's: one session (only if its owner is the searching client, or nobody's for a
run naming none) or the sessions a client owns; the listing may also span every session.
"""

from __future__ import annotations

from collections.abc import Callable

Placeholder = Callable[[str], str]
"""A named parameter in a backend's style: ``lambda n: f":{n}"`` or ``lambda n: f"%({n})s"``."""


def _scope(ph: Placeholder, client_id: str | None, session_id: str | None, *, search: bool) -> str:
    if session_id is not None:
        # A search sees the session only if its owner is the searching client (None: nobody).
        owner = f" AND s.client_id IS NOT DISTINCT FROM {ph('cid')}" if search else ""
        return f"s.session_id = {ph('sid')}{owner}"
    if client_id is not None:
        return f"s.client_id = {ph('cid')}"
    return "1 = 1"


def unembedded(
    p: str, ph: Placeholder, client_id: str | None, session_id: str | None, collate: str = ""
) -> str:
    """Messages with no vector of the model (``model``), in the scope, by session then seq
    (``limit``): session id, seq, the session's generation, the stored JSON. `collate` follows
    the session id in the order (PostgreSQL's ``' COLLATE "C"'``: code point order, as every
    backend, whatever the database's collation)."""
    return (
        f"SELECT m.session_id, m.seq, s.generation, m.message FROM {p}messages AS m "
        f"JOIN {p}sessions AS s ON s.session_id = m.session_id "
        f"WHERE {_scope(ph, client_id, session_id, search=False)} AND NOT EXISTS (SELECT 1 FROM {p}vectors AS v "
        f"WHERE v.session_id = m.session_id AND v.seq = m.seq AND v.model = {ph('model')}) "
        f"ORDER BY m.session_id{collate}, m.seq LIMIT {ph('limit')}"
    )


def search(
    p: str,
    ph: Placeholder,
    score: str,
    size: str,
    client_id: str | None,
    session_id: str | None,
    collate: str = "",
) -> str:
    """The ``limit`` messages of the scope closest to the query: `score` computes a vector's
    cosine with it, `size` is true of the vectors of its length; rows as `contract.SearchRow`
    less the fact (score, session id, seq, JSON, date), best first, ties by session (`collate`
    after it, as in `unembedded`) and seq."""
    return (
        f"SELECT {score} AS score, m.session_id, m.seq, m.message, m.created_at FROM {p}vectors AS v "
        f"JOIN {p}sessions AS s ON s.session_id = v.session_id "
        f"JOIN {p}messages AS m ON m.session_id = v.session_id AND m.seq = v.seq "
        f"WHERE v.model = {ph('model')} AND {size} AND {_scope(ph, client_id, session_id, search=True)} "
        f"ORDER BY score DESC, m.session_id{collate}, m.seq LIMIT {ph('limit')}"
    )


def search_rescored(
    p: str,
    ph: Placeholder,
    approx: str,
    exact: str,
    size: str,
    margin: str,
    client_id: str | None,
    session_id: str | None,
    collate: str = "",
) -> str:
    """`search`, ranked first by a fast `approx` score (pgvector's, summed in float32), then by the
    `exact` one over the vectors whose fast score is within `margin` of the ``limit``-th best: the
    same hits, scores and ties as `search` with `exact`, in one statement that filters by owner
    once (the vectors' keys and fast scores are kept; the vectors themselves are read again only
    for the few rescored)."""
    return (
        f"WITH approx AS MATERIALIZED (SELECT v.session_id, v.seq, {approx} AS a FROM {p}vectors AS v "
        f"JOIN {p}sessions AS s ON s.session_id = v.session_id "
        f"WHERE v.model = {ph('model')} AND {size} AND {_scope(ph, client_id, session_id, search=True)}), "
        f"cut AS (SELECT a FROM approx ORDER BY a DESC OFFSET {ph('limit')} - 1 LIMIT 1) "
        f"SELECT {exact} AS score, m.session_id, m.seq, m.message, m.created_at FROM approx AS x "
        f"JOIN {p}vectors AS v ON v.session_id = x.session_id AND v.seq = x.seq AND v.model = {ph('model')} "
        f"JOIN {p}messages AS m ON m.session_id = x.session_id AND m.seq = x.seq "
        f"WHERE x.a >= coalesce((SELECT a FROM cut), '-Infinity'::float8) - {margin} "
        f"ORDER BY score DESC, m.session_id{collate}, m.seq LIMIT {ph('limit')}"
    )


def scope_vectors(p: str, ph: Placeholder, size: str, client_id: str | None, session_id: str | None) -> str:
    """The scope's vectors of the model (``model``) for a search ranked by the backend itself
    (`stores.vector_rank.closest`): session id, seq, vector, in no order (sorting 10,000 vectors in SQL
    copies them all: the caller sorts the keys); `size` is true of the vectors of the query's
    length. Read in one snapshot with `rows_at`."""
    return (
        f"SELECT v.session_id, v.seq, v.vector FROM {p}vectors AS v "
        f"JOIN {p}sessions AS s ON s.session_id = v.session_id "
        f"WHERE v.model = {ph('model')} AND {size} AND {_scope(ph, client_id, session_id, search=True)}"
    )


def rows_at(p: str, ph: Placeholder, count: int) -> str:
    """The JSON and date of `count` messages named by ``sid0``/``seq0``, ``sid1``/``seq1``...:
    session id, seq, JSON, date (a message gone since is not returned)."""
    keys = " OR ".join(f"(session_id = {ph(f'sid{i}')} AND seq = {ph(f'seq{i}')})" for i in range(count))
    return f"SELECT session_id, seq, message, created_at FROM {p}messages WHERE {keys}"
