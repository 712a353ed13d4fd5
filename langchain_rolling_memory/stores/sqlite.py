"""SQLite backend on the standard library's `sqlite3` (WAL mode, safe with threads and processes).

Owns the SQL and the migrations for SQLite; the public API is in `base.py`, the fact rules in
`fact_rules.py`. `sqlite3` is used directly rather than through an ORM: it ships with Python,
so the default backend needs no extra at all.

Erasure leaves no bytes in the database's files: every connection sets ``secure_delete``
(deleted content is overwritten with zeros, in the file and in free pages), and each erase
(`forget`, `clear_session`, `purge`) is followed by ``wal_checkpoint(TRUNCATE)``, which copies
the zeroed pages into the file and empties the WAL. If another process holds a read
transaction at that moment the checkpoint cannot finish and a warning is logged; `vacuum()`
runs it again. Copies outside the files (backups, the file system's own journal) are out of
reach. Driver errors (disk full, read-only file) become `StoreError` naming the file; a
write-protected file (or ``read_only=True``) is opened read-only, so reads still work.

Search (schema 2) is FTS5 with *external content*: `{p}search_docs` holds one row per message
and fact (its `search.index_text`, already folded) and the FTS5 table `{p}search` indexes
it without a second copy of the text; triggers keep the index in step with `search_docs`,
and `search_docs` in step with every delete of a message or a fact, so no erasure path
can leave an entry behind. External content rather than contentless: SQLite before 3.43
can delete from a contentless table only if handed the exact text it indexed, which would
have to be recomputed from the message (and would break if the indexed text ever changed).
Ranking is FTS5's `bm25()`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import langchain_rolling_memory.stores.forks as forks
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError, SchemaVersionError, StoreError
from langchain_rolling_memory.records import Fact, FactPlan, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.search import fts5_query, index_text, message_index_text
from langchain_rolling_memory.serde import loads_message
from langchain_rolling_memory.stores.backend import SCHEMA_VERSION, IndexedRow, SearchRow, index_rows
from langchain_rolling_memory.stores.base import RollingStore

__all__ = ["SQLiteRollingStore"]

logger = logging.getLogger("langchain_rolling_memory")

_PREFIX = re.compile(r"[a-z_][a-z0-9_]{0,30}")

# Append-only: migration N brings the schema from version N-1 to N. Never edit one that shipped.
_MIGRATIONS: tuple[str, ...] = (
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
    # 2: pinned facts and the search index (backfilled from the existing rows by `_backfill`).
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
)
if len(_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one SQLite migration per schema version is required")

_FACT_COLUMNS = "id, client_id, text, key, source, created_at, updated_at, pinned"


def _statements(script: str) -> list[str]:
    """The statements of a migration: split on ``;``, but a trigger body's ``;`` does not end it."""
    out, pending = [], ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):  # pragma: no cover - a migration with an unfinished statement
        out.append(pending.strip())
    return out


def _fact_of(row: Sequence[Any]) -> Fact:
    fact_id, client_id, text, key, source, created_at, updated_at, pinned = row
    return Fact(fact_id, client_id, text, key, source, created_at, updated_at, bool(pinned))


class SQLiteRollingStore(RollingStore):
    """The default persistent backend: one SQLite file, shared by threads and processes.

    Args:
        path: database file (created with its parent folder), or ``":memory:"``.
        table_prefix: prefix of every table, so several apps can share one file.
        read_only: open the file read-only (reads work, writes raise `StoreError`); a file
            the process may not write is opened read-only anyway.
        **options: fact limits and filter, see `RollingStore`.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("sqlite:///:memory:")
        >>> store.append("s1", [HumanMessage("hi")])
        [1]
    """

    schemes = ("sqlite",)

    def __init__(
        self, path: str | Path, *, table_prefix: str = "lrm_", read_only: bool = False, **options: Any
    ) -> None:
        super().__init__(**options)
        if not _PREFIX.fullmatch(table_prefix):
            msg = f"table_prefix must match [a-z_][a-z0-9_]{{0,30}}, got {table_prefix!r}"
            raise ConfigurationError(msg)
        self.path = str(path)
        self.prefix = table_prefix
        on_disk = self.path != ":memory:"
        # Root ignores file modes, so os.access answers for this process, as the open would.
        self.read_only = read_only or (
            on_disk and os.path.exists(self.path) and not os.access(self.path, os.W_OK)
        )
        self._lock = threading.RLock()
        self._closed = False
        with self._errors("open"):
            if on_disk and not self.read_only:
                Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._conn: sqlite3.Connection | None = self._connect()
        forks.track(self)
        try:
            with self._errors("open"):
                self._migrate()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        """A connection with this store's settings; only reads if the store is read-only."""
        if self.read_only:
            conn = self._connect_read_only()
        else:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        # Zero deleted content instead of leaving it in free space (off in upstream builds).
        conn.execute("PRAGMA secure_delete = ON")
        if self.path != ":memory:" and not self.read_only:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        base = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
        conn = sqlite3.connect(base, timeout=30.0, isolation_level=None, check_same_thread=False, uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # A WAL file in a read-only folder with no -shm beside it cannot be opened plainly.
            # Without a -wal file every committed write is in the file itself, and nobody can
            # write there without making the folder writable, so reading it as immutable is exact.
            conn.close()
            if os.path.exists(f"{self.path}-wal"):
                raise
            conn = sqlite3.connect(
                f"{base}&immutable=1", timeout=30.0, isolation_level=None, check_same_thread=False, uri=True
            )
        return conn

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        """Turn a driver error into a `StoreError` that names the file, the cause and a fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise _failure(self.path, op, exc) from exc

    # ------------------------------------------------------------------ plumbing

    def _t(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _db(self) -> sqlite3.Connection:
        """The connection of this process (call with the lock held); reopened after a fork."""
        if self._conn is None:
            if self._closed:
                msg = f"the SQLite store on {self.path} is closed; open a new one"
                raise sqlite3.ProgrammingError(msg)
            self._conn = self._connect()
        return self._conn

    def _after_fork(self) -> None:
        # SQLite must never carry a connection across fork(); the child opens its own on first
        # use. A ":memory:" database is the child's private copy, so it keeps that one.
        self._lock = threading.RLock()
        if self.path != ":memory:":
            forks.abandon(self._conn)
            self._conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with BEGIN IMMEDIATE so writers queue up at once."""
        with self._lock, self._errors("write"):
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                # SQLite may have rolled back already (disk full): do not hide the first error.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors("read"):
            return self._db().execute(sql, params).fetchall()

    def _checkpoint(self) -> None:
        """Copy the WAL into the file and empty it, so that erased text leaves the WAL."""
        if self.path == ":memory:" or self.read_only:
            return
        with self._lock, self._errors("checkpoint"):
            busy = self._db().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            logger.warning(
                "rolling memory: %s: another connection is reading, so the WAL still holds erased "
                "data; call store.vacuum() when it is idle",
                self.path,
            )

    def _vacuum(self) -> None:
        self._checkpoint()

    def _schema_version(self) -> int | None:
        """The recorded schema version, read without writing (None: no meta table yet)."""
        meta, conn = self._t("meta"), self._db()
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (meta,))
        if found.fetchone() is None:
            return None
        row = conn.execute(f"SELECT value FROM {meta} WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        meta = self._t("meta")
        # A current schema needs no write, so a read-only file still opens for reading.
        current = self._schema_version()
        if current == SCHEMA_VERSION:
            return
        if self.read_only:
            msg = (
                f"SQLite file {self.path} is opened read-only but its tables {self.prefix}* are "
                f"at schema {current or 0}, not {SCHEMA_VERSION}; open it once writable to set them up"
            )
            if current is not None and current > SCHEMA_VERSION:
                msg = (
                    f"{self.path} (tables {self.prefix}*) was written by a newer version of "
                    f"langchain-rolling-memory (schema {current}, this one knows {SCHEMA_VERSION}); "
                    "upgrade the package"
                )
                raise SchemaVersionError(msg)
            raise StoreError(msg)
        with self._write() as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute(f"SELECT value FROM {meta} WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                msg = (
                    f"{self.path} (tables {self.prefix}*) was written by a newer version of "
                    f"langchain-rolling-memory (schema {version}, this one knows {SCHEMA_VERSION}); "
                    "upgrade the package"
                )
                raise SchemaVersionError(msg)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _statements(_MIGRATIONS[number - 1].format(p=self.prefix)):
                    conn.execute(statement)
                if number == 2:
                    self._backfill(conn)
                conn.execute(
                    f"INSERT INTO {meta} (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(number),),
                )

    def _backfill(self, conn: sqlite3.Connection) -> None:
        """Index the messages and facts written before schema 2 (in the migration's transaction)."""
        docs = self._t("search_docs")
        messages = conn.execute(f"SELECT session_id, seq, message FROM {self._t('messages')}")
        conn.executemany(
            f"INSERT INTO {docs} (session_id, seq, text) VALUES (?, ?, ?)",
            ((sid, seq, message_index_text(loads_message(payload))) for sid, seq, payload in messages),
        )
        facts = conn.execute(f"SELECT id, client_id, text FROM {self._t('facts')}")
        conn.executemany(
            f"INSERT INTO {docs} (fact_id, client_id, text) VALUES (?, ?, ?)",
            ((fid, cid, index_text(text)) for fid, cid, text in facts),
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    # ------------------------------------------------------------------ primitives

    def _append(
        self,
        session_id: str,
        client_id: str | None,
        rows: Sequence[tuple[str, int | None]],
        now: float,
        index: Sequence[IndexedRow] | None = None,
    ) -> list[int]:
        entries = index_rows(rows, now, index)
        sessions, messages = self._t("sessions"), self._t("messages")
        with self._write() as conn:
            row = conn.execute(
                f"SELECT client_id, last_seq FROM {sessions} WHERE session_id = ?", (session_id,)
            ).fetchone()
            owner, last = (row[0], int(row[1])) if row else (None, 0)
            if client_id is not None and owner is not None and owner != client_id:
                raise OwnershipError.for_session(session_id, client_id)
            seqs = list(range(last + 1, last + 1 + len(rows)))
            conn.execute(
                f"INSERT INTO {sessions} (session_id, client_id, created_at, updated_at, last_seq) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                "last_seq = excluded.last_seq, updated_at = excluded.updated_at, "
                f"client_id = COALESCE({sessions}.client_id, excluded.client_id)",
                (session_id, client_id, now, now, seqs[-1]),
            )
            conn.executemany(
                f"INSERT INTO {messages} (session_id, seq, message, tokens, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, seq, payload, tokens, entry.created_at)
                    for seq, (payload, tokens), entry in zip(seqs, rows, entries, strict=True)
                ],
            )
            conn.executemany(
                f"INSERT INTO {self._t('search_docs')} (session_id, seq, text) VALUES (?, ?, ?)",
                [(session_id, seq, entry.text) for seq, entry in zip(seqs, entries, strict=True)],
            )
        return seqs

    def _search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        fts, docs = self._t("search"), self._t("search_docs")
        # The FTS table drives the ranking (bm25() needs it) and the scope filters its matches;
        # only the best `limit` entries are then joined to their message or fact.
        sql = f"""
            WITH top AS (
                SELECT d.doc, d.session_id, d.seq, d.fact_id, bm25({fts}) AS rank
                FROM {fts} JOIN {docs} AS d ON d.doc = {fts}.rowid
                WHERE {fts} MATCH :q AND (
                    (d.fact_id IS NULL AND (d.session_id = :sid OR (:sid IS NULL AND d.session_id IN
                        (SELECT session_id FROM {self._t("sessions")} WHERE client_id = :cid))))
                    OR (d.fact_id IS NOT NULL AND d.client_id = :cid)
                )
                ORDER BY rank, d.doc LIMIT :limit
            )
            SELECT -top.rank, top.session_id, top.seq, m.message, m.created_at,
                   f.id, f.client_id, f.text, f.key, f.source, f.created_at, f.updated_at, f.pinned
            FROM top
            LEFT JOIN {self._t("messages")} AS m
                ON top.fact_id IS NULL AND m.session_id = top.session_id AND m.seq = top.seq
            LEFT JOIN {self._t("facts")} AS f ON f.id = top.fact_id
            ORDER BY top.rank, top.doc
        """
        params = {"q": fts5_query(terms), "sid": session_id, "cid": client_id, "limit": limit}
        out: list[SearchRow] = []
        for score, sid, seq, payload, at, *fact in self._query(sql, params):  # type: ignore[arg-type]
            if fact[0] is not None:
                out.append((float(score), None, None, None, None, _fact_of(fact)))
            elif payload is not None:
                out.append((float(score), str(sid), int(seq), str(payload), float(at), None))
        return out

    def _read(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        messages = self._t("messages")
        base = f"SELECT seq, message, tokens FROM {messages} WHERE session_id = ? AND seq > ?"
        if limit is None:
            rows = self._query(f"{base} ORDER BY seq", (session_id, after_seq))
        elif newest:
            rows = self._query(f"{base} ORDER BY seq DESC LIMIT ?", (session_id, after_seq, limit))
            rows.reverse()
        else:
            rows = self._query(f"{base} ORDER BY seq LIMIT ?", (session_id, after_seq, limit))
        return [(int(s), str(m), None if t is None else int(t)) for s, m, t in rows]

    def _last_seq(self, session_id: str) -> int:
        rows = self._query(f"SELECT last_seq FROM {self._t('sessions')} WHERE session_id = ?", (session_id,))
        return int(rows[0][0]) if rows else 0

    def _get_summary(self, session_id: str) -> SummaryRecord | None:
        rows = self._query(
            f"SELECT text, covered_seq, version, meta, updated_at FROM {self._t('summaries')} "
            "WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        text, covered, version, meta, updated = rows[0]
        return SummaryRecord(str(text), int(covered), int(version), json.loads(str(meta)), float(updated))

    def _cas_summary(
        self,
        session_id: str,
        text: str,
        covered_seq: int,
        meta: str,
        expected_version: int,
        now: float,
        lease_owner: str | None = None,
    ) -> bool:
        summaries = self._t("summaries")
        with self._write() as conn:
            if (
                lease_owner is not None
                and not conn.execute(
                    f"SELECT 1 FROM {self._t('leases')} WHERE session_id = ? AND owner = ?",
                    (session_id, lease_owner),
                ).fetchone()
            ):
                return False
            if expected_version == 0:
                cur = conn.execute(
                    f"INSERT INTO {summaries} (session_id, text, covered_seq, version, meta, updated_at) "
                    "VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(session_id) DO NOTHING",
                    (session_id, text, covered_seq, meta, now),
                )
            else:
                cur = conn.execute(
                    f"UPDATE {summaries} SET text = ?, covered_seq = ?, version = version + 1, "
                    "meta = ?, updated_at = ? WHERE session_id = ? AND version = ?",
                    (text, covered_seq, meta, now, session_id, expected_version),
                )
            return cur.rowcount == 1

    def _claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        leases = self._t("leases")
        with self._write() as conn:
            cur = conn.execute(
                f"INSERT INTO {leases} (session_id, owner, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, "
                f"expires_at = excluded.expires_at WHERE {leases}.expires_at <= ? "
                f"OR {leases}.owner = excluded.owner",
                (session_id, owner, now + ttl, now),
            )
            return cur.rowcount == 1

    def _release(self, session_id: str, owner: str) -> None:
        with self._write() as conn:
            conn.execute(
                f"DELETE FROM {self._t('leases')} WHERE session_id = ? AND owner = ?",
                (session_id, owner),
            )

    def _get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._query(
            f"SELECT client_id, created_at, updated_at FROM {self._t('sessions')} WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        client, created, updated = rows[0]
        return SessionInfo(
            session_id, None if client is None else str(client), float(created), float(updated)
        )

    def _list_sessions(self, client_id: str) -> list[str]:
        rows = self._query(
            f"SELECT session_id FROM {self._t('sessions')} WHERE client_id = ? ORDER BY session_id",
            (client_id,),
        )
        return [str(r[0]) for r in rows]

    def _get_state(self, session_id: str) -> str | None:
        rows = self._query(f"SELECT state FROM {self._t('sessions')} WHERE session_id = ?", (session_id,))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def _set_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        sessions = self._t("sessions")
        with self._write() as conn:
            row = conn.execute(
                f"SELECT client_id FROM {sessions} WHERE session_id = ?", (session_id,)
            ).fetchone()
            if client_id is not None and row and row[0] is not None and row[0] != client_id:
                raise OwnershipError.for_session(session_id, client_id)
            conn.execute(
                f"INSERT INTO {sessions} (session_id, client_id, created_at, updated_at, state) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET state = excluded.state, "
                f"updated_at = excluded.updated_at, client_id = COALESCE({sessions}.client_id, excluded.client_id)",
                (session_id, client_id, now, now, state),
            )

    def _delete_sessions_where(self, conn: sqlite3.Connection, where: str, params: Sequence[object]) -> int:
        sessions = self._t("sessions")
        ids = [r[0] for r in conn.execute(f"SELECT session_id FROM {sessions} WHERE {where}", params)]
        for table in ("messages", "summaries", "leases", "sessions"):
            conn.executemany(f"DELETE FROM {self._t(table)} WHERE session_id = ?", [(i,) for i in ids])
        return len(ids)

    def _delete_session(self, session_id: str) -> None:
        with self._write() as conn:
            for table in ("messages", "summaries", "leases", "sessions"):
                conn.execute(f"DELETE FROM {self._t(table)} WHERE session_id = ?", (session_id,))
        self._checkpoint()

    def _list_facts(self, client_id: str) -> list[Fact]:
        rows = self._query(
            f"SELECT {_FACT_COLUMNS} FROM {self._t('facts')} WHERE client_id = ? ORDER BY created_at, id",
            (client_id,),
        )
        return [_fact_of(row) for row in rows]

    def _change_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        # One write transaction: a second process adding the same fact waits, then sees it.
        with self._write() as conn:
            existing = self._list_facts(client_id)
            fact = plan(existing)
            if fact is not None:
                self._insert_fact(conn, fact)
            return existing, fact

    def _put_fact(self, fact: Fact) -> None:
        with self._write() as conn:
            self._insert_fact(conn, fact)

    def _insert_fact(self, conn: sqlite3.Connection, fact: Fact) -> None:
        cur = conn.execute(
            f"INSERT INTO {self._t('facts')} ({_FACT_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET text = excluded.text, "
            "key = excluded.key, source = excluded.source, updated_at = excluded.updated_at, "
            f"pinned = excluded.pinned WHERE {self._t('facts')}.client_id = excluded.client_id",
            (
                fact.id,
                fact.client_id,
                fact.text,
                fact.key,
                fact.source,
                fact.created_at,
                fact.updated_at,
                int(fact.pinned),
            ),
        )
        if cur.rowcount == 1:  # written (not another client's id): its entry follows its text
            docs = self._t("search_docs")
            conn.execute(f"DELETE FROM {docs} WHERE fact_id = ?", (fact.id,))
            conn.execute(
                f"INSERT INTO {docs} (fact_id, client_id, text) VALUES (?, ?, ?)",
                (fact.id, fact.client_id, index_text(fact.text)),
            )

    def _delete_fact(self, client_id: str, fact_id: str) -> bool:
        with self._write() as conn:
            cur = conn.execute(
                f"DELETE FROM {self._t('facts')} WHERE client_id = ? AND id = ?",
                (client_id, fact_id),
            )
            return cur.rowcount == 1

    def _delete_client(self, client_id: str) -> None:
        with self._write() as conn:
            conn.execute(f"DELETE FROM {self._t('facts')} WHERE client_id = ?", (client_id,))
            self._delete_sessions_where(conn, "client_id = ?", (client_id,))
            # FTS5 deletes are markers until segments merge: merge now so the forgotten
            # client's words leave the index pages too.
            fts = self._t("search")
            conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('optimize')")
        self._checkpoint()

    def _purge(self, cutoff: float) -> int:
        with self._write() as conn:
            count = self._delete_sessions_where(conn, "updated_at < ?", (cutoff,))
        if count:
            self._checkpoint()
        return count


def _failure(path: str, op: str, exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    lowered = text.lower()
    if "readonly" in lowered or "read-only" in lowered:
        hint = (
            "; the file (or its folder, where SQLite keeps -wal and -shm) is read-only: make it "
            "writable, or open it with read_only=True to read only"
        )
    elif "full" in lowered:
        hint = (
            "; the disk (or the database's max_page_count) is full: free space and retry, nothing was written"
        )
    elif "unable to open" in lowered:
        hint = "; check that the path exists and that this process may open it"
    elif "locked" in lowered or "busy" in lowered:
        hint = "; another connection held the database longer than busy_timeout (30 s)"
    else:
        hint = ""
    return StoreError(f"SQLite {op} on {path} failed: {type(exc).__name__}: {text}{hint}")
