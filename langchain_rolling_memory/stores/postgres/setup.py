"""Creating and migrating a PostgreSQL store's tables, as sync and async twins.

Owns what `setup()` / `asetup()` of `PostgresRollingStore` run (the schema record, the migrations in
order under an advisory lock, the search backfill of schema 2); the SQL text is in
`sql.py`, the store class in `store.py`. Imports no driver: the store hands it
psycopg.
"""

from __future__ import annotations

from typing import Any

import langchain_rolling_memory.stores.postgres.search as pgs
import langchain_rolling_memory.stores.postgres.sql as pg
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION, newer_schema


class Migration:
    """The schema of one store's tables, created or brought up to date on a connection."""

    def __init__(self, psycopg: Any, q: pg.Queries, search_config: str) -> None:
        self._psycopg, self.q, self.search_config = psycopg, q, search_config
        self.prefix = q.prefix

    def _config_error(self, exc: BaseException) -> ConfigurationError:
        msg = (
            f"search_config {self.search_config!r} is not a text search configuration of this "
            f"server ({exc}); list them with: SELECT cfgname FROM pg_ts_config"
        )
        return ConfigurationError(msg)

    def run(self, conn: Any) -> None:
        q = self.q
        try:
            conn.execute(q.check_config, (self.search_config,))
        except self._psycopg.Error as exc:
            raise self._config_error(exc) from exc
        with conn.transaction():
            # Two processes starting at once must not both create the tables.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (q.lock_key,))
            conn.execute(q.create_meta)
            row = conn.execute(q.get_version).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise newer_schema(f"PostgreSQL tables {self.prefix}*", version)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in q.migrations[number - 1]:
                    conn.execute(statement)
                if number == 2:
                    self._backfill(conn)
                conn.execute(q.set_version, (str(number),))

    async def arun(self, conn: Any) -> None:
        q = self.q
        try:
            await conn.execute(q.check_config, (self.search_config,))
        except self._psycopg.Error as exc:
            raise self._config_error(exc) from exc
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (q.lock_key,))
            await conn.execute(q.create_meta)
            row = await (await conn.execute(q.get_version)).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise newer_schema(f"PostgreSQL tables {self.prefix}*", version)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in q.migrations[number - 1]:
                    await conn.execute(statement)
                if number == 2:
                    await self._abackfill(conn)
                await conn.execute(q.set_version, (str(number),))

    def _backfill(self, conn: Any) -> None:
        """Index the messages and facts written before schema 2 (in the migration's transaction)."""
        q, cfg = self.q, self.search_config
        with conn.cursor(name=f"lrm_backfill_{self.prefix}") as cur:
            cur.execute(q.unindexed_messages)
            while records := cur.fetchmany(2000):
                conn.execute(q.index_messages, pgs.backfill_messages(records, cfg))
        facts = conn.execute(q.unindexed_facts).fetchall()
        if facts:
            conn.execute(q.index_facts, pgs.backfill_facts(facts, cfg))

    async def _abackfill(self, conn: Any) -> None:
        q, cfg = self.q, self.search_config
        async with conn.cursor(name=f"lrm_backfill_{self.prefix}") as cur:
            await cur.execute(q.unindexed_messages)
            while records := await cur.fetchmany(2000):
                await conn.execute(q.index_messages, pgs.backfill_messages(records, cfg))
        facts = await (await conn.execute(q.unindexed_facts)).fetchall()
        if facts:
            await conn.execute(q.index_facts, pgs.backfill_facts(facts, cfg))
