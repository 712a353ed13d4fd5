"""Redis backend on redis-py (sync) and `redis.asyncio`: the store class, which joins the two twins.

Owns the clients, the schema record and closing; the sync primitives are in `redis_sync.py`,
the async ones in `redis_aio.py`, the key layout, the Lua scripts and what both twins share
in `redis_scripts.py`, the public API in `base.py`. redis-py is imported only when a store
is created, so the package works without the ``redis`` extra.

What an erase leaves behind: `forget`, `clear_session` and `purge` delete the keys at once
(memory is freed, nothing is readable), and `vacuum()` has nothing to do. Persistence files
are the server's: an RDB snapshot keeps the data until the next save replaces it, and an
append-only file keeps every write, the deleted ones included, until it is rewritten
(``BGREWRITEAOF``, or automatically past ``auto-aof-rewrite-percentage``); replicas and
copied backups keep their own. Run ``BGSAVE``/``BGREWRITEAOF`` after an erase if the files
must not hold the data; this store does not, as they rewrite the whole server's data.

Search: this backend does not use the RediSearch module (FT.*), which plain Redis lacks. It
keeps, beside each session's messages, a list of their dates and indexed words, and a
search reads the scope's lists and facts whole and ranks them in Python with
`search.Bm25Index(stem=True)`: linear in the client's messages. Measured by
`benchmarks/search_cost.py` on this machine (p50): ~45-70 ms at 1,000 messages of a client,
~350-500 ms at 10,000 (a full read and scan: ~90 ms and ~550 ms-1.1 s). Fine for clients
with a few thousand messages; beyond that, prefer SQLite or PostgreSQL for recall. The entries
are written by the append script itself (one more RPUSH of text computed from the messages in
hand): indexing them at the first search instead would need a second script and a read of the
messages' JSON at every recalling turn, for a saving of a few microseconds per append.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import langchain_rolling_memory.stores.forks as forks
from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError
from langchain_rolling_memory.stores import redis_scripts as lua
from langchain_rolling_memory.stores.backend import SCHEMA_VERSION, newer_schema
from langchain_rolling_memory.stores.base import RollingStore
from langchain_rolling_memory.stores.redis_aio import AsyncRedisPrimitives
from langchain_rolling_memory.stores.redis_sync import SyncRedisPrimitives
from langchain_rolling_memory.stores.urls import split_prefix

__all__ = ["RedisRollingStore"]

# Append-only, like the SQL migrations: step N brings the keys from version N-1 to N. Keys
# are created on first use, so version 1 has nothing to convert; 2 (the search entries) is
# `_backfill`, in Python, because the indexed text is computed here; 3 is SQLite's alone.
_MIGRATIONS: tuple[str | None, ...] = (None, None, None)
if len(_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one Redis migration per schema version is required")


def _texts(items: list[Any]) -> list[str]:
    from langchain_rolling_memory.search import message_index_text
    from langchain_rolling_memory.serde import loads_message

    return [message_index_text(loads_message(str(item).partition(" ")[2])) for item in items]


def _driver() -> Any:
    try:
        import redis
        import redis.asyncio
    except ImportError as exc:
        msg = (
            "the Redis backend needs redis-py, which is not installed; "
            "install it with: pip install 'langchain-rolling-memory[redis]'"
        )
        raise MissingExtraError(msg) from exc
    return redis


class RedisRollingStore(SyncRedisPrimitives, AsyncRedisPrimitives, RollingStore):
    """Transcripts, summaries and facts in plain Redis, shared by many app processes.

    A turn costs two round trips whatever the transcript's length: one append script and
    one script that reads the summary with the unsummarized tail (a range from the list's
    end). A connection dropped mid-call is retried once on a fresh connection; the append
    script is then told to look for its batch id first, so a message is never doubled. A
    second failure, or a timeout (the command may still run), raises `StoreError`.

    Args:
        url: ``redis://host:6379/0`` (or ``rediss://``); see `redis.Redis.from_url`.
        key_prefix: prefix of every key, so several apps can share one server.
        ttl: optional seconds a session lives after its last write (transcript, summary,
            state); None keeps sessions until `forget`, `clear_session` or `purge`.
        client_kwargs: extra keyword arguments for the redis-py clients.
        **options: fact limits and filter, see `RollingStore`.

    Example (needs a server, so not run here)::

        store = RedisRollingStore.from_url("redis://127.0.0.1:6379/0?prefix=app1:", ttl=30 * 86400)
    """

    schemes = ("redis", "rediss")

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "lrm:",
        ttl: float | None = None,
        client_kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._redis = _driver()
        if ttl is not None and ttl <= 0:
            msg = f"ttl must be a positive number of seconds or None, got {ttl!r}"
            raise ConfigurationError(msg)
        self.prefix = lua.check_prefix(key_prefix)
        self.keys = lua.Keys(self.prefix)
        self.ttl = ttl
        self._ttl_ms = 0 if ttl is None else max(1, math.ceil(ttl * 1000))
        self._url = url
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # redis-py would silently resend a command after a dropped connection; an append
        # resent that way could land twice, so retries are ours (and idempotent).
        self._kwargs: dict[str, Any] = {"decode_responses": True, **(client_kwargs or {})}
        self._akwargs: dict[str, Any] = {"retry": AsyncRetry(NoBackoff(), 0), **self._kwargs}
        self._r = self._redis.Redis.from_url(url, **{"retry": Retry(NoBackoff(), 0), **self._kwargs})
        self._scripts = {name: self._r.register_script(src) for name, src in lua.SCRIPTS.items()}
        self._ar: Any = None
        self._ar_loop: asyncio.AbstractEventLoop | None = None
        self._ascripts: dict[str, Any] = {}
        forks.track(self)
        try:
            self._call("migrate", self._migrate)
        except BaseException:
            self._r.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisRollingStore:
        """Open a store from ``redis://...``; a ``prefix`` query parameter sets the key prefix."""
        clean, prefix = split_prefix(url)
        if prefix is not None:
            options.setdefault("key_prefix", prefix)
        return cls(clean, **options)

    # ------------------------------------------------------------------ plumbing

    def _migrate(self) -> None:
        self._r.setnx(self.keys.schema, "0")
        version = int(self._r.get(self.keys.schema) or 0)
        if version > SCHEMA_VERSION:
            raise newer_schema(f"Redis keys {self.prefix}*", version)
        for number in range(version + 1, SCHEMA_VERSION + 1):
            step = _MIGRATIONS[number - 1]
            if step is not None:  # pragma: no cover - no conversion shipped yet
                self._r.eval(step, 0, self.prefix)
            if number == 2:
                self._backfill()
            self._r.set(self.keys.schema, str(number))

    def _backfill(self) -> None:
        """Write the search entries of sessions written before schema 2 (their messages had no
        date: undated). Each session is rewritten under WATCH, so an append meanwhile retries it."""
        pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in self.prefix) + "s:*:msgs"
        for key in self._r.scan_iter(match=pattern, count=1000):
            sid = str(key)[len(self.prefix) + 2 : -len(":msgs")]
            idx = self.keys.idx(sid)
            with self._r.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch(key, idx)
                        items = pipe.lrange(key, 0, -1)
                        if pipe.llen(idx) >= len(items):
                            break
                        entries = [lua.idx_entry(None, text) for text in _texts(items)]
                        pipe.multi()
                        pipe.delete(idx)
                        if entries:
                            pipe.rpush(idx, *entries)
                        pipe.execute()
                        break
                    except self._redis.WatchError:
                        continue

    def _after_fork(self) -> None:
        # The sync client is already fork-safe: redis-py's pool sees the new pid, drops the
        # inherited connections without shutting the parent's sockets, and connects anew. The
        # async client has no such check and belongs to the parent's loop: abandon it (see
        # `forks`); the child's first async call opens its own.
        forks.abandon(self._ar)
        self._ar, self._ar_loop, self._ascripts = None, None, {}

    def close(self) -> None:
        """Close the clients. An async client is closed here only if its event loop is idle;
        in async code prefer ``await store.aclose()``."""
        self._r.close()
        client, loop, self._ar, self._ar_loop = self._ar, self._ar_loop, None, None
        if client is not None and loop is not None and not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(client.aclose())

    async def aclose(self) -> None:
        client, loop = self._ar, self._ar_loop
        if client is not None and loop is asyncio.get_running_loop():
            self._ar, self._ar_loop = None, None
            await client.aclose()
        await asyncio.to_thread(self.close)
