"""PostgreSQL backend on psycopg 3 pools: the store class, which builds the two twins.

Owns the store's settings and the choice of its async primitives; the connections (its own
pools, or a pool or connection handed in by the caller; closing) are in `conn.py`, the sync
primitives in `sync.py`, the async ones in `aio.py`, the migrations in `setup.py`, the SQL and
what both share in `sql.py`, the public API in `stores/api.py`. psycopg is imported only when
a store is created, so the package works without the ``postgres`` extra.

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
from typing import Any

from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError, StoreError
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.fact_api import FactOptions
from langchain_rolling_memory.stores.lifecycle import close_at_exit
from langchain_rolling_memory.stores.postgres.aio import AsyncPostgres
from langchain_rolling_memory.stores.postgres.conn import Connections
from langchain_rolling_memory.stores.postgres.sql import Queries, check_config, check_prefix
from langchain_rolling_memory.stores.postgres.sync import SyncPostgres
from langchain_rolling_memory.stores.urls import url_options


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


class PostgresRollingStore(RollingStore):
    """Transcripts, summaries and facts in PostgreSQL, shared by many app processes.

    A turn costs two statements whatever the transcript's length: one append (the session
    row's lock hands out gap-free seqs) and one read of the summary with the unsummarized
    tail (primary-key range on ``(session_id, seq)``) and the session's owner and erase
    generation. A connection dropped mid-call is
    retried once on a fresh connection; an append is retried idempotently (its batch id is
    looked up first), so a message is never doubled. A second failure raises `StoreError`.

    Args:
        conninfo: a libpq URL or ``key=value`` string (``postgresql://user@host:5432/db``);
            the store opens its own pools on it. Give it or `conn`, not both.
        conn: a pool or connection of your own instead: a `psycopg_pool.ConnectionPool` or
            `AsyncConnectionPool`, or a `psycopg.Connection` or `AsyncConnection` (calls then
            take turns on it), opened with ``autocommit=True`` and the default row factory.
            It stays yours: `close()` leaves it open, `statement_timeout` is not set on it
            (set it in its options if you want it), and a forked child refuses to use it
            (open a new one there). With a sync one, the async methods run in a worker thread;
            with an async one, only the async methods work, and setup runs at the first call.
        setup: create or migrate the tables now (the default); False creates nothing, for a
            role without DDL rights: run `setup()` once elsewhere (a missing table then raises
            `StoreError` naming it).
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

        with PostgresRollingStore.from_url("postgresql://postgres@127.0.0.1:5432/test?prefix=app1_") as store:
            ...
    """

    schemes = ("postgresql", "postgres")

    def __init__(
        self,
        conninfo: str | None = None,
        *,
        conn: Any = None,
        setup: bool = True,
        table_prefix: str = "lrm_",
        pool_size: int = 10,
        timeout: float = 30.0,
        statement_timeout: float | None = 30.0,
        connect_timeout: float = 5.0,
        connect_kwargs: dict[str, Any] | None = None,
        search_config: str = "simple",
        **options: Any,
    ) -> None:
        fact_options = FactOptions(**options)
        psycopg, psycopg_pool = _driver()
        if (conninfo is None) == (conn is None):
            msg = f"give a PostgreSQL URL or conn=, not both nor neither; got conninfo={conninfo!r}, conn={conn!r}"
            raise ConfigurationError(msg)
        if pool_size < 1 or timeout <= 0:
            msg = f"pool_size must be >= 1 and timeout > 0, got pool_size={pool_size!r}, timeout={timeout!r}"
            raise ConfigurationError(msg)
        if statement_timeout is not None and not 0 < statement_timeout < float("inf"):
            msg = f"statement_timeout must be a number of seconds > 0 or None, got {statement_timeout!r}"
            raise ConfigurationError(msg)
        self.prefix = check_prefix(table_prefix)
        self.q = Queries(self.prefix)
        self.search_config = check_config(search_config)
        self.statement_timeout = statement_timeout
        kwargs: dict[str, Any] = {"autocommit": True, **(connect_kwargs or {})}
        if conninfo is not None and statement_timeout is not None:
            # Sent at connect time, so RESET (after vacuum) returns to it; keeps the caller's options.
            given = kwargs.get("options") or psycopg.conninfo.conninfo_to_dict(conninfo).get("options")
            ours = f"-c statement_timeout={max(1, round(statement_timeout * 1000))}"
            kwargs["options"] = f"{given} {ours}" if given else ours
        link = Connections(
            psycopg,
            psycopg_pool,
            conninfo=conninfo,
            conn=conn,
            prefix=self.prefix,
            pool_size=pool_size,
            timeout=timeout,
            kwargs=kwargs,
            name=type(self).__name__,
        )
        self._pg = SyncPostgres(link, self.q, self.search_config, statement_timeout)
        # Native async unless the caller handed in a sync resource only: its async API runs
        # the sync primitives in a worker thread. An async one handed in is set up at its
        # first call (a constructor cannot await).
        self._apg = (
            None
            if link.sync_only
            else AsyncPostgres(
                link,
                self.q,
                self.search_config,
                statement_timeout,
                setup_pending=setup and link.borrowed is not None and link.pool is None,
            )
        )
        super().__init__(self._pg, self._apg, options=fact_options)
        if conninfo is None:  # the caller's pool or connection
            if setup and link.pool is not None:
                self.setup()
            return
        _probe(psycopg, conninfo, kwargs, connect_timeout)
        link.open_pool()
        close_at_exit(self)
        if setup:
            self._setup_or_close()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresRollingStore:
        """Open a store from ``postgresql://...``; a ``prefix`` query parameter sets the table
        prefix, ``fact_ttl`` the facts' default retention, the other parameters go to libpq."""
        conninfo, options = url_options(url, options, "table_prefix")
        scheme, rest = conninfo.split("://", 1) if "://" in conninfo else ("", conninfo)
        if "+" in scheme:  # SQLAlchemy-style "postgresql+psycopg://": libpq knows no driver part
            conninfo = f"{scheme.split('+', 1)[0]}://{rest}"
        return cls(conninfo, **options)

    def vacuum(self, *, full: bool = True) -> None:
        """VACUUM the store's tables so that erased rows leave their files (see the module
        docstring for what stays in the WAL and backups).

        Args:
            full: VACUUM FULL (the default) rewrites each table and deletes the old file, so
                no byte of an erased row stays in it, but locks the table while it runs; False
                runs a plain VACUUM (no lock against turns; the bytes stay until overwritten).
        """
        self._pg.vacuum(full=full)

    async def avacuum(self, *, full: bool = True) -> None:
        if self._apg is None:
            await asyncio.to_thread(self._pg.vacuum, full=full)
        else:
            await self._apg.vacuum(full=full)


def _probe(psycopg: Any, conninfo: str, kwargs: dict[str, Any], connect_timeout: float) -> None:
    """Connect once, now: a server that cannot be reached or refuses us fails in seconds,
    with its own reason, instead of as a pool timeout after retrying for `timeout`."""
    if not 0 < connect_timeout < float("inf"):
        msg = f"connect_timeout must be a number of seconds > 0, got {connect_timeout!r}"
        raise ConfigurationError(msg)
    # libpq counts whole seconds, at least 2; a connect_timeout in the URL wins.
    try:
        psycopg.connect(conninfo, **{"connect_timeout": max(2, round(connect_timeout)), **kwargs}).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        msg = (
            f"cannot connect to PostgreSQL at {_where(psycopg, conninfo)}: {reason}; "
            "check the URL (host, port, database, user, password) and that the server is running"
        )
        raise StoreError(msg) from None


def _where(psycopg: Any, conninfo: str) -> str:
    """``user@host:port/dbname`` of a conninfo, without its password."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "the given URL"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"{user}{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"
