"""Test helpers that look under a store: raw contents per backend, reopening, URLs, cleanup.

The conformance suite checks erasure and "writes nothing" on the RAW tables and keys, not
through the store's own API, so these helpers read each backend's storage directly.
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import pytest

from langchain_rolling_memory.stores import RollingStore, SQLiteRollingStore
from langchain_rolling_memory.stores.memory.store import MemoryBackend

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")

_SQL_TABLES = ("sessions", "messages", "summaries", "leases", "facts", "vectors")


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(params)) if q)
    return urlunsplit(parts._replace(query=query))


def backend_name(store: RollingStore) -> str:
    return {
        "InMemoryRollingStore": "memory",
        "SQLiteRollingStore": "sqlite",
        "PostgresRollingStore": "postgres",
        "RedisRollingStore": "redis",
    }[type(store).__name__]


def store_url(store: RollingStore) -> str:
    """A URL that opens the same data from another process (not for the in-memory store)."""
    name = backend_name(store)
    if name == "sqlite":
        assert isinstance(store, SQLiteRollingStore)
        # Built by hand: urlunsplit would fold the four slashes of an absolute path.
        return f"sqlite:///{os.path.abspath(store.path)}?{urlencode({'prefix': store.prefix})}"
    if name == "postgres":
        return _with_query(store.backend.link.conninfo, prefix=store.prefix)  # type: ignore[attr-defined]
    if name == "redis":
        return _with_query(store.backend.clients.url, prefix=store.prefix)  # type: ignore[attr-defined]
    pytest.skip("the in-memory store lives in one process: it has no URL to reopen")


def reopen(store: RollingStore) -> RollingStore:
    """A new store object on the same data."""
    from langchain_rolling_memory.stores import open_store

    return open_store(store_url(store))


def _sql_rows(store: RollingStore) -> list[str]:
    prefix = store.prefix  # type: ignore[attr-defined]
    lines = []
    if isinstance(store, SQLiteRollingStore):
        import sqlite3

        with closing(sqlite3.connect(store.path)) as conn:
            for table in _SQL_TABLES:
                for row in conn.execute(f"SELECT * FROM {prefix}{table}"):
                    lines.append(f"{table}: {row!r}")
        return sorted(lines)
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for table in _SQL_TABLES:
            for row in conn.execute(f"SELECT * FROM {prefix}{table}"):
                lines.append(f"{table}: {row!r}")
    return sorted(lines)


def _redis_keys(store: RollingStore) -> list[str]:
    import redis

    prefix = store.prefix  # type: ignore[attr-defined]
    lines = []
    # Vectors are binary (packed floats): shown escaped, never decoded as text.
    with redis.Redis.from_url(REDIS_URL, decode_responses=True, encoding_errors="backslashreplace") as r:
        for key in r.scan_iter(match=_glob_escape(prefix) + "*", count=1000):
            kind = r.type(key)
            value: Any
            if kind == "string":
                value = r.get(key)
            elif kind == "list":
                value = r.lrange(key, 0, -1)
            elif kind == "hash":
                value = r.hgetall(key)
            elif kind == "set":
                value = sorted(r.smembers(key))
            elif kind == "zset":
                value = r.zrange(key, 0, -1, withscores=True)
            else:  # pragma: no cover - nothing else is written
                value = kind
            lines.append(f"{key} ({kind}): {json.dumps(value, ensure_ascii=False, default=str)}")
    return sorted(line for line in lines if not line.startswith(f"{prefix}schema "))


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def raw_contents(store: RollingStore) -> list[str]:
    """Everything the backend holds (except its schema record), one line per row or key."""
    name = backend_name(store)
    if name == "memory":
        memory = store.backend
        assert isinstance(memory, MemoryBackend)
        with memory._lock:
            lines = [f"session {sid}: {s!r}" for sid, s in memory._sessions.items()]
            lines += [f"facts {cid}: {facts!r}" for cid, facts in memory._facts.items() if facts]
        return sorted(lines)
    if name in ("sqlite", "postgres"):
        return _sql_rows(store)
    return _redis_keys(store)


def leftovers(store: RollingStore, *ids: str) -> list[str]:
    """Raw rows or keys that still mention any of `ids` (use ids no other data contains)."""
    return [line for line in raw_contents(store) if any(i in line for i in ids)]


def set_schema_version(store: RollingStore, version: int) -> None:
    """Record `version` as the store's schema version, the way a newer release would."""
    name = backend_name(store)
    prefix = getattr(store, "prefix", "")
    if name == "sqlite":
        import sqlite3

        assert isinstance(store, SQLiteRollingStore)
        with closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute(f"UPDATE {prefix}meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    elif name == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"UPDATE {prefix}meta SET value = %s WHERE key = 'schema_version'", (str(version),))
    elif name == "redis":
        import redis

        with redis.Redis.from_url(REDIS_URL) as r:
            r.set(f"{prefix}schema", str(version))
    else:
        pytest.skip("the in-memory store has no recorded schema")


def wipe(store: RollingStore) -> None:
    """Drop what a test created on a shared server (its own prefix only)."""
    name = backend_name(store)
    prefix = getattr(store, "prefix", "")
    if name == "postgres":
        import psycopg

        # The store's own database (the pgvector tests use one beside the test database).
        # Its database only: the host and port are the server's, a store opened through a
        # test's proxy (gone by now) included.
        conninfo = getattr(getattr(store.backend, "link", None), "conninfo", POSTGRES_URL)
        database = psycopg.conninfo.conninfo_to_dict(conninfo).get("dbname")
        with psycopg.connect(
            POSTGRES_URL, autocommit=True, **({"dbname": database} if database else {})
        ) as conn:
            for table in ("meta", *_SQL_TABLES):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}{table} CASCADE")
    elif name == "redis":
        import redis

        with redis.Redis.from_url(REDIS_URL) as r:
            keys = list(r.scan_iter(match=_glob_escape(prefix) + "*", count=1000))
            if keys:
                r.delete(*keys)
