"""The SQLite search: index entries (their owner, length and repeated terms), the catch-up
that writes them, the statement that reads one owner's postings of the query terms with that
owner's statistics only, and their BM25 ranking.

Owns the search's SQL text and the steps around it; it is handed a connection inside the
store's transaction and imports no driver (`store.py` owns connections and transactions,
`sql.py` the schema and the other statements).

FTS5 only finds the entries holding a term (one ``MATCH`` per term, cheap); it does not rank:
its `bm25()` counts documents and lengths over the whole table, every client's, so a client's
score moved when another client wrote a word (issue 20, defect 5). A search ranks with
`lexical_search.Bm25Index`'s BM25 (same k1, b, idf and length normalisation) over the statistics of
the owner of the search, all read in one statement (`postings_statement`), then reads the best
entries' rows in the same snapshot (`rows_statement`):

* an entry's owner is its `client_id`: a fact's client, or the owner of the message's session
  (written when it is indexed, and moved by the ``sessions_claimed`` trigger in the write
  that gives an anonymous session its client). A search naming a client ranks that client's
  entries (its sessions' messages and its facts); one naming only a session ranks the entries
  of that session if it is nobody's. So the owner is checked by the statement that reads
  the postings, and a score depends on the owner's text only;
* document count and total length: each session's `indexed_seq` (its indexed messages) and
  `indexed_terms` (their summed lengths), plus the client's live facts (an expired fact,
  `expires_at <= :now`, is neither counted nor found: `gone` lists them);
* an entry's length is its count of content words (`lexical_search.indexed_words`, what
  `Bm25Index` counts) in `terms`; a term's frequency is 1 unless the entry's `repeats`
  (`` word:count`` for each content word written more than once, NULL for most) says more;
* document frequencies are counted over the owner's matching entries; each score is summed
  in query-term order, as `Bm25Index` sums, so the two backends give the same floats on the
  same data (`ranked`). Ties keep index order (an entry's `doc` number, its write order).

The ranking is Python over the postings (~1,000 for a LoCoMo question at 10,000 messages),
read as one row per term (its entries' numbers and lengths as comma-separated lists: a row
read into Python cost more than its lookup): the same BM25 computed in the statement (each
entry's terms pivoted into columns by a ``GROUP BY``) took 1.6x as long as reading the
postings and ranking them here.

Messages are indexed at the first search after their append (schema 3), facts with their row:
every session's new messages in one ``INSERT ... SELECT`` in write order (one statement per
message, measured, took 2-3x as long), their entries computed by the SQL functions every
connection registers (`FUNCTIONS`).
"""

from __future__ import annotations

import functools
import heapq
import json
import math
import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_rolling_memory.core.lexical_search import (
    Bm25Index,
    content_words,
    fts5_query,
    index_text,
    indexed_words,
    payload_index_text,
)
from langchain_rolling_memory.stores.contract import SearchRow
from langchain_rolling_memory.stores.sqlite.sql import FACT_COLUMNS, Queries, fact_of

if TYPE_CHECKING:
    from sqlite3 import Connection

_INDEX_TEXT, _TERMS, _REPEATS = "lrm_index_text", "lrm_index_terms", "lrm_index_repeats"

_REFERENCE = Bm25Index()
_K1, _B = _REFERENCE.k1, _REFERENCE.b


def idf(n: int, df: int) -> float:
    """`Bm25Index`'s inverse document frequency of a term in `df` of `n` documents."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@functools.lru_cache(maxsize=4)  # the catch-up asks for a text's length, then its repeats
def _words(indexed: str) -> tuple[str, ...]:
    return tuple(indexed_words(indexed))


def _terms(indexed: str) -> int:
    return len(_words(indexed))


def _repeats(indexed: str) -> str | None:
    words = _words(indexed)
    if len(set(words)) == len(words):
        return None
    return "".join(f" {w}:{n}" for w, n in Counter(words).items() if n > 1)


def entry(indexed: str) -> tuple[int, str | None]:
    """The length (content words) and the repeated content words (`` word:count``, None if
    none) of a folded text (`lexical_search.index_text`), as `Bm25Index` counts them."""
    return _terms(indexed), _repeats(indexed)


FUNCTIONS: dict[str, tuple[int, Callable[..., str | int | float | None]]] = {
    _INDEX_TEXT: (1, payload_index_text),  # a message's JSON -> its folded text
    _TERMS: (1, _terms),
    _REPEATS: (1, _repeats),
}
"""The SQL functions (name: arity, function) every connection registers, all deterministic."""


@functools.cache
def _index_pending(p: str) -> str:
    # OFFSET 0 keeps the subquery apart, so each message's JSON is read once, not once per column.
    return f"""
        INSERT INTO {p}search_docs (session_id, seq, client_id, text, terms, repeats)
        SELECT session_id, seq, client_id, text, {_TERMS}(text), {_REPEATS}(text) FROM (
            SELECT m.session_id, m.seq, s.client_id, {_INDEX_TEXT}(m.message) AS text
            FROM {p}sessions AS s JOIN {p}messages AS m
                ON m.session_id = s.session_id AND m.seq > s.indexed_seq
            WHERE s.indexed_seq < s.last_seq
            ORDER BY m.created_at, m.session_id, m.seq LIMIT -1 OFFSET 0
        )
    """


def index_pending(conn: Connection, q: Queries) -> None:
    """Index every message appended since the last search, in write order (a message's date
    is its write time unless an import gave one; then by date), with its session's owner,
    and add their lengths to their sessions (inside the caller's write transaction)."""
    if conn.execute(q.unindexed).fetchone():
        conn.execute(_index_pending(q.prefix))
        conn.execute(q.mark_indexed)


def index_fact(conn: Connection, q: Queries, fact_id: str, client_id: str, text: str) -> None:
    """(Re)index a fact just written: its entry goes last, as `Bm25Index.add` moves it."""
    folded = index_text(text)
    conn.execute(q.unindex_fact, (fact_id,))
    conn.execute(q.index_fact, (fact_id, client_id, folded, *entry(folded)))


def backfill_index(conn: Connection, q: Queries) -> None:
    """Schema 2: index the messages and facts written before the search index (in the
    migration's transaction, with the columns of schema 2; schema 4 completes them)."""
    messages = conn.execute(q.backfill_messages)
    conn.executemany(
        q.backfill_message, ((sid, seq, payload_index_text(payload)) for sid, seq, payload in messages)
    )
    facts = conn.execute(q.backfill_facts)
    conn.executemany(q.backfill_fact, ((fid, cid, index_text(text)) for fid, cid, text in facts))


def backfill_lengths(conn: Connection, q: Queries) -> None:
    """Schema 4: the length and repeats of every entry indexed before, then each session's
    indexed length (in the migration's transaction; read in pages, never while updating)."""
    last = 0
    while page := conn.execute(q.entries_after, (last,)).fetchall():
        conn.executemany(q.set_entry, [(*entry(str(text)), doc) for doc, text in page])
        last = page[-1][0]
    conn.execute(q.sum_indexed_terms)


# The client's expired facts (none for a search with no client).
_GONE = "SELECT id FROM {p}facts WHERE client_id = :cid AND expires_at <= :now"
_LIVE_FACTS = "client_id = :cid AND fact_id IS NOT NULL AND fact_id NOT IN (SELECT id FROM gone)"
_STATS = {
    # the owner's document count and total length: its sessions' indexed messages, its live facts
    # (each table read once for both sums)
    "client": f"""
        SELECT s.n + f.n AS n, s.total + f.total AS total
        FROM (SELECT coalesce(sum(indexed_seq), 0) AS n, coalesce(sum(indexed_terms), 0) AS total
              FROM {{p}}sessions WHERE client_id = :cid) AS s,
             (SELECT count(*) AS n, coalesce(sum(terms), 0) AS total
              FROM {{p}}search_docs WHERE {_LIVE_FACTS}) AS f
    """,
    "session": """
        SELECT coalesce(max(indexed_seq), 0) AS n, coalesce(max(indexed_terms), 0) AS total
        FROM {p}sessions WHERE session_id = :sid AND client_id IS NULL
    """,
}
_OWNED = {
    "client": "d.client_id = :cid AND (d.fact_id IS NULL OR d.fact_id NOT IN (SELECT id FROM gone))",
    "session": "d.client_id IS NULL AND d.fact_id IS NULL AND d.session_id = :sid",
}
# Where `repeats` (" word:count" for each word written more than once) lists term `i`, and
# its count there; an entry whose `repeats` does not list it holds it once.
_AT = "instr(d.repeats, ' ' || :t{i} || ':')"
_ONCE = f"(d.repeats IS NULL OR {_AT} = 0)"
_COUNT = f"CAST(substr(d.repeats, {_AT} + length(:t{{i}}) + 2) AS INTEGER)"


@functools.cache
def postings_statement(p: str, owner: str, one_session: bool, n_terms: int) -> str:
    """The postings of `n_terms` terms among `owner`'s entries (``client`` or an anonymous
    ``session``) and the owner's statistics, in one statement: a first row ``(-1, n, total,
    NULL, NULL)``, then one row per term ``(i, df, docs, lengths, repeated)``: the number of
    the owner's entries holding term `i`, then those of them shown (the client's facts and
    only `:sid`'s messages if `one_session`, else all): the entry numbers and lengths of those
    holding the term once, as comma-separated lists in the same order, and
    ``doc:length:count`` for those holding it more than once (NULLs: none).

    One row a term, not one an entry: reading a row into Python cost more than the row's
    lookup (~1,500 postings for a recall at 10,000 synthetic messages); the lists are split
    by `str.split`.
    """
    shown = "(d.fact_id IS NOT NULL OR d.session_id = :sid) AND " if one_session else ""

    def term(i: int) -> str:
        once, count = _ONCE.format(i=i), _COUNT.format(i=i)
        return f"""SELECT {i}, count(*),
               group_concat(CASE WHEN {shown}{once} THEN d.doc END),
               group_concat(CASE WHEN {shown}{once} THEN d.terms END),
               group_concat(CASE WHEN {shown}NOT {once} THEN d.doc || ':' || d.terms || ':' || {count} END)
        FROM {p}search JOIN {p}search_docs AS d ON d.doc = {p}search.rowid
        WHERE {p}search MATCH :q{i} AND {_OWNED[owner]}"""

    return f"""
        WITH gone AS ({_GONE.format(p=p)})
        SELECT -1, n, total, NULL, NULL FROM ({_STATS[owner].format(p=p)})
        UNION ALL
        {" UNION ALL ".join(term(i) for i in range(n_terms))}
    """


_TERM = operator.itemgetter(0)

_ROWS_BATCHES = (10, 100)
"""The number of entries one read of the ranked rows asks for: 10 (the default search), else
100 at a time; fewer are padded with NULL, so the statements are few and stay prepared."""


@functools.cache
def rows_statement(p: str, size: int) -> str:
    """The message (NULLs for a fact) and the fact id (NULL for a message) of up to `size`
    entries, by entry number (in no order); a fact's row is read by `fact_statement`, so a
    message's row carries no column of the facts table."""
    marks = ", ".join(["?"] * size)
    return f"""
        SELECT d.doc, d.session_id, d.seq, m.message, m.created_at, d.fact_id
        FROM {p}search_docs AS d
        LEFT JOIN {p}messages AS m ON d.fact_id IS NULL AND m.session_id = d.session_id AND m.seq = d.seq
        WHERE d.doc IN ({marks})
    """


@functools.cache
def fact_statement(p: str) -> str:
    """The row of a fact found (`sql.fact_of`'s columns), by id."""
    return f"SELECT {FACT_COLUMNS} FROM {p}facts WHERE id = ?"


def rows_batches(docs: Sequence[int]) -> list[tuple[int, list[int | None]]]:
    """How `rows_statement` reads `docs`: ``(size, parameters)`` pairs, each padded with NULL
    (which no entry number equals) to one of `_ROWS_BATCHES`."""
    small, large = _ROWS_BATCHES
    size = small if len(docs) <= small else large
    out: list[tuple[int, list[int | None]]] = []
    for at in range(0, len(docs), size):
        part: list[int | None] = list(docs[at : at + size])
        out.append((size, part + [None] * (size - len(part))))
    return out


def search_terms(terms: Sequence[str]) -> list[str]:
    """The terms a search looks for: each content word once as `Bm25Index` reads them (a
    folded word, not a stop word), in query order."""
    return [t for t in dict.fromkeys(terms) if content_words(t) == [t]]


def search(
    q: Queries, terms: Sequence[str], client_id: str | None, session_id: str | None, now: float
) -> tuple[str, dict[str, Any]] | None:
    """The postings statement and parameters of a search (a checked scope) at the store's
    clock `now` (for the facts' expiry) of `terms` (`search_terms`), None if there is none."""
    unique = list(terms)
    if not unique:
        return None
    owner = "client" if client_id is not None else "session"
    statement = postings_statement(
        q.prefix, owner, client_id is not None and session_id is not None, len(unique)
    )
    params: dict[str, Any] = {"cid": client_id, "sid": session_id, "now": now}
    for i, term in enumerate(unique):
        params[f"t{i}"] = term
        params[f"q{i}"] = fts5_query([term])
    return statement, params


def _integers(listed: str) -> list[int]:
    """A comma-separated list of integers (`group_concat`'s), read in C: twice as fast as
    ``map(int, listed.split(","))``."""
    return cast("list[int]", json.loads(f"[{listed}]"))


def ranked(postings: list[tuple[Any, ...]], limit: int) -> list[tuple[float, int]]:
    """The best `limit` ``(score, doc)`` of the rows of `postings_statement`, best first, ties
    in entry order.

    `lexical_search.bm25_scores`'s arithmetic, operation for operation: the idf of each term
    from its count of the owner's entries, each entry's parts summed in query-term order
    (the rows sorted by term; within a term, each entry gets one part, in any order), so the
    floats are those of `Bm25Index`; a part depends on the term, the frequency and the
    length only, so that of an entry holding the term once is computed once per length (most
    entries of a term share a few). The sums are kept negated (negation is exact and IEEE
    sums are symmetric), so the smallest ``(-score, doc)`` pairs are the best, compared
    without a key function.
    """
    n = total = 0
    terms = []
    for row in postings:
        if row[0] < 0:
            n, total = int(row[1]), int(row[2])
        else:
            terms.append(row)
    terms.sort(key=_TERM)  # UNION ALL gives them in term order already
    k1, b = _K1, _B
    mean = total / n if n else 0.0
    mean = mean or 1.0
    k1p1 = k1 + 1

    def norm(dl: int) -> float:  # `bm25_scores`'s
        return k1 * (1 - b + b * dl / mean)

    negated: dict[int, float] = {}
    get = negated.get
    for _, df, docs, lengths, repeated in terms:
        if not df:  # no entry of the owner holds the term
            continue
        weight = idf(n, int(df))
        if docs is not None:
            tf = 1
            dls = _integers(lengths)
            once = {dl: weight * tf * k1p1 / (tf + norm(dl)) for dl in set(dls)}  # by length
            for doc, part in zip(_integers(docs), map(once.__getitem__, dls), strict=True):
                negated[doc] = get(doc, 0.0) - part
        if repeated is not None:
            for item in repeated.split(","):
                doc, dl, tf = map(int, item.split(":"))
                negated[doc] = get(doc, 0.0) - weight * tf * k1p1 / (tf + norm(dl))
    best = heapq.nsmallest(limit, zip(negated.values(), negated.keys(), strict=True))
    return [(-score, doc) for score, doc in best]


def search_rows_of(
    top: Sequence[tuple[float, int]], records: Sequence[tuple[Any, ...]], facts: Mapping[str, Sequence[Any]]
) -> list[SearchRow]:
    """Ranked entries: `top` (`ranked`) with the rows `rows_statement` read for them and the
    facts' rows (`fact_statement`) by id; an entry whose row is gone is dropped."""
    found = {int(doc): rest for doc, *rest in records}
    out: list[SearchRow] = []
    for score, doc in top:
        row = found.get(doc)
        if row is None:
            continue
        sid, seq, payload, at, fact_id = row
        if fact_id is not None:
            fact = facts.get(fact_id)
            if fact is not None:
                out.append((float(score), None, None, None, None, fact_of(fact)))
        elif payload is not None:
            out.append((float(score), str(sid), int(seq), str(payload), float(at), None))
    return out
