"""The SQL of the SQLite backend: schema migrations, the search backfills and one statement per primitive.

Owns text and the pure steps around it (parameters, decoding rows), with no connection and no
`sqlite3` import: `store.py` holds the connections, the transactions, fork handling and the
driver's errors. Statements use ``?`` placeholders (the search, in `search.py`, ``:name``).

Search (schema 2) is FTS5 with *external content*: `{p}search_docs` holds one row per message
and fact (its `lexical_search.index_text`, already folded) and the FTS5 table `{p}search` indexes
it without a second copy of the text; triggers keep the index in step with `search_docs`,
and `search_docs` in step with every delete of a message or a fact, so no erasure path
can leave an entry behind. External content rather than contentless: SQLite before 3.43
can delete from a contentless table only if handed the exact text it indexed, which would
have to be recomputed from the message (and would break if the indexed text ever changed).
Ranking is BM25 over the statistics of the search's owner only (schema 4), read by the
statement of `search.py` (which ranks its postings and also writes the index entries).

Messages are indexed lazily (schema 3): an append writes the message only, and a session whose
`last_seq` is past its `indexed_seq` has messages to index; the first search after writes
indexes them all, every session of the file, in one transaction, in write order, so that ties
(broken by entry number) are those of indexing at each append. A turn without recall pays
nothing for search. Facts, written seldom, are indexed with their row (after the messages
appended before them, for the same order).

Every session row carries an erase generation (schema 4), set when the row is created: every
erase deletes the row, so a session re-created under the same id has a new one. An append's
rewind that withdraws a row sets a new one too: it deletes the messages past the seq kept (the
triggers take their index entries and vectors), lowers the session's `indexed_seq` and
`indexed_terms` by what was indexed of them, so the statistics are those of the rows kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_rolling_memory.core.records import Fact, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION, Reader

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,30}")
FACT_COLUMNS = "id, client_id, text, key, source, created_at, updated_at, pinned, expires_at"
# What an erase deletes by session id, in this order (the sessions row last).
_SESSION_TABLES = ("messages", "summaries", "leases", "sessions")

# Append-only: migration N brings the schema from version N-1 to N. Never edit one that shipped.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS {p}sessions (
        session_id TEXT PRIMARY KEY,
        client_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        state TEXT
    );
    CREATE INDEX IF NOT EXISTS {p}sessions_client ON {p}sessions (client_id);
    CREATE INDEX IF NOT EXISTS {p}sessions_updated ON {p}sessions (updated_at);
    CREATE TABLE IF NOT EXISTS {p}messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        message TEXT NOT NULL,
        tokens INTEGER,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS {p}summaries (
        session_id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        covered_seq INTEGER NOT NULL,
        version INTEGER NOT NULL,
        meta TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS {p}leases (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS {p}facts (
        id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        text TEXT NOT NULL,
        key TEXT,
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS {p}facts_client ON {p}facts (client_id, created_at);
    """,
    # 2: pinned facts and the search index (backfilled from the existing rows by the `backfill_*` statements).
    """
    ALTER TABLE {p}facts ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE IF NOT EXISTS {p}search_docs (
        doc INTEGER PRIMARY KEY,
        session_id TEXT,
        seq INTEGER,
        client_id TEXT,
        fact_id TEXT,
        text TEXT NOT NULL
    );
    CREATE UNIQUE INDEX IF NOT EXISTS {p}search_docs_message
        ON {p}search_docs (session_id, seq) WHERE fact_id IS NULL;
    CREATE UNIQUE INDEX IF NOT EXISTS {p}search_docs_fact ON {p}search_docs (fact_id) WHERE fact_id IS NOT NULL;
    CREATE VIRTUAL TABLE IF NOT EXISTS {p}search USING fts5(
        text, content='{p}search_docs', content_rowid='doc', tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER IF NOT EXISTS {p}search_docs_added AFTER INSERT ON {p}search_docs BEGIN
        INSERT INTO {p}search (rowid, text) VALUES (new.doc, new.text);
    END;
    CREATE TRIGGER IF NOT EXISTS {p}search_docs_gone AFTER DELETE ON {p}search_docs BEGIN
        INSERT INTO {p}search ({p}search, rowid, text) VALUES ('delete', old.doc, old.text);
    END;
    CREATE TRIGGER IF NOT EXISTS {p}messages_unindexed AFTER DELETE ON {p}messages BEGIN
        DELETE FROM {p}search_docs WHERE session_id = old.session_id AND seq = old.seq AND fact_id IS NULL;
    END;
    CREATE TRIGGER IF NOT EXISTS {p}facts_unindexed AFTER DELETE ON {p}facts BEGIN
        DELETE FROM {p}search_docs WHERE fact_id = old.id;
    END;
    """,
    # 3: messages are indexed at the first search after their append, not with it: a session's
    # `indexed_seq` is the last seq in the index (everything, for rows written at schema 2).
    """
    ALTER TABLE {p}sessions ADD COLUMN indexed_seq INTEGER NOT NULL DEFAULT 0;
    UPDATE {p}sessions SET indexed_seq = last_seq;
    CREATE INDEX IF NOT EXISTS {p}sessions_unindexed ON {p}sessions (session_id) WHERE indexed_seq < last_seq;
    """,
    # 4 (issue 20): each session row's erase generation ('' for the rows written before: a row
    # created from now on gets a random one); BM25 statistics per owner (`search.py`):
    # each index entry's owner (a message's: its session's, moved by a trigger when an anonymous
    # session is claimed), length and repeated terms (computed by `search.backfill_lengths`),
    # each session's indexed length. A summary with no session row (an install that landed after
    # an erase before schema 4) is deleted, as on PostgreSQL.
    """
    DELETE FROM {p}summaries WHERE session_id NOT IN (SELECT session_id FROM {p}sessions);
    ALTER TABLE {p}sessions ADD COLUMN generation TEXT NOT NULL DEFAULT '';
    ALTER TABLE {p}sessions ADD COLUMN indexed_terms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE {p}search_docs ADD COLUMN terms INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE {p}search_docs ADD COLUMN repeats TEXT;
    UPDATE {p}search_docs SET client_id =
        (SELECT s.client_id FROM {p}sessions AS s WHERE s.session_id = {p}search_docs.session_id)
        WHERE fact_id IS NULL;
    CREATE INDEX IF NOT EXISTS {p}search_docs_facts ON {p}search_docs (client_id) WHERE fact_id IS NOT NULL;
    CREATE TRIGGER IF NOT EXISTS {p}sessions_claimed AFTER UPDATE OF client_id ON {p}sessions
    WHEN old.client_id IS NULL AND new.client_id IS NOT NULL BEGIN
        UPDATE {p}search_docs SET client_id = new.client_id WHERE session_id = new.session_id AND fact_id IS NULL;
    END;
    """,
    # 5 (issue 24): a fact's expiry (NULL: never, as every fact written before); `purge` finds
    # the expired ones by the partial index.
    """
    ALTER TABLE {p}facts ADD COLUMN expires_at REAL;
    CREATE INDEX IF NOT EXISTS {p}facts_expiry ON {p}facts (expires_at) WHERE expires_at IS NOT NULL;
    """,
    # 6 (issue 23): dense vectors, one per message and model (`vectors.py`); a trigger erases a
    # message's vectors with the message, on every erasure path.
    """
    CREATE TABLE IF NOT EXISTS {p}vectors (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        model TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (session_id, seq, model)
    ) WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS {p}messages_unembedded AFTER DELETE ON {p}messages BEGIN
        DELETE FROM {p}vectors WHERE session_id = old.session_id AND seq = old.seq;
    END;
    """,
    # 7: nothing here (PostgreSQL's search indexes lose their pending list); the version is
    # shared by every backend.
    "SELECT 1",
    # 8: the vectors in a rowid table, keyed by a unique index. In the WITHOUT ROWID table of 6
    # a row keeps about 1,000 bytes on its b-tree page and the rest on an overflow page of its
    # own: a 384-dimension vector (1,536 bytes) took about three times its size on disk, and a
    # search read two pages per vector. The trigger goes first (a table it names cannot be
    # renamed into place while it stands) and comes back unchanged.
    """
    DROP TRIGGER IF EXISTS {p}messages_unembedded;
    CREATE TABLE {p}vectors_rowid (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    INSERT INTO {p}vectors_rowid (session_id, seq, model, vector)
        SELECT session_id, seq, model, vector FROM {p}vectors ORDER BY session_id, seq, model;
    DROP TABLE {p}vectors;
    ALTER TABLE {p}vectors_rowid RENAME TO {p}vectors;
    CREATE UNIQUE INDEX {p}vectors_key ON {p}vectors (session_id, seq, model);
    CREATE TRIGGER {p}messages_unembedded AFTER DELETE ON {p}messages BEGIN
        DELETE FROM {p}vectors WHERE session_id = old.session_id AND seq = old.seq;
    END;
    """,
)
if len(MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one SQLite migration per schema version is required")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        msg = f"table_prefix must match [a-z_][a-z0-9_]{{0,30}}, got {prefix!r}"
        raise ConfigurationError(msg)
    return prefix


class Queries:
    """Every statement, formatted once for one table prefix (prefixes are validated)."""

    def __init__(self, p: str) -> None:
        self.prefix = p
        self.migrations = tuple(m.format(p=p) for m in MIGRATIONS)
        self.meta = f"{p}meta"
        self.has_meta = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        self.create_meta = f"CREATE TABLE IF NOT EXISTS {p}meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        self.get_version = f"SELECT value FROM {p}meta WHERE key = 'schema_version'"
        self.set_version = (
            f"INSERT INTO {p}meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
        # Schema 2 backfill: index the messages and facts written before the search index
        # (with the columns of schema 2; schema 4 completes them).
        self.backfill_messages = f"SELECT session_id, seq, message FROM {p}messages"
        self.backfill_facts = f"SELECT id, client_id, text FROM {p}facts"
        self.backfill_message = f"INSERT INTO {p}search_docs (session_id, seq, text) VALUES (?, ?, ?)"
        self.backfill_fact = f"INSERT INTO {p}search_docs (fact_id, client_id, text) VALUES (?, ?, ?)"
        # Schema 4 backfill: the lengths of the entries indexed before, page by page.
        self.entries_after = f"SELECT doc, text FROM {p}search_docs WHERE doc > ? ORDER BY doc LIMIT 1000"
        self.set_entry = f"UPDATE {p}search_docs SET terms = ?, repeats = ? WHERE doc = ?"
        self.sum_indexed_terms = (
            f"UPDATE {p}sessions SET indexed_terms = (SELECT coalesce(sum(d.terms), 0) FROM "
            f"{p}search_docs AS d WHERE d.session_id = {p}sessions.session_id AND d.fact_id IS NULL)"
        )
        # Index entries (`search.py`): a fact, its owner, its folded text, its length in
        # content words and its repeated words (messages: `search.index_pending`).
        self.index_fact = (
            f"INSERT INTO {p}search_docs (fact_id, client_id, text, terms, repeats) VALUES (?, ?, ?, ?, ?)"
        )
        self.unindex_fact = f"DELETE FROM {p}search_docs WHERE fact_id = ?"
        # Schema 3: sessions with messages appended since the last search.
        self.unindexed = f"SELECT 1 FROM {p}sessions WHERE indexed_seq < last_seq LIMIT 1"
        # Right after indexing them (same transaction): their lengths go to their sessions.
        self.mark_indexed = f"""
            UPDATE {p}sessions SET
                indexed_terms = indexed_terms + (
                    SELECT coalesce(sum(d.terms), 0) FROM {p}search_docs AS d
                    WHERE d.session_id = {p}sessions.session_id AND d.fact_id IS NULL
                        AND d.seq > {p}sessions.indexed_seq),
                indexed_seq = last_seq
            WHERE indexed_seq < last_seq
        """

        self.session_head = f"SELECT client_id, last_seq FROM {p}sessions WHERE session_id = ?"
        # A new row gets the generation passed (`backend.new_generation`); an existing one keeps its own.
        self.upsert_session = (
            f"INSERT INTO {p}sessions (session_id, client_id, created_at, updated_at, last_seq, generation) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
            "last_seq = excluded.last_seq, updated_at = excluded.updated_at, "
            f"client_id = COALESCE({p}sessions.client_id, excluded.client_id)"
        )
        # An append's rewind (`AppendBatch.rewind`): the owner, the last seq and the seq a
        # summary covers, read in the append's transaction; then the session's statistics lose
        # the entries past the seq kept (before the delete, whose triggers drop the entries and
        # vectors) and it gets a new generation; then the messages past it are deleted.
        self.rewind_head = (
            "SELECT s.client_id, s.last_seq, coalesce(m.covered_seq, 0) "
            f"FROM {p}sessions AS s LEFT JOIN {p}summaries AS m ON m.session_id = s.session_id "
            "WHERE s.session_id = ?"
        )
        self.withdraw_indexed = (
            f"UPDATE {p}sessions SET indexed_terms = indexed_terms - (SELECT coalesce(sum(d.terms), 0) "
            f"FROM {p}search_docs AS d WHERE d.session_id = {p}sessions.session_id AND d.fact_id IS NULL "
            "AND d.seq > ?1), indexed_seq = min(indexed_seq, ?1), generation = ?2 WHERE session_id = ?3"
        )
        self.withdraw_messages = f"DELETE FROM {p}messages WHERE session_id = ? AND seq > ?"
        self.insert_messages = (
            f"INSERT INTO {p}messages (session_id, seq, message, tokens, created_at) VALUES (?, ?, ?, ?, ?)"
        )
        self._read = (
            f"SELECT seq, message, tokens, created_at FROM {p}messages WHERE session_id = ? AND seq > ?"
        )
        self.last_seq = f"SELECT last_seq FROM {p}sessions WHERE session_id = ?"
        self.get_summary = (
            f"SELECT text, covered_seq, version, meta, updated_at FROM {p}summaries WHERE session_id = ?"
        )
        # A turn's first read: the owner, the generation and the summary (NULLs: none), one row
        # if the session has a row.
        self.turn_head = (
            "SELECT s.client_id, s.generation, m.text, m.covered_seq, m.version, m.meta, m.updated_at "
            f"FROM {p}sessions AS s LEFT JOIN {p}summaries AS m ON m.session_id = s.session_id "
            "WHERE s.session_id = ?"
        )
        self.session_mark = f"SELECT client_id, generation FROM {p}sessions WHERE session_id = ?"
        self.lease_held = f"SELECT 1 FROM {p}leases WHERE session_id = ? AND owner = ?"
        self.insert_summary = (
            f"INSERT INTO {p}summaries (session_id, text, covered_seq, version, meta, updated_at) "
            "VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(session_id) DO NOTHING"
        )
        self.update_summary = (
            f"UPDATE {p}summaries SET text = ?, covered_seq = ?, version = version + 1, "
            "meta = ?, updated_at = ? WHERE session_id = ? AND version = ?"
        )
        self.claim = (
            f"INSERT INTO {p}leases (session_id, owner, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, "
            f"expires_at = excluded.expires_at WHERE {p}leases.expires_at <= ? "
            f"OR {p}leases.owner = excluded.owner"
        )
        self.release = f"DELETE FROM {p}leases WHERE session_id = ? AND owner = ?"
        self.get_session = f"SELECT client_id, created_at, updated_at FROM {p}sessions WHERE session_id = ?"
        self.list_sessions = f"SELECT session_id FROM {p}sessions WHERE client_id = ? ORDER BY session_id"
        self.get_state = f"SELECT state FROM {p}sessions WHERE session_id = ?"
        self.session_client = f"SELECT client_id FROM {p}sessions WHERE session_id = ?"
        self.session_client_state = f"SELECT client_id, state FROM {p}sessions WHERE session_id = ?"
        self.set_state = (
            f"INSERT INTO {p}sessions (session_id, client_id, created_at, updated_at, state, generation) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET state = excluded.state, "
            f"updated_at = excluded.updated_at, client_id = COALESCE({p}sessions.client_id, excluded.client_id)"
        )
        self.client_sessions = f"SELECT session_id FROM {p}sessions WHERE client_id = ?"
        self.old_sessions = f"SELECT session_id FROM {p}sessions WHERE updated_at < ?"
        self.delete_session = tuple(f"DELETE FROM {p}{t} WHERE session_id = ?" for t in _SESSION_TABLES)
        # The live facts at the store's clock (the second parameter): an expired one is left out.
        self.list_facts = (
            f"SELECT {FACT_COLUMNS} FROM {p}facts WHERE client_id = ? "
            "AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at, id"
        )
        self.upsert_fact = (
            f"INSERT INTO {p}facts ({FACT_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET text = excluded.text, "
            "key = excluded.key, source = excluded.source, updated_at = excluded.updated_at, "
            "pinned = excluded.pinned, expires_at = excluded.expires_at "
            f"WHERE {p}facts.client_id = excluded.client_id"
        )
        self.delete_expired_facts = f"DELETE FROM {p}facts WHERE expires_at <= ?"
        self.delete_fact = f"DELETE FROM {p}facts WHERE client_id = ? AND id = ?"
        self.delete_facts = f"DELETE FROM {p}facts WHERE client_id = ?"
        # FTS5 deletes are markers until segments merge: merging moves erased words off the pages.
        self.optimize_search = f"INSERT INTO {p}search ({p}search) VALUES ('optimize')"

    def messages_after(
        self, points: Sequence[tuple[str, int]], reader: Reader | None
    ) -> tuple[str, tuple[Any, ...]]:
        """One statement: the first message after each (session, seq), none for a session
        whose owner (read in the same statement) the reader may not read."""
        p = self.prefix
        sql = (
            f"WITH p(i, sid, after_seq) AS (VALUES {', '.join(['(?, ?, ?)'] * len(points))}) "
            f"SELECT p.i, m.seq, m.message, m.tokens, m.created_at FROM p JOIN {p}messages AS m "
            f"ON m.session_id = p.sid AND m.seq = (SELECT MIN(seq) FROM {p}messages "
            "WHERE session_id = p.sid AND seq > p.after_seq) "
            f"WHERE NOT EXISTS (SELECT 1 FROM {p}sessions WHERE session_id = p.sid AND ? "
            "AND client_id IS NOT ? AND (client_id IS NOT NULL OR ?))"
        )
        values = [x for i, (sid, seq) in enumerate(points, 1) for x in (i, sid, seq)]
        check = (
            reader is not None,
            None if reader is None else reader.client_id,
            reader is not None and reader.exact,
        )
        return sql, (*values, *check)

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool
    ) -> tuple[str, tuple[Any, ...]]:
        """The statement of `_read`; with `newest` its rows come newest first (see `rows_of`)."""
        if limit is None:
            return f"{self._read} ORDER BY seq", (session_id, after_seq)
        if newest:
            return f"{self._read} ORDER BY seq DESC LIMIT ?", (session_id, after_seq, limit)
        return f"{self._read} ORDER BY seq LIMIT ?", (session_id, after_seq, limit)


def rows_of(records: list[tuple[Any, ...]], newest: bool, limit: int | None) -> list[Row]:
    """Transcript rows in ascending order, from the rows of `Queries.read`."""
    rows: list[Row] = [(int(s), str(m), None if t is None else int(t), float(at)) for s, m, t, at in records]
    if newest and limit is not None:
        rows.reverse()
    return rows


def summary_of(record: Sequence[Any] | None) -> SummaryRecord | None:
    if record is None:
        return None
    text, covered, version, meta, updated = record
    return SummaryRecord(str(text), int(covered), int(version), json.loads(str(meta)), float(updated))


def session_of(session_id: str, record: Sequence[Any] | None) -> SessionInfo | None:
    if record is None:
        return None
    client, created, updated = record
    return SessionInfo(session_id, None if client is None else str(client), float(created), float(updated))


def fact_of(row: Sequence[Any]) -> Fact:
    fact_id, client_id, text, key, source, created_at, updated_at, pinned, expires_at = row
    expires = None if expires_at is None else float(expires_at)
    return Fact(fact_id, client_id, text, key, source, created_at, updated_at, bool(pinned), expires)


def fact_params(fact: Fact) -> tuple[Any, ...]:
    """The parameters of `Queries.upsert_fact`, in `FACT_COLUMNS` order."""
    return (
        fact.id,
        fact.client_id,
        fact.text,
        fact.key,
        fact.source,
        fact.created_at,
        fact.updated_at,
        int(fact.pinned),
        fact.expires_at,
    )
