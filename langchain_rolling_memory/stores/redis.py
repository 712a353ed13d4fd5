"""Redis backend on redis-py (sync) and `redis.asyncio`: plain Redis, no modules.

Owns the clients, retries and the mapping of driver errors; the key layout and the Lua
scripts are in `redis_scripts.py`, the rules (validation, facts, export) in `base.py`.
redis-py is imported only when a store is created, so the package works without the
``redis`` extra.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from langchain_rolling_memory.errors import (
    ConfigurationError,
    MissingExtraError,
    OwnershipError,
    SchemaVersionError,
    StoreError,
)
from langchain_rolling_memory.stores import redis_scripts as lua
from langchain_rolling_memory.stores.base import (
    SCHEMA_VERSION,
    Fact,
    RollingStore,
    Row,
    SessionInfo,
    SummaryRecord,
    split_prefix,
)

__all__ = ["RedisRollingStore"]

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")

# Append-only, like the SQL migrations: step N brings the keys from version N-1 to N. Keys
# are created on first use, so version 1 has nothing to convert.
_MIGRATIONS: tuple[str | None, ...] = (None,)
if len(_MIGRATIONS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one Redis migration per schema version is required")

_SCRIPTS = {
    "append": lua.APPEND,
    "read": lua.READ,
    "summary_and_tail": lua.SUMMARY_AND_TAIL,
    "cas": lua.CAS_SUMMARY,
    "claim": lua.CLAIM,
    "release": lua.RELEASE,
    "set_state": lua.SET_STATE,
    "list_sessions": lua.LIST_SESSIONS,
    "delete_session": lua.DELETE_SESSION,
    "delete_client": lua.DELETE_CLIENT,
    "purge": lua.PURGE,
}


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


def _encode(payload: str, tokens: int | None) -> str:
    return f"{'-' if tokens is None else tokens} {payload}"


def _rows(reply: Sequence[Any]) -> list[Row]:
    """``[first seq, item...]`` from the scripts -> rows."""
    first = int(reply[0])
    out: list[Row] = []
    for offset, item in enumerate(reply[1:]):
        tokens, _, payload = str(item).partition(" ")
        out.append((first + offset, payload, None if tokens == "-" else int(tokens)))
    return out


def _summary(text: Any, covered: Any, version: Any, meta: Any, updated: Any) -> SummaryRecord | None:
    if not version:
        return None
    return SummaryRecord(str(text), int(covered), int(version), json.loads(meta), float(updated))


def _owned_by_other(session_id: str, client_id: str | None) -> OwnershipError:
    return OwnershipError(f"session {session_id!r} belongs to another client than {client_id!r}")


class RedisRollingStore(RollingStore):
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
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # redis-py would silently resend a command after a dropped connection; an append
        # resent that way could land twice, so retries are ours (and idempotent).
        self._kwargs: dict[str, Any] = {
            "decode_responses": True,
            "retry": Retry(NoBackoff(), 0),
            **(client_kwargs or {}),
        }
        self._r = self._redis.Redis.from_url(url, **self._kwargs)
        self._scripts = {name: self._r.register_script(src) for name, src in _SCRIPTS.items()}
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

    def _fail(self, op: str, exc: BaseException, retried: bool) -> StoreError:
        after = " twice (the call was retried once on a fresh connection)" if retried else ""
        unsure = retried or isinstance(exc, self._redis.TimeoutError)
        hint = (
            "; the batch may or may not be stored: read the session's tail before appending it again"
            if op == "append" and unsure
            else ""
        )
        return StoreError(f"Redis {op} failed{after}: {type(exc).__name__}: {exc}{hint}")

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

    async def _aclient(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._ar is None or self._ar_loop is not loop:
            # redis.asyncio connections belong to the loop that made them.
            self._ar = self._redis.asyncio.Redis.from_url(self._url, **self._kwargs)
            self._ar_loop = loop
            self._ascripts = {name: self._ar.register_script(src) for name, src in _SCRIPTS.items()}
        return self._ar

    async def _acall(
        self, op: str, fn: Callable[[], Awaitable[_T]], retry: Callable[[], Awaitable[_T]] | None = None
    ) -> _T:
        redis = self._redis
        client = await self._aclient()
        try:
            return await fn()
        except redis.ConnectionError:
            logger.warning("rolling memory: Redis connection lost during %s, retrying once", op)
            await client.connection_pool.disconnect(inuse_connections=False)
            try:
                return await (retry or fn)()
            except redis.RedisError as again:
                raise self._fail(op, again, True) from again
        except redis.RedisError as exc:
            raise self._fail(op, exc, False) from exc

    def _run(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._call(op, lambda: self._scripts[name](keys=keys, args=args))

    async def _arun(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        await self._aclient()
        return await self._acall(op, lambda: self._ascripts[name](keys=keys, args=args))

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

    # ------------------------------------------------------------------ argument builders

    def _append_args(
        self, session_id: str, client_id: str | None, rows: Sequence[tuple[str, int | None]], now: float
    ) -> tuple[list[str], list[Any], list[Any]]:
        keys = [*self.keys.session(session_id), self.keys.client_sessions(client_id), self.keys.updated]
        batch = uuid.uuid4().hex
        payloads = [_encode(payload, tokens) for payload, tokens in rows]
        head = [session_id, client_id or "", repr(now), self._ttl_ms]
        return keys, [*head, 0, batch, *payloads], [*head, 1, batch, *payloads]

    def _seqs(self, reply: Sequence[Any], session_id: str, client_id: str | None) -> list[int]:
        first, n = int(reply[0]), int(reply[1])
        if first < 0:
            raise _owned_by_other(session_id, client_id)
        return list(range(first, first + n))

    def _read_args(self, after_seq: int, limit: int | None, newest: bool) -> list[Any]:
        return [after_seq, -1 if limit is None else limit, 1 if newest else 0]

    def _cas_keys(self, session_id: str) -> list[str]:
        info, msgs, summary, _lease, batches = self.keys.session(session_id)
        return [summary, info, msgs, batches]

    def _state_keys(self, session_id: str, client_id: str | None) -> list[str]:
        info, msgs, summary, _lease, batches = self.keys.session(session_id)
        return [info, msgs, summary, batches, self.keys.client_sessions(client_id), self.keys.updated]

    def _lease(self, session_id: str) -> str:
        return self.keys.session(session_id)[3]

    @staticmethod
    def _claim_args(owner: str, ttl: float, now: float) -> list[Any]:
        # The hash carries the expiry the rule reads; the key's own expiry only cleans up.
        return [owner, repr(now + ttl), repr(now), max(1, math.ceil(ttl * 1000)) + 60_000]

    @staticmethod
    def _session_info(session_id: str, values: Sequence[Any]) -> SessionInfo | None:
        client, created, updated = values
        if created is None:
            return None
        return SessionInfo(session_id, client, float(created), float(updated))

    @staticmethod
    def _facts(raw: dict[str, str]) -> list[Fact]:
        facts = [Fact(**json.loads(v)) for v in raw.values()]
        return sorted(facts, key=lambda f: (f.created_at, f.id))

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
        return _rows(self._run("read", "read", [msgs], self._read_args(after_seq, limit, newest)))

    def _summary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        _info, msgs, summary, _lease, _batches = self.keys.session(session_id)
        reply = self._run("read", "summary_and_tail", [summary, msgs], [limit])
        return _summary(*reply[:5]), _rows(reply[5:])

    def _last_seq(self, session_id: str) -> int:
        return int(self._call("read", lambda: self._r.llen(self.keys.session(session_id)[1])))

    def _get_summary(self, session_id: str) -> SummaryRecord | None:
        key = self.keys.session(session_id)[2]
        fields = ("text", "covered_seq", "version", "meta", "updated_at")
        return _summary(*self._call("read", lambda: self._r.hmget(key, fields)))

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
            raise _owned_by_other(session_id, client_id)

    def _delete_session(self, session_id: str) -> None:
        self._run("delete", "delete_session", [], [self.prefix, session_id])

    def _list_facts(self, client_id: str) -> list[Fact]:
        key = self.keys.facts(client_id)
        return self._facts(self._call("facts", lambda: self._r.hgetall(key)))

    def _put_fact(self, fact: Fact) -> None:
        key, value = self.keys.facts(fact.client_id), json.dumps(fact.to_dict(), ensure_ascii=False)
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

    # ------------------------------------------------------------------ primitives (async)

    async def _aappend(
        self, session_id: str, client_id: str | None, rows: Sequence[tuple[str, int | None]], now: float
    ) -> list[int]:
        keys, args, again = self._append_args(session_id, client_id, rows, now)
        await self._aclient()
        script = self._ascripts["append"]
        reply = await self._acall(
            "append", lambda: script(keys=keys, args=args), lambda: script(keys=keys, args=again)
        )
        return self._seqs(reply, session_id, client_id)

    async def _aread(self, session_id: str, after_seq: int, limit: int | None, newest: bool) -> list[Row]:
        msgs = self.keys.session(session_id)[1]
        return _rows(await self._arun("read", "read", [msgs], self._read_args(after_seq, limit, newest)))

    async def _asummary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        _info, msgs, summary, _lease, _batches = self.keys.session(session_id)
        reply = await self._arun("read", "summary_and_tail", [summary, msgs], [limit])
        return _summary(*reply[:5]), _rows(reply[5:])

    async def _alast_seq(self, session_id: str) -> int:
        client = await self._aclient()
        return int(await self._acall("read", lambda: client.llen(self.keys.session(session_id)[1])))

    async def _aget_summary(self, session_id: str) -> SummaryRecord | None:
        client = await self._aclient()
        key = self.keys.session(session_id)[2]
        fields = ("text", "covered_seq", "version", "meta", "updated_at")
        return _summary(*await self._acall("read", lambda: client.hmget(key, fields)))

    async def _acas_summary(
        self, session_id: str, text: str, covered_seq: int, meta: str, expected_version: int, now: float
    ) -> bool:
        args = [expected_version, text, covered_seq, meta, repr(now), self._ttl_ms]
        return int(await self._arun("summary", "cas", self._cas_keys(session_id), args)) == 1

    async def _aclaim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        args = self._claim_args(owner, ttl, now)
        return int(await self._arun("lease", "claim", [self._lease(session_id)], args)) == 1

    async def _arelease(self, session_id: str, owner: str) -> None:
        await self._arun("lease", "release", [self._lease(session_id)], [owner])

    async def _aget_session(self, session_id: str) -> SessionInfo | None:
        client = await self._aclient()
        info = self.keys.session(session_id)[0]
        fields = ("client_id", "created_at", "updated_at")
        return self._session_info(session_id, await self._acall("read", lambda: client.hmget(info, fields)))

    async def _alist_sessions(self, client_id: str) -> list[str]:
        key = self.keys.client_sessions(client_id)
        return sorted(await self._arun("read", "list_sessions", [key], [self.prefix]))

    async def _aget_state(self, session_id: str) -> str | None:
        client = await self._aclient()
        info = self.keys.session(session_id)[0]
        value = await self._acall("read", lambda: client.hget(info, "state"))
        return None if value is None else str(value)

    async def _aset_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        args = [session_id, client_id or "", repr(now), state, self._ttl_ms]
        if not int(await self._arun("state", "set_state", self._state_keys(session_id, client_id), args)):
            raise _owned_by_other(session_id, client_id)

    async def _adelete_session(self, session_id: str) -> None:
        await self._arun("delete", "delete_session", [], [self.prefix, session_id])

    async def _alist_facts(self, client_id: str) -> list[Fact]:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return self._facts(await self._acall("facts", lambda: client.hgetall(key)))

    async def _aput_fact(self, fact: Fact) -> None:
        client = await self._aclient()
        key, value = self.keys.facts(fact.client_id), json.dumps(fact.to_dict(), ensure_ascii=False)
        await self._acall("facts", lambda: client.hset(key, fact.id, value))

    async def _adelete_fact(self, client_id: str, fact_id: str) -> bool:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return int(await self._acall("facts", lambda: client.hdel(key, fact_id))) == 1

    async def _adelete_client(self, client_id: str) -> None:
        keys = [self.keys.client_sessions(client_id), self.keys.facts(client_id)]
        await self._arun("forget", "delete_client", keys, [self.prefix])

    async def _apurge(self, cutoff: float) -> int:
        gone = 0
        while True:
            seen, deleted = await self._arun(
                "purge", "purge", [self.keys.updated], [self.prefix, repr(cutoff), 500]
            )
            gone += int(deleted)
            if int(seen) < 500:
                return gone
