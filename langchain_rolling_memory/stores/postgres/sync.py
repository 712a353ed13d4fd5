"""The sync twin of the PostgreSQL primitives, on psycopg's ConnectionPool.

Owns `SyncPostgres`: the sync retry loop and the sync primitives; the connections (pools,
closing) are in `conn.py`, the migrations in `setup.py`, the store class in `store.py`, the
async twin in `aio.py`, the SQL and what both twins share in `sql.py`. Imports no driver: the
store hands it psycopg.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import langchain_rolling_memory.stores.contract as contract
import langchain_rolling_memory.stores.postgres.reads as postgres_reads
import langchain_rolling_memory.stores.postgres.search as pgs
import langchain_rolling_memory.stores.postgres.sql as pg
import langchain_rolling_memory.stores.postgres.vectors as pgv
from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import OwnershipError, SchemaVersionError, StaleWriteError
from langchain_rolling_memory.stores.contract import (
    AppendBatch,
    MemoryRows,
    Reader,
    SearchRow,
    SummaryWrite,
    SyncBackend,
    TurnRows,
    Unembedded,
    VectorWrite,
)
from langchain_rolling_memory.stores.postgres.conn import Connections, check_connection
from langchain_rolling_memory.stores.postgres.setup import Migration

_T = TypeVar("_T")


class SyncPostgres(SyncBackend):
    """The sync primitives: each is one statement (or one transaction) on a pooled connection,
    retried once if the connection was lost."""

    def __init__(
        self, link: Connections, q: pg.Queries, search_config: str, statement_timeout: float | None
    ) -> None:
        self.link, self.q, self.prefix = link, q, q.prefix
        self.search_config, self.statement_timeout = search_config, statement_timeout
        self.migration = Migration(link.psycopg, q, search_config)
        self.failures = pg.Failures(link.psycopg, q.prefix, statement_timeout)
        self._pgvector: str | None = None  # the schema of the database's pgvector, once probed
        self._pgvector_probed = False

    def setup(self) -> None:
        self._run("migrate", self.migration.run)

    def vacuum(self, *, full: bool = True) -> None:
        """VACUUM (FULL by default) the store's tables: see `PostgresRollingStore.vacuum`."""
        self._run("vacuum", lambda conn: pg.vacuum(conn, self.q, full=full))

    def close(self) -> None:
        self.link.close()

    def _run(
        self,
        op: str,
        fn: Callable[[Any], _T],
        retry: Callable[[Any], _T] | None = None,
    ) -> _T:
        """Run `fn(conn)`; if the connection was lost, run `retry` (default `fn`) once more."""
        psycopg, pool = self.link.psycopg, self.link.sync_pool()
        for attempt in (1, 2):
            conn = watch = None
            try:
                with pool.connection() as conn:
                    if self.link.borrowed is not None:
                        check_connection(psycopg, conn)
                    with pg.deadline(op, conn, self.statement_timeout) as watch:
                        return (fn if attempt == 1 else retry or fn)(conn)
            except (OwnershipError, SchemaVersionError):
                raise
            except psycopg.Error as exc:
                self.failures.raise_unless_lost(exc, op, attempt, conn, watch)
                pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ append

    def append(self, batch: AppendBatch) -> list[int]:
        params = pg.append_params(self.q, batch, self.search_config)
        if batch.rewind is not None:

            def rewind(conn: Any) -> list[int]:
                with self._pipeline(conn):
                    cur = self._rewind(conn, params)
                return pg.rewound(cur.fetchall(), batch)

            return self._run("append", rewind, lambda conn: self._append_again(conn, batch, params))
        return self._run(
            "append",
            lambda conn: pg.appended(conn.execute(self.q.append, params).fetchall(), batch),
            lambda conn: self._append_again(conn, batch, params),
        )

    def _rewind(self, conn: Any, params: dict[str, Any], *, begin: bool = True) -> Any:
        """Send an append with a rewind (`Queries.rewind_lock`, `Queries.rewind`) in its own
        transaction (`begin`: queued in the caller's pipeline) or the caller's; its cursor."""
        if begin:
            conn.execute(pg.BEGIN)
        conn.execute(self.q.rewind_lock, params)
        cur = conn.execute(self.q.rewind, params)
        if begin:
            conn.execute(pg.COMMIT)
        return cur

    @contextlib.contextmanager
    def _pipeline(self, conn: Any) -> Iterator[None]:
        """A pipeline whose transaction (`_rewind`'s) is rolled back if one of its statements failed."""
        psycopg = self.link.psycopg
        try:
            with conn.pipeline():
                yield
        except psycopg.Error:
            if pg.left_open(psycopg, conn):
                with contextlib.suppress(psycopg.Error):
                    conn.execute(pg.ROLLBACK)
            raise

    def _append_again(self, conn: Any, batch: AppendBatch, params: dict[str, Any]) -> list[int]:
        """The retry of an append whose outcome is unknown: lock the session row first (this
        waits for a still-running first attempt), then look for the batch."""
        q, session_id = self.q, batch.session_id
        with conn.transaction() as tx:
            conn.execute(q.lock_session, (session_id, batch.now, batch.now, contract.new_generation()))
            done = [int(r[0]) for r in conn.execute(q.find_batch, (session_id, params["batch"]))]
            if done:  # the first attempt committed before its connection died
                tx.force_rollback = True
                return done
            if batch.rewind is not None:  # in this transaction
                return pg.rewound(self._rewind(conn, params, begin=False).fetchall(), batch)
            return pg.appended(conn.execute(q.append, params).fetchall(), batch)

    def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        # One pipeline, one round trip: the append, then the summary read with its owner.
        params = pg.append_params(self.q, batch, self.search_config)
        sid = batch.session_id
        read, args = postgres_reads.summary_read(self.q, sid, reader)

        def first(conn: Any) -> tuple[list[int], SummaryRecord | None]:
            with self._pipeline(conn):
                if batch.rewind is None:
                    appended = conn.execute(self.q.append, params)
                else:
                    appended = self._rewind(conn, params)
                summary = conn.execute(read, args)
            seqs = (pg.appended if batch.rewind is None else pg.rewound)(appended.fetchall(), batch)
            return seqs, postgres_reads.summary_found(summary.fetchall(), sid, reader)

        def again(conn: Any) -> tuple[list[int], SummaryRecord | None]:
            seqs = self._append_again(conn, batch, params)
            return seqs, postgres_reads.summary_found(conn.execute(read, args).fetchall(), sid, reader)

        return self._run("append", first, again)

    # ------------------------------------------------------------------ one-statement primitives

    def _fetch(self, op: str, sql: str, params: Any) -> list[tuple[Any, ...]]:
        return self._run(op, lambda conn: conn.execute(sql, params).fetchall())

    def _count(self, op: str, sql: str, params: Any) -> int:
        return self._run(op, lambda conn: int(conn.execute(sql, params).rowcount))

    def _fetch_session(
        self, sql: str, params: Any, session_id: str, reader: Reader | None
    ) -> list[tuple[Any, ...]]:
        """A session read; with a `reader`, its owner is read and checked by the same statement."""
        if reader is None:
            return self._fetch("read", sql, params)
        wrapped, args = postgres_reads.owned(self.prefix, sql, params, session_id)
        return postgres_reads.checked(self._fetch("read", wrapped, args), reader, session_id)

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        sql, params = self.q.read(session_id, after_seq, limit, newest)
        return pg.rows_of(self._fetch_session(sql, params, session_id, reader), newest, limit)

    def messages_after(self, points: Sequence[tuple[str, int]], reader: Reader | None) -> list[Row | None]:
        # One statement: each point's next message, its session's owner checked in it.
        return contract.rows_after(
            self._fetch("read", self.q.messages_after, pg.after_params(points, reader)), len(points)
        )

    def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        # One statement: the summary, the tail, the owner (checked here) and the generation.
        params = {"sid": session_id, "limit": limit}
        owner, turn = pg.summary_and_tail_of(self._fetch("read", self.q.summary_and_tail, params))
        if reader is not None:
            reader.check(session_id, owner)
        return turn

    def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        # One statement: summary, tail, owner (checked here), generation, state and facts.
        params = pg.memory_params(session_id, limit, reader, facts_of, now)
        owner, memory = pg.memory_of(self._fetch("read", self.q.read_memory, params), facts_of)
        if reader is not None:
            reader.check(session_id, owner)
        return memory

    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        sql, params = pgs.search_params(
            self.q, list(terms), client_id, session_id, limit, self.search_config, now
        )
        return pgs.search_rows_of(self._fetch("search", sql, params))

    def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        rows = self._fetch_session(self.q.last_seq, (session_id,), session_id, reader)
        return int(rows[0][0]) if rows else 0

    def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        rows = self._fetch_session(self.q.get_summary, (session_id,), session_id, reader)
        return pg.summary_of(rows[0] if rows else None)

    # A CAS retried after a lost reply answers False if the first attempt landed: the
    # compactor then treats the window as done by someone else, which it is.
    def cas_summary(self, write: SummaryWrite) -> bool:
        sql, params = self.q.cas(write)
        return self._count("summary", sql, params) == 1

    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        return self._count("lease", self.q.claim, (session_id, owner, now + ttl, now)) == 1

    def release(self, session_id: str, owner: str) -> None:
        self._count("lease", self.q.release, (session_id, owner))

    def get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._fetch("read", self.q.get_session, (session_id,))
        return pg.session_of(session_id, rows[0] if rows else None)

    def list_sessions(self, client_id: str) -> list[str]:
        return [str(r[0]) for r in self._fetch("read", self.q.list_sessions, (client_id,))]

    def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        rows = self._fetch_session(self.q.get_state, (session_id,), session_id, reader)
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: contract.ExpectedState = contract.ANY_STATE,
    ) -> bool:
        lock = self.q.client_lock(client_id or "")
        params = {"sid": session_id, "cid": client_id, "now": now, "state": state, "lock": lock}
        params["gen"] = contract.new_generation()  # used only if this creates the session row
        if expected is contract.ANY_STATE:
            if not self._fetch("state", self.q.set_state, params):
                raise OwnershipError.for_session(session_id, client_id)
            return True
        params["expected"] = expected
        sql = self.q.set_state_if_none if expected is None else self.q.set_state_if
        ((wrote, owner),) = self._fetch("state", sql, params)
        if not wrote and owner is not None and owner != client_id:
            raise OwnershipError.for_session(session_id, client_id)
        return bool(wrote)

    def _erase(self, op: str, plan: pg.Erase, reader: Reader | None = None) -> int:
        """Run one erase transaction (see `Queries.erase`); return how many sessions it erased.
        With a `reader` (one session's erase), its owner is checked on the locked row."""

        def go(conn: Any) -> int:
            with conn.transaction():
                for sql, params in plan.first:
                    conn.execute(sql, params)
                records = conn.execute(plan.lock, plan.lock_params).fetchall()
                if reader is not None:  # one session's erase: its lock returns one row
                    reader.check(str(records[0][0]), records[0][1])
                locked = {str(r[0]) for r in records}
                ids = sorted(locked | set(plan.always))
                for sql in self.q.erase_sessions if ids else ():
                    conn.execute(sql, (ids,))
                gone = len(locked)
                for sql, params in plan.then:
                    gone += max(0, conn.execute(sql, params).rowcount)
                return gone

        return self._run(op, go)

    def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        self._erase("delete", self.q.erase("session", session_id), reader)

    def list_facts(self, client_id: str, at: float) -> list[Fact]:
        return [pg.fact_of(r) for r in self._fetch("facts", self.q.list_facts, (client_id, at))]

    def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        q = self.q

        def go(conn: Any) -> tuple[list[Fact], Fact | None]:
            with conn.transaction():
                conn.execute(q.lock_facts, (f"{self.prefix}facts:{client_id}",))
                # Planned from a session's messages: its row must still be the client's at
                # that generation, and stays locked (an erase waits) until this commits.
                if mark is not None:
                    found = conn.execute(q.session_mark, pg.mark_params(mark, client_id)).fetchall()
                    if not found:
                        raise StaleWriteError.for_session(mark.session_id, "fact write")
                live = conn.execute(q.list_facts, (client_id, now)).fetchall()
                existing = [pg.fact_of(r) for r in live]
                fact = plan(existing)
                if fact is not None:
                    conn.execute(q.put_fact, pg.fact_params(fact, self.search_config))
                return existing, fact

        # Retried after a lost reply, the plan sees the fact it wrote and writes nothing.
        return self._run("facts", go)

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        q = self.q

        def go(conn: Any) -> int:
            with conn.transaction():
                # The client's facts lock, as `change_facts` and `forget` take it: an update
                # planned from the facts it read lands wholly before this delete (which then
                # erases it) or reads the fact gone; it never writes it back.
                conn.execute(q.lock_facts, (q.facts_lock(client_id),))
                return int(conn.execute(q.delete_fact, (client_id, fact_id)).rowcount)

        return self._run("facts", go) == 1

    def delete_client(self, client_id: str) -> None:
        self._erase("forget", self.q.erase("client", client_id))

    def purge(self, cutoff: float, now: float) -> int:
        return self._erase("purge", self.q.erase("purge", cutoff, now))

    # ------------------------------------------------------------------ dense vectors (`vectors.py`)

    def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        sql, params = pgv.unembedded(self.prefix, model, client_id, session_id, limit)
        return pgv.unembedded_rows(self._fetch("vectors", sql, params))

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        sql, params = pgv.put(self.prefix, model, items)
        return self._count("vectors", sql, params)

    def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        if not self._pgvector_probed:  # once per backend: which schema holds pgvector, if any
            self._pgvector = pgv.pgvector_schema(self._fetch("search", pgv.PGVECTOR_PROBE, None))
            self._pgvector_probed = True
        sql, params = pgv.search(self.prefix, model, vector, client_id, session_id, limit, self._pgvector)
        return pgv.search_rows(self._fetch("search", sql, params))
