"""Redis backend on redis-py (sync) and `redis.asyncio`: the store class, which builds the two twins.

Owns the store's settings, opening its clients and the choice of its async primitives; the
clients (its own, or one the caller handed in; closing) are in `clients.py`, the sync
primitives in `sync.py`, the async ones in `aio.py`, the Lua scripts and what
both twins share in `scripts.py` (erasing in `erase.py`, search in
`search.py`), the key layout and its migrations in `layout.py`, the public API in
`stores/api.py`. redis-py is imported only when a store is created, so the package works without
the ``redis`` extra.

What an erase leaves behind: `forget`, `clear_session` and `purge` delete the keys at once
(memory is freed, nothing is readable), and `vacuum()` has nothing to do. Persistence files
are the server's: an RDB snapshot keeps the data until the next save replaces it, and an
append-only file keeps every write, the deleted ones included, until it is rewritten
(``BGREWRITEAOF``, or automatically past ``auto-aof-rewrite-percentage``); replicas and
copied backups keep their own. Run ``BGSAVE``/``BGREWRITEAOF`` after an erase if the files
must not hold the data; this store does not, as they rewrite the whole server's data.

Search: this backend does not use the RediSearch module (FT.*), which plain Redis lacks, and
has no code for it: the module that Redis Stack ships (2.x, hashes indexed by prefix) is not on
this machine to test against, and Debian 12's `redis-redisearch` is RediSearch 1.2 (documents
added with FT.ADD, the model before 2.0). Each session keeps an inverted
index beside its messages (`layout.py`: term -> "<seq>:<tf>:<length>" postings, its message
count and summed length), written by the append script in the same script as the messages
(the terms counted in Python, with `Bm25Index`'s rule), erased and expiring with them. A search
reads, for the scope's live sessions, only the query terms' postings (one script, owner and
generation checked in it), ranks them and the client's facts in Python with BM25
(`lexical_search.bm25_scores`, the scores `Bm25Index(stem=True)` gives), then fetches the hits
(a second script, which drops a hit whose session changed owner or generation since). Its cost
grows with the query terms' postings and, by a few microseconds each, with the client's
sessions, not with their text: measured by `benchmarks/search_cost.py` (p50 of search +
injection at 10,000 messages of a client, a quiet run of 2026-12-04): 4.6 ms on the synthetic
corpus (100 sessions), 9.9 ms on LoCoMo (459 sessions), 6.0 and 13.4 ms with one 5 MB message
stored (`benchmarks/results/search_cost.md`); a search that read the client's whole index took
324 and 873 ms on an earlier machine. A session written before the index existed (or appended to by
an older release) is indexed at its first search.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

import langchain_rolling_memory.stores.redis.layout as layout
from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError, StoreError
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.fact_api import FactOptions
from langchain_rolling_memory.stores.redis.aio import AsyncRedis
from langchain_rolling_memory.stores.redis.clients import Clients
from langchain_rolling_memory.stores.redis.sync import SyncRedis
from langchain_rolling_memory.stores.urls import url_options


def _where(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if not parts.hostname:  # unix:///path/to/socket
        return f"{parts.scheme}://{parts.path}"
    host = parts.hostname
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


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


class RedisRollingStore(RollingStore):
    """Transcripts, summaries and facts in plain Redis, shared by many app processes.

    A turn costs two round trips whatever the transcript's length: one append script and
    one script that reads the summary with the unsummarized tail (a range from the list's
    end). A connection dropped mid-call is retried once on a fresh connection; the append
    script is then told to look for its batch id first, so a message is never doubled. A
    second failure, or a timeout (the command may still run), raises `StoreError`.

    Args:
        url: ``redis://host:6379/0`` (or ``rediss://``); see `redis.Redis.from_url`. Give it
            or `client`, not both.
        client: a client of your own instead, `redis.Redis` or `redis.asyncio.Redis`, made
            with ``decode_responses=True`` and ``retry=Retry(NoBackoff(), 0)`` (the store
            retries itself, idempotently: a client that resends an append could store it
            twice). It stays yours: `close()` leaves it open. With a sync one the async methods
            run in a worker thread (a forked child keeps using it: redis-py reconnects there);
            with an async one only the async methods work, setup runs at the first call, and a
            forked child refuses it.
        setup: record (or migrate) the key layout's version now (the default); False writes
            nothing: the first call then checks the version once and raises `StoreError`
            naming `setup()` if it is missing or old.
        key_prefix: prefix of every key, so several apps can share one server.
        ttl: optional seconds a session lives after its last write (transcript, summary,
            state); None keeps sessions until `forget`, `clear_session` or `purge`, except
            one that another store on the prefix gave a ttl: what this store writes to it
            expires with it (a session's keys expire together and are read only while its
            info hash lives).
        client_kwargs: extra keyword arguments for the redis-py clients the store opens.
        connect_timeout: seconds the first connection of a store opened from a URL may take; a
            refused port, an unknown host or a wrong password fails at once with the
            server's reason (`StoreError`), never retried.
        **options: fact limits and filter, see `RollingStore`.

    Example (needs a server, so not run here)::

        store = RedisRollingStore.from_url("redis://127.0.0.1:6379/0?prefix=app1:", ttl=30 * 86400)
    """

    schemes = ("redis", "rediss")

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        setup: bool = True,
        key_prefix: str = "lrm:",
        ttl: float | None = None,
        client_kwargs: dict[str, Any] | None = None,
        connect_timeout: float = 5.0,
        **options: Any,
    ) -> None:
        fact_options = FactOptions(**options)
        redis = _driver()
        if (url is None) == (client is None):
            msg = f"give a Redis URL or client=, not both nor neither; got url={url!r}, client={client!r}"
            raise ConfigurationError(msg)
        if ttl is not None and ttl <= 0:
            msg = f"ttl must be a positive number of seconds or None, got {ttl!r}"
            raise ConfigurationError(msg)
        self.prefix = layout.check_prefix(key_prefix)
        self.keys = layout.Keys(self.prefix)
        self.ttl = ttl
        ttl_ms = 0 if ttl is None else max(1, math.ceil(ttl * 1000))
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # redis-py would silently resend a command after a dropped connection; an append
        # resent that way could land twice, so retries are ours (and idempotent).
        kwargs: dict[str, Any] = {"decode_responses": True, **(client_kwargs or {})}
        akwargs: dict[str, Any] = {"retry": AsyncRetry(NoBackoff(), 0), **kwargs}
        if client is None:
            assert url is not None
            _probe(redis, url, {**kwargs, "retry": Retry(NoBackoff(), 0)}, connect_timeout)
            borrowed, sync = None, redis.Redis.from_url(url, **{"retry": Retry(NoBackoff(), 0), **kwargs})
        else:
            borrowed = _check_client(redis, client)
            sync = None if isinstance(client, redis.asyncio.Redis) else client
        # An async client handed in is set up (if asked) at its first call: a constructor cannot await.
        state = "ok" if setup else "check"
        state = "setup" if setup and sync is None else state
        clients = Clients(
            redis,
            url=url or "",
            sync=sync,
            borrowed=borrowed,
            akwargs=akwargs,
            schema_state=state,
            name=type(self).__name__,
        )
        # Native async unless the caller handed in a sync client: its async API then runs the
        # sync primitives in a worker thread.
        native = None if borrowed is not None and sync is not None else AsyncRedis(clients, self.keys, ttl_ms)
        super().__init__(SyncRedis(clients, self.keys, ttl_ms), native, options=fact_options)
        if sync is not None and setup:
            self._setup_or_close()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisRollingStore:
        """Open a store from ``redis://...``; a ``prefix`` query parameter sets the key prefix,
        ``fact_ttl`` the facts' default retention."""
        clean, options = url_options(url, options, "key_prefix")
        return cls(clean, **options)


def _probe(redis: Any, url: str, kwargs: dict[str, Any], connect_timeout: float) -> None:
    """Connect once, now, within `connect_timeout`: a refused port, an unknown host or a
    wrong password is one `StoreError` with the server's reason, not a retried call."""
    if not 0 < connect_timeout < float("inf"):
        msg = f"connect_timeout must be a number of seconds > 0, got {connect_timeout!r}"
        raise ConfigurationError(msg)
    limits = {"socket_connect_timeout": connect_timeout, "socket_timeout": connect_timeout}
    client = redis.Redis.from_url(url, **{**kwargs, **limits})
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
        msg = (
            f"cannot connect to Redis at {_where(url)}: {reason}; "
            "check the URL (host, port, user, password, database) and that the server is running"
        )
        raise StoreError(msg) from None
    finally:
        client.close()


def _check_client(redis: Any, client: Any) -> Any:
    """Refuse a handed-in client the store cannot use as it is (see the `client` argument)."""
    kind = type(client).__name__
    if not isinstance(client, redis.Redis | redis.asyncio.Redis):
        msg = f"client must be a redis.Redis or redis.asyncio.Redis, got {kind}"
        raise ConfigurationError(msg)
    kwargs = client.get_connection_kwargs()
    if not kwargs.get("decode_responses"):
        msg = "the store reads replies as text: make the client with decode_responses=True"
        raise ConfigurationError(msg)
    retry = client.get_retry()
    if retry is not None and getattr(retry, "_retries", 0) > 0:
        msg = (
            f"the client resends commands after a dropped connection ({retry._retries} retries), which "
            "could store an append twice; make it with retry=Retry(NoBackoff(), 0) (redis.retry, "
            "redis.backoff; redis.asyncio.retry for an async client): the store retries itself, once "
            "and idempotently"
        )
        raise ConfigurationError(msg)
    return client
