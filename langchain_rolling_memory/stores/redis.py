"""Redis backend on redis-py (sync) and `redis.asyncio`: plain Redis, no modules.

Owns the sync client, the schema record and the sync primitives with their retries; the
async twins are in `redis_aio.py`, the key layout and the Lua scripts in `redis_scripts.py`,
the rules (validation, facts, export) in `base.py`.
redis-py is imported only when a store is created, so the package works without the
``redis`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_rolling_memory.errors import (
    ConfigurationError,
    MissingExtraError,
    SchemaVersionError,
)
from langchain_rolling_memory.records import Fact, FactPlan, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.stores import redis_scripts as lua
from langchain_rolling_memory.stores.base import SCHEMA_VERSION, RollingStore, split_prefix
from langchain_rolling_memory.stores.redis_aio import AsyncRedisPrimitives

__all__ = ["RedisRollingStore"]

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")

# Append-only, like the SQL migrations: step N brings the keys from version N-1 to N. Keys
# are created on first use, so version 1 has nothing to convert.
_MIGRATIONS: tuple[str | None, ...] = (None,)
if len(_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one Redis migration per schema version is required")


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


class RedisRollingStore(AsyncRedisPrimitives, RollingStore):
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
            msg = (
                f"Redis keys {self.prefix}* were written by a newer version of "
                f"langchain-rolling-memory (schema {version}, this one knows {SCHEMA_VERSION}); "
                "upgrade the package"
            )
            raise SchemaVersionError(msg)
        for number in range(version + 1, SCHEMA_VERSION + 1):
            step = _MIGRATIONS[number - 1]
            if step is not None:  # pragma: no cover - no conversion shipped yet
                self._r.eval(step, 0, self.prefix)
            self._r.set(self.keys.schema, str(number))

    def _call(self, op: str, fn: Callable[[], _T], retry: Callable[[], _T] | None = None) -> _T:
        redis = self._redis
        try:
            return fn()
        except redis.ConnectionError:
            logger.warning("rolling memory: Redis connection lost during %s, retrying once", op)
            self._r.connection_pool.disconnect(inuse_connections=False)
            try:
                return (retry or fn)()
            except redis.RedisError as again:
                raise self._fail(op, again, True) from again
        except redis.RedisError as exc:
            raise self._fail(op, exc, False) from exc

    def _run(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._call(op, lambda: self._scripts[name](keys=keys, args=args))

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

    # ------------------------------------------------------------------ primitives (sync)

    def _append(
        self, session_id: str, client_id: str | None, rows: Sequence[tuple[str, int | None]], now: float
    ) -> list[int]:
        keys, args, again = self._append_args(session_id, client_id, rows, now)
        script = self._scripts["append"]
        reply = self._call(
            "append", lambda: script(keys=keys, args=args), lambda: script(keys=keys, args=again)
        )
        return self._seqs(reply, session_id, client_id)

    def _read(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        msgs = self.keys.session(session_id)[1]
        return lua.rows_of(self._run("read", "read", [msgs], self._read_args(after_seq, limit, newest)))

    def _summary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        _info, msgs, summary, _lease, _batches = self.keys.session(session_id)
        reply = self._run("read", "summary_and_tail", [summary, msgs], [limit])
        return lua.summary_of(*reply[:5]), lua.rows_of(reply[5:])

    def _last_seq(self, session_id: str) -> int:
        return int(self._call("read", lambda: self._r.llen(self.keys.session(session_id)[1])))

    def _get_summary(self, session_id: str) -> SummaryRecord | None:
        key = self.keys.session(session_id)[2]
        fields = ("text", "covered_seq", "version", "meta", "updated_at")
        return lua.summary_of(*self._call("read", lambda: self._r.hmget(key, fields)))

    def _cas_summary(
        self, session_id: str, text: str, covered_seq: int, meta: str, expected_version: int, now: float
    ) -> bool:
        args = [expected_version, text, covered_seq, meta, repr(now), self._ttl_ms]
        return int(self._run("summary", "cas", self._cas_keys(session_id), args)) == 1

    def _claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        args = self._claim_args(owner, ttl, now)
        return int(self._run("lease", "claim", [self._lease(session_id)], args)) == 1

    def _release(self, session_id: str, owner: str) -> None:
        self._run("lease", "release", [self._lease(session_id)], [owner])

    def _get_session(self, session_id: str) -> SessionInfo | None:
        info = self.keys.session(session_id)[0]
        values = self._call("read", lambda: self._r.hmget(info, ("client_id", "created_at", "updated_at")))
        return self._session_info(session_id, values)

    def _list_sessions(self, client_id: str) -> list[str]:
        key = self.keys.client_sessions(client_id)
        return sorted(self._run("read", "list_sessions", [key], [self.prefix]))

    def _get_state(self, session_id: str) -> str | None:
        info = self.keys.session(session_id)[0]
        value = self._call("read", lambda: self._r.hget(info, "state"))
        return None if value is None else str(value)

    def _set_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        args = [session_id, client_id or "", repr(now), state, self._ttl_ms]
        if not int(self._run("state", "set_state", self._state_keys(session_id, client_id), args)):
            raise lua.owned_by_other(session_id, client_id)

    def _delete_session(self, session_id: str) -> None:
        self._run("delete", "delete_session", [], [self.prefix, session_id])

    def _list_facts(self, client_id: str) -> list[Fact]:
        key = self.keys.facts(client_id)
        return self._facts(self._call("facts", lambda: self._r.hgetall(key)))

    def _change_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        key = self.keys.facts(client_id)

        def go() -> tuple[list[Fact], Fact | None]:
            with self._r.pipeline() as pipe:
                while True:  # optimistic: start again if another writer changed the facts meanwhile
                    try:
                        pipe.watch(key)
                        existing = self._facts(pipe.hgetall(key))
                        fact = plan(existing)
                        if fact is not None:
                            pipe.multi()
                            pipe.hset(key, fact.id, lua.fact_json(fact))
                            pipe.execute()
                        return existing, fact
                    except self._redis.WatchError:
                        continue

        return self._call("facts", go)

    def _put_fact(self, fact: Fact) -> None:
        key, value = self.keys.facts(fact.client_id), lua.fact_json(fact)
        self._call("facts", lambda: self._r.hset(key, fact.id, value))

    def _delete_fact(self, client_id: str, fact_id: str) -> bool:
        key = self.keys.facts(client_id)
        return int(self._call("facts", lambda: self._r.hdel(key, fact_id))) == 1

    def _delete_client(self, client_id: str) -> None:
        keys = [self.keys.client_sessions(client_id), self.keys.facts(client_id)]
        self._run("forget", "delete_client", keys, [self.prefix])

    def _purge(self, cutoff: float) -> int:
        gone = 0
        while True:  # in chunks, so one script never blocks the server for long
            seen, deleted = self._run("purge", "purge", [self.keys.updated], [self.prefix, repr(cutoff), 500])
            gone += int(deleted)
            if int(seen) < 500:
                return gone
