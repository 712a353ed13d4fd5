"""The PostgreSQL search: the BM25 statement, its parameters and rows, and the backfill of rows
written before the index (schema 2).

Owns the search's SQL text and the pure steps around it, with no connection and no driver
import: shared by the sync and async twins (`sync.py`, `aio.py`) and
`setup.py`. The `tsv` column it reads is written with each row by the statements of
`sql.py`; this module does not write rows or own the schema.

Matching is `to_tsquery(search_config, search.tsquery(terms))` against the GIN-indexed `tsv`;
the text handed to `to_tsvector` is `lexical_search.index_text`, already folded (accents, case), so the
default ``simple`` configuration matches French and English words alike without the
`unaccent` extension (which needs a superuser); another configuration (``english``,
``french``: stemming, stop words) is a store option.

Ranking is BM25 computed in the statement, as SQLite's FTS5 and `lexical_search.Bm25Index` rank:
`ts_rank_cd` has no IDF, so a speaker's name (indexed with every message) counted as much as
the question's rare word; on LoCoMo it recalled 56.4% of the answers, BM25 60.5% (SQLite 61.0%).
Every row matching a term is a candidate, so a term's document frequency is counted over the
candidates exactly; N is the scope's message count (its sessions' ``last_seq``) plus the
client's live facts (an expired one is neither a candidate nor counted), so every statistic is
the scope's own, never another client's text; a row's length is its lexeme count; a term counts
once per row (messages are short).

How the statement gets there (issue 23: at 10,000 messages of a client, 2-4x less than the
statement before it, `benchmarks/results/search_cost.md`):
the index is scanned once per term (``tsv @@ term``), which says which terms each candidate
holds without testing every term against every candidate (when the scope holds a tenth of the
table or more by the planner's estimate: else the scope's rows matching any term come first,
as the planner likes, each tested per term; the table's size only picks the way, never a
score); a candidate is grouped once, by its
row's ``ctid``, into its length and the set of its terms (a bit set: bit i-1 for term i);
candidates with the same length and terms score the same, so the BM25 sum is computed once per
such kind (a handful to a few dozen), always adding the terms in their query order: the float
sum, hence the ranking and its ties, is the same whatever plan the server picks. The top rows
(with their ties) are read back by ``ctid`` in the same snapshot and ordered by score, session,
seq as before. The index has no pending list (schema 7): each per-term scan would read it whole.

Indexed with the append, not lazily as SQLite is, by measurement: `to_tsvector` and the GIN
insert (queued by ``fastupdate`` before schema 7) cost the server ~20 us a message,
while the folded text is computed in Python, so a lazy index would add two round trips (read
the payloads, write their vectors) to every turn that recalls.
"""

from __future__ import annotations

import functools
from typing import Any

from langchain_rolling_memory.core.lexical_search import index_text, message_index_text, tsquery
from langchain_rolling_memory.core.serde import loads_message
from langchain_rolling_memory.stores.contract import SearchRow
from langchain_rolling_memory.stores.postgres.sql import FACT_COLUMNS, Queries, fact_of

# BM25's term saturation and length normalisation, as `lexical_search.Bm25Index` ranks.
_K1 = 1.2
_B = 0.75

# The sessions a search may read, by their row now: read by the search statement itself (one
# snapshot with the messages), never by a look-up before it, so a session erased and re-created
# by another client between the caller's check and the search yields nothing of that client's.
# A session named with no client is searched only if it is nobody's.
_OWNED = {
    "session": "session_id = %(sid)s AND client_id IS NOT DISTINCT FROM %(cid)s::text",
    "client": "client_id = %(cid)s::text",
}
_SCOPES = {
    # (which messages, how many messages the scope holds)
    "session": (
        "m.session_id = %(sid)s AND EXISTS (SELECT 1 FROM {p}sessions WHERE " + _OWNED["session"] + ")",
        "SELECT last_seq FROM {p}sessions WHERE " + _OWNED["session"],
    ),
    "client": (
        "m.session_id IN (SELECT session_id FROM {p}sessions WHERE " + _OWNED["client"] + ")",
        "SELECT sum(last_seq) FROM {p}sessions WHERE " + _OWNED["client"],
    ),
}


# A fact not expired at the store's clock: an expired one is neither found nor counted.
_LIVE = "(f.expires_at IS NULL OR f.expires_at > %(now)s)"


# A candidate's terms as a bit set (bit i-1: the query's term i), in a bigint while there are
# at most 64 terms (`query_terms` gives at most 32), else in an exact numeric sum of powers of two.
_MASKS = {
    False: ("bit_or(1::bigint << (h.i - 1)::int)", "k.mask & (1::bigint << ({i} - 1)::int) <> 0"),
    True: ("sum(2::numeric ^ (h.i - 1))", "mod(div(k.mask, 2::numeric ^ ({i} - 1)), 2) = 1"),
}
MASK_BITS = 64

# The index is scanned once per term when the scope holds at least a tenth of the table's rows
# (by the planner's estimate; a table never analyzed counts as small): a term's index entries
# are then mostly the scope's. Else (a small client in a shared table) the scope's rows matching
# any term are found first, as the planner prefers, and each is tested against each term.
_PER_TERM_SHARE = 10


@functools.cache
def search_statement(p: str, scope: str, wide: bool = False) -> str:
    """The search of one scope (``session`` or ``client``) for table prefix `p` (validated by
    the store): the matching messages and (a client named) facts, best first, `limit` rows;
    `wide` for more than `MASK_BITS` terms."""
    where, count = (part.format(p=p) for part in _SCOPES[scope])
    facts = ", ".join(f"f.{c.strip()}" for c in FACT_COLUMNS.split(","))
    mask, has = _MASKS[wide]
    # The terms are unnested from a subquery: a plan for 3 terms and one for any number cost the
    # same to the planner, so a prepared statement settles on its generic plan (planned once)
    # instead of planning each search again (~1 ms, as much as the search of 1,000 messages).
    return f"""
        WITH terms AS (
            SELECT t.i, to_tsquery(%(cfg)s::regconfig, t.q) AS tq
            FROM unnest((SELECT %(qs)s::text[])) WITH ORDINALITY AS t(q, i)
        ),
        gate AS (
            SELECT coalesce(({count}), 0) * {_PER_TERM_SHARE} >= c.reltuples AS per_term
            FROM pg_class AS c WHERE c.oid = '{p}messages'::regclass
        ),
        hits AS (
            (SELECT m.tid, NULL::text AS fact_id, length(m.tsv)::float8 AS dl, t.i
             FROM terms AS t CROSS JOIN LATERAL (
                 SELECT m.ctid AS tid, m.session_id, m.tsv FROM {p}messages AS m WHERE m.tsv @@ t.tq OFFSET 0
             ) AS m
             WHERE {where} AND (SELECT per_term FROM gate))
            UNION ALL
            (SELECT m.tid, NULL::text, length(m.tsv)::float8, t.i
             FROM (
                 SELECT m.ctid AS tid, m.tsv FROM {p}messages AS m
                 WHERE m.tsv @@ to_tsquery(%(cfg)s::regconfig, %(q)s) AND {where} OFFSET 0
             ) AS m JOIN terms AS t ON m.tsv @@ t.tq
             WHERE NOT (SELECT per_term FROM gate))
            UNION ALL
            (SELECT NULL::tid, f.id, length(f.tsv)::float8, t.i
             FROM terms AS t JOIN {p}facts AS f ON f.tsv @@ t.tq
             WHERE f.client_id = %(cid)s::text AND {_LIVE})
        ),
        cand AS (
            SELECT h.tid, h.fact_id, h.dl, {mask} AS mask FROM hits AS h GROUP BY h.tid, h.fact_id, h.dl
        ),
        kinds AS (SELECT mask, dl, count(*) AS c FROM cand GROUP BY mask, dl),
        stats AS (
            SELECT greatest(coalesce(({count}), 0)
                            + (SELECT count(*) FROM {p}facts AS f WHERE f.client_id = %(cid)s::text AND {_LIVE}),
                            sum(c))::float8 AS n,
                   greatest(sum(dl * c) / sum(c), 1.0) AS avgdl
            FROM kinds
        ),
        df AS (
            SELECT t.i, sum(k.c)::float8 AS df FROM kinds AS k JOIN terms AS t ON {has.format(i="t.i")}
            GROUP BY t.i
        ),
        scores AS (
            SELECT k.mask, k.dl,
                   sum(ln(1 + (s.n - d.df + 0.5) / (d.df + 0.5))
                       * {_K1 + 1} / (1 + {_K1} * ({1 - _B} + {_B} * k.dl / s.avgdl)) ORDER BY d.i) AS score
            FROM kinds AS k JOIN df AS d ON {has.format(i="d.i")} CROSS JOIN stats AS s
            GROUP BY k.mask, k.dl
        ),
        top AS (
            SELECT c.tid, c.fact_id, k.score FROM cand AS c JOIN scores AS k USING (mask, dl)
            ORDER BY k.score DESC FETCH FIRST %(limit)s ROWS WITH TIES
        )
        SELECT top.score, m.session_id, m.seq, m.message, m.created_at, {facts}
        FROM top
        LEFT JOIN {p}messages AS m ON top.fact_id IS NULL AND m.ctid = top.tid
        LEFT JOIN {p}facts AS f ON f.id = top.fact_id
        ORDER BY top.score DESC, m.session_id COLLATE "C", m.seq, f.id COLLATE "C" LIMIT %(limit)s
    """


def search_params(
    q: Queries,
    terms: list[str],
    client_id: str | None,
    session_id: str | None,
    limit: int,
    config: str,
    now: float,
) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of a search of `terms` (checked scope, at least one term)
    at the store's clock `now` (for the facts' expiry)."""
    scope = "client" if session_id is None else "session"
    sql = search_statement(q.prefix, scope, len(terms) > MASK_BITS)
    params = {
        "cfg": config,
        "q": tsquery(terms),
        "qs": [tsquery([term]) for term in terms],
        "sid": session_id,
        "cid": client_id,
        "limit": limit,
        "now": now,
    }
    return sql, params


def search_rows_of(records: list[tuple[Any, ...]]) -> list[SearchRow]:
    """The backend's ranked rows of the statement's records, best first."""
    out: list[SearchRow] = []
    for score, sid, seq, payload, at, *fact in records:
        if fact[0] is not None:
            out.append((float(score), None, None, None, None, fact_of(tuple(fact))))
        else:
            out.append((float(score), str(sid), int(seq), str(payload), float(at), None))
    return out


def backfill_messages(records: list[tuple[Any, ...]], config: str) -> tuple[Any, ...]:
    """Parameters of `Queries.index_messages` for rows written before the search index."""
    texts = [message_index_text(loads_message(str(payload))) for _, _, payload in records]
    return (config, [r[0] for r in records], [int(r[1]) for r in records], texts)


def backfill_facts(records: list[tuple[Any, ...]], config: str) -> tuple[Any, ...]:
    """Parameters of `Queries.index_facts` for facts written before the search index."""
    return (config, [r[0] for r in records], [index_text(str(r[1])) for r in records])
