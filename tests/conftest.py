"""Shared fixtures: every backend behind one `store` fixture, fake models, message builders.

Server backends (PostgreSQL, Redis) are reached at the URLs in `LRM_POSTGRES_URL` and
`LRM_REDIS_URL` (defaults: the local servers). When `CI` is set their tests must run, so an
unreachable server fails them; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")


def server_unavailable(kind: str, reason: str) -> None:
    """Skip (or, under CI, fail) a test whose server backend cannot be reached."""
    text = f"{kind} backend unavailable: {reason}"
    if os.environ.get("CI"):
        pytest.fail(text + " (CI is set: the servers must run; .ci/run starts them)")
    pytest.skip(text)


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


def _memory(tmp_path: Path) -> RollingStore:
    return InMemoryRollingStore()


def _sqlite(tmp_path: Path) -> RollingStore:
    return SQLiteRollingStore(tmp_path / "memory.db", table_prefix=unique_prefix())


# name -> factory(tmp_path) returning an EMPTY store; server backends register here too.
STORE_FACTORIES: dict[str, Callable[[Path], RollingStore]] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RollingStore]:
    """An empty store of every backend in turn."""
    backend = STORE_FACTORIES[request.param](tmp_path)
    try:
        yield backend
    finally:
        backend.close()
