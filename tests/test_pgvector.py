"""PostgreSQL dense search scored by pgvector when the database has it (issue 23): the same hits,
order, ties and scores (to the last bit: pgvector ranks, the vectors near the cut are scored
again exactly) as the plain ``unnest`` scoring and as the in-memory backend, within one client, never an erased message, sync and async, the extension in a schema
off the search_path too.

Each test uses a database of its own beside ``test`` (created once, with ``CREATE EXTENSION
vector``): the ``test`` database itself has no pgvector, so every other PostgreSQL test runs the
plain scoring. The extension's files come from Debian's pgvector source built against the
server (`.ci/run` builds it when it is missing); without them this file skips, and under CI fails.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import random
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import POSTGRES_URL, disposing, unique_prefix
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage
from store_kit import wipe
from test_store_races import (
    test_a_vector_search_as_the_first_owner_never_returns_the_next_owners_messages as _vector_search_race,
)

from langchain_rolling_memory import index_vectors
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore
from langchain_rolling_memory.stores.contract import VectorWrite

psycopg = pytest.importorskip("psycopg")

_DATABASES = {"public": "lrm_pgvector", "ext": "lrm_pgvector_ext"}
"""The database for each schema the extension is created in."""
_READY: dict[str, str | None] = {}


def _url(database: str) -> str:
    return urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{database}"))


def _prepare(schema: str) -> str:
    """The database whose pgvector lives in `schema`, created once per run (or a skip/fail)."""
    database = _DATABASES[schema]
    if schema not in _READY:
        try:
            with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as conn:
                if (
                    conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
                    is None
                ):
                    with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # another worker made it
                        conn.execute(f'CREATE DATABASE "{database}"')
            with psycopg.connect(_url(database), autocommit=True, connect_timeout=3) as conn:
                # IF NOT EXISTS still races another worker doing the same: its error means done.
                with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateSchema):
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                with contextlib.suppress(psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
                    conn.execute(f'CREATE EXTENSION IF NOT EXISTS vector SCHEMA "{schema}"')
            _READY[schema] = None
        except psycopg.Error as exc:
            _READY[schema] = f"{type(exc).__name__}: {str(exc).strip()}"
    reason = _READY[schema]
    if reason is not None:
        text = f"pgvector unavailable on {POSTGRES_URL}: {reason}"
        if os.environ.get("CI"):
            pytest.fail(text + " (CI is set: .ci/run builds pgvector when it is missing)")
        pytest.skip(text)
    return _url(database)


def _open(url: str) -> RollingStore:
    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    return PostgresRollingStore.from_url(url, table_prefix=unique_prefix(), pool_size=2)


@pytest.fixture(params=sorted(_DATABASES))
async def pgv_store(request: pytest.FixtureRequest) -> AsyncIterator[RollingStore]:
    """An empty PostgreSQL store in a database that has pgvector (in `public`, then in `ext`)."""
    async with disposing(_open(_prepare(request.param))) as store:
        yield store


@pytest.fixture
async def plain_store() -> AsyncIterator[RollingStore]:
    """An empty PostgreSQL store in the ``test`` database, which has no pgvector."""
    from conftest import _probe

    _probe("postgres")
    async with disposing(_open(POSTGRES_URL)) as store:
        yield store


def _scheme(store: RollingStore) -> str | None:
    return store.backend._pgvector  # type: ignore[attr-defined,no-any-return]


_WORDS = ["cat", "dog", "piano", "beach", "pottery", "camping"]
FAKE = DeterministicFakeEmbedding(size=8)


def _fill(stores: list[RollingStore], sessions: dict[str, tuple[str, list[str]]]) -> None:
    for store in stores:
        for sid, (client, texts) in sessions.items():
            store.append(sid, [HumanMessage(t) for t in texts], client_id=client)
            index_vectors(store, FAKE, client_id=client)


def _hits(
    store: RollingStore, query: list[float], model: str | None = None, **where: Any
) -> list[tuple[str | None, int | None, float]]:
    hits = store.vector_search(query, model=model or _model(), **where)
    return [(h.session_id, h.seq, h.score) for h in hits]


def _model() -> str:
    from langchain_rolling_memory.engine.dense import model_name

    return model_name(FAKE)


def _same(
    got: list[tuple[str | None, int | None, float]], want: list[tuple[str | None, int | None, float]]
) -> None:
    # pgvector only ranks: the vectors near the cut are scored again exactly, so the scores are
    # the plain statement's and the memory backend's to the last bit.
    assert got == want


def test_pgvector_scores_what_the_plain_statement_and_the_memory_backend_score(
    pgv_store: RollingStore, plain_store: RollingStore
) -> None:
    memory = InMemoryRollingStore()
    sessions = {
        "a1": ("ana", ["I took up pottery", "we went camping", "cat"]),
        "a2": ("ana", ["cat", "cat", "the beach in May"]),  # equal vectors: ties by session, seq
        "b1": ("bob", ["pottery classes", "a dog"]),
    }
    _fill([pgv_store, plain_store, memory], sessions)
    for text in ("pottery", "cat", "a quiet beach"):
        query = FAKE.embed_query(text)
        for where in (
            {"client_id": "ana", "limit": 10},
            {"client_id": "ana", "session_id": "a2", "limit": 2},
        ):
            want = _hits(memory, query, **where)
            _same(_hits(pgv_store, query, **where), want)
            _same(_hits(plain_store, query, **where), want)
    assert _scheme(pgv_store) in _DATABASES and _scheme(plain_store) is None  # each took its own path
    assert all(
        h.session_id != "b1"
        for h in pgv_store.vector_search(FAKE.embed_query("pottery"), model=_model(), client_id="ana")
    )


async def test_the_async_twin_uses_pgvector_too(pgv_store: RollingStore) -> None:
    await pgv_store.aappend("s", [HumanMessage("we went camping")], client_id="ana")
    index_vectors(pgv_store, FAKE, client_id="ana")
    hits = await pgv_store.avector_search(
        FAKE.embed_query("we went camping"), model=_model(), client_id="ana"
    )
    assert [h.text for h in hits] == ["we went camping"] and math.isclose(hits[0].score, 1.0, abs_tol=1e-6)
    assert pgv_store.async_backend._pgvector in _DATABASES  # type: ignore[attr-defined]


def test_an_erased_message_is_never_found_by_pgvector(pgv_store: RollingStore) -> None:
    _fill([pgv_store], {"s": ("ana", ["zebra one"]), "t": ("ana", ["zebra two"])})
    query = FAKE.embed_query("zebra one")
    pgv_store.clear_session("s")
    assert [h.text for h in pgv_store.vector_search(query, model=_model(), client_id="ana")] == ["zebra two"]
    pgv_store.forget("ana")
    assert pgv_store.vector_search(query, model=_model(), client_id="ana") == []


@pytest.mark.parametrize("scope", ["session", "client"])
def test_a_pgvector_search_racing_erases_never_returns_the_next_owners_messages(
    pgv_store: RollingStore, scope: str
) -> None:
    _vector_search_race(pgv_store, scope)  # the four backends' race, on a store with pgvector
    assert _scheme(pgv_store) in _DATABASES


_VALUES = [-1.0, 0.0, 0.5, 1.0]


@contextlib.contextmanager
def _stores() -> Iterator[tuple[RollingStore, RollingStore]]:
    pgv, memory = _open(_prepare("public")), InMemoryRollingStore()
    try:
        yield pgv, memory
    finally:
        try:
            pgv.close()
        finally:
            wipe(pgv)  # its tables, in its own database


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["ana", "bob"]), st.lists(st.sampled_from(_VALUES), min_size=3, max_size=3)
        ),
        min_size=1,
        max_size=12,
    ),
    query=st.lists(st.sampled_from(_VALUES), min_size=3, max_size=3),
    limit=st.integers(min_value=1, max_value=6),
)
def test_pgvector_ranks_any_vectors_as_the_memory_backend_does(
    rows: list[tuple[str, list[float]]], query: list[float], limit: int
) -> None:
    # Few distinct values: many equal vectors, so ties at the cut; an all-zero vector (stored
    # empty) or query has no direction and finds nothing, on every backend.
    with _stores() as (pgv, memory):
        for store in (pgv, memory):
            vectors = {}
            for i, (client, vector) in enumerate(rows):
                sid = f"{client}-{i % 3}"
                [seq] = store.append(sid, [HumanMessage(f"m{i}")], client_id=client)
                vectors[(sid, seq)] = pack(vector)
            for client in ("ana", "bob"):
                pending = store.unembedded("fixed", client_id=client)
                store.put_vectors(
                    "fixed",
                    [
                        VectorWrite(u.session_id, u.seq, u.generation, vectors[(u.session_id, u.seq)])
                        for u in pending
                    ],
                )
        for client in ("ana", "bob"):
            want = [
                (h.session_id, h.seq, h.score)
                for h in memory.vector_search(query, model="fixed", client_id=client, limit=limit)
            ]
            got = [
                (h.session_id, h.seq, h.score)
                for h in pgv.vector_search(query, model="fixed", client_id=client, limit=limit)
            ]
            _same(got, want)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_near_ties_come_out_as_the_exact_scores_order_them(seed: int, limit: int) -> None:
    # Vectors a hair apart (1e-4 of noise on one base, 384 dimensions): their cosines differ by
    # less than pgvector's float32 sum is off by, so its own order would not be the exact one.
    rng = random.Random(seed)
    base = [rng.gauss(0.0, 1.0) for _ in range(384)]
    vectors = [pack([x + rng.gauss(0.0, 1e-4) for x in base]) for _ in range(30)]
    query = [x + rng.gauss(0.0, 1e-3) for x in base]
    with _stores() as (pgv, memory):
        for store in (pgv, memory):
            for i in range(30):
                store.append(f"s{i:02d}", [HumanMessage(f"m{i}")], client_id="ana")
            pending = store.unembedded("fixed", client_id="ana")
            store.put_vectors(
                "fixed",
                [VectorWrite(u.session_id, u.seq, u.generation, vectors[i]) for i, u in enumerate(pending)],
            )
        want = _hits(memory, query, client_id="ana", limit=limit, model="fixed")
        _same(_hits(pgv, query, client_id="ana", limit=limit, model="fixed"), want)


_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def _forked_search(store: RollingStore, query: list[float]) -> None:
    # The store was opened, and its pgvector probed, by the parent before the fork.
    hits = store.vector_search(query, model=_model(), client_id="ana")
    os._exit(0 if [h.text for h in hits][:1] == ["a tram to Belem"] and _scheme(store) else 1)


@pytest.mark.skipif(_FORK is None, reason="this platform has no fork()")
def test_a_forked_child_searches_through_pgvector_with_a_store_opened_before_the_fork(
    pgv_store: RollingStore,
) -> None:
    assert _FORK is not None
    _fill([pgv_store], {"s": ("ana", ["Casa Azul in Alfama", "a tram to Belem"])})
    query = FAKE.embed_query("a tram to Belem")
    assert pgv_store.vector_search(query, model=_model(), client_id="ana")[0].text == "a tram to Belem"
    child = _FORK.Process(target=_forked_search, args=(pgv_store, query))
    child.start()
    child.join(60)
    if child.exitcode is None:  # pragma: no cover - a hung child fails the test, not the run
        child.kill()
        child.join()
    assert child.exitcode == 0
    assert pgv_store.vector_search(query, model=_model(), client_id="ana")[0].text == "a tram to Belem"
