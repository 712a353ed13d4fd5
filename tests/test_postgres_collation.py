"""PostgreSQL orders session ids (and fact ids) by code point whatever the database's collation, as
every other backend does: ties of a search, the listing of what is left to embed and of a client's
sessions come out the same on a database whose default collation is ICU's ``en-US`` (where ``_x``
sorts before ``A``, and ``a`` before ``B``) as on the memory backend; a lexical search's ties as
on a database of the C collation (the memory and SQLite backends break those ties by order of
writing, not by id).

Runs in a database ``lrm_icu`` beside the test one, created once (ICU is built into Debian's
PostgreSQL). Without a server this file skips, and under CI fails."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import POSTGRES_URL, disposing, unique_prefix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from store_kit import wipe

from langchain_rolling_memory import open_store
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import VectorWrite

psycopg = pytest.importorskip("psycopg")

DATABASE = "lrm_icu"
_READY: list[str | None] = []


def _prepare() -> str:
    if not _READY:
        try:
            with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as conn:
                found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
                if found is None:
                    with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # another worker made it
                        conn.execute(
                            f'CREATE DATABASE "{DATABASE}" TEMPLATE template0 LOCALE_PROVIDER icu '
                            "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
                        )
            _READY.append(None)
        except psycopg.Error as exc:
            _READY.append(f"{type(exc).__name__}: {str(exc).strip()}")
    if _READY[0] is not None:
        text = f"no ICU database on {POSTGRES_URL}: {_READY[0]}"
        if os.environ.get("CI"):
            pytest.fail(text)
        pytest.skip(text)
    return urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{DATABASE}"))


@pytest.fixture
async def icu_store() -> AsyncIterator[RollingStore]:
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    url = _prepare()
    async with disposing(
        PostgresRollingStore.from_url(url, table_prefix=unique_prefix(), pool_size=2)
    ) as store:
        yield store


def test_the_icu_database_sorts_differently_from_code_points(icu_store: RollingStore) -> None:
    # What the fixes below guard against: the database's own order of these ids.
    with psycopg.connect(_prepare()) as conn:
        rows = conn.execute(
            "SELECT x FROM unnest(%s::text[]) AS x ORDER BY x", (["B", "_x", "a"],)
        ).fetchall()
    assert [r[0] for r in rows] != sorted(["B", "_x", "a"])


_IDS = st.lists(st.text(alphabet="aAbBzZ_-:.19", min_size=1, max_size=4), min_size=2, max_size=8, unique=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_IDS, st.integers(1, 8))
def test_ties_listings_and_sessions_come_out_in_code_point_order(
    icu_store: RollingStore, ids: list[str], limit: int
) -> None:
    memory = open_store("memory://")
    plain = open_store(f"{POSTGRES_URL}?prefix={unique_prefix()}")
    try:
        client = f"c{unique_prefix()}"  # each example its own client: the store is shared
        stores = (icu_store, memory)
        for store in (*stores, plain):
            for sid in ids:
                # The same words and the same vector in every session: every search is one tie.
                store.append(f"{client}{sid}", [HumanMessage("camping by the lake")], client_id=client)
        listed = [store.unembedded("fixed", client_id=client, limit=limit) for store in stores]
        assert [[(u.session_id, u.seq) for u in rows] for rows in listed] == [
            [(u.session_id, u.seq) for u in listed[1]]
        ] * 2
        for store in stores:
            pending = store.unembedded("fixed", client_id=client)
            store.put_vectors(
                "fixed", [VectorWrite(u.session_id, u.seq, u.generation, pack([0.6, 0.8])) for u in pending]
            )
        near = [
            [h.session_id for h in s.vector_search([0.6, 0.8], model="fixed", client_id=client, limit=limit)]
            for s in stores
        ]
        words = [
            [h.session_id for h in s.search("camping lake", client_id=client, limit=limit)]
            for s in (icu_store, plain)
        ]
        sessions = [s.sessions(client) for s in stores]
        assert near[0] == near[1] == sorted(f"{client}{sid}" for sid in ids)[:limit]
        assert words[0] == words[1]
        assert sessions[0] == sessions[1]
    finally:
        memory.close()
        plain.close()
        wipe(plain)
