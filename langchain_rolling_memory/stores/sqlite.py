"""SQLite backend on the standard library's `sqlite3` (WAL mode, safe with threads and processes).

Owns the SQL and the migrations for SQLite; the public API is in `base.py`, the fact rules in
`fact_rules.py`. `sqlite3` is used directly rather than through an ORM: it ships with Python,
so the default backend needs no extra at all.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import langchain_rolling_memory.stores.forks as forks
from langchain_rolling_memory.errors import ConfigurationError, OwnershipError, SchemaVersionError
from langchain_rolling_memory.records import Fact, FactPlan, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.stores.backend import SCHEMA_VERSION
from langchain_rolling_memory.stores.base import RollingStore

__all__ = ["SQLiteRollingStore"]

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
)
if len(_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one SQLite migration per schema version is required")


class SQLiteRollingStore(RollingStore):
    """The default persistent backend: one SQLite file, shared by threads and processes.

    Args:
        path: database file (created with its parent folder), or ``":memory:"``.
        table_prefix: prefix of every table, so several apps can share one file.
        **options: fact limits and filter, see `RollingStore`.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("sqlite:///:memory:")
        >>> store.append("s1", [HumanMessage("hi")])
        [1]
    """

    schemes = ("sqlite",)

    def __init__(self, path: str | Path, *, table_prefix: str = "lrm_", **options: Any) -> None:
        super().__init__(**options)
        if not _PREFIX.fullmatch(table_prefix):
            msg = f"table_prefix must match [a-z_][a-z0-9_]{{0,30}}, got {table_prefix!r}"
            raise ConfigurationError(msg)
        self.path = str(path)
        self.prefix = table_prefix
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._closed = False
        self._conn: sqlite3.Connection | None = self._connect()
        forks.track(self)
        self._migrate()

    # ------------------------------------------------------------------ plumbing

    def _t(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        return conn

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
        with self._lock:
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db().execute(sql, params).fetchall()

    def _migrate(self) -> None:
        meta = self._t("meta")
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
                for statement in _MIGRATIONS[number - 1].format(p=self.prefix).split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {meta} (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(number),),
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
    ) -> list[int]:
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
                    (session_id, seq, payload, tokens, now)
                    for seq, (payload, tokens) in zip(seqs, rows, strict=True)
                ],
            )
        return seqs

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

    def _list_facts(self, client_id: str) -> list[Fact]:
        rows = self._query(
            f"SELECT id, client_id, text, key, source, created_at, updated_at FROM {self._t('facts')} "
            "WHERE client_id = ? ORDER BY created_at, id",
            (client_id,),
        )
        return [Fact(*row) for row in rows]

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
        conn.execute(
            f"INSERT INTO {self._t('facts')} (id, client_id, text, key, source, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET text = excluded.text, "
            "key = excluded.key, source = excluded.source, updated_at = excluded.updated_at "
            f"WHERE {self._t('facts')}.client_id = excluded.client_id",
            (
                fact.id,
                fact.client_id,
                fact.text,
                fact.key,
                fact.source,
                fact.created_at,
                fact.updated_at,
            ),
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

    def _purge(self, cutoff: float) -> int:
        with self._write() as conn:
            return self._delete_sessions_where(conn, "updated_at < ?", (cutoff,))
