"""The native async twin of the Redis primitives, on `redis.asyncio`.

Owns the async client (one per event loop: its connections belong to the loop that made
them; or the one the caller handed in) and the ``_a*`` primitives; the store class is in `store.py`, the sync twin in
`sync.py`, the scripts, the keys and what both twins share in `scripts.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import langchain_rolling_memory.stores.redis.erase as erase
import langchain_rolling_memory.stores.redis.scripts as lua
import langchain_rolling_memory.stores.redis.search as found
from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import OwnershipError
from langchain_rolling_memory.stores.contract import (
    AppendBatch,
    Reader,
    SearchRow,
    StoreBackend,
    SummaryWrite,
    TurnRows,
)
from langchain_rolling_memory.stores.lifecycle import close_with_loop
from langchain_rolling_memory.stores.redis.layout import Keys

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


class AsyncRedisPrimitives(StoreBackend):
    """Mixed into `RedisRollingStore` ahead of `RollingStore`: these replace the
    thread-based async defaults of `StoreBackend`."""

    prefix: str
    keys: Keys
    _redis: Any
    _url: str
    _akwargs: dict[str, Any]
    _ttl_ms: int
    _ar: Any
    _ar_loop: asyncio.AbstractEventLoop | None
    _ascripts: dict[str, Any]
    _aguard: Any = None
    _schema_state: str
    _borrowed_aclient: Callable[[], Any]
    _asetup: Callable[[], Awaitable[None]]
    _acheck_schema: Callable[[Any], Awaitable[None]]

    async def _aclient(self) -> Any:
        """The async client of this loop, once the schema is known to be there."""
        client = await self._aclient_now()
        if self._schema_state == "setup":  # an async client handed in: set up at first use
            await self._asetup()
        elif self._schema_state == "check":
            await self._acheck_schema(client)
        return client

    async def _aclient_now(self) -> Any:
        borrowed = self._borrowed_aclient()
        if borrowed is not None:
            if not self._ascripts:
                self._ascripts = {name: borrowed.register_script(src) for name, src in lua.SCRIPTS.items()}
            return borrowed
        loop = asyncio.get_running_loop()
        if self._ar is None or self._ar_loop is not loop:
            # redis.asyncio connections belong to the loop that made them.
            self._ar = self._redis.asyncio.Redis.from_url(self._url, **self._akwargs)
            self._ar_loop = loop
            self._ascripts = {name: self._ar.register_script(src) for name, src in lua.SCRIPTS.items()}
            self._aguard = close_with_loop(self._ar.aclose)
        return self._ar

    async def _acall(
        self, op: str, fn: Callable[[], Awaitable[_T]], retry: Callable[[], Awaitable[_T]] | None = None
    ) -> _T:
        redis = self._redis
        client = await (self._aclient_now() if op == "migrate" else self._aclient())
        try:
            return await fn()
        except redis.ConnectionError:
            logger.warning("rolling memory: Redis connection lost during %s, retrying once", op)
            await client.connection_pool.disconnect(inuse_connections=False)
            try:
                return await (retry or fn)()
            except redis.RedisError as again:
                raise lua.failure(redis, op, again, True) from again
        except redis.RedisError as exc:
            raise lua.failure(redis, op, exc, False) from exc

    async def _arun(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        await self._aclient()
        return await self._acall(op, lambda: self._ascripts[name](keys=keys, args=args))

    async def _aappend(self, batch: AppendBatch) -> list[int]:
        keys = self.keys.append(batch.session_id, batch.client_id)
        args, again = lua.append_args(self.prefix, batch, self._ttl_ms)
        await self._aclient()
        script = self._ascripts["append"]
        reply = await self._acall(
            "append", lambda: script(keys=keys, args=args), lambda: script(keys=keys, args=again)
        )
        return lua.seqs_of(reply, batch.session_id, batch.client_id)

    async def _asearch(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        scope = found.search_args(self.prefix, client_id, session_id)
        seen = found.found_of(await self._arun("search", "search_scope", [], scope), self._now())
        ranked = found.rank(terms, seen, limit)
        fetch = found.fetch_args(self.prefix, client_id, seen, ranked)
        payloads = [] if fetch is None else await self._arun("search", "search_fetch", [], fetch)
        return found.search_rows(ranked, payloads)

    async def _asession_get(
        self, session_id: str, reader: Reader | None, command: Callable[[Any], Any], empty: Any
    ) -> Any:
        """Async twin of `_session_get`: `command(pipe)` queued on the MULTI/EXEC pipeline that
        reads the session's info hash (`empty` when it is gone) and checks the owner."""
        client = await self._aclient()

        async def go() -> Any:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hmget(self.keys.info(session_id), "created_at", "client_id")
                command(pipe)
                (created, owner), value = await pipe.execute()
            if reader is not None:
                reader.check(session_id, owner)
            return empty if created is None else value

        return await self._acall("read", go)

    async def _aread(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        args = lua.read_args(after_seq, limit, newest, reader is not None)
        reply = await self._arun("read", "read", self.keys.read(session_id), args)
        return lua.rows_of(lua.checked(reply, session_id, reader))

    async def _asummary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        keys = self.keys.summary_and_tail(session_id)
        return lua.turn_of(await self._arun("read", "summary_and_tail", keys, [limit]), session_id, reader)

    async def _alast_seq(self, session_id: str, reader: Reader | None = None) -> int:
        return int(
            await self._asession_get(session_id, reader, lambda r: r.llen(self.keys.msgs(session_id)), 0)
        )

    async def _aget_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        key = self.keys.summary(session_id)
        values = await self._asession_get(
            session_id, reader, lambda r: r.hmget(key, lua.SUMMARY_FIELDS), lua.NO_SUMMARY
        )
        return lua.summary_of(*values)

    async def _acas_summary(self, write: SummaryWrite) -> bool:
        args = lua.cas_args(self.prefix, write, self._ttl_ms)
        return int(await self._arun("summary", "cas", self.keys.cas(write.session_id), args)) == 1

    async def _aclaim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        args = lua.claim_args(owner, ttl, now)
        return int(await self._arun("lease", "claim", self.keys.claim(session_id), args)) == 1

    async def _arelease(self, session_id: str, owner: str) -> None:
        await self._arun("lease", "release", [self.keys.lease(session_id)], [owner])

    async def _aget_session(self, session_id: str) -> SessionInfo | None:
        client = await self._aclient()
        info = self.keys.info(session_id)
        values = await self._acall("read", lambda: client.hmget(info, lua.SESSION_FIELDS))
        return lua.session_of(session_id, values)

    async def _alist_sessions(self, client_id: str) -> list[str]:
        key = self.keys.client_sessions(client_id)
        return sorted(await self._arun("read", "list_sessions", [key], [self.prefix, client_id]))

    async def _aget_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        info = self.keys.info(session_id)
        value = await self._asession_get(session_id, reader, lambda r: r.hget(info, "state"), None)
        return None if value is None else str(value)

    async def _aset_state(self, session_id: str, client_id: str | None, state: str, now: float) -> None:
        args = lua.state_args(self.prefix, session_id, client_id, state, now, self._ttl_ms)
        if not int(await self._arun("state", "set_state", self.keys.state(session_id, client_id), args)):
            raise OwnershipError.for_session(session_id, client_id)

    async def _adelete_session(self, session_id: str, reader: Reader | None = None) -> None:
        args = erase.delete_args(self.prefix, session_id, reader)
        erase.deleted(await self._arun("delete", "delete_session", [], args), session_id, reader)

    async def _alist_facts(self, client_id: str, at: float | None = None) -> list[Fact]:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        raw = await self._acall("facts", lambda: client.hgetall(key))
        return lua.facts_of(raw, self._now() if at is None else at)

    async def _achange_facts(
        self, client_id: str, plan: FactPlan, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        client = await self._aclient()
        keys = self.keys.put_fact(client_id, mark.session_id if mark else "")
        key, info = keys[0], keys[1]
        script = self._ascripts["put_fact"]

        async def go() -> tuple[list[Fact], Fact | None]:
            async with client.pipeline() as pipe:
                while True:
                    try:
                        await pipe.watch(key)
                        if mark is not None:
                            lua.check_mark(await pipe.hmget(info, lua.MARK_FIELDS), client_id, mark)
                        existing = lua.facts_of(await pipe.hgetall(key), self._now())
                        fact = plan(existing)
                        if fact is not None:
                            pipe.multi()
                            await script(keys=keys, args=lua.fact_args(fact, client_id, mark), client=pipe)
                            lua.check_put((await pipe.execute())[0], mark)
                        return existing, fact
                    except self._redis.WatchError:
                        continue

        return await self._acall("facts", go)

    async def _aput_fact(self, fact: Fact) -> None:
        keys, args = self.keys.put_fact(fact.client_id, ""), lua.fact_args(fact, fact.client_id, None)
        await self._arun("facts", "put_fact", keys, args)

    async def _adelete_fact(self, client_id: str, fact_id: str) -> bool:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return int(await self._acall("facts", lambda: client.hdel(key, fact_id))) == 1

    async def _adelete_client(self, client_id: str) -> None:
        await self._arun("forget", "delete_client", self.keys.client(client_id), [self.prefix, client_id])

    async def _apurge(self, cutoff: float, now: float) -> int:
        gone = 0
        for name, key, at in erase.purges(self.keys, cutoff, now):
            while True:
                args = [self.prefix, repr(at), erase.PURGE_BATCH]
                seen, deleted = await self._arun("purge", name, [key], args)
                gone += int(deleted)
                if int(seen) < erase.PURGE_BATCH:
                    break
        return gone
