"""The native async twins of the PostgreSQL primitives, on psycopg's AsyncConnectionPool.

Owns `AsyncPostgres`: the async retry loop and the async primitives, on the running loop's
pool (one per event loop, see `conn.py` and `loops.py`: async connections belong to the loop
that made them; or the caller's); the store class is in `store.py`, the sync twin in
`sync.py`, the SQL and what both twins share in `sql.py`. Every primitive is the same statement as its sync
twin, so both behave alike, retries included.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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
    AsyncBackend,
    MemoryRows,
    Reader,
    SearchRow,
    SummaryWrite,
    TurnRows,
    Unembedded,
    VectorWrite,
)
from langchain_rolling_memory.stores.postgres.conn import Connections, check_connection
from langchain_rolling_memory.stores.postgres.setup import Migration

_T = TypeVar("_T")


class AsyncPostgres(AsyncBackend):
    """The native async primitives: the same statements as `SyncPostgres`'s, awaited on the
    running loop's async pool (or the caller's), retries included.

    Args:
        setup_pending: set up at the first call (an async pool or connection handed in with
            ``setup=True``: the constructor could not await it).
    """

    def __init__(
        self,
        link: Connections,
        q: pg.Queries,
        search_config: str,
        statement_timeout: float | None,
        *,
        setup_pending: bool = False,
    ) -> None:
        self.link, self.q, self.prefix = link, q, q.prefix
        self.search_config, self.statement_timeout = search_config, statement_timeout
        self.migration = Migration(link.psycopg, q, search_config)
        self.failures = pg.Failures(link.psycopg, q.prefix, statement_timeout)
        self._pgvector: str | None = None  # the schema of the database's pgvector, once probed
        self._pgvector_probed = False
        self._setup_pending = setup_pending

    async def setup(self) -> None:
        await self._arun("migrate", self.migration.arun)
        self._setup_pending = False

    async def vacuum(self, *, full: bool = True) -> None:
        async def go(conn: Any) -> None:
            await conn.execute(pg.VACUUM_UNLIMITED)
            try:
                await conn.execute(self.q.vacuum_full if full else self.q.vacuum_plain)
            finally:
                await conn.execute(pg.VACUUM_RESTORE)

        await self._arun("vacuum", go)

    async def close(self) -> None:
        await self.link.aclose()

    async def _arun(
        self,
        op: str,
        fn: Callable[[Any], Awaitable[_T]],
        retry: Callable[[Any], Awaitable[_T]] | None = None,
    ) -> _T:
        psycopg = self.link.psycopg
        try:
            pool = await self.link.async_pool()
        except psycopg.Error as exc:  # no first connection within `timeout`
            raise pg.failure(op, exc, False) from exc
        if self._setup_pending and op != "migrate":  # an async resource handed in: set up now
            await self.setup()
        for attempt in (1, 2):
            conn = watch = None
            try:
                async with pool.connection() as conn:
                    if self.link.borrowed is not None:
                        check_connection(psycopg, conn)
                    with pg.deadline(op, conn, self.statement_timeout) as watch:
                        return await (fn if attempt == 1 else retry or fn)(conn)
            except (OwnershipError, SchemaVersionError):
                raise
            except psycopg.Error as exc:
                ended = self.link.apools.ended_error() if self.link.ended() else None  # the loop's end
                self.failures.raise_unless_lost(exc, op, attempt, conn, watch, ended)
                await pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    async def append(self, batch: AppendBatch) -> list[int]:
        params = pg.append_params(self.q, batch, self.search_config)

        async def first(conn: Any) -> list[int]:
            if batch.rewind is not None:
                async with self._pipeline(conn):
                    cur = await self._rewind(conn, params)
                return pg.rewound(await cur.fetchall(), batch)
            cur = await conn.execute(self.q.append, params)
            return pg.appended(await cur.fetchall(), batch)

        return await self._arun("append", first, lambda conn: self._append_again(conn, batch, params))

    async def _rewind(self, conn: Any, params: dict[str, Any], *, begin: bool = True) -> Any:
        """Async twin of `SyncPostgres._rewind`."""
        if begin:
            await conn.execute(pg.BEGIN)
        await conn.execute(self.q.rewind_lock, params)
        cur = await conn.execute(self.q.rewind, params)
        if begin:
            await conn.execute(pg.COMMIT)
        return cur

    @contextlib.asynccontextmanager
    async def _pipeline(self, conn: Any) -> AsyncIterator[None]:
        """Async twin of `SyncPostgres._pipeline`."""
        psycopg = self.link.psycopg
        try:
            async with conn.pipeline():
                yield
        except psycopg.Error:
            if pg.left_open(psycopg, conn):
                with contextlib.suppress(psycopg.Error):
                    await conn.execute(pg.ROLLBACK)
            raise

    async def _append_again(self, conn: Any, batch: AppendBatch, params: dict[str, Any]) -> list[int]:
        """Async twin of `SyncPostgres._append_again`."""
        q, session_id = self.q, batch.session_id
        async with conn.transaction() as tx:
            await conn.execute(q.lock_session, (session_id, batch.now, batch.now, contract.new_generation()))
            cur = await conn.execute(q.find_batch, (session_id, params["batch"]))
            done = [int(r[0]) for r in await cur.fetchall()]
            if done:
                tx.force_rollback = True
                return done
            if batch.rewind is not None:  # in this transaction
                return pg.rewound(await (await self._rewind(conn, params, begin=False)).fetchall(), batch)
            cur = await conn.execute(q.append, params)
            return pg.appended(await cur.fetchall(), batch)

    async def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        params = pg.append_params(self.q, batch, self.search_config)
        sid = batch.session_id
        read, args = postgres_reads.summary_read(self.q, sid, reader)

        async def first(conn: Any) -> tuple[list[int], SummaryRecord | None]:
            async with self._pipeline(conn):
                if batch.rewind is None:
                    appended = await conn.execute(self.q.append, params)
                else:
                    appended = await self._rewind(conn, params)
                summary = await conn.execute(read, args)
            seqs = (pg.appended if batch.rewind is None else pg.rewound)(await appended.fetchall(), batch)
            return seqs, postgres_reads.summary_found(await summary.fetchall(), sid, reader)

        async def again(conn: Any) -> tuple[list[int], SummaryRecord | None]:
            seqs = await self._append_again(conn, batch, params)
            cur = await conn.execute(read, args)
            return seqs, postgres_reads.summary_found(await cur.fetchall(), sid, reader)

        return await self._arun("append", first, again)

    async def _afetch(self, op: str, sql: str, params: Any) -> list[tuple[Any, ...]]:
        async def go(conn: Any) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return list(await cur.fetchall())

        return await self._arun(op, go)

    async def _acount(self, op: str, sql: str, params: Any) -> int:
        async def go(conn: Any) -> int:
            return int((await conn.execute(sql, params)).rowcount)

        return await self._arun(op, go)

    async def _afetch_session(
        self, sql: str, params: Any, session_id: str, reader: Reader | None
    ) -> list[tuple[Any, ...]]:
        """A session read; with a `reader`, its owner is read and checked by the same statement."""
        if reader is None:
            return await self._afetch("read", sql, params)
        wrapped, args = postgres_reads.owned(self.prefix, sql, params, session_id)
        return postgres_reads.checked(await self._afetch("read", wrapped, args), reader, session_id)

    async def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        sql, params = self.q.read(session_id, after_seq, limit, newest)
        return pg.rows_of(await self._afetch_session(sql, params, session_id, reader), newest, limit)

    async def messages_after(
        self, points: Sequence[tuple[str, int]], reader: Reader | None
    ) -> list[Row | None]:
        params = pg.after_params(points, reader)
        return contract.rows_after(await self._afetch("read", self.q.messages_after, params), len(points))

    async def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        params = {"sid": session_id, "limit": limit}
        owner, turn = pg.summary_and_tail_of(await self._afetch("read", self.q.summary_and_tail, params))
        if reader is not None:
            reader.check(session_id, owner)
        return turn

    async def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        params = pg.memory_params(session_id, limit, reader, facts_of, now)
        owner, memory = pg.memory_of(await self._afetch("read", self.q.read_memory, params), facts_of)
        if reader is not None:
            reader.check(session_id, owner)
        return memory

    async def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        sql, params = pgs.search_params(
            self.q, list(terms), client_id, session_id, limit, self.search_config, now
        )
        return pgs.search_rows_of(await self._afetch("search", sql, params))

    async def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        rows = await self._afetch_session(self.q.last_seq, (session_id,), session_id, reader)
        return int(rows[0][0]) if rows else 0

    async def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        rows = await self._afetch_session(self.q.get_summary, (session_id,), session_id, reader)
        return pg.summary_of(rows[0] if rows else None)

    async def cas_summary(self, write: SummaryWrite) -> bool:
        sql, params = self.q.cas(write)
        return await self._acount("summary", sql, params) == 1

    async def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        return await self._acount("lease", self.q.claim, (session_id, owner, now + ttl, now)) == 1

    async def release(self, session_id: str, owner: str) -> None:
        await self._acount("lease", self.q.release, (session_id, owner))

    async def get_session(self, session_id: str) -> SessionInfo | None:
        rows = await self._afetch("read", self.q.get_session, (session_id,))
        return pg.session_of(session_id, rows[0] if rows else None)

    async def list_sessions(self, client_id: str) -> list[str]:
        return [str(r[0]) for r in await self._afetch("read", self.q.list_sessions, (client_id,))]

    async def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        rows = await self._afetch_session(self.q.get_state, (session_id,), session_id, reader)
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    async def set_state(
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
            if not await self._afetch("state", self.q.set_state, params):
                raise OwnershipError.for_session(session_id, client_id)
            return True
        params["expected"] = expected
        sql = self.q.set_state_if_none if expected is None else self.q.set_state_if
        ((wrote, owner),) = await self._afetch("state", sql, params)
        if not wrote and owner is not None and owner != client_id:
            raise OwnershipError.for_session(session_id, client_id)
        return bool(wrote)

    async def _aerase(self, op: str, plan: pg.Erase, reader: Reader | None = None) -> int:
        async def go(conn: Any) -> int:
            async with conn.transaction():
                for sql, params in plan.first:
                    await conn.execute(sql, params)
                cur = await conn.execute(plan.lock, plan.lock_params)
                records = await cur.fetchall()
                if reader is not None:  # one session's erase: its lock returns one row
                    reader.check(str(records[0][0]), records[0][1])
                locked = {str(r[0]) for r in records}
                ids = sorted(locked | set(plan.always))
                for sql in self.q.erase_sessions if ids else ():
                    await conn.execute(sql, (ids,))
                gone = len(locked)
                for sql, params in plan.then:
                    gone += max(0, (await conn.execute(sql, params)).rowcount)
                return gone

        return await self._arun(op, go)

    async def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        await self._aerase("delete", self.q.erase("session", session_id), reader)

    async def list_facts(self, client_id: str, at: float) -> list[Fact]:
        return [pg.fact_of(r) for r in await self._afetch("facts", self.q.list_facts, (client_id, at))]

    async def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        q = self.q

        async def go(conn: Any) -> tuple[list[Fact], Fact | None]:
            async with conn.transaction():
                await conn.execute(q.lock_facts, (f"{self.prefix}facts:{client_id}",))
                if mark is not None:
                    cur = await conn.execute(q.session_mark, pg.mark_params(mark, client_id))
                    if not await cur.fetchall():
                        raise StaleWriteError.for_session(mark.session_id, "fact write")
                cur = await conn.execute(q.list_facts, (client_id, now))
                existing = [pg.fact_of(r) for r in await cur.fetchall()]
                fact = plan(existing)
                if fact is not None:
                    await conn.execute(q.put_fact, pg.fact_params(fact, self.search_config))
                return existing, fact

        return await self._arun("facts", go)

    async def delete_fact(self, client_id: str, fact_id: str) -> bool:
        q = self.q

        async def go(conn: Any) -> int:
            async with conn.transaction():
                # The client's facts lock, as `change_facts` takes it (see the sync twin).
                await conn.execute(q.lock_facts, (q.facts_lock(client_id),))
                cur = await conn.execute(q.delete_fact, (client_id, fact_id))
                return int(cur.rowcount)

        return await self._arun("facts", go) == 1

    async def delete_client(self, client_id: str) -> None:
        await self._aerase("forget", self.q.erase("client", client_id))

    async def purge(self, cutoff: float, now: float) -> int:
        return await self._aerase("purge", self.q.erase("purge", cutoff, now))

    # ------------------------------------------------------------------ dense vectors (`vectors.py`)

    async def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        sql, params = pgv.unembedded(self.prefix, model, client_id, session_id, limit)
        return pgv.unembedded_rows(await self._afetch("vectors", sql, params))

    async def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        sql, params = pgv.put(self.prefix, model, items)
        return await self._acount("vectors", sql, params)

    async def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        if not self._pgvector_probed:  # once per backend: which schema holds pgvector, if any
            self._pgvector = pgv.pgvector_schema(await self._afetch("search", pgv.PGVECTOR_PROBE, None))
            self._pgvector_probed = True
        sql, params = pgv.search(self.prefix, model, vector, client_id, session_id, limit, self._pgvector)
        return pgv.search_rows(await self._afetch("search", sql, params))
