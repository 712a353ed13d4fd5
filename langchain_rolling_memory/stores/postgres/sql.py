"""The SQL of the PostgreSQL backend: schema migrations and one statement per primitive.

Owns text and the pure steps around it (parameters, decoding rows, mapping driver errors),
with no connection and no driver import: shared by the sync twin in `sync.py` and
the async one in `aio.py`. Each statement is a single round trip; the ones that must be atomic are one
statement (data-modifying CTEs run in one snapshot, in autocommit mode), but for an append with
a rewind: two statements in one transaction, pipelined (one round trip; see `Queries.rewind`).

Erase generation (schema 4): a statement that creates a session row writes a fresh
`backend.new_generation()` into it; an erase deletes the row, so its id's next row has another.
The turn read returns it with the owner; a summary install and a fact write planned from a read
lock the session row (``FOR KEY SHARE``: appends go on, an erase waits) only if it still has
that generation, in the statement or transaction that writes, so an erase is wholly before
(and the write refused) or wholly after (and it erases what was written).

Search (schema 2): a `tsv tsvector` column on messages and facts, written with the row by the
same statement, so the index follows every append and is erased with its row; the search
statement itself, BM25 in SQL, and the backfill of older rows are in `search.py`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_rolling_memory.core.lexical_search import index_text
from langchain_rolling_memory.core.records import Fact, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError, StoreError
from langchain_rolling_memory.stores.contract import (
    SCHEMA_VERSION,
    AppendBatch,
    MemoryRows,
    Reader,
    SummaryWrite,
    TurnRows,
    new_generation,
)
from langchain_rolling_memory.stores.lifecycle import not_set_up
from langchain_rolling_memory.stores.postgres.deadlines import Deadlines, Watch, sever

logger = logging.getLogger("langchain_rolling_memory")

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,30}")
_CONFIG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?")
FACT_COLUMNS = "id, client_id, text, key, source, created_at, updated_at, pinned, expires_at"

# Append-only: migration N brings the schema from version N-1 to N. Never edit one that shipped.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS {p}sessions (
        session_id TEXT PRIMARY KEY,
        client_id TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT 0,
        state TEXT
    );
    CREATE INDEX IF NOT EXISTS {p}sessions_client ON {p}sessions (client_id);
    CREATE INDEX IF NOT EXISTS {p}sessions_updated ON {p}sessions (updated_at);
    CREATE TABLE IF NOT EXISTS {p}messages (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        message TEXT NOT NULL,
        tokens INTEGER,
        batch TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE IF NOT EXISTS {p}summaries (
        session_id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        covered_seq BIGINT NOT NULL,
        version BIGINT NOT NULL,
        meta TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE IF NOT EXISTS {p}leases (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE IF NOT EXISTS {p}facts (
        id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        text TEXT NOT NULL,
        key TEXT,
        source TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX IF NOT EXISTS {p}facts_client ON {p}facts (client_id, created_at)
    """,
    # 2: the search index (backfilled from the existing rows by the store) and pinned facts.
    """
    ALTER TABLE {p}messages ADD COLUMN IF NOT EXISTS tsv tsvector;
    ALTER TABLE {p}facts ADD COLUMN IF NOT EXISTS tsv tsvector;
    ALTER TABLE {p}facts ADD COLUMN IF NOT EXISTS pinned BOOLEAN NOT NULL DEFAULT FALSE;
    CREATE INDEX IF NOT EXISTS {p}messages_tsv ON {p}messages USING GIN (tsv);
    CREATE INDEX IF NOT EXISTS {p}facts_tsv ON {p}facts USING GIN (tsv)
    """,
    # 3: nothing to convert here (SQLite's lazy index); the version is shared by every backend.
    "SELECT 1",
    # 4: the erase generation of each session row ('' for the rows written before: every row
    # created from now on gets a fresh one). A summary without a session row is what an install
    # after an erase left behind (issue 20): the next owner of that id would see it, so it goes.
    """
    ALTER TABLE {p}sessions ADD COLUMN IF NOT EXISTS generation TEXT NOT NULL DEFAULT '';
    DELETE FROM {p}summaries AS s
        WHERE NOT EXISTS (SELECT 1 FROM {p}sessions AS t WHERE t.session_id = s.session_id)
    """,
    # 5 (issue 24): a fact's expiry (NULL: never, as every fact written before); `purge` finds
    # the expired ones by the partial index.
    """
    ALTER TABLE {p}facts ADD COLUMN IF NOT EXISTS expires_at DOUBLE PRECISION;
    CREATE INDEX IF NOT EXISTS {p}facts_expiry ON {p}facts (expires_at) WHERE expires_at IS NOT NULL
    """,
    # 6 (issue 23): dense vectors, one per message and model, as plain REAL[] (`vectors.py`);
    # the foreign key erases them with their message in the erasing statement itself.
    """
    CREATE TABLE IF NOT EXISTS {p}vectors (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        model TEXT NOT NULL,
        vector REAL[] NOT NULL,
        PRIMARY KEY (session_id, seq, model),
        FOREIGN KEY (session_id, seq) REFERENCES {p}messages (session_id, seq) ON DELETE CASCADE
    )
    """,
    # 7 (issue 23): the search indexes without a pending list (``fastupdate``): the search scans
    # the index once per query term (`search.py`), and each scan read the whole pending list
    # (up to 4 MB of rows not yet merged, flushed when autovacuum comes by), so its cost hung on
    # autovacuum's timing; an append now merges its row's lexemes itself. What is pending goes in.
    """
    ALTER INDEX {p}messages_tsv SET (fastupdate = off);
    ALTER INDEX {p}facts_tsv SET (fastupdate = off);
    SELECT gin_clean_pending_list('{p}messages_tsv'::regclass);
    SELECT gin_clean_pending_list('{p}facts_tsv'::regclass)
    """,
    # 8: nothing here (SQLite's vectors move to a rowid table); the version is shared by every
    # backend.
    "SELECT 1",
)
if len(MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one PostgreSQL migration per schema version is required")

TABLES = ("meta", "sessions", "messages", "summaries", "leases", "facts", "vectors")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        msg = f"table_prefix must match [a-z_][a-z0-9_]{{0,30}}, got {prefix!r}"
        raise ConfigurationError(msg)
    return prefix


def check_config(config: str) -> str:
    """A text search configuration name, checked before it reaches a statement."""
    if not isinstance(config, str) or not _CONFIG.fullmatch(config):
        msg = (
            f"search_config must be a text search configuration name like 'simple' or "
            f"'english', got {config!r}; list them with: SELECT cfgname FROM pg_ts_config"
        )
        raise ConfigurationError(msg)
    return config


class Queries:
    """Every statement, formatted once for one table prefix (prefixes are validated)."""

    def __init__(self, p: str) -> None:
        self.prefix = p
        self.lock_key = f"langchain-rolling-memory:{p}"
        self.create_meta = f"CREATE TABLE IF NOT EXISTS {p}meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        self.get_version = f"SELECT value FROM {p}meta WHERE key = 'schema_version'"
        self.set_version = (
            f"INSERT INTO {p}meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.migrations = [[s for s in m.format(p=p).split(";") if s.strip()] for m in MIGRATIONS]
        tables = ", ".join(
            f"{p}{t}" for t in ("messages", "summaries", "sessions", "leases", "facts", "vectors")
        )
        self.vacuum_full = f"VACUUM (FULL) {tables}"
        self.vacuum_plain = f"VACUUM {tables}"
        # Appending is one statement: the session row is upserted (its lock serializes the
        # writers of one session and hands out gap-free seqs), and the messages are inserted
        # only if the ownership check let the upsert through (the session is nobody's or the
        # named client's: an append naming no client is refused on an owned session); no row
        # back means refused.
        # A write that names a client first takes that client's lock, shared (`client_lock`):
        # `forget` takes it exclusive, so it waits for such writes and none starts meanwhile.
        client_lock = (
            "SELECT CASE WHEN %(cid)s::text IS NULL THEN NULL "
            "ELSE pg_advisory_xact_lock_shared(hashtext(%(lock)s)) END"
        )
        self.append = f"""
            WITH s AS (
                INSERT INTO {p}sessions AS t
                    (session_id, client_id, created_at, updated_at, last_seq, generation)
                SELECT %(sid)s, %(cid)s, %(now)s, %(now)s, %(n)s, %(gen)s FROM ({client_lock}) AS lock
                ON CONFLICT (session_id) DO UPDATE SET
                    last_seq = t.last_seq + %(n)s,
                    updated_at = excluded.updated_at,
                    client_id = COALESCE(t.client_id, excluded.client_id)
                WHERE t.client_id IS NULL OR t.client_id = excluded.client_id
                RETURNING t.last_seq
            )
            INSERT INTO {p}messages (session_id, seq, message, tokens, batch, created_at, tsv)
            SELECT %(sid)s, s.last_seq - %(n)s + m.ord, m.message, m.tokens, %(batch)s, m.at,
                   to_tsvector(%(cfg)s::regconfig, m.text)
            FROM s, unnest(%(msgs)s::text[], %(toks)s::int[], %(ats)s::float8[], %(texts)s::text[])
                WITH ORDINALITY AS m(message, tokens, at, text, ord)
            RETURNING seq
        """
        # An append with a rewind (`AppendBatch.rewind`) is one transaction of two statements,
        # sent with its BEGIN and COMMIT in one pipeline (one round trip). `rewind_lock` takes
        # the client's shared lock and the session row's strongest lock (setting the key column,
        # as an erase's lock does: a summary install or a vector write holding the row FOR KEY
        # SHARE is waited for), creating the row if there is none (as the append would). Then
        # `rewind` runs in a snapshot taken once that lock is held, so it sees every write to
        # the session that committed before it (another rewind's rows, a summary's covered
        # seq): a single statement would read the rows of a snapshot taken before it waited.
        # It checks the owner and, only if the owner lets it through, moves the session's last
        # seq back to the last row kept (past the rewind and the summary's covered seq), gives
        # the row a new generation if a row goes, deletes the rows past it (their `tsv` with
        # them, their vectors by the foreign key's cascade; the search's statistics count the
        # scope's rows by `last_seq`) and, once they are gone (`gone` reads the deletes first),
        # inserts the new rows after the last kept. Its rows: the new seqs, and one NULL when
        # the owner check passed (no row: refused).
        self.rewind_lock = f"""
            INSERT INTO {p}sessions AS t
                (session_id, client_id, created_at, updated_at, last_seq, generation)
            SELECT %(sid)s, %(cid)s, %(now)s, %(now)s, 0, %(gen)s FROM ({client_lock}) AS lock
            ON CONFLICT (session_id) DO UPDATE SET session_id = excluded.session_id
        """
        self.rewind = f"""
            WITH k AS (
                SELECT greatest(%(back)s::bigint, coalesce(
                    (SELECT covered_seq FROM {p}summaries WHERE session_id = %(sid)s), 0)) AS keep
            ),
            s AS (
                UPDATE {p}sessions AS t SET
                    last_seq = least(t.last_seq, k.keep) + %(n)s,
                    updated_at = %(now)s,
                    client_id = COALESCE(t.client_id, %(cid)s::text),
                    generation = CASE WHEN EXISTS (
                        SELECT 1 FROM {p}messages WHERE session_id = %(sid)s AND seq > k.keep
                    ) THEN %(gen)s ELSE t.generation END
                FROM k
                WHERE t.session_id = %(sid)s AND (t.client_id IS NULL OR t.client_id = %(cid)s::text)
                RETURNING t.last_seq, k.keep
            ),
            d AS (
                DELETE FROM {p}messages AS m USING s
                WHERE m.session_id = %(sid)s AND m.seq > s.keep
                RETURNING m.seq
            ),
            i AS (
                INSERT INTO {p}messages (session_id, seq, message, tokens, batch, created_at, tsv)
                SELECT %(sid)s, s.last_seq - %(n)s + m.ord, m.message, m.tokens, %(batch)s, m.at,
                       to_tsvector(%(cfg)s::regconfig, m.text)
                FROM s, (SELECT count(*) FROM d) AS gone,
                    unnest(%(msgs)s::text[], %(toks)s::int[], %(ats)s::float8[], %(texts)s::text[])
                    WITH ORDINALITY AS m(message, tokens, at, text, ord)
                RETURNING seq
            )
            SELECT seq FROM i UNION ALL SELECT NULL FROM s
        """
        # The retry of an append whose outcome is unknown: lock the session row first (this
        # waits for a still-running first attempt), then look for the batch in a fresh snapshot.
        self.lock_session = (
            f"INSERT INTO {p}sessions AS t (session_id, client_id, created_at, updated_at, generation) "
            "VALUES (%s, NULL, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET last_seq = t.last_seq"
        )
        self.find_batch = f"SELECT seq FROM {p}messages WHERE session_id = %s AND batch = %s ORDER BY seq"
        self.owner_of = f"SELECT client_id FROM {p}sessions WHERE session_id = %s"
        base = f"SELECT seq, message, tokens, created_at FROM {p}messages WHERE session_id = %s AND seq > %s"
        self.read_all = f"{base} ORDER BY seq"
        self.read_newest = f"{base} ORDER BY seq DESC LIMIT %s"
        self.read_oldest = f"{base} ORDER BY seq LIMIT %s"
        self.last_seq = f"SELECT last_seq FROM {p}sessions WHERE session_id = %s"
        # The first message after each (session, seq) of a batch (recall's answers), one
        # statement: a session whose owner the reader may not read, seen in the same snapshot,
        # gives nothing (as `read_memory`'s check). p.i: the point's place in the batch.
        self.messages_after = f"""
            SELECT p.i, m.seq, m.message, m.tokens, m.created_at
            FROM unnest(%(sids)s::text[], %(seqs)s::bigint[]) WITH ORDINALITY AS p(sid, after_seq, i)
            CROSS JOIN LATERAL (
                SELECT seq, message, tokens, created_at FROM {p}messages
                WHERE session_id = p.sid AND seq > p.after_seq ORDER BY seq LIMIT 1
            ) AS m
            WHERE NOT EXISTS (
                SELECT 1 FROM {p}sessions WHERE session_id = p.sid AND %(check)s
                AND client_id IS DISTINCT FROM %(rcid)s::text AND (client_id IS NOT NULL OR %(exact)s)
            )
        """
        self.get_summary = (
            f"SELECT text, covered_seq, version, meta, updated_at FROM {p}summaries WHERE session_id = %s"
        )
        # One statement, one snapshot: the tail starts right after the summary it comes with,
        # and the session row (kind 2: its owner and generation) is read at the same instant.
        # A message (kind 1) carries its date in the column that holds the summary's.
        self.summary_and_tail = f"""
            WITH s AS (
                SELECT text, covered_seq, version, meta, updated_at FROM {p}summaries
                WHERE session_id = %(sid)s
            )
            (SELECT 2 AS kind, NULL::bigint AS seq, client_id AS message, NULL::bigint AS tokens,
                    generation AS meta, NULL::float8 AS updated_at
             FROM {p}sessions WHERE session_id = %(sid)s)
            UNION ALL
            (SELECT 0, version, text, covered_seq, meta, updated_at FROM s)
            UNION ALL
            (SELECT 1, seq, message, tokens::bigint, NULL, created_at FROM {p}messages
             WHERE session_id = %(sid)s AND seq > COALESCE((SELECT covered_seq FROM s), 0)
             ORDER BY seq DESC LIMIT %(limit)s)
        """
        # What a turn reads (`read_memory`), one statement, one snapshot: `summary_and_tail`'s
        # rows, the session's state (kind 3) and the client's live facts (kind 4, `seq` their
        # rank oldest first), five more columns carrying a fact's fields. Checked (`check`),
        # a session its owner does not let the reader (`rcid`, `exact`: `Reader`) see sends
        # nothing but its owner row: its text never leaves the server.
        no_fact = "NULL::text, NULL::text, NULL::float8, NULL::boolean, NULL::float8"
        self.read_memory = f"""
            WITH ok AS (
                SELECT NOT EXISTS (
                    SELECT 1 FROM {p}sessions WHERE session_id = %(sid)s AND %(check)s
                    AND client_id IS DISTINCT FROM %(rcid)s::text AND (client_id IS NOT NULL OR %(exact)s)
                ) AS yes
            ),
            s AS (
                SELECT text, covered_seq, version, meta, updated_at FROM {p}summaries
                WHERE session_id = %(sid)s AND (SELECT yes FROM ok)
            )
            (SELECT 2 AS kind, NULL::bigint AS seq, client_id AS message, NULL::bigint AS tokens,
                    generation AS meta, NULL::float8 AS updated_at, NULL::text AS key,
                    NULL::text AS source, NULL::float8 AS created_at, NULL::boolean AS pinned,
                    NULL::float8 AS expires_at
             FROM {p}sessions WHERE session_id = %(sid)s)
            UNION ALL
            (SELECT 0, version, text, covered_seq, meta, updated_at, {no_fact} FROM s)
            UNION ALL
            (SELECT 1, seq, message, tokens::bigint, NULL, created_at, {no_fact} FROM {p}messages
             WHERE session_id = %(sid)s AND (SELECT yes FROM ok)
               AND seq > COALESCE((SELECT covered_seq FROM s), 0)
             ORDER BY seq DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 3, NULL, state, NULL, NULL, NULL, {no_fact} FROM {p}sessions
             WHERE session_id = %(sid)s AND state IS NOT NULL AND (SELECT yes FROM ok))
            UNION ALL
            (SELECT 4, row_number() OVER (ORDER BY created_at, id COLLATE "C"), text, NULL, id, updated_at, key,
                    source, created_at, pinned, expires_at
             FROM {p}facts WHERE client_id = %(cid)s AND (expires_at IS NULL OR expires_at > %(now)s))
        """
        # A summary install, only while the session row exists (with the generation it was
        # planned from, if given) and, with a lease owner, while that owner holds the lease:
        # `g` and `l` lock those rows until the install commits (the session row first, as an
        # erase does, then the lease: `l` waits for `g`), and an erase deleting them first
        # leaves nothing to lock. `g` in `l` (or the install) is an init plan: it runs first.
        found = (
            f"g AS (SELECT 1 FROM {p}sessions WHERE session_id = %(sid)s "
            "AND (%(gen)s::text IS NULL OR generation = %(gen)s::text) FOR KEY SHARE)"
        )
        leased = (
            f"l AS (SELECT 1 FROM {p}leases WHERE session_id = %(sid)s AND owner = %(owner)s "
            "AND EXISTS (SELECT 1 FROM g) FOR UPDATE)"
        )
        insert = (
            f"INSERT INTO {p}summaries (session_id, text, covered_seq, version, meta, updated_at) "
            "SELECT %(sid)s, %(text)s, %(covered)s, 1, %(meta)s, %(now)s FROM {gate} "
            "ON CONFLICT (session_id) DO NOTHING"
        )
        update = (
            f"UPDATE {p}summaries SET text = %(text)s, covered_seq = %(covered)s, version = version + 1, "
            "meta = %(meta)s, updated_at = %(now)s WHERE session_id = %(sid)s AND version = %(expected)s "
            "AND EXISTS (SELECT 1 FROM {gate})"
        )
        self.insert_summary = f"WITH {found} {insert.format(gate='g')}"
        self.update_summary = f"WITH {found} {update.format(gate='g')}"
        self.insert_summary_leased = f"WITH {found}, {leased} {insert.format(gate='l')}"
        self.update_summary_leased = f"WITH {found}, {leased} {update.format(gate='l')}"
        self.claim = (
            f"INSERT INTO {p}leases AS l (session_id, owner, expires_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
            "WHERE l.expires_at <= %s OR l.owner = excluded.owner"
        )
        self.release = f"DELETE FROM {p}leases WHERE session_id = %s AND owner = %s"
        self.get_session = f"SELECT client_id, created_at, updated_at FROM {p}sessions WHERE session_id = %s"
        self.list_sessions = (
            f'SELECT session_id FROM {p}sessions WHERE client_id = %s ORDER BY session_id COLLATE "C"'
        )
        self.get_state = f"SELECT state FROM {p}sessions WHERE session_id = %s"
        self.set_state = (
            f"INSERT INTO {p}sessions AS t (session_id, client_id, created_at, updated_at, state, generation) "
            f"SELECT %(sid)s, %(cid)s, %(now)s, %(now)s, %(state)s, %(gen)s FROM ({client_lock}) AS lock "
            "ON CONFLICT (session_id) DO UPDATE SET "
            "state = excluded.state, updated_at = excluded.updated_at, "
            "client_id = COALESCE(t.client_id, excluded.client_id) "
            "WHERE t.client_id IS NULL OR t.client_id = excluded.client_id "
            "RETURNING 1"
        )
        # The compare-and-swap of `set_state` (`expected`): the owner check, the comparison and
        # the write in one statement, each answering (wrote, the owner its snapshot read; that
        # owner only tells a refusal from a lost race, both of which wrote nothing). With no
        # state expected, the upsert writes a new row or one with no state (an erase racing it
        # holds the row: it then inserts after the erase); with a state expected, only the row
        # holding that exact text is updated (an erased row is gone, so nothing is written).
        answer = (
            f"SELECT (SELECT count(*) FROM w), (SELECT client_id FROM {p}sessions WHERE session_id = %(sid)s)"
        )
        self.set_state_if_none = (
            f"WITH w AS (INSERT INTO {p}sessions AS t "
            "(session_id, client_id, created_at, updated_at, state, generation) "
            f"SELECT %(sid)s, %(cid)s, %(now)s, %(now)s, %(state)s, %(gen)s FROM ({client_lock}) AS lock "
            "ON CONFLICT (session_id) DO UPDATE SET "
            "state = excluded.state, updated_at = excluded.updated_at, "
            "client_id = COALESCE(t.client_id, excluded.client_id) "
            "WHERE (t.client_id IS NULL OR t.client_id = excluded.client_id) AND t.state IS NULL "
            f"RETURNING 1) {answer}"
        )
        self.set_state_if = (
            f"WITH w AS (UPDATE {p}sessions AS t SET state = %(state)s, updated_at = %(now)s, "
            f"client_id = COALESCE(t.client_id, %(cid)s) FROM ({client_lock}) AS lock "
            "WHERE t.session_id = %(sid)s AND (t.client_id IS NULL OR t.client_id = %(cid)s) "
            f"AND t.state = %(expected)s RETURNING 1) {answer}"
        )
        # An erase is one transaction (see `erase`) that first locks what it erases: the
        # session rows, which an append holds while it writes, so each delete that follows
        # sees every append that committed before; then the leases before the summaries, so a
        # summary install holding its lease (`cas`) has committed before its summary is deleted.
        # Lock order, in every statement that touches a session: its session row first, then
        # its leases, messages and summaries. One session's erase locks its row even when there
        # is none: it inserts one (seen by no one, deleted by the same transaction), so that an
        # append or a second erase of the id waits for it instead of re-creating the row it
        # deletes last, after locking the other rows (a deadlock, or messages left without
        # their row). Setting the key column takes the FOR UPDATE lock an erase needs (FOR KEY
        # SHARE holders wait); any other SET would take a weaker one.
        self.lock_client = "SELECT pg_advisory_xact_lock(hashtext(%s)), pg_advisory_xact_lock(hashtext(%s))"
        self.lock_session_row = (
            f"INSERT INTO {p}sessions AS t (session_id, client_id, created_at, updated_at) "
            "VALUES (%s, NULL, 0, 0) ON CONFLICT (session_id) DO UPDATE SET session_id = excluded.session_id "
            "RETURNING t.session_id, t.client_id"
        )
        self.lock_client_sessions = (
            f"SELECT session_id FROM {p}sessions WHERE client_id = %s ORDER BY session_id FOR UPDATE"
        )
        self.lock_old_sessions = (
            f"SELECT session_id FROM {p}sessions WHERE updated_at < %s ORDER BY session_id FOR UPDATE"
        )
        self.erase_sessions = tuple(
            f"DELETE FROM {p}{table} WHERE session_id = ANY(%s::text[])"
            for table in ("leases", "messages", "summaries", "sessions")
        )
        # The live facts at the store's clock (the second parameter): an expired one is left out.
        self.list_facts = (
            f"SELECT {FACT_COLUMNS} FROM {p}facts WHERE client_id = %s "
            'AND (expires_at IS NULL OR expires_at > %s) ORDER BY created_at, id COLLATE "C"'
        )
        self.delete_expired_facts = f"DELETE FROM {p}facts WHERE expires_at <= %s"
        self.delete_facts = f"DELETE FROM {p}facts WHERE client_id = %s"
        self.put_fact = (
            f"INSERT INTO {p}facts AS f ({FACT_COLUMNS}, tsv) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector(%s::regconfig, %s)) "
            "ON CONFLICT (id) DO UPDATE SET text = excluded.text, key = excluded.key, "
            "source = excluded.source, updated_at = excluded.updated_at, pinned = excluded.pinned, "
            "expires_at = excluded.expires_at, tsv = excluded.tsv WHERE f.client_id = excluded.client_id"
        )
        self.check_config = "SELECT %s::regconfig"
        self.unindexed_messages = f"SELECT session_id, seq, message FROM {p}messages WHERE tsv IS NULL"
        self.index_messages = (
            f"UPDATE {p}messages AS m SET tsv = to_tsvector(%s::regconfig, u.text) "
            "FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS u(sid, seq, text) "
            "WHERE m.session_id = u.sid AND m.seq = u.seq"
        )
        self.unindexed_facts = f"SELECT id, text FROM {p}facts WHERE tsv IS NULL"
        self.index_facts = (
            f"UPDATE {p}facts AS f SET tsv = to_tsvector(%s::regconfig, u.text) "
            "FROM unnest(%s::text[], %s::text[]) AS u(id, text) WHERE f.id = u.id"
        )
        self.delete_fact = f"DELETE FROM {p}facts WHERE client_id = %s AND id = %s"
        # Fact writers of one client queue here (a new fact has no row to lock yet).
        self.lock_facts = "SELECT pg_advisory_xact_lock(hashtext(%s))"
        # A fact write planned from a session's messages, in the fact write's transaction: the
        # session row, still the client's at that generation, stays locked until it commits.
        self.session_mark = (
            f"SELECT 1 FROM {p}sessions WHERE session_id = %s AND client_id = %s AND generation = %s "
            "FOR KEY SHARE"
        )

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool
    ) -> tuple[str, tuple[Any, ...]]:
        if limit is None:
            return self.read_all, (session_id, after_seq)
        return (self.read_newest if newest else self.read_oldest), (session_id, after_seq, limit)

    def cas(self, write: SummaryWrite) -> tuple[str, dict[str, Any]]:
        """The compare-and-swap of a summary: an insert for the first one, else an update;
        only on the session's row (of `write.generation`, if given) and, with a
        `lease_owner`, only while that owner holds the session's lease."""
        params = {
            "sid": write.session_id,
            "gen": write.generation,
            "owner": write.lease_owner,
            "text": write.text,
            "covered": write.covered_seq,
            "meta": write.meta_json,
            "now": write.now,
            "expected": write.expected_version,
        }
        first = write.expected_version == 0
        if write.lease_owner is None:
            return (self.insert_summary if first else self.update_summary), params
        return (self.insert_summary_leased if first else self.update_summary_leased), params

    def client_lock(self, client_id: str) -> str:
        """Key of the client's advisory lock (shared by its writers, exclusive for `forget`)."""
        return f"{self.prefix}client:{client_id}"

    def facts_lock(self, client_id: str) -> str:
        return f"{self.prefix}facts:{client_id}"

    def erase(self, kind: str, arg: Any, now: float = 0.0) -> Erase:
        """The erase transaction of one `kind`: ``session`` (arg: its id), ``client`` (arg:
        the client id) or ``purge`` (arg: the cutoff; with the facts expired at `now`)."""
        if kind == "session":
            # Its id is erased even without a session row (a lease or summary written alone);
            # the lock returns the row, or the placeholder nobody owns when there was none.
            return Erase([], self.lock_session_row, (arg,), [arg], [])
        if kind == "client":
            locks = (self.lock_client, (self.client_lock(arg), self.facts_lock(arg)))
            return Erase([locks], self.lock_client_sessions, (arg,), [], [(self.delete_facts, (arg,))])
        return Erase([], self.lock_old_sessions, (arg,), [], [(self.delete_expired_facts, (now,))])


class Erase(NamedTuple):
    """One erase transaction: `first` statements, the `lock` select whose rows name the
    sessions to erase (plus `always`), then `then` statements after the sessions are gone (the
    rows they delete count in what the erase returns)."""

    first: list[tuple[str, tuple[Any, ...]]]
    lock: str
    lock_params: tuple[Any, ...]
    always: list[str]
    then: list[tuple[str, tuple[Any, ...]]]


# An append with a rewind opens its transaction itself, in the pipeline that sends it (psycopg's
# `transaction()` would sync the pipeline at its start and end: two more round trips).
BEGIN, COMMIT, ROLLBACK = "BEGIN", "COMMIT", "ROLLBACK"


def left_open(psycopg: Any, conn: Any) -> bool:
    """Whether a failed pipeline left `conn` (still usable) inside the transaction it opened:
    an error skips the rest of the pipeline, its COMMIT included, so it is rolled back."""
    status = psycopg.pq.TransactionStatus
    if conn.closed or conn.broken:
        return False
    return conn.info.transaction_status in (status.INTRANS, status.INERROR)


def lost(psycopg: Any, exc: BaseException, conn: Any) -> bool:
    """Whether `exc` means the connection died (worth one retry on a fresh one)."""
    return isinstance(exc, psycopg.OperationalError) and (conn is None or conn.closed or conn.broken)


# How long past statement_timeout a call may wait before the client gives up on the server: the
# server's own timeout fires first whenever the server runs at all.
UNANSWERED_GRACE = 5.0
_UNWATCHED = ("migrate", "vacuum")  # may run long on purpose, with the timeout lifted
_DEADLINES = Deadlines()


def deadline(
    op: str, conn: Any, statement_timeout: float | None
) -> contextlib.AbstractContextManager[Watch | None]:
    """A client-side deadline on one call on `conn`: past statement_timeout plus a grace, its
    socket is severed, so a paused server (which enforces no timeout of its own) cannot hold the
    turn. None when there is no statement timeout, or for the calls that lift it."""
    if statement_timeout is None or op in _UNWATCHED:
        return contextlib.nullcontext(None)
    return _DEADLINES.watch(statement_timeout + UNANSWERED_GRACE, lambda: sever(conn.pgconn.socket))


def unanswered(op: str, statement_timeout: float | None) -> StoreError:
    """The `StoreError` of a call the server did not answer in time (not retried: a paused
    server would not answer the retry either)."""
    waited = (statement_timeout or 0) + UNANSWERED_GRACE
    msg = (
        f"PostgreSQL did not answer {op} within {waited:g} s (statement_timeout={statement_timeout:g} s "
        "plus a grace): the server is paused, frozen or unreachable; nothing was retried"
    )
    return StoreError(msg)


def failure(op: str, exc: BaseException, retried: bool) -> StoreError:
    """The `StoreError` raised for a failed `op`, saying whether it was retried."""
    after = " twice (the call was retried once on a fresh connection)" if retried else ""
    hint = (
        "; the batch may or may not be stored: read the session's tail before appending it again"
        if op == "append" and retried
        else ""
    )
    if getattr(exc, "sqlstate", None) == "57014":  # query_canceled: our statement_timeout fired
        hint += (
            "; the statement ran past statement_timeout (the server is slow or paused, or another "
            "connection holds a lock): retry later, or raise the store's statement_timeout option"
        )
    msg = f"PostgreSQL {op} failed{after}: {type(exc).__name__}: {exc}{hint}"
    return StoreError(msg)


class Failures:
    """What a failed attempt of a primitive raises: the one decision of the sync and async
    retry loops (`sync.py`, `aio.py`), for one store's driver, tables and statement timeout."""

    def __init__(self, psycopg: Any, prefix: str, statement_timeout: float | None) -> None:
        self.psycopg, self.prefix, self.statement_timeout = psycopg, prefix, statement_timeout

    def raise_unless_lost(
        self,
        exc: BaseException,
        op: str,
        attempt: int,
        conn: Any,
        watch: Watch | None,
        ended: StoreError | None = None,
    ) -> None:
        """Raise what the caller of `op` sees after the driver error `exc` on `attempt` (1 or
        2), unless the connection was lost on the first: then log it and return, for one retry
        on a fresh connection. `ended`: the error of an async pool closed under the call by
        the end of its loop (None: it was not)."""
        if watch is not None and watch.fired:
            raise unanswered(op, self.statement_timeout) from None
        if isinstance(exc, self.psycopg.errors.UndefinedTable):
            raise not_set_up(f"PostgreSQL tables {self.prefix}*", exc) from None
        if ended is not None:
            raise ended from None
        if attempt == 2 or not lost(self.psycopg, exc, conn):
            raise failure(op, exc, attempt == 2) from exc
        logger.warning("rolling memory: PostgreSQL connection lost during %s, retrying once", op)


# VACUUM runs outside a transaction (autocommit connections) and may take longer than the
# statement timeout that protects turns, so it lifts it for itself and restores it after.
VACUUM_UNLIMITED = "SET statement_timeout = 0"
VACUUM_RESTORE = "RESET statement_timeout"


def vacuum(conn: Any, q: Queries, *, full: bool) -> None:
    """VACUUM the store's tables on a sync autocommit connection."""
    conn.execute(VACUUM_UNLIMITED)
    try:
        conn.execute(q.vacuum_full if full else q.vacuum_plain)
    finally:
        conn.execute(VACUUM_RESTORE)


def append_params(q: Queries, batch: AppendBatch, config: str = "simple") -> dict[str, Any]:
    """The parameters of `Queries.append` (and, with the batch's rewind as ``back``, of
    `Queries.rewind_lock` and `Queries.rewind`); a new batch id marks the rows, so that a retry
    can tell whether the first attempt landed."""
    entries, rows = batch.entries(), batch.rows
    return {
        "cfg": config,
        "ats": [entry.created_at for entry in entries],
        "texts": [entry.text for entry in entries],
        "sid": batch.session_id,
        "cid": batch.client_id,
        "now": batch.now,
        "gen": new_generation(),
        "n": len(rows),
        "batch": uuid.uuid4().hex,
        "lock": q.client_lock(batch.client_id or ""),
        "msgs": [payload for payload, _ in rows],
        "toks": [tokens for _, tokens in rows],
    } | ({} if batch.rewind is None else {"back": batch.rewind})


def appended(records: list[tuple[Any, ...]], batch: AppendBatch) -> list[int]:
    """The seqs `Queries.append` returned; none: refused (the session is another client's)."""
    seqs = sorted(int(r[0]) for r in records)
    if not seqs:
        raise OwnershipError.for_session(batch.session_id, batch.client_id)
    return seqs


def rewound(records: list[tuple[Any, ...]], batch: AppendBatch) -> list[int]:
    """The seqs `Queries.rewind` returned; no row at all: refused (another client's session)."""
    if not records:
        raise OwnershipError.for_session(batch.session_id, batch.client_id)
    return sorted(int(r[0]) for r in records if r[0] is not None)


def rows_of(records: list[tuple[Any, ...]], newest: bool, limit: int | None) -> list[Row]:
    rows: list[Row] = [(int(s), str(m), None if t is None else int(t), float(at)) for s, m, t, at in records]
    # Ascending: a newest-first read comes reversed, and one wrapped by `reads.owned`
    # in no guaranteed order.
    rows.sort(key=lambda r: r[0])
    return rows


def summary_of(record: tuple[Any, ...] | None) -> SummaryRecord | None:
    if record is None:
        return None
    text, covered, version, meta, updated = record
    return SummaryRecord(str(text), int(covered), int(version), json.loads(str(meta)), float(updated))


def summary_and_tail_of(records: list[tuple[Any, ...]]) -> tuple[str | None, TurnRows]:
    """The session's owner and what `Queries.summary_and_tail` read (generation None: no row)."""
    owner: str | None = None
    generation: str | None = None
    summary: SummaryRecord | None = None
    rows: list[Row] = []
    for kind, seq, message, tokens, meta, updated in records:
        if kind == 2:
            owner, generation = (None if message is None else str(message)), str(meta)
        elif kind == 0:
            summary = SummaryRecord(
                str(message), int(tokens), int(seq), json.loads(str(meta)), float(updated)
            )
        else:
            rows.append((int(seq), str(message), None if tokens is None else int(tokens), float(updated)))
    rows.sort(key=lambda r: r[0])
    return owner, TurnRows(summary, rows, generation)


def memory_params(
    session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
) -> dict[str, Any]:
    """The parameters of `Queries.read_memory`."""
    return {"sid": session_id, "limit": limit, "cid": facts_of, "now": now, **_reader_params(reader)}


def _reader_params(reader: Reader | None) -> dict[str, Any]:
    """The owner check's parameters (check, rcid, exact) of the statements that make it."""
    return {
        "check": reader is not None,
        "rcid": None if reader is None else reader.client_id,
        "exact": reader is not None and reader.exact,
    }


def after_params(points: Sequence[tuple[str, int]], reader: Reader | None) -> dict[str, Any]:
    """The parameters of `Queries.messages_after`."""
    return {"sids": [sid for sid, _ in points], "seqs": [seq for _, seq in points], **_reader_params(reader)}


def memory_of(records: list[tuple[Any, ...]], client_id: str | None) -> tuple[str | None, MemoryRows]:
    """The session's owner and what `Queries.read_memory` read."""
    turn: list[tuple[Any, ...]] = []
    state: str | None = None
    facts: list[tuple[int, Fact]] = []
    for record in records:
        kind, seq, message, _, meta, updated, key, source, created, pinned, expires = record
        if kind == 3:
            state = str(message)
        elif kind == 4:
            fact = (meta, client_id, message, key, source, created, updated, pinned, expires)
            facts.append((int(seq), fact_of(fact)))
        else:
            turn.append(record[:6])
    owner, rows = summary_and_tail_of(turn)
    return owner, MemoryRows(rows, state, [fact for _, fact in sorted(facts, key=lambda f: f[0])])


def mark_params(mark: SessionMark, client_id: str) -> tuple[str, str, str]:
    """The parameters of `Queries.session_mark`."""
    return (mark.session_id, client_id, mark.generation)


def session_of(session_id: str, record: tuple[Any, ...] | None) -> SessionInfo | None:
    if record is None:
        return None
    client, created, updated = record
    return SessionInfo(session_id, None if client is None else str(client), float(created), float(updated))


def fact_params(fact: Fact, config: str = "simple") -> tuple[Any, ...]:
    return (
        fact.id,
        fact.client_id,
        fact.text,
        fact.key,
        fact.source,
        fact.created_at,
        fact.updated_at,
        fact.pinned,
        fact.expires_at,
        config,
        index_text(fact.text),
    )


def fact_of(record: tuple[Any, ...]) -> Fact:
    fact_id, client_id, text, key, source, created_at, updated_at, pinned, expires_at = record
    expires = None if expires_at is None else float(expires_at)
    return Fact(fact_id, client_id, text, key, source, created_at, updated_at, bool(pinned), expires)
