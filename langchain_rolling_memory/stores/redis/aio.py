"""The native async twin of the Redis primitives, on `redis.asyncio`.

Owns `AsyncRedis`: the async retry and the async primitives, on the running loop's client
(`clients.py`: one per event loop, its connections belong to the loop that made them; or the
one the caller handed in); the store class is in `store.py`, the sync twin in `sync.py`, the
scripts, the keys and what both twins share in `scripts.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import langchain_rolling_memory.stores.redis.erase as erase
import langchain_rolling_memory.stores.redis.layout as layout
import langchain_rolling_memory.stores.redis.scripts as lua
import langchain_rolling_memory.stores.redis.search as found
import langchain_rolling_memory.stores.redis.vectors as vectors
from langchain_rolling_memory.core.records import Fact, FactPlan, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.stores.contract import (
    ANY_STATE,
    AppendBatch,
    AsyncBackend,
    ExpectedState,
    MemoryRows,
    Reader,
    SearchRow,
    SummaryWrite,
    TurnRows,
    Unembedded,
    VectorWrite,
)
from langchain_rolling_memory.stores.redis.clients import Clients
from langchain_rolling_memory.stores.redis.layout import Keys

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


class AsyncRedis(AsyncBackend):
    """The native async primitives: the same scripts and commands as `SyncRedis`'s, awaited
    on the running loop's client (or the caller's), retries included."""

    def __init__(self, clients: Clients, keys: Keys, ttl_ms: int) -> None:
        self.clients, self.keys, self.prefix, self._ttl_ms = clients, keys, keys.prefix, ttl_ms

    async def setup(self) -> None:
        client = await self.clients.async_client()
        await self._acall(
            "migrate", lambda: layout.amigrate(client, self.prefix, self.clients.redis.WatchError)
        )
        self.clients.schema_state = "ok"

    async def vacuum(self) -> None:
        """Nothing to do: an erase frees the keys at once (see `store.py`)."""

    async def close(self) -> None:
        await self.clients.aclose()

    async def _aclient(self) -> Any:
        """The async client of this loop, once the schema is known to be there."""
        client = await self.clients.async_client()
        if self.clients.schema_state == "setup":  # an async client handed in: set up at first use
            await self.setup()
        elif self.clients.schema_state == "check":
            version = await self._acall("migrate", lambda: client.get(self.keys.schema))
            self.clients.schema_ok(version, self.prefix)
        return client

    async def _acall(
        self, op: str, fn: Callable[[], Awaitable[_T]], retry: Callable[[], Awaitable[_T]] | None = None
    ) -> _T:
        redis = self.clients.redis
        client = await (self.clients.async_client() if op == "migrate" else self._aclient())
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
        return await self._acall(op, lambda: self.clients.ascripts[name](keys=keys, args=args))

    async def append(self, batch: AppendBatch) -> list[int]:
        (name, keys, args), again = lua.append_call(self.prefix, self.keys, batch, self._ttl_ms)
        await self._aclient()
        script = self.clients.ascripts[name]
        reply = await self._acall(
            "append", lambda: script(keys=keys, args=args), lambda: script(keys=keys, args=again)
        )
        return lua.seqs_of(reply, batch.session_id, batch.client_id)

    async def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        calls, again = lua.append_and_summary_calls(self.prefix, self.keys, batch, self._ttl_ms)
        client = await self._aclient()
        scripts = [self.clients.ascripts[name] for name, _, _ in calls]

        async def go() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for script, (_, keys, args) in zip(scripts, calls, strict=True):
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
            for i in lua.unloaded(replies, self.clients.redis):
                replies[i] = await scripts[i](keys=calls[i][1], args=calls[i][2])
            return replies

        async def retry() -> list[Any]:
            (_, keys, _), (_, summary_keys, summary_args) = calls
            return [
                await scripts[0](keys=keys, args=again),
                await scripts[1](keys=summary_keys, args=summary_args),
            ]

        appended, summary = await self._acall("append", go, retry)
        return lua.appended_and_summary(appended, summary, batch, reader)

    async def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        keys = self.keys.read_memory(session_id, facts_of)
        reply = await self._arun("read", "read_memory", keys, lua.memory_args(limit, reader, facts_of))
        return lua.memory_of(reply, session_id, reader, now)

    async def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        stems = found.stems(terms)
        scope = found.search_args(self.prefix, client_id, session_id, stems)
        seen = found.found_of(await self._arun("search", "search_scope", [], scope), now)
        for _ in range(found.REINDEX_TRIES):
            if not seen.stale:
                break
            for sid in seen.stale:
                source = await self._arun("search", "terms_source", [], found.source_args(self.prefix, sid))
                build = found.build_args(self.prefix, sid, source)
                if build is not None:
                    await self._arun("search", "terms_build", [], build)
            seen = found.found_of(await self._arun("search", "search_scope", [], scope), now)
        build = found.client_build_args(self.prefix, client_id, seen)
        if build is not None:
            await self._arun("search", "client_build", [], build)
        ranked = found.rank(stems, seen, limit)
        fetch = found.fetch_args(self.prefix, client_id, seen, ranked)
        fetched = "" if fetch is None else str(await self._arun("search", "search_fetch", [], fetch))
        return found.search_rows(ranked, fetched)

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

    async def messages_after(
        self, points: Sequence[tuple[str, int]], reader: Reader | None
    ) -> list[Row | None]:
        # One script, checking each session's owner itself.
        args = lua.after_args(self.prefix, points, reader)
        return lua.after_of(await self._arun("read", "messages_after", [], args))

    async def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        args = lua.read_args(after_seq, limit, newest, reader is not None)
        reply = await self._arun("read", "read", self.keys.read(session_id), args)
        return lua.rows_of(lua.checked(reply, session_id, reader))

    async def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        keys = self.keys.summary_and_tail(session_id)
        return lua.turn_of(await self._arun("read", "summary_and_tail", keys, [limit]), session_id, reader)

    async def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        return int(
            await self._asession_get(session_id, reader, lambda r: r.llen(self.keys.msgs(session_id)), 0)
        )

    async def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        key = self.keys.summary(session_id)
        values = await self._asession_get(
            session_id, reader, lambda r: r.hmget(key, lua.SUMMARY_FIELDS), lua.NO_SUMMARY
        )
        return lua.summary_of(*values)

    async def cas_summary(self, write: SummaryWrite) -> bool:
        args = lua.cas_args(self.prefix, write, self._ttl_ms)
        return int(await self._arun("summary", "cas", self.keys.cas(write.session_id), args)) == 1

    async def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        args = lua.claim_args(owner, ttl, now)
        return int(await self._arun("lease", "claim", self.keys.claim(session_id), args)) == 1

    async def release(self, session_id: str, owner: str) -> None:
        await self._arun("lease", "release", [self.keys.lease(session_id)], [owner])

    async def get_session(self, session_id: str) -> SessionInfo | None:
        client = await self._aclient()
        info = self.keys.info(session_id)
        values = await self._acall("read", lambda: client.hmget(info, lua.SESSION_FIELDS))
        return lua.session_of(session_id, values)

    async def list_sessions(self, client_id: str) -> list[str]:
        key = self.keys.client_sessions(client_id)
        return sorted(await self._arun("read", "list_sessions", [key], [self.prefix, client_id]))

    async def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        info = self.keys.info(session_id)
        value = await self._asession_get(session_id, reader, lambda r: r.hget(info, "state"), None)
        return None if value is None else str(value)

    async def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        args = lua.state_args(self.prefix, session_id, client_id, state, now, self._ttl_ms, expected)
        reply = await self._arun("state", "set_state", self.keys.state(session_id, client_id), args)
        return lua.state_written(reply, session_id, client_id)

    async def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        args = erase.delete_args(self.prefix, session_id, reader)
        erase.deleted(await self._arun("delete", "delete_session", [], args), session_id, reader)

    async def list_facts(self, client_id: str, at: float) -> list[Fact]:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return lua.facts_of(await self._acall("facts", lambda: client.hgetall(key)), at)

    async def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        client = await self._aclient()
        keys = self.keys.put_fact(client_id, mark.session_id if mark else "")
        key, info = keys[0], keys[1]
        script = self.clients.ascripts["put_fact"]

        async def go() -> tuple[list[Fact], Fact | None]:
            async with client.pipeline() as pipe:
                while True:
                    try:
                        await pipe.watch(key)
                        if mark is not None:
                            lua.check_mark(await pipe.hmget(info, lua.MARK_FIELDS), client_id, mark)
                        existing = lua.facts_of(await pipe.hgetall(key), now)
                        fact = plan(existing)
                        if fact is not None:
                            pipe.multi()
                            await script(keys=keys, args=lua.fact_args(fact, client_id, mark), client=pipe)
                            lua.check_put((await pipe.execute())[0], mark)
                        return existing, fact
                    except self.clients.redis.WatchError:
                        continue

        return await self._acall("facts", go)

    async def delete_fact(self, client_id: str, fact_id: str) -> bool:
        client = await self._aclient()
        key = self.keys.facts(client_id)
        return int(await self._acall("facts", lambda: client.hdel(key, fact_id))) == 1

    async def delete_client(self, client_id: str) -> None:
        await self._arun("forget", "delete_client", self.keys.client(client_id), [self.prefix, client_id])

    async def purge(self, cutoff: float, now: float) -> int:
        gone = 0
        for name, key, at in erase.purges(self.keys, cutoff, now):
            while True:
                args = [self.prefix, repr(at), erase.PURGE_BATCH]
                seen, deleted = await self._arun("purge", name, [key], args)
                gone += int(deleted)
                if int(seen) < erase.PURGE_BATCH:
                    break
        return gone

    # ------------------------------------------------------------------ dense vectors (`vectors.py`)

    async def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        args = vectors.unembedded_args(self.prefix, model, client_id, session_id, limit)
        return vectors.unembedded_of(await self._arun("vectors", "unembedded", [], args))

    async def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        return int(
            await self._arun("vectors", "put_vectors", [], vectors.put_args(self.prefix, model, items))
        )

    async def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        args = vectors.search_args(self.prefix, model, vector, client_id, session_id, limit)
        return vectors.search_rows_of(await self._arun("search", "vector_search", [], args))
