"""Where a PostgreSQL store's connections come from when the caller hands them in.

Owns the check of a handed-in psycopg pool or connection (what the store needs of it) and the
wrappers that let one connection serve as a pool of one; the store's own pools are opened in
`store.py`. Imports no driver: the store hands it psycopg. A handed-in resource is the
caller's: the store never opens, closes or reconfigures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_rolling_memory.errors import ConfigurationError, StoreError


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
