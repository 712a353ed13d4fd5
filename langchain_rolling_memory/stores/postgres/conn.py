"""Where a PostgreSQL store's connections come from: its own pools, or the caller's.

Owns `Connections`, the one object the sync and async primitives share (the sync pool, the
async pools one per event loop, or the pool or connection the caller handed in; closing,
forking), the check of a handed-in psycopg pool or connection (what the store needs of it) and
the wrappers that let one connection serve as a pool of one. Imports no driver: the store
hands it psycopg. A handed-in resource is the caller's: the store never opens, closes or
reconfigures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

import langchain_rolling_memory.stores.forks as forks
from langchain_rolling_memory.errors import ConfigurationError, StoreError
from langchain_rolling_memory.stores.loops import PerLoop


class OneConnection:
    """A caller's `psycopg.Connection` used as a pool of one: calls take turns on it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._lock:
            yield self.conn

    def check(self) -> None:
        """Nothing to heal: a broken connection is the caller's to replace."""


class OneAsyncConnection:
    """A caller's `psycopg.AsyncConnection` used as a pool of one: calls take turns on it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._lock: asyncio.Lock | None = None

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            yield self.conn

    async def check(self) -> None:
        """Nothing to heal: a broken connection is the caller's to replace."""


class Borrowed:
    """What a handed-in resource gives the store: a sync source, an async source, or one."""

    def __init__(self, sync: Any, asynchronous: Any, kind: str) -> None:
        self.sync = sync
        self.asynchronous = asynchronous
        self.kind = kind


def borrow(psycopg: Any, psycopg_pool: Any, conn: Any) -> Borrowed:
    """Check a handed-in pool or connection and wrap it as the store's source."""
    kind = type(conn).__name__
    if isinstance(conn, psycopg_pool.ConnectionPool | psycopg_pool.AsyncConnectionPool):
        if conn.closed:
            msg = f"the {kind} handed to the store is closed; open it first (pool.open() or open=True)"
            raise ConfigurationError(msg)
        if isinstance(conn, psycopg_pool.AsyncConnectionPool):
            return Borrowed(None, conn, kind)
        return Borrowed(conn, None, kind)
    if isinstance(conn, psycopg.Connection | psycopg.AsyncConnection):
        if conn.closed:
            msg = f"the {kind} handed to the store is closed; hand in an open one"
            raise ConfigurationError(msg)
        check_connection(psycopg, conn)
        if isinstance(conn, psycopg.AsyncConnection):
            return Borrowed(None, OneAsyncConnection(conn), kind)
        return Borrowed(OneConnection(conn), None, kind)
    msg = (
        "conn must be a psycopg_pool.ConnectionPool or AsyncConnectionPool, or a psycopg "
        f"Connection or AsyncConnection, got {kind}"
    )
    raise ConfigurationError(msg)


def check_connection(psycopg: Any, conn: Any) -> None:
    """Refuse a connection the store cannot use as it is: it runs each statement on its own
    (autocommit, transactions opened explicitly) and reads rows by position."""
    rows = psycopg.rows
    if not conn.autocommit:
        msg = (
            "the store needs connections in autocommit mode, got one with autocommit=False; "
            "open it with autocommit=True (for a pool: kwargs={'autocommit': True})"
        )
        raise ConfigurationError(msg)
    if conn.row_factory not in (rows.tuple_row, rows.namedtuple_row):
        name = getattr(conn.row_factory, "__name__", repr(conn.row_factory))
        msg = (
            f"the store reads rows as tuples, got a connection with row_factory={name}; "
            "hand in one with the default row factory (tuple_row)"
        )
        raise ConfigurationError(msg)


def forked_error(kind: str) -> StoreError:
    """The error of a store used in a forked child with a resource its parent handed in."""
    msg = (
        f"this store was given a {kind} before the process forked; a child never shares its "
        "parent's connections: open a new store (or a new pool) in the child"
    )
    return StoreError(msg)


class OwnedAsyncPool:
    """An async pool the store opened, with every connection it made (held weakly).

    The connections are tracked because the pool's own close can stop short: at the end of
    ``asyncio.run`` the loop cancels the pool's workers together with the store's guard, and
    the pool's close, waiting for them, is cancelled before it closes a single connection.
    """

    def __init__(self) -> None:
        self.pool: Any = None
        self.conns: weakref.WeakSet[Any] = weakref.WeakSet()

    async def track(self, conn: Any) -> None:
        self.conns.add(conn)

    async def close(self) -> None:
        try:
            await self.pool.close()
        except BaseException:
            self.finish()
            raise

    def finish(self) -> None:
        """Hang up every connection at once (libpq's own close, which needs no event loop)."""
        for conn in list(self.conns):
            if not conn.closed:
                conn.pgconn.finish()


class Connections:
    """The connections of one store, shared by its sync and async primitives: the pools it
    opens on `conninfo` (one sync pool, opened now; one async pool per event loop, opened at
    the loop's first call, see `loops`), or the pool or connection handed in as `conn`.

    Args:
        psycopg, psycopg_pool: the driver's modules.
        conninfo: the URL the store's own pools connect to (None with `conn`).
        conn: the caller's pool or connection (None: the store opens its own).
        kwargs: the keyword arguments of every connection the store opens.
        name: the store's class name, for the error of a closed store.
    """

    def __init__(
        self,
        psycopg: Any,
        psycopg_pool: Any,
        *,
        conninfo: str | None,
        conn: Any,
        prefix: str,
        pool_size: int,
        timeout: float,
        kwargs: dict[str, Any],
        name: str,
    ) -> None:
        self.psycopg, self.psycopg_pool = psycopg, psycopg_pool
        self.conninfo, self.prefix, self.pool_size, self.timeout = conninfo, prefix, pool_size, timeout
        self.kwargs, self.name = kwargs, name
        self.closed = False
        self.forked = False
        self._pool_lock = threading.Lock()
        self.apools: PerLoop[OwnedAsyncPool] = PerLoop(
            self._open_apool, OwnedAsyncPool.close, OwnedAsyncPool.finish
        )
        self.borrowed = None if conn is None else borrow(psycopg, psycopg_pool, conn)
        self.pool: Any = None if self.borrowed is None else self.borrowed.sync
        forks.track(self)

    def check_open(self) -> None:
        if self.closed:
            msg = f"this {self.name} is closed; open a new store (closing is final)"
            raise StoreError(msg)

    @property
    def sync_only(self) -> bool:
        """True for a sync pool or connection handed in: the async API runs in a thread."""
        return self.borrowed is not None and self.borrowed.asynchronous is None

    def open_pool(self) -> None:
        """Open the store's own sync pool (the constructor's, after its probe)."""
        self.pool = self._new_pool()

    def _pool_args(self) -> dict[str, Any]:
        """What the store's own sync and async pools share: where, how many, how long."""
        return {"min_size": 1, "max_size": self.pool_size, "kwargs": self.kwargs, "timeout": self.timeout}

    def _new_pool(self) -> Any:
        return self.psycopg_pool.ConnectionPool(
            self.conninfo, **self._pool_args(), open=True, name=f"rolling-memory-{self.prefix}"
        )

    def sync_pool(self) -> Any:
        """The sync pool of this process: a forked child opens its own on first use."""
        self.check_open()
        pool = self.pool
        if pool is None:
            if self.borrowed is not None:
                if self.forked:
                    raise forked_error(self.borrowed.kind)
                msg = (
                    f"this store was given an {self.borrowed.kind}: use its async methods "
                    "(aappend, aread, asetup...), or hand it a sync pool or connection"
                )
                raise StoreError(msg)
            with self._pool_lock:
                if self.pool is None:
                    self.pool = self._new_pool()
                pool = self.pool
        return pool

    async def async_pool(self) -> Any:
        """The running loop's async pool: the caller's, or the store's own for this loop."""
        self.check_open()
        if self.borrowed is not None:
            if self.forked:
                raise forked_error(self.borrowed.kind)
            return self.borrowed.asynchronous
        return (await self.apools.get()).pool

    def ended(self) -> bool:
        """True if the store's own pool of the running loop was closed by the loop's end."""
        return self.borrowed is None and self.apools.ended()

    async def _open_apool(self) -> OwnedAsyncPool:
        owned = OwnedAsyncPool()
        owned.pool = self.psycopg_pool.AsyncConnectionPool(
            self.conninfo,
            **self._pool_args(),
            open=False,
            configure=owned.track,
            name=f"rolling-memory-async-{self.prefix}",
        )
        try:
            # Wait for the first connection: a call that found none would grow the pool, and a
            # connection attempt still in flight when the loop ends is beyond anyone's close.
            await owned.pool.open(wait=True, timeout=self.timeout)
        except BaseException:
            await owned.close()
            raise
        return owned

    def _after_fork(self) -> None:
        # The inherited pools' sockets are the parent's and their worker threads do not exist
        # here: abandon them unclosed (see `forks`) and open fresh ones on first use. A pool or
        # connection the caller handed in cannot be replaced: the child refuses to use it.
        self._pool_lock = threading.Lock()
        if self.closed:
            return
        if self.borrowed is not None:
            self.forked = True
            self.pool = None
            return
        forks.abandon(self.pool)
        self.pool = None
        self.apools.abandon()

    def close(self) -> None:
        """Close the pools the store opened (never a pool or connection handed in); an async
        pool whose loop is running is closed on that loop as soon as it gets to it."""
        self.closed = True
        pool, self.pool = self.pool, None
        if self.borrowed is not None:
            return
        if pool is not None:
            pool.close()
        self.apools.close()

    async def aclose(self) -> None:
        """Close the running loop's own pool on it (`close` then does the rest)."""
        if self.borrowed is None:
            await self.apools.aclose()
