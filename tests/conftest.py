"""Shared fixtures: every backend behind one `store` fixture, fake models, message builders.

Server backends (PostgreSQL, Redis) are reached at the URLs in `LRM_POSTGRES_URL` and
`LRM_REDIS_URL` (defaults: the local servers). When `CI` is set their tests must run, so an
unreachable server fails them; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import ClassVar

import pytest
import store_kit
from store_kit import POSTGRES_URL, REDIS_URL, wipe
from tcp_proxy import FaultyProxy

from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore

# The lab is a distribution of its own (lab/): the tests run this checkout's, installed or not, in
# this process (pyproject's pytest `pythonpath`) and in the Python processes they start.
_LAB = str(Path(__file__).resolve().parents[1] / "lab")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_LAB, os.environ.get("PYTHONPATH")]))


def server_unavailable(kind: str, reason: str) -> None:
    """Skip (or, under CI, fail) a test whose server backend cannot be reached."""
    text = f"{kind} backend unavailable: {reason}"
    if os.environ.get("CI"):
        pytest.fail(text + " (CI is set: the servers must run; .ci/run starts them)")
    pytest.skip(text)


@contextlib.asynccontextmanager
async def disposing(backend: RollingStore) -> AsyncIterator[RollingStore]:
    """Close the store's connections, then wipe what the test wrote (even if closing fails)."""
    try:
        yield backend
    finally:
        try:
            await backend.aclose()
        finally:
            wipe(backend)


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


def _memory(tmp_path: Path) -> RollingStore:
    return InMemoryRollingStore()


def _sqlite(tmp_path: Path) -> RollingStore:
    return SQLiteRollingStore(tmp_path / "memory.db", table_prefix=unique_prefix())


_REACHABLE: dict[str, str | None] = {}


def _probe(kind: str) -> None:
    """Fail or skip once per run if the server is down (not once per test after a timeout)."""
    if kind not in _REACHABLE:
        try:
            if kind == "postgres":
                import psycopg

                psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
            else:
                import redis

                with redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3) as r:
                    r.ping()
            _REACHABLE[kind] = None
        except Exception as exc:
            _REACHABLE[kind] = f"{type(exc).__name__}: {exc}".strip()
    reason = _REACHABLE[kind]
    if reason is not None:
        url = POSTGRES_URL if kind == "postgres" else REDIS_URL
        server_unavailable(kind, f"{url}: {reason}")


def _postgres(tmp_path: Path) -> RollingStore:
    _probe("postgres")
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    return PostgresRollingStore.from_url(POSTGRES_URL, table_prefix=unique_prefix(), pool_size=4)


def _redis(tmp_path: Path) -> RollingStore:
    _probe("redis")
    from langchain_rolling_memory.stores.redis import RedisRollingStore

    return RedisRollingStore.from_url(REDIS_URL, key_prefix=unique_prefix())


# name -> factory(tmp_path) returning an EMPTY store with its own table or key prefix.
STORE_FACTORIES: dict[str, Callable[[Path], RollingStore]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "redis": _redis,
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RollingStore]:
    """An empty store of every backend in turn.

    Async so that its teardown runs on the test's event loop: async connections are closed
    on the loop that opened them, before pytest-asyncio closes it.
    """
    backend = STORE_FACTORIES[request.param](tmp_path)
    async with disposing(backend):
        yield backend


class OurBackend:
    """What our backends give the conformance kit (`langchain_rolling_memory.testing`): an
    empty store of `kind` per test, and the raw views of `store_kit`. Put it first among the
    bases of a class that subclasses a suite of the kit."""

    kind: ClassVar[str]

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[RollingStore]:
        async with disposing(STORE_FACTORIES[self.kind](tmp_path)) as backend:
            yield backend

    def raw_contents(self, store: RollingStore) -> list[str]:
        return store_kit.raw_contents(store)

    def reopen(self, store: RollingStore) -> RollingStore:
        return store_kit.reopen(store)

    def set_schema_version(self, store: RollingStore, version: int) -> bool:
        store_kit.set_schema_version(store, version)
        return True


@pytest.fixture(params=["postgres", "redis", "sqlite"])
async def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RollingStore]:
    """An empty store of each backend several processes can open at once (by URL)."""
    backend = STORE_FACTORIES[request.param](tmp_path)
    async with disposing(backend):
        yield backend


@pytest.fixture
async def pg_store(tmp_path: Path) -> AsyncIterator[tuple[RollingStore, str]]:
    """An empty PostgreSQL store whose connections carry a unique application_name."""
    _probe("postgres")
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    name = f"lrm-{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in POSTGRES_URL else "?"
    backend = PostgresRollingStore.from_url(
        f"{POSTGRES_URL}{sep}application_name={name}", table_prefix=unique_prefix(), pool_size=2
    )
    async with disposing(backend):
        yield backend, name


@pytest.fixture
async def redis_store(tmp_path: Path) -> AsyncIterator[tuple[RollingStore, str]]:
    """An empty Redis store whose connections carry a unique client name."""
    _probe("redis")
    from langchain_rolling_memory.stores.redis import RedisRollingStore

    name = f"lrm-{uuid.uuid4().hex[:12]}"
    backend = RedisRollingStore.from_url(
        REDIS_URL, key_prefix=unique_prefix(), client_kwargs={"client_name": name}
    )
    async with disposing(backend):
        yield backend, name


@pytest.fixture(params=["postgres", "redis"])
async def proxied_store(request: pytest.FixtureRequest) -> AsyncIterator[tuple[RollingStore, FaultyProxy]]:
    """An empty server store reached through a `FaultyProxy` in front of the real server."""
    from urllib.parse import urlsplit

    kind = request.param
    _probe(kind)
    url = urlsplit(POSTGRES_URL if kind == "postgres" else REDIS_URL)
    proxy = FaultyProxy(url.hostname or "127.0.0.1", url.port or (5432 if kind == "postgres" else 6379))
    through = url._replace(
        netloc=f"{url.username + '@' if url.username else ''}127.0.0.1:{proxy.port}"
    ).geturl()
    backend: RollingStore
    if kind == "postgres":
        from langchain_rolling_memory.stores.postgres import PostgresRollingStore

        backend = PostgresRollingStore.from_url(through, table_prefix=unique_prefix(), pool_size=2, timeout=2)
    else:
        from langchain_rolling_memory.stores.redis import RedisRollingStore

        backend = RedisRollingStore.from_url(through, key_prefix=unique_prefix())
    try:
        yield backend, proxy
    finally:
        try:
            proxy.up()
            await backend.aclose()
        finally:
            proxy.close()
            wipe(backend)
