"""The native async twins of the Redis primitives on `redis.asyncio`, and what both twins share.

Owns the async client (one per event loop: its connections belong to the loop that made
them), the ``_a*`` primitives and the argument builders the sync class in `redis.py` uses
too; the scripts and the key layout are in `redis_scripts.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.records import Fact, FactPlan, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.stores import redis_scripts as lua

__all__ = ["AsyncRedisPrimitives"]

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


class AsyncRedisPrimitives:
    """Mixed into `RedisRollingStore` ahead of `RollingStore`, whose thread-based async
    defaults these replace."""

    prefix: str
    keys: lua.Keys
    _redis: Any
    _url: str
    _akwargs: dict[str, Any]
    _ttl_ms: int
    _ar: Any
    _ar_loop: asyncio.AbstractEventLoop | None
    _ascripts: dict[str, Any]

    def _fail(self, op: str, exc: BaseException, retried: bool) -> StoreError:
        after = " twice (the call was retried once on a fresh connection)" if retried else ""
        unsure = retried or isinstance(exc, self._redis.TimeoutError)
        hint = (
            "; the batch may or may not be stored: read the session's tail before appending it again"
            if op == "append" and unsure
            else ""
        )
        return StoreError(f"Redis {op} failed{after}: {type(exc).__name__}: {exc}{hint}")

    async def _aclient(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._ar is None or self._ar_loop is not loop:
            # redis.asyncio connections belong to the loop that made them.
            self._ar = self._redis.asyncio.Redis.from_url(self._url, **self._akwargs)
            self._ar_loop = loop
            self._ascripts = {name: self._ar.register_script(src) for name, src in lua.SCRIPTS.items()}
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

    async def _arun(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        await self._aclient()
        return await self._acall(op, lambda: self._ascripts[name](keys=keys, args=args))

    def _append_args(
        self, session_id: str, client_id: str | None, rows: Sequence[tuple[str, int | None]], now: float
    ) -> tuple[list[str], list[Any], list[Any]]:
        keys = [*self.keys.session(session_id), self.keys.client_sessions(client_id), self.keys.updated]
        batch = uuid.uuid4().hex
        payloads = [lua.encode_row(payload, tokens) for payload, tokens in rows]
        head = [session_id, client_id or "", repr(now), self._ttl_ms]
        return keys, [*head, 0, batch, *payloads], [*head, 1, batch, *payloads]

    def _seqs(self, reply: Sequence[Any], session_id: str, client_id: str | None) -> list[int]:
        first, n = int(reply[0]), int(reply[1])
        if first < 0:
            raise lua.owned_by_other(session_id, client_id)
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
        return lua.rows_of(
            await self._arun("read", "read", [msgs], self._read_args(after_seq, limit, newest))
        )

    async def _asummary_and_tail(self, session_id: str, limit: int) -> tuple[SummaryRecord | None, list[Row]]:
        _info, msgs, summary, _lease, _batches = self.keys.session(session_id)
        reply = await self._arun("read", "summary_and_tail", [summary, msgs], [limit])
        return lua.summary_of(*reply[:5]), lua.rows_of(reply[5:])

    async def _alast_seq(self, session_id: str) -> int:
        client = await self._aclient()
        return int(await self._acall("read", lambda: client.llen(self.keys.session(session_id)[1])))

    async def _aget_summary(self, session_id: str) -> SummaryRecord | None:
        client = await self._aclient()
        key = self.keys.session(session_id)[2]
        fields = ("text", "covered_seq", "version", "meta", "updated_at")
        return lua.summary_of(*await self._acall("read", lambda: client.hmget(key, fields)))

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
            raise lua.owned_by_other(session_id, client_id)

    async def _adelete_session(self, session_id: str) -> None:
        await self._arun("delete", "delete_session", [], [self.prefix, session_id])

    async def _alist_facts(self, client_id: str) -> list[Fact]:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return self._facts(await self._acall("facts", lambda: client.hgetall(key)))

    async def _achange_facts(self, client_id: str, plan: FactPlan) -> tuple[list[Fact], Fact | None]:
        client = await self._aclient()
        key = self.keys.facts(client_id)

        async def go() -> tuple[list[Fact], Fact | None]:
            async with client.pipeline() as pipe:
                while True:
                    try:
                        await pipe.watch(key)
                        existing = self._facts(await pipe.hgetall(key))
                        fact = plan(existing)
                        if fact is not None:
                            pipe.multi()
                            pipe.hset(key, fact.id, lua.fact_json(fact))
                            await pipe.execute()
                        return existing, fact
                    except self._redis.WatchError:
                        continue

        return await self._acall("facts", go)

    async def _aput_fact(self, fact: Fact) -> None:
        client = await self._aclient()
        key, value = self.keys.facts(fact.client_id), lua.fact_json(fact)
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
