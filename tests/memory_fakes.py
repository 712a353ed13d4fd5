"""Test helpers for the memory tests: a chat model that records what it received, raw dumps."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore
from langchain_rolling_memory.stores.memory.store import MemoryBackend


class RecordingChatModel(GenericFakeChatModel):
    """`GenericFakeChatModel` that keeps every message list it was called with."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def recording_model(replies: Iterable[str | AIMessage]) -> RecordingChatModel:
    messages = [r if isinstance(r, AIMessage) else AIMessage(r) for r in replies]
    return RecordingChatModel(messages=iter(messages), received=[])


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(f"{m.type}: {m.text}" for m in messages)


def raw_dump(store: RollingStore) -> str | None:
    """Everything the backend holds, as text, read around the public API; None if unknown."""
    if isinstance(store, InMemoryRollingStore):
        memory = store.backend
        assert isinstance(memory, MemoryBackend)
        return repr(memory._sessions) + repr(memory._facts)
    if isinstance(store, SQLiteRollingStore):
        conn = sqlite3.connect(store.path)
        try:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?",
                    (store.prefix + "%",),
                )
            ]
            return "\n".join(repr(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables)
        finally:
            conn.close()
    kind = type(store).__name__
    if kind == "PostgresRollingStore":
        return _postgres_dump(store.prefix)  # type: ignore[attr-defined]
    if kind == "RedisRollingStore":
        return _redis_dump(store.prefix)  # type: ignore[attr-defined]
    return None


def _postgres_dump(prefix: str) -> str:
    import psycopg
    from conftest import POSTGRES_URL

    with psycopg.connect(POSTGRES_URL) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_name LIKE %s",
                (prefix.replace("_", "\\_") + "%",),
            )
        ]
        return "\n".join(repr(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)


def _redis_dump(prefix: str) -> str:
    import redis
    from conftest import REDIS_URL

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        out = []
        for key in client.scan_iter(match=prefix + "*"):
            kind = client.type(key)
            if kind == "string":
                value: Any = client.get(key)
            elif kind == "hash":
                value = client.hgetall(key)
            elif kind == "list":
                value = client.lrange(key, 0, -1)
            elif kind == "set":
                value = sorted(client.smembers(key))
            elif kind == "zset":
                value = client.zrange(key, 0, -1, withscores=True)
            else:
                value = kind
            out.append(f"{key}={value!r}")
        return "\n".join(out)
    finally:
        client.close()
