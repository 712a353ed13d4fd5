"""The sync twin of the Redis primitives, on a redis-py client.

Owns `SyncRedis`: the sync retry and the sync primitives, and setting up the key layout; the
clients (schema state, closing) are in `clients.py`, the store class in `store.py`, the async
twin in `aio.py`, the scripts, the keys and what both twins share in `scripts.py`. Imports no
driver: the store hands it redis-py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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
    ExpectedState,
    MemoryRows,
    Reader,
    SearchRow,
    SummaryWrite,
    SyncBackend,
    TurnRows,
    Unembedded,
    VectorWrite,
)
from langchain_rolling_memory.stores.redis.clients import Clients
from langchain_rolling_memory.stores.redis.layout import Keys

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


class SyncRedis(SyncBackend):
    """The sync primitives: each is one script or one command, retried once on a fresh
    connection if the connection dropped.

    Args:
        ttl_ms: milliseconds a session lives after its last write (0: no expiry).
    """

    def __init__(self, clients: Clients, keys: Keys, ttl_ms: int) -> None:
        self.clients, self.keys, self.prefix, self._ttl_ms = clients, keys, keys.prefix, ttl_ms

    def setup(self) -> None:
        sync = self.clients.sync_client()
        self._call("migrate", lambda: layout.migrate(sync, self.prefix, self.clients.redis.WatchError))
        self.clients.schema_state = "ok"

    def close(self) -> None:
        self.clients.close()

    def _check_schema(self) -> None:
        version = self._call("migrate", lambda: self.clients.sync.get(self.keys.schema))
        self.clients.schema_ok(version, self.prefix)

    def _call(self, op: str, fn: Callable[[], _T], retry: Callable[[], _T] | None = None) -> _T:
        redis = self.clients.redis
        self.clients.sync_client()
        if self.clients.schema_state == "check" and op != "migrate":
            self._check_schema()
        try:
            return fn()
        except redis.ConnectionError:
            logger.warning("rolling memory: Redis connection lost during %s, retrying once", op)
            self.clients.sync.connection_pool.disconnect(inuse_connections=False)
            try:
                return (retry or fn)()
            except redis.RedisError as again:
                raise lua.failure(redis, op, again, True) from again
        except redis.RedisError as exc:
            raise lua.failure(redis, op, exc, False) from exc

    def _run(self, op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._call(op, lambda: self.clients.scripts[name](keys=keys, args=args))

    def append(self, batch: AppendBatch) -> list[int]:
        (name, keys, args), again = lua.append_call(self.prefix, self.keys, batch, self._ttl_ms)
        script = self.clients.scripts[name]
        reply = self._call(
            "append", lambda: script(keys=keys, args=args), lambda: script(keys=keys, args=again)
        )
        return lua.seqs_of(reply, batch.session_id, batch.client_id)

    def append_and_summary(
        self, batch: AppendBatch, reader: Reader | None
    ) -> tuple[list[int], SummaryRecord | None]:
        # One pipeline, one round trip: the append script, then the summary-and-tail script
        # with no tail (the summary, its owner checked).
        calls, again = lua.append_and_summary_calls(self.prefix, self.keys, batch, self._ttl_ms)
        scripts = [self.clients.scripts[name] for name, _, _ in calls]

        def go() -> list[Any]:
            with self.clients.sync.pipeline(transaction=False) as pipe:
                for script, (_, keys, args) in zip(scripts, calls, strict=True):
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                replies: list[Any] = pipe.execute(raise_on_error=False)
            for i in lua.unloaded(replies, self.clients.redis):
                replies[i] = scripts[i](keys=calls[i][1], args=calls[i][2])
            return replies

        def retry() -> list[Any]:
            (_, keys, _), (_, summary_keys, summary_args) = calls
            return [scripts[0](keys=keys, args=again), scripts[1](keys=summary_keys, args=summary_args)]

        appended, summary = self._call("append", go, retry)
        return lua.appended_and_summary(appended, summary, batch, reader)

    def read_memory(
        self, session_id: str, limit: int, reader: Reader | None, facts_of: str | None, now: float
    ) -> MemoryRows:
        keys = self.keys.read_memory(session_id, facts_of)
        reply = self._run("read", "read_memory", keys, lua.memory_args(limit, reader, facts_of))
        return lua.memory_of(reply, session_id, reader, now)

    def search(
        self, terms: Sequence[str], client_id: str | None, session_id: str | None, limit: int, now: float
    ) -> list[SearchRow]:
        # Two scripts, each checking the owner (and the second the generation) itself, and
        # the sessions the first found unindexed indexed in between: see `search`.
        stems = found.stems(terms)
        scope = found.search_args(self.prefix, client_id, session_id, stems)
        seen = found.found_of(self._run("search", "search_scope", [], scope), now)
        for _ in range(found.REINDEX_TRIES):
            if not seen.stale:
                break
            for sid in seen.stale:
                source = self._run("search", "terms_source", [], found.source_args(self.prefix, sid))
                build = found.build_args(self.prefix, sid, source)
                if build is not None:
                    self._run("search", "terms_build", [], build)
            seen = found.found_of(self._run("search", "search_scope", [], scope), now)
        build = found.client_build_args(self.prefix, client_id, seen)
        if build is not None:
            self._run("search", "client_build", [], build)
        ranked = found.rank(stems, seen, limit)
        fetch = found.fetch_args(self.prefix, client_id, seen, ranked)
        fetched = "" if fetch is None else str(self._run("search", "search_fetch", [], fetch))
        return found.search_rows(ranked, fetched)

    def _session_get(
        self, session_id: str, reader: Reader | None, command: Callable[[Any], Any], empty: Any
    ) -> Any:
        """`command(client)` in one MULTI/EXEC with the session's info hash (one round trip, one
        instant): `empty` when the hash is gone, and with a `reader` the owner checked."""

        def go() -> Any:
            with self.clients.sync.pipeline(transaction=True) as pipe:
                pipe.hmget(self.keys.info(session_id), "created_at", "client_id")
                command(pipe)
                (created, owner), value = pipe.execute()
            if reader is not None:
                reader.check(session_id, owner)
            return empty if created is None else value

        return self._call("read", go)

    def messages_after(self, points: Sequence[tuple[str, int]], reader: Reader | None) -> list[Row | None]:
        # One script, checking each session's owner itself.
        args = lua.after_args(self.prefix, points, reader)
        return lua.after_of(self._run("read", "messages_after", [], args))

    def read(
        self, session_id: str, after_seq: int, limit: int | None, newest: bool, reader: Reader | None = None
    ) -> list[Row]:
        args = lua.read_args(after_seq, limit, newest, reader is not None)
        reply = self._run("read", "read", self.keys.read(session_id), args)
        return lua.rows_of(lua.checked(reply, session_id, reader))

    def summary_and_tail(self, session_id: str, limit: int, reader: Reader | None = None) -> TurnRows:
        keys = self.keys.summary_and_tail(session_id)
        return lua.turn_of(self._run("read", "summary_and_tail", keys, [limit]), session_id, reader)

    def last_seq(self, session_id: str, reader: Reader | None = None) -> int:
        return int(self._session_get(session_id, reader, lambda r: r.llen(self.keys.msgs(session_id)), 0))

    def get_summary(self, session_id: str, reader: Reader | None = None) -> SummaryRecord | None:
        key = self.keys.summary(session_id)
        return lua.summary_of(
            *self._session_get(session_id, reader, lambda r: r.hmget(key, lua.SUMMARY_FIELDS), lua.NO_SUMMARY)
        )

    def cas_summary(self, write: SummaryWrite) -> bool:
        args = lua.cas_args(self.prefix, write, self._ttl_ms)
        return int(self._run("summary", "cas", self.keys.cas(write.session_id), args)) == 1

    def claim(self, session_id: str, owner: str, ttl: float, now: float) -> bool:
        args = lua.claim_args(owner, ttl, now)
        return int(self._run("lease", "claim", self.keys.claim(session_id), args)) == 1

    def release(self, session_id: str, owner: str) -> None:
        self._run("lease", "release", [self.keys.lease(session_id)], [owner])

    def get_session(self, session_id: str) -> SessionInfo | None:
        info = self.keys.info(session_id)
        return lua.session_of(
            session_id, self._call("read", lambda: self.clients.sync.hmget(info, lua.SESSION_FIELDS))
        )

    def list_sessions(self, client_id: str) -> list[str]:
        key = self.keys.client_sessions(client_id)
        return sorted(self._run("read", "list_sessions", [key], [self.prefix, client_id]))

    def get_state(self, session_id: str, reader: Reader | None = None) -> str | None:
        info = self.keys.info(session_id)
        value = self._session_get(session_id, reader, lambda r: r.hget(info, "state"), None)
        return None if value is None else str(value)

    def set_state(
        self,
        session_id: str,
        client_id: str | None,
        state: str,
        now: float,
        expected: ExpectedState = ANY_STATE,
    ) -> bool:
        args = lua.state_args(self.prefix, session_id, client_id, state, now, self._ttl_ms, expected)
        reply = self._run("state", "set_state", self.keys.state(session_id, client_id), args)
        return lua.state_written(reply, session_id, client_id)

    def delete_session(self, session_id: str, reader: Reader | None = None) -> None:
        args = erase.delete_args(self.prefix, session_id, reader)
        erase.deleted(self._run("delete", "delete_session", [], args), session_id, reader)

    def list_facts(self, client_id: str, at: float) -> list[Fact]:
        key = self.keys.facts(client_id)
        return lua.facts_of(self._call("facts", lambda: self.clients.sync.hgetall(key)), at)

    def change_facts(
        self, client_id: str, plan: FactPlan, now: float, mark: SessionMark | None = None
    ) -> tuple[list[Fact], Fact | None]:
        keys = self.keys.put_fact(client_id, mark.session_id if mark else "")
        key, info = keys[0], keys[1]
        script = self.clients.scripts["put_fact"]

        def go() -> tuple[list[Fact], Fact | None]:
            with self.clients.sync.pipeline() as pipe:
                while True:  # optimistic: start again if another writer changed the facts meanwhile
                    try:
                        pipe.watch(key)
                        if mark is not None:
                            lua.check_mark(pipe.hmget(info, lua.MARK_FIELDS), client_id, mark)
                        existing = lua.facts_of(pipe.hgetall(key), now)
                        fact = plan(existing)
                        if fact is not None:
                            pipe.multi()
                            # The script checks the mark again, in the write itself.
                            script(keys=keys, args=lua.fact_args(fact, client_id, mark), client=pipe)
                            lua.check_put(pipe.execute()[0], mark)
                        return existing, fact
                    except self.clients.redis.WatchError:
                        continue

        return self._call("facts", go)

    def delete_fact(self, client_id: str, fact_id: str) -> bool:
        key = self.keys.facts(client_id)
        return int(self._call("facts", lambda: self.clients.sync.hdel(key, fact_id))) == 1

    def delete_client(self, client_id: str) -> None:
        self._run("forget", "delete_client", self.keys.client(client_id), [self.prefix, client_id])

    def purge(self, cutoff: float, now: float) -> int:
        gone = 0
        for name, key, at in erase.purges(self.keys, cutoff, now):
            while True:  # in chunks, so one script never blocks the server for long
                seen, deleted = self._run("purge", name, [key], [self.prefix, repr(at), erase.PURGE_BATCH])
                gone += int(deleted)
                if int(seen) < erase.PURGE_BATCH:
                    break
        return gone

    # ------------------------------------------------------------------ dense vectors (`vectors.py`)

    def unembedded(
        self, model: str, client_id: str | None, session_id: str | None, limit: int
    ) -> list[Unembedded]:
        args = vectors.unembedded_args(self.prefix, model, client_id, session_id, limit)
        return vectors.unembedded_of(self._run("vectors", "unembedded", [], args))

    def put_vectors(self, model: str, items: Sequence[VectorWrite]) -> int:
        return int(self._run("vectors", "put_vectors", [], vectors.put_args(self.prefix, model, items)))

    def vector_search(
        self, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
    ) -> list[SearchRow]:
        args = vectors.search_args(self.prefix, model, vector, client_id, session_id, limit)
        return vectors.search_rows_of(self._run("search", "vector_search", [], args))
