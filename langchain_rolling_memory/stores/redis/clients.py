"""Where a Redis store's connections come from: its own clients, or the caller's.

Owns `Clients`, the one object the sync and async primitives share: the sync client and its
scripts, the async client of the running event loop (its connections belong to the loop that
made them) or the one the caller handed in, the schema state both check before their first
call, closing and forking. Imports no driver: the store hands it redis-py. A client handed in
is the caller's: the store never closes it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import langchain_rolling_memory.stores.forks as forks
import langchain_rolling_memory.stores.redis.scripts as lua
from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION, newer_schema
from langchain_rolling_memory.stores.lifecycle import close_now, close_with_loop, not_set_up


class Clients:
    """The clients of one store.

    Args:
        redis: the driver's module.
        url: what the store's own async clients connect to ('' with a client handed in).
        sync: the sync client (the store's own, or the caller's), or None (an async client
            handed in).
        borrowed: the client the caller handed in, or None.
        akwargs: the keyword arguments of every async client the store opens.
        schema_state: "ok" (set up), "check" (check the schema record once before the first
            call) or "setup" (set up at the first async call: an async client handed in).
        name: the store's class name, for the error of a closed store.
    """

    def __init__(
        self,
        redis: Any,
        *,
        url: str,
        sync: Any,
        borrowed: Any,
        akwargs: dict[str, Any],
        schema_state: str,
        name: str,
    ) -> None:
        self.redis, self.url, self.akwargs, self.name = redis, url, akwargs, name
        self.sync, self.borrowed, self.schema_state = sync, borrowed, schema_state
        self.scripts: dict[str, Any] = (
            {} if sync is None else {n: sync.register_script(s) for n, s in lua.SCRIPTS.items()}
        )
        self.closed = False
        self.forked = False
        self.ar: Any = None
        self.ar_loop: asyncio.AbstractEventLoop | None = None
        self.ascripts: dict[str, Any] = {}
        self.aguard: Any = None
        forks.track(self)

    def check_open(self) -> None:
        if self.closed:
            msg = f"this {self.name} is closed; open a new store (closing is final)"
            raise StoreError(msg)

    def schema_ok(self, version: Any, prefix: str) -> None:
        """Accept the schema record `version` read from ``{prefix}schema``, or raise."""
        where = f"Redis keys {prefix}*"
        if version is None:
            raise not_set_up(f"the schema record of the {where}", f"no key {prefix}schema")
        if int(version) > SCHEMA_VERSION:
            raise newer_schema(where, int(version))
        if int(version) < SCHEMA_VERSION:
            raise not_set_up(f"the {where} at schema {SCHEMA_VERSION}", f"they are at {version}")
        self.schema_state = "ok"

    def sync_client(self) -> Any:
        self.check_open()
        if self.sync is None:
            kind = type(self.borrowed).__module__ + "." + type(self.borrowed).__name__
            msg = f"this store was given a {kind}: use its async methods (aappend, aread, asetup...)"
            raise StoreError(msg)
        return self.sync

    def _borrowed_aclient(self) -> Any:
        self.check_open()
        if self.borrowed is None or self.sync is not None:
            return None
        if self.forked:
            msg = (
                "this store was given a redis.asyncio client before the process forked; a child "
                "never shares its parent's connections: open a new store (or client) in the child"
            )
            raise StoreError(msg)
        return self.borrowed

    async def async_client(self) -> Any:
        """The async client of the running loop: the caller's, or the store's own for it."""
        borrowed = self._borrowed_aclient()
        if borrowed is not None:
            if not self.ascripts:
                self.ascripts = {name: borrowed.register_script(src) for name, src in lua.SCRIPTS.items()}
            return borrowed
        loop = asyncio.get_running_loop()
        if self.ar is None or self.ar_loop is not loop:
            # redis.asyncio connections belong to the loop that made them.
            self.ar = self.redis.asyncio.Redis.from_url(self.url, **self.akwargs)
            self.ar_loop = loop
            self.ascripts = {name: self.ar.register_script(src) for name, src in lua.SCRIPTS.items()}
            self.aguard = close_with_loop(self.ar.aclose)
        return self.ar

    def _after_fork(self) -> None:
        # The sync client is already fork-safe: redis-py's pool sees the new pid, drops the
        # inherited connections without shutting the parent's sockets, and connects anew (a
        # sync client handed in by the caller too). The async client has no such check and
        # belongs to the parent's loop: abandon it (see `forks`); the child's first async call
        # opens its own, or refuses if the caller handed it in.
        if self.borrowed is not None and self.sync is None:
            self.forked = True
            self.ascripts = {}
            return
        forks.abandon(self.ar, self.aguard)
        self.ar, self.ar_loop, self.ascripts, self.aguard = None, None, {}, None

    def close(self) -> None:
        """Close the clients the store opened (never one handed in). An async client is closed
        here only if its event loop is idle (see `aclose`)."""
        self.closed = True
        if self.borrowed is not None:
            return
        self.sync.close()
        guard, loop, self.aguard, self.ar, self.ar_loop = self.aguard, self.ar_loop, None, None, None
        if guard is not None and loop is not None and not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(close_now(guard))

    async def aclose(self) -> None:
        """Close the running loop's own async client on it (`close` then does the rest)."""
        guard, loop = self.aguard, self.ar_loop
        if guard is not None and loop is asyncio.get_running_loop():
            self.aguard, self.ar, self.ar_loop = None, None, None
            await close_now(guard)  # closes the async client
