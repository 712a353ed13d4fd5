"""PostgreSQL backend on psycopg 3 pools: the store class, which joins the two twins.

Owns the pools, the migrations and closing; the sync primitives are in `postgres_sync.py`,
the async ones in `postgres_aio.py`, the SQL and what both share in `postgres_sql.py`, the
public API in `base.py`. psycopg is imported only when a store is created, so the package
works without the ``postgres`` extra.

What an erase leaves behind: `forget`, `clear_session` and `purge` delete the rows at once,
but PostgreSQL keeps the old row versions (dead tuples) in the table and index files until
VACUUM; a plain VACUUM makes their space reusable yet leaves their bytes in the page until
overwritten, so `vacuum()` runs VACUUM FULL by default (rewrites the store's tables into new
files and deletes the old ones; it locks each table exclusively while it runs). The WAL
(``pg_wal``) keeps the inserted and deleted data until its segments are recycled after
checkpoints (longer with ``wal_keep_size``, replication slots or archiving), and base backups,
WAL archives and replicas keep their own copies: those are the operator's to expire.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import langchain_rolling_memory.stores.forks as forks
import langchain_rolling_memory.stores.postgres_sql as pg
from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError, StoreError
from langchain_rolling_memory.stores.backend import SCHEMA_VERSION, newer_schema
from langchain_rolling_memory.stores.base import RollingStore
from langchain_rolling_memory.stores.postgres_aio import AsyncPostgresPrimitives
from langchain_rolling_memory.stores.postgres_sql import Queries, check_config, check_prefix
from langchain_rolling_memory.stores.postgres_sync import SyncPostgresPrimitives
from langchain_rolling_memory.stores.urls import split_prefix

__all__ = ["PostgresRollingStore"]


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


class PostgresRollingStore(SyncPostgresPrimitives, AsyncPostgresPrimitives, RollingStore):
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
        timeout: seconds to wait for a connection from the pool before `StoreError`.
        connect_timeout: seconds the first connection may take when the store opens; a wrong
            host, port, database, user or password fails then, once, with the server's own
            reason (`StoreError`), instead of after the pool's `timeout` of retries.
        statement_timeout: seconds the server may spend on one statement (waiting for a lock
            included) before it cancels it and the call raises `StoreError`, so a stuck
            server or a held lock does not stall a turn; None for no limit. Default 30.
        connect_kwargs: extra keyword arguments for every psycopg connection.
        search_config: the text search configuration of `search` (``simple``: no stemming,
            no stop words, good for French and English alike since the indexed text is
            already folded; ``english`` or ``french`` stem). Rows keep the configuration
            they were indexed with: choose it before writing.
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
        statement_timeout: float | None = 30.0,
        connect_timeout: float = 5.0,
        connect_kwargs: dict[str, Any] | None = None,
        search_config: str = "simple",
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._psycopg, self._psycopg_pool = _driver()
        if pool_size < 1 or timeout <= 0:
            msg = f"pool_size must be >= 1 and timeout > 0, got pool_size={pool_size!r}, timeout={timeout!r}"
            raise ConfigurationError(msg)
        if statement_timeout is not None and not 0 < statement_timeout < float("inf"):
            msg = f"statement_timeout must be a number of seconds > 0 or None, got {statement_timeout!r}"
            raise ConfigurationError(msg)
        self.prefix = check_prefix(table_prefix)
        self.q = Queries(self.prefix)
        self.search_config = check_config(search_config)
        self._conninfo = conninfo
        self._pool_size = pool_size
        self._timeout = timeout
        self.statement_timeout = statement_timeout
        self._kwargs: dict[str, Any] = {"autocommit": True, **(connect_kwargs or {})}
        if statement_timeout is not None:
            # Sent at connect time, so RESET (after vacuum) returns to it; keeps the caller's options.
            given = self._kwargs.get("options") or self._psycopg.conninfo.conninfo_to_dict(conninfo).get(
                "options"
            )
            ours = f"-c statement_timeout={max(1, round(statement_timeout * 1000))}"
            self._kwargs["options"] = f"{given} {ours}" if given else ours
        self._probe(connect_timeout)
        self._closed = False
        self._pool_lock = threading.Lock()
        self._pool: Any = self._open_pool()
        self._apool: Any = None
        self._apool_loop: asyncio.AbstractEventLoop | None = None
        forks.track(self)
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

    def _probe(self, connect_timeout: float) -> None:
        """Connect once, now: a server that cannot be reached or refuses us fails in seconds,
        with its own reason, instead of as a pool timeout after retrying for `timeout`."""
        if not 0 < connect_timeout < float("inf"):
            msg = f"connect_timeout must be a number of seconds > 0, got {connect_timeout!r}"
            raise ConfigurationError(msg)
        # libpq counts whole seconds, at least 2; a connect_timeout in the URL wins.
        kwargs = {"connect_timeout": max(2, round(connect_timeout)), **self._kwargs}
        try:
            self._psycopg.connect(self._conninfo, **kwargs).close()
        except self._psycopg.Error as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            msg = (
                f"cannot connect to PostgreSQL at {_where(self._psycopg, self._conninfo)}: {reason}; "
                "check the URL (host, port, database, user, password) and that the server is running"
            )
            raise StoreError(msg) from None

    def _open_pool(self) -> Any:
        return self._psycopg_pool.ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            kwargs=self._kwargs,
            timeout=self._timeout,
            open=True,
            name=f"rolling-memory-{self.prefix}",
        )

    def _sync_pool(self) -> Any:
        """The sync pool of this process: a forked child opens its own on first use."""
        pool = self._pool
        if pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = self._open_pool()
                pool = self._pool
        return pool

    def _after_fork(self) -> None:
        # The inherited pools' sockets are the parent's and their worker threads do not exist
        # here: abandon them unclosed (see `forks`) and open fresh ones on first use.
        self._pool_lock = threading.Lock()
        if self._closed:
            return
        forks.abandon(self._pool, self._apool)
        self._pool, self._apool, self._apool_loop = None, None, None

    def _migrate(self, conn: Any) -> None:
        q = self.q
        try:
            conn.execute(q.check_config, (self.search_config,))
        except self._psycopg.Error as exc:
            msg = (
                f"search_config {self.search_config!r} is not a text search configuration of this "
                f"server ({exc}); list them with: SELECT cfgname FROM pg_ts_config"
            )
            raise ConfigurationError(msg) from exc
        with conn.transaction():
            # Two processes starting at once must not both create the tables.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (q.lock_key,))
            conn.execute(q.create_meta)
            row = conn.execute(q.get_version).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise newer_schema(f"PostgreSQL tables {self.prefix}*", version)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in q.migrations[number - 1]:
                    conn.execute(statement)
                if number == 2:
                    self._backfill(conn)
                conn.execute(q.set_version, (str(number),))

    def vacuum(self, *, full: bool = True) -> None:
        """VACUUM the store's tables so that erased rows leave their files (see the module
        docstring for what stays in the WAL and backups).

        Args:
            full: VACUUM FULL (the default) rewrites each table and deletes the old file, so
                no byte of an erased row stays in it, but locks the table while it runs; False
                runs a plain VACUUM (no lock against turns; the bytes stay until overwritten).
        """
        self._run("vacuum", lambda conn: pg.vacuum(conn, self.q, full=full))

    async def avacuum(self, *, full: bool = True) -> None:
        async def go(conn: Any) -> None:
            await conn.execute(pg.VACUUM_UNLIMITED)
            try:
                await conn.execute(self.q.vacuum_full if full else self.q.vacuum_plain)
            finally:
                await conn.execute(pg.VACUUM_RESTORE)

        await self._arun("vacuum", go)

    def _backfill(self, conn: Any) -> None:
        """Index the messages and facts written before schema 2 (in the migration's transaction)."""
        q, cfg = self.q, self.search_config
        with conn.cursor(name=f"lrm_backfill_{self.prefix}") as cur:
            cur.execute(q.unindexed_messages)
            while records := cur.fetchmany(2000):
                conn.execute(q.index_messages, pg.backfill_messages(records, cfg))
        facts = conn.execute(q.unindexed_facts).fetchall()
        if facts:
            conn.execute(q.index_facts, pg.backfill_facts(facts, cfg))

    def close(self) -> None:
        """Close the pools. An async pool is closed here only if its event loop is idle; in
        async code prefer ``await store.aclose()``."""
        self._closed = True
        if self._pool is not None:
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


def _where(psycopg: Any, conninfo: str) -> str:
    """``user@host:port/dbname`` of a conninfo, without its password."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "the given URL"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"{user}{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"
