"""SQLite backend on the standard library's `sqlite3` (WAL mode, safe with threads and processes).

Owns the connections (one per process, reopened after a fork), the transactions, the driver's
errors and the primitives; the SQL text and the migrations are in `sql.py`, the public
API in `stores/api.py`. `sqlite3` is used directly rather than through an ORM: it ships with Python,
so the default backend needs no extra at all.

The contract's checks (`stores/contract.py`) are made inside the transaction that reads or writes the
rows: the owner and the erase generation with a turn's read (one read transaction), with a
summary install and a fact write planned from a read (their write transaction); a search reads
the owner's postings with a statement that filters by owner, then the best entries' rows, in
one read transaction (`search.py`). An append's rewind reads the owner and the summary's
`covered_seq`, withdraws the rows past the seq kept and appends, in the append's write
transaction (`_withdraw`); an append without one runs the statements it always ran.

Erasure leaves no bytes in the database's files: every connection sets ``secure_delete``
(deleted content is overwritten with zeros, in the file and in free pages), and each erase
(`forget`, `clear_session`, `purge`) is followed by ``wal_checkpoint(TRUNCATE)``, which copies
the zeroed pages into the file and empties the WAL. If another process holds a read
transaction at that moment the checkpoint cannot finish and a warning is logged; `vacuum()`
runs it again. A rewind is not an erase: its rows are deleted as securely, but no checkpoint
follows (the next one, SQLite's own or an erase's, copies the zeroed pages). Copies outside
the files (backups, the file system's own journal) are out of reach. Driver errors (disk full,
read-only file) become `StoreError` naming the file; a write-protected file (or
``read_only=True``) is opened read-only, so reads still work.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import langchain_rolling_memory.stores.forks as forks
import langchain_rolling_memory.stores.sqlite.search as search
import langchain_rolling_memory.stores.sqlite.sql as sql
import langchain_rolling_memory.stores.vector_sql as vector_sql
from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError, StoreError
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.contract import (
    ANY_STATE,
    SCHEMA_VERSION,
    AppendBatch,
    ExpectedState,
    MemoryRows,
    Reader,
    SearchRow,
    SummaryWrite,
    SyncBackend,
    TurnRows,
    Unembedded,
    VectorWrite,
    new_generation,
    newer_schema,
    rows_after,
)
from langchain_rolling_memory.stores.fact_api import FactOptions
from langchain_rolling_memory.stores.lifecycle import not_set_up
from langchain_rolling_memory.stores.vector_rank import closest

logger = logging.getLogger("langchain_rolling_memory")

CACHE_KIB = 64 * 1024
"""The page cache of each connection, in KiB (`PRAGMA cache_size`)."""
_ROWS_AT = 100
"""Messages read per statement after a vector search (2 parameters each: under any SQLite limit)."""


def _named(name: str) -> str:
    return f":{name}"


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


class SQLiteBackend(SyncBackend):
    """The primitives on one SQLite file (or ``":memory:"``), shared by threads and processes;
    see `SQLiteRollingStore` for the arguments."""

    def __init__(
        self, path: str | Path, *, table_prefix: str = "lrm_", read_only: bool = False, setup: bool = True
    ) -> None:
        self.path = str(path)
        self.prefix = sql.check_prefix(table_prefix)
        self.q = sql.Queries(self.prefix)
        on_disk = self.path != ":memory:"
        # Root ignores file modes, so os.access answers for this process, as the open would.
        self.read_only = read_only or (
            on_disk and os.path.exists(self.path) and not os.access(self.path, os.W_OK)
        )
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._unset = not setup
        forks.track(self)
        if not setup:  # nothing is opened or created until the first call
            return
        try:
            with self._errors("open"):
                if on_disk and not self.read_only:
                    Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
                self._conn = self._connect()
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
        for name, (arity, function) in search.FUNCTIONS.items():
            conn.create_function(name, arity, function, deterministic=True)
        # Zero deleted content instead of leaving it in free space (off in upstream builds).
        conn.execute("PRAGMA secure_delete = ON")
        # The pages a search reads (its terms' postings, their entries, the hits' messages)
        # stay in this connection's cache instead of being read again from the file at each
        # search: SQLite's default of 2 MiB held less than a 10,000-message client's search
        # reads (~190 page reads a recall on LoCoMo, none with this). Pages are cached as
        # they are read, so a small file never takes more than its size.
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
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
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise not_set_up(self._tables, exc) from None
            raise _failure(self.path, op, exc) from exc
        except sqlite3.Error as exc:
            raise _failure(self.path, op, exc) from exc

    # ------------------------------------------------------------------ plumbing

    @property
    def _tables(self) -> str:
        return f"SQLite tables {self.prefix}* in {self.path}"

    def _db(self) -> sqlite3.Connection:
        """The connection of this process (call with the lock held); reopened after a fork."""
        if self._conn is None:
            if self._closed:
                msg = f"this SQLite store ({self.path}) is closed; open a new store (closing is final)"
                raise StoreError(msg)
            if self._unset and self.path != ":memory:" and not os.path.exists(self.path):
                raise not_set_up(self._tables, f"no file {self.path}")
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

    def _query(self, sql: str, params: Sequence[object] | Mapping[str, object] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors("read"):
            return self._db().execute(sql, params).fetchall()

    @contextmanager
    def _reading(self, session_id: str, reader: Reader | None) -> Iterator[None]:
        """With a `reader`: one read transaction (one snapshot) that first checks the session's
        owner, so the reads inside see the data of the owner they checked."""
        if reader is None:
            yield
            return
        with self._lock, self._errors("read"):
            conn = self._db()
            conn.execute("BEGIN")
            try:
                row = conn.execute(self.q.session_client, (session_id,)).fetchone()
                reader.check(session_id, row[0] if row else None)
                yield
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

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

    def vacuum(self) -> None:
        self._checkpoint()

    def _schema_version(self) -> int | None:
        """The recorded schema version, read without writing (None: no meta table yet)."""
        q, conn = self.q, self._db()
        if conn.execute(q.has_meta, (q.meta,)).fetchone() is None:
            return None
        row = conn.execute(q.get_version).fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        q = self.q
        # A current schema needs no write, so a read-only file still opens for reading.
        current = self._schema_version()
        if current == SCHEMA_VERSION:
            return
        if self.read_only:
            if current is not None and current > SCHEMA_VERSION:
                raise newer_schema(self._tables, current)
            msg = (
                f"SQLite file {self.path} is opened read-only but its tables {self.prefix}* are "
                f"at schema {current or 0}, not {SCHEMA_VERSION}; open it once writable to set them up"
            )
            raise StoreError(msg)
        with self._write() as conn:
            conn.execute(q.create_meta)
            row = conn.execute(q.get_version).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise newer_schema(self._tables, version)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _statements(q.migrations[number - 1]):
                    conn.execute(statement)
                if number == 2:
                    search.backfill_index(conn, q)
                elif number == 4:
                    search.backfill_lengths(conn, q)
                conn.execute(q.set_version, (str(number),))

    def setup(self) -> None:
        with self._lock, self._errors("setup"):
            if self.path != ":memory:" and not self.read_only:
                Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self._unset = False
            self._migrate()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def __del__(self) -> None:
        # A store dropped without close() closes its own connection, quietly: from Python 3.13
        # a sqlite3 connection collected open warns "unclosed database". A forked child never
        # gets here with the parent's connection: `_after_fork` abandoned it and set None.
        conn = self.__dict__.get("_conn")
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # ------------------------------------------------------------------ primitives

    def append(self, batch: AppendBatch) -> list[int]:
        session_id, client_id, rows, now = batch.session_id, batch.client_id, batch.rows, batch.now
        q = self.q
        with self._write() as conn:
            if batch.rewind is None:
                row = conn.execute(q.session_head, (session_id,)).fetchone()
                owner, last = (row[0], int(row[1])) if row else (None, 0)
                if owner is not None and owner != client_id:  # None: an anonymous write, refused too
                    raise OwnershipError.for_session(session_id, client_id)
            else:
                last = self._withdraw(conn, session_id, client_id, batch.rewind)
            seqs = list(range(last + 1, last + 1 + len(rows)))
            conn.execute(
                q.upsert_session,
                (session_id, client_id, now, now, seqs[-1] if seqs else last, new_generation()),
            )
            conn.executemany(  # no row (a withdrawal alone): nothing runs
                q.insert_messages,
                [
                    (session_id, seq, payload, tokens, at)
                    for seq, (payload, tokens), at in zip(seqs, rows, batch.created_at(), strict=True)
                ],
            )
        return seqs

    def _withdraw(self, conn: sqlite3.Connection, session_id: str, client_id: str | None, rewind: int) -> int:
        """An append's rewind, in its write transaction: the owner checked, then the session's
        rows past ``max(rewind, covered_seq)`` withdrawn with their index entries, the statistics
        counting them and their vectors (a new generation if one went); the last seq kept."""
        q = self.q
        row = conn.execute(q.rewind_head, (session_id,)).fetchone()
        if row is None:
            return 0
        owner, last, covered = row[0], int(row[1]), int(row[2])
        if owner is not None and owner != client_id:  # None: an anonymous write, refused too
            raise OwnershipError.for_session(session_id, client_id)
        keep = max(rewind, covered)
        if keep >= last:
            return last
        # The statistics first: the delete's triggers take the entries they are summed from.
        conn.execute(q.withdraw_indexed, (keep, new_generation(), session_id))
        conn.execute(q.withdraw_messages, (session_id, keep))
        return keep

    def _catch_up(self) -> None:
        """Index the messages appended since the last search (schema 3), in one transaction."""
        q = self.q
        if not self._query(q.unindexed):
            return
        if self.read_only:
            logger.warning(
                "rolling memory: %s: messages appended since the last search are not indexed yet and "
                "a read-only store cannot index them, so this search does not see them; search once "
                "from a writable store",
                self.path,
            )
            return
        with self._write() as conn:
            self._index_pending(conn)

    def _index_pending(self, conn: sqlite3.Connection) -> None:
        search.index_pending(conn, self.q)

    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        # In one snapshot: one statement reads the owner's postings of the terms and its
        # statistics, ranked here (`search.ranked`), then one reads the best entries' rows.
        wanted = search.search_terms(terms)
        statement = search.search(self.q, wanted, client_id, session_id, now)
        if statement is None:
            return []
        self._catch_up()
        with self._snapshot() as conn:
            top = search.ranked(conn.execute(*statement).fetchall(), limit)
            records: list[tuple[Any, ...]] = []
            for size, docs in search.rows_batches([doc for _, doc in top]):
                records += conn.execute(search.rows_statement(self.q.prefix, size), docs).fetchall()
            facts = {}
            for *_, fact_id in records:
                if fact_id is not None:
                    row = conn.execute(search.fact_statement(self.q.prefix), (fact_id,)).fetchone()
                    if row is not None:
                        facts[fact_id] = row
            return search.search_rows_of(top, records, facts)

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        statement, params = self.q.read(session_id, after_seq, limit, newest)
        with self._reading(session_id, reader):
            return sql.rows_of(self._query(statement, params), newest, limit)

    def messages_after(self, points: Sequence[tuple[str, int]], reader: Reader | None) -> list[Row | None]:
        # One statement (one snapshot): each point's next message, its owner checked in it.
        return rows_after(self._query(*self.q.messages_after(points, reader)), len(points))

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: what is read inside is seen at one instant."""
        with self._lock, self._errors("read"):
            conn = self._db()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def _turn(self, conn: sqlite3.Connection, session_id: str, limit: int, reader: Reader | None) -> TurnRows:
        """The owner (checked), the generation, the summary and the rows, in `conn`'s snapshot."""
        q = self.q
        head = conn.execute(q.turn_head, (session_id,)).fetchone()
        if reader is not None:
            reader.check(session_id, head[0] if head else None)
        if head is None:
            return TurnRows(None, [], None)
        record = sql.summary_of(head[2:] if head[2] is not None else None)
        statement, params = q.read(session_id, record.covered_seq if record else 0, limit, True)
        rows = sql.rows_of(conn.execute(statement, params).fetchall(), True, limit) if limit else []
        return TurnRows(record, rows, str(head[1]))

    def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        with self._snapshot() as conn:  # one snapshot: the owner, the generation, the summary, the rows
            return self._turn(conn, session_id, limit, reader)

    def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        # One read transaction, as the server backends' one statement: the turn, state and facts
        # at one instant, the owner checked first.
        with self._snapshot() as conn:
            turn = self._turn(conn, session_id, limit, reader)
            row = conn.execute(self.q.get_state, (session_id,)).fetchone() if turn.generation else None
            state = None if row is None or row[0] is None else str(row[0])
            found = (
                conn.execute(self.q.list_facts, (facts_of, now)).fetchall() if facts_of is not None else []
            )
            return MemoryRows(turn, state, [sql.fact_of(r) for r in found])

    def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        with self._reading(session_id, reader):
            rows = self._query(self.q.last_seq, (session_id,))
        return int(rows[0][0]) if rows else 0

    def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        with self._reading(session_id, reader):
            rows = self._query(self.q.get_summary, (session_id,))
        return sql.summary_of(rows[0] if rows else None)

    def cas_summary(self, write: SummaryWrite) -> bool:
        q, sid, owner = self.q, write.session_id, write.lease_owner
        body = (write.text, write.covered_seq, write.meta_json, write.now)
        with self._write() as conn:
            row = conn.execute(q.session_mark, (sid,)).fetchone()
            if row is None or write.generation not in (None, row[1]):
                return False  # no row (never written, or erased), or erased and re-created since
            if owner is not None and not conn.execute(q.lease_held, (sid, owner)).fetchone():
                return False
            if write.expected_version == 0:
                cur = conn.execute(q.insert_summary, (sid, *body))
            else:
                cur = conn.execute(q.update_summary, (*body, sid, write.expected_version))
            return cur.rowcount == 1

    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        with self._write() as conn:
            return conn.execute(self.q.claim, (session_id, owner, now + ttl, now)).rowcount == 1

    def release(self, session_id: str, owner: str) -> None:
        with self._write() as conn:
            conn.execute(self.q.release, (session_id, owner))

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._query(self.q.get_session, (session_id,))
        return sql.session_of(session_id, rows[0] if rows else None)

    def list_sessions(self, client_id: str) -> list[str]:
        return [str(r[0]) for r in self._query(self.q.list_sessions, (client_id,))]

    def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        with self._reading(session_id, reader):
            rows = self._query(self.q.get_state, (session_id,))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        q = self.q
        with self._write() as conn:
            # The owner and the state compared are read in the write transaction (BEGIN IMMEDIATE).
            row = conn.execute(q.session_client_state, (session_id,)).fetchone()
            if row and row[0] is not None and row[0] != client_id:
                raise OwnershipError.for_session(session_id, client_id)
            if expected is not ANY_STATE and (row[1] if row else None) != expected:
                return False
            conn.execute(q.set_state, (session_id, client_id, now, now, state, new_generation()))
            return True

    def _delete_sessions(self, conn: sqlite3.Connection, select: str, params: Sequence[object]) -> int:
        """Erase the sessions whose ids `select` returns; how many there were."""
        ids = [(r[0],) for r in conn.execute(select, params)]
        for statement in self.q.delete_session:
            conn.executemany(statement, ids)
        return len(ids)

    def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        with self._write() as conn:
            if reader is not None:
                row = conn.execute(self.q.session_client, (session_id,)).fetchone()
                if row is None:
                    return
                reader.check(session_id, row[0])
            for statement in self.q.delete_session:
                conn.execute(statement, (session_id,))
        self._checkpoint()

    def list_facts(self, client_id: str, at: float) -> list[Fact]:
        return [sql.fact_of(row) for row in self._query(self.q.list_facts, (client_id, at))]

    def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        # One write transaction: a second process adding the same fact waits, then sees it; the
        # session of `mark` is checked in it, so an erase lands wholly before (refused) or after.
        with self._write() as conn:
            if mark is not None:
                row = conn.execute(self.q.session_mark, (mark.session_id,)).fetchone()
                if row is None or row[0] != client_id or row[1] != mark.generation:
                    raise StaleWriteError.for_session(mark.session_id, "fact write")
            existing = self.list_facts(client_id, now)
            fact = plan(existing)
            if fact is not None:
                self._insert_fact(conn, fact)
            return existing, fact

    def _insert_fact(self, conn: sqlite3.Connection, fact: Fact) -> None:
        q = self.q
        if conn.execute(q.upsert_fact, sql.fact_params(fact)).rowcount == 1:
            # Written (not another client's id): its index entry follows its text, after the
            # messages appended before it, so that entries keep write order (ties rank by it).
            self._index_pending(conn)
            search.index_fact(conn, q, fact.id, fact.client_id, fact.text)

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        with self._write() as conn:
            return conn.execute(self.q.delete_fact, (client_id, fact_id)).rowcount == 1

    def delete_client(self, client_id: str) -> None:
        q = self.q
        with self._write() as conn:
            conn.execute(q.delete_facts, (client_id,))
            self._delete_sessions(conn, q.client_sessions, (client_id,))
            # Merge the index now, so the forgotten client's words leave its pages too.
            conn.execute(q.optimize_search)
        self._checkpoint()

    def purge(self, cutoff: float, now: float) -> int:
        with self._write() as conn:
            count = self._delete_sessions(conn, self.q.old_sessions, (cutoff,))
            count += conn.execute(self.q.delete_expired_facts, (now,)).rowcount
        if count:
            self._checkpoint()
        return count

    # ------------------------------------------------------------------ dense vectors (schema 6)

    def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        statement = vector_sql.unembedded(self.prefix, _named, client_id, session_id)
        params = {"model": model, "cid": client_id, "sid": session_id, "limit": limit}
        return [Unembedded(str(s), int(n), str(g), str(m)) for s, n, g, m in self._query(statement, params)]

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        # One write transaction: each vector lands only beside its message, in a session that
        # still has the generation it was listed under (an erase is wholly before or after).
        p = self.prefix
        statement = (
            f"INSERT OR REPLACE INTO {p}vectors (session_id, seq, model, vector) SELECT ?, ?, ?, ? "
            f"WHERE EXISTS (SELECT 1 FROM {p}messages AS m JOIN {p}sessions AS s ON s.session_id = m.session_id "
            "WHERE m.session_id = ? AND m.seq = ? AND s.generation = ?)"
        )
        with self._write() as conn:
            stored = 0
            for sid, seq, generation, vector in items:
                stored += conn.execute(statement, (sid, seq, model, vector, sid, seq, generation)).rowcount
            return stored

    def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        # Brute force in one snapshot, the owner filtered in it: one statement reads the scope's
        # vectors, ranked here (`stores.vector_rank.closest`: numpy when installed), then one reads the
        # best ones' messages.
        scope = vector_sql.scope_vectors(
            self.prefix, _named, "length(v.vector) = :size", client_id, session_id
        )
        params = {"model": model, "size": len(vector), "cid": client_id, "sid": session_id}
        with self._snapshot() as conn:
            found = sorted(
                conn.execute(scope, params).fetchall(), key=lambda row: (row[0], row[1])
            )  # ties: session, seq
            best = closest(vector, [blob for _, _, blob in found], limit)
            records: dict[tuple[str, int], tuple[str, float]] = {}
            for start in range(0, len(best), _ROWS_AT):
                chunk = [found[i] for i, _ in best[start : start + _ROWS_AT]]
                keys = {f"sid{n}": sid for n, (sid, _, _) in enumerate(chunk)}
                keys.update({f"seq{n}": seq for n, (_, seq, _) in enumerate(chunk)})
                for sid, seq, message, at in conn.execute(
                    vector_sql.rows_at(self.prefix, _named, len(chunk)), keys
                ):
                    records[(str(sid), int(seq))] = (str(message), float(at))
        rows: list[SearchRow] = []
        for i, score in best:
            sid, seq, _ = found[i]
            record = records.get((str(sid), int(seq)))
            if record is not None:
                rows.append((score, str(sid), int(seq), record[0], record[1], None))
        return rows


class SQLiteRollingStore(RollingStore):
    """The default persistent store: one SQLite file (`SQLiteBackend`), shared by threads and processes.

    Args:
        path: database file (created with its parent folder), or ``":memory:"``.
        table_prefix: prefix of every table, so several apps can share one file.
        read_only: open the file read-only (reads work, writes raise `StoreError`); a file
            the process may not write is opened read-only anyway.
        setup: create or migrate the tables now (the default); False opens nothing until the
            first call and creates nothing: run `setup()` yourself (a missing table then
            raises `StoreError` naming it).
        **options: fact limits and filter, see `RollingStore`.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("sqlite:///:memory:")
        >>> store.append("s1", [HumanMessage("hi")])
        [1]
        >>> store.close()
    """

    schemes = ("sqlite",)

    def __init__(
        self,
        path: str | Path,
        *,
        table_prefix: str = "lrm_",
        read_only: bool = False,
        setup: bool = True,
        **options: Any,
    ) -> None:
        fact_options = FactOptions(**options)
        backend = SQLiteBackend(path, table_prefix=table_prefix, read_only=read_only, setup=setup)
        super().__init__(backend, options=fact_options)
        self.path, self.prefix, self.q, self.read_only = (
            backend.path,
            backend.prefix,
            backend.q,
            backend.read_only,
        )


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
