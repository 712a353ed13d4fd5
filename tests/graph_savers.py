"""LangGraph checkpointers for agent tests: `InMemorySaver` and the real `PostgresSaver`.

Each PostgreSQL saver lives in a schema of its own (created, set as the connection's
``search_path``, dropped afterwards), so tests running at once never see each other's threads
and the saver's own migrations run on empty tables. Without ``langgraph-checkpoint-postgres``
the PostgreSQL cases are skipped (failed under ``CI``) with the reason, as server backends are.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from conftest import _probe, server_unavailable
from store_kit import POSTGRES_URL


def _postgres_saver_module() -> Any:
    try:
        import langgraph.checkpoint.postgres as module
    except ImportError as exc:  # the dev extra installs it
        server_unavailable("postgres checkpointer", f"langgraph-checkpoint-postgres is not installed ({exc})")
    return module


@contextlib.contextmanager
def _schema() -> Iterator[str]:
    import psycopg

    _probe("postgres")
    schema = f"ckpt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@contextlib.contextmanager
def postgres_saver() -> Iterator[Any]:
    """A set-up `PostgresSaver` on its own schema of the local server."""
    import psycopg
    from psycopg.rows import dict_row

    module = _postgres_saver_module()
    with (
        _schema() as schema,
        psycopg.connect(
            POSTGRES_URL,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={schema}",
        ) as conn,
    ):
        saver = module.PostgresSaver(conn)
        saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def async_postgres_saver() -> AsyncIterator[Any]:
    """A set-up `AsyncPostgresSaver` on its own schema of the local server."""
    import psycopg
    from psycopg.rows import dict_row

    _postgres_saver_module()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    with _schema() as schema:
        conn = await psycopg.AsyncConnection.connect(
            POSTGRES_URL,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={schema}",
        )
        async with conn:
            saver = AsyncPostgresSaver(conn)
            await saver.setup()
            yield saver
