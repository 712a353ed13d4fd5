"""PostgreSQL backend on psycopg 3 pools: the store class, its sync pool and sync primitives.

Owns connections, migrations and sync retries; the async twins are in `postgres_aio.py`, the
SQL in `postgres_sql.py` and the rules (validation, facts, export) in `base.py`. psycopg is
imported only when a store is created, so the package works without the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_rolling_memory.errors import (
    ConfigurationError,
    MissingExtraError,
    OwnershipError,
    SchemaVersionError,
)
from langchain_rolling_memory.records import Fact, FactPlan, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.stores.base import SCHEMA_VERSION, RollingStore, split_prefix
from langchain_rolling_memory.stores.postgres_aio import AsyncPostgresPrimitives
from langchain_rolling_memory.stores.postgres_sql import (
    Queries,
    append_params,
    check_prefix,
    fact_params,
    owned_by_other,
    rows_of,
    session_of,
    summary_and_tail_of,
    summary_of,
)

__all__ = ["PostgresRollingStore"]

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


def _driver() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        msg = (
            "the PostgreSQL backend needs psycopg 3 and psycopg_pool, which are not installed; "
            "install them with: pip install 'langchain-rolling-memory[postgres]'"
        )
        raise MissingExtraError(msg) from exc
    return psycopg, psycopg_pool


class PostgresRollingStore(AsyncPostgresPrimitives, RollingStore):
    """Transcripts, summaries and facts in PostgreSQL, shared by many app processes.

    A turn costs two statements whatever the transcript's length: one append (the session
    row's lock hands out gap-free seqs) and one read of the summary with the unsummarized
    tail (primary-key range on ``(session_id, seq)``). A connection dropped mid-call is
    retried once on a fresh connection; an append is retried idempotently (its batch id is
    looked up first), so a message is never doubled. A second failure raises `StoreError`.

    Args:
        conninfo: a libpq URL or ``key=value`` string (``postgresql://user@host:5432/db``).
        table_prefix: prefix of every table, so several apps can share one database.
        pool_size: most connections per pool (one sync pool, one async pool per event loop).
        timeout: seconds to wait for a connection before `StoreError`.
        connect_kwargs: extra keyword arguments for every psycopg connection.
        **options: fact limits and filter, see `RollingStore`.

    Example (needs a server, so not run here)::

        store = PostgresRollingStore.from_url("postgresql://postgres@127.0.0.1:5432/test?prefix=app1_")
    """

    schemes = ("postgresql", "postgres")

    def __init__(
        self,
        conninfo: str,
        *,
        table_prefix: str = "lrm_",
        pool_size: int = 10,
        timeout: float = 30.0,
        connect_kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._psycopg, self._psycopg_pool = _driver()
        if pool_size < 1 or timeout <= 0:
            msg = f"pool_size must be >= 1 and timeout > 0, got pool_size={pool_size!r}, timeout={timeout!r}"
            raise ConfigurationError(msg)
        self.prefix = check_prefix(table_prefix)
        self.q = Queries(self.prefix)
        self._conninfo = conninfo
        self._pool_size = pool_size
        self._timeout = timeout
        self._kwargs: dict[str, Any] = {"autocommit": True, **(connect_kwargs or {})}
        self._pool = self._psycopg_pool.ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs=self._kwargs,
            timeout=timeout,
            open=True,
            name=f"rolling-memory-{self.prefix}",
        )
        self._apool: Any = None
        self._apool_loop: asyncio.AbstractEventLoop | None = None
        try:
            self._run("migrate", self._migrate)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresRollingStore:
        """Open a store from ``postgresql://...``; a ``prefix`` query parameter sets the table
        prefix, the other parameters go to libpq."""
        conninfo, prefix = split_prefix(url)
        scheme, rest = conninfo.split("://", 1) if "://" in conninfo else ("", conninfo)
        if "+" in scheme:  # SQLAlchemy-style "postgresql+psycopg://": libpq knows no driver part
            conninfo = f"{scheme.split('+', 1)[0]}://{rest}"
        if prefix is not None:
            options.setdefault("table_prefix", prefix)
        return cls(conninfo, **options)

    # ------------------------------------------------------------------ plumbing

    def _migrate(self, conn: Any) -> None:
        q = self.q
        with conn.transaction():
            # Two processes starting at once must not both create the tables.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (q.lock_key,))
            conn.execute(q.create_meta)
            row = conn.execute(q.get_version).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                msg = (
                    f"PostgreSQL tables {self.prefix}* were written by a newer version of "
                    f"langchain-rolling-memory (schema {version}, this one knows {SCHEMA_VERSION}); "
                    "upgrade the package"
                )
                raise SchemaVersionError(msg)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in q.migrations[number - 1]:
                    conn.execute(statement)
                conn.execute(q.set_version, (str(number),))

    def _run(
        self,
        op: str,
        fn: Callable[[Any], _T],
        retry: Callable[[Any], _T] | None = None,
    ) -> _T:
        """Run `fn(conn)`; if the connection was lost, run `retry` (default `fn`) once more."""
        psycopg = self._psycopg
        for attempt in (1, 2):
            conn = None
            try:
                with self._pool.connection() as conn:
                    return (fn if attempt == 1 else retry or fn)(conn)
            except (OwnershipError, SchemaVersionError):
                raise
            except psycopg.Error as exc:
                if attempt == 2 or not self._lost(exc, conn):
                    raise self._fail(op, exc, attempt == 2) from exc
                logger.warning("rolling memory: PostgreSQL connection lost during %s, retrying once", op)
                self._pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the pools. An async pool is closed here only if its event loop is idle; in
        async code prefer ``await store.aclose()``."""
        self._pool.close()
        pool, loop, self._apool, self._apool_loop = self._apool, self._apool_loop, None, None
        if pool is not None and loop is not None and not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(pool.close())

    async def aclose(self) -> None:
        pool, loop = self._apool, self._apool_loop
        if pool is not None and loop is asyncio.get_running_loop():
            self._apool, self._apool_loop = None, None
            await pool.close()
        await asyncio.to_thread(self.close)

    # ------------------------------------------------------------------ append

    def _append(
        self,
        session_id: str,
        client_id: str | None,
        rows: Sequence[tuple[str, int | None]],
        now: float,
    ) -> list[int]:
        params = append_params(session_id, client_id, list(rows), now, uuid.uuid4().hex)
        q = self.q

        def first(conn: Any) -> list[int]:
            seqs = sorted(int(r[0]) for r in conn.execute(q.append, params).fetchall())
            if not seqs:
                raise owned_by_other(session_id, client_id)
            return seqs

        def again(conn: Any) -> list[int]:
            with conn.transaction() as tx:
                conn.execute(q.lock_session, (session_id, now, now))
                done = [int(r[0]) for r in conn.execute(q.find_batch, (session_id, params["batch"]))]
                if done:  # the first attempt committed before its connection died
                    tx.force_rollback = True
                    return done
                return first(conn)

        return self._run("append", first, again)

    # ------------------------------------------------------------------ one-statement primitives

    def _fetch(self, op: str, sql: str, params: Any) -> list[tuple[Any, ...]]:
        return self._run(op, lambda conn: conn.execute(sql, params).fetchall())

    def _count(self, op: str, sql: str, params: Any) -> int:
        return self._run(op, lambda conn: int(conn.execute(sql, params).rowcount))

    def _read(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        sql, params = self.q.read(session_id, after_seq, limit, newest)
        return rows_of(self._fetch("read", sql, params), newest, limit)

    def _summary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        params = {"sid": session_id, "limit": limit}
        return summary_and_tail_of(self._fetch("read", self.q.summary_and_tail, params))

    def _last_seq(self, session_id: str) -> int:
        rows = self._fetch("read", self.q.last_seq, (session_id,))
        return int(rows[0][0]) if rows else 0

    def _get_summary(self, session_id: str) -> SummaryRecord | None:
        rows = self._fetch("read", self.q.get_summary, (session_id,))
        return summary_of(rows[0] if rows else None)

    # A CAS retried after a lost reply answers False if the first attempt landed: the
    # compactor then treats the window as done by someone else, which it is.
    def _cas_summary(
        self, session_id: str, text: str, covered_seq: int, meta: str, expected_version: int, now: float
    ) -> bool:
        sql, params = self._cas_args(session_id, text, covered_seq, meta, expected_version, now)
        return self._count("summary", sql, params) == 1

    def _claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        return self._count("lease", self.q.claim, (session_id, owner, now + ttl, now)) == 1

    def _release(self, session_id: str, owner: str) -> None:
        self._count("lease", self.q.release, (session_id, owner))

    def _get_session(self, session_id: str) -> SessionInfo | None:
        rows = self._fetch("read", self.q.get_session, (session_id,))
        return session_of(session_id, rows[0] if rows else None)

    def _list_sessions(self, client_id: str) -> list[str]:
        return [str(r[0]) for r in self._fetch("read", self.q.list_sessions, (client_id,))]

    def _get_state(self, session_id: str) -> str | None:
        rows = self._fetch("read", self.q.get_state, (session_id,))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def _set_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        params = {"sid": session_id, "cid": client_id, "now": now, "state": state}
        if not self._fetch("state", self.q.set_state, params):
            raise owned_by_other(session_id, client_id)

    def _delete_session(self, session_id: str) -> None:
        self._fetch("delete", self.q.delete_session, {"sid": session_id})

    def _list_facts(self, client_id: str) -> list[Fact]:
        return [Fact(*r) for r in self._fetch("facts", self.q.list_facts, (client_id,))]

    def _change_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        q = self.q

        def go(conn: Any) -> tuple[list[Fact], Fact | None]:
            with conn.transaction():
                conn.execute(q.lock_facts, (f"{self.prefix}facts:{client_id}",))
                existing = [Fact(*r) for r in conn.execute(q.list_facts, (client_id,)).fetchall()]
                fact = plan(existing)
                if fact is not None:
                    conn.execute(q.put_fact, fact_params(fact))
                return existing, fact

        # Retried after a lost reply, the plan sees the fact it wrote and writes nothing.
        return self._run("facts", go)

    def _put_fact(self, fact: Fact) -> None:
        self._count("facts", self.q.put_fact, fact_params(fact))

    def _delete_fact(self, client_id: str, fact_id: str) -> bool:
        return self._count("facts", self.q.delete_fact, (client_id, fact_id)) == 1

    def _delete_client(self, client_id: str) -> None:
        self._fetch("forget", self.q.delete_client, {"cid": client_id})

    def _purge(self, cutoff: float) -> int:
        return int(self._fetch("purge", self.q.purge, {"cutoff": cutoff})[0][0])
