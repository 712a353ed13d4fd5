"""Time of one dense search (`store.vector_search`) as a client's embedded messages grow, per backend.

Fills one client with 1,000 then 10,000 messages (sessions of 100), each with a seeded random
unit vector of 384 dimensions (what multilingual-e5-small gives; no model runs here: the
search's cost does not depend on where the vectors came from), and a second client with as
many, which no search of the first may read or pay for. Times ``vector_search(query,
client_id=..., limit=80)`` (80: the hits a 2,000-token recall asks for) with fresh random
queries: the brute force each backend runs (memory and SQLite: `stores.vector_rank.closest` in the
process, numpy when installed; PostgreSQL: a sum over ``unnest`` of two ``REAL[]`` in SQL, or
pgvector's inner product on a database that has the extension, ``postgresql-pgvector``: a
database ``lrm_pgvector`` beside the test one, created with the extension if missing; Redis: dot
products in the Lua script).

Prints p50 and p95 milliseconds and the 10k/1k ratio of the p50; wall clock on a shared
machine: read the p50.

    python -m benchmarks.vector_search_cost --out benchmarks/results/vector_search_cost.md
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from langchain_core.messages import HumanMessage

from benchmarks._shared import markdown_table, percentile
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.stores import RollingStore, open_store
from langchain_rolling_memory.stores.contract import VectorWrite

DIMS = 384
MODEL = "bench"
SIZES = (1_000, 10_000)
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"


def _vector(rng: random.Random) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(DIMS)]


def _fill(store: RollingStore, client: str, start: int, stop: int, rng: random.Random) -> None:
    for first in range(start, stop, 100):
        session = f"{client}-{first // 100}"
        store.append(
            session, [HumanMessage(f"message {i}") for i in range(first, first + 100)], client_id=client
        )
        listed = store.unembedded(MODEL, session_id=session, limit=100)
        store.put_vectors(
            MODEL, [VectorWrite(u.session_id, u.seq, u.generation, pack(_vector(rng))) for u in listed]
        )


def _pgvector_database() -> str:
    """The URL of a database beside the test one with pgvector in it (created if missing; the
    server needs pgvector's files: `.ci/run` builds them)."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = 'lrm_pgvector'").fetchone() is None:
            conn.execute("CREATE DATABASE lrm_pgvector")
    url = urlunsplit(urlsplit(POSTGRES_URL)._replace(path="/lrm_pgvector"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def _open(backend: str, folder: Path) -> RollingStore:
    tag = uuid.uuid4().hex[:8]
    if backend == "sqlite":
        return open_store(f"sqlite:///{folder / 'bench.db'}")
    if backend == "postgresql":
        return open_store(f"{POSTGRES_URL}?prefix=vb{tag}_")
    if backend == "postgresql-pgvector":
        return open_store(f"{_pgvector_database()}?prefix=vb{tag}_")
    if backend == "redis":
        return open_store(f"{REDIS_URL}?prefix=vb:{tag}:")
    return open_store("memory://")


def measure(backend: str, queries: int) -> list[list[float]]:
    """Per size, the search times in ms."""
    rng = random.Random(7)
    out = []
    with tempfile.TemporaryDirectory() as folder:
        store = _open(backend, Path(folder))
        try:
            filled = 0
            for size in SIZES:
                _fill(store, "ana", filled, size, rng)
                _fill(store, "bob", filled, size, rng)
                filled = size
                store.vector_search(_vector(rng), model=MODEL, client_id="ana", limit=80)  # warm
                times = []
                for _ in range(queries):
                    query = _vector(rng)
                    began = time.perf_counter()
                    hits = store.vector_search(query, model=MODEL, client_id="ana", limit=80)
                    times.append((time.perf_counter() - began) * 1000)
                    assert len(hits) == 80 and all(h.session_id.startswith("ana-") for h in hits)  # type: ignore[union-attr]
                out.append(times)
        finally:
            store.close()
            _drop_ours(store)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="memory,sqlite,postgresql,postgresql-pgvector,redis")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for backend in args.backends.split(","):
        small, large = measure(backend, args.queries)
        p50s = [percentile(small, 0.5), percentile(large, 0.5)]
        rows.append(
            [
                backend,
                f"{p50s[0]:.1f}",
                f"{percentile(small, 0.95):.1f}",
                f"{p50s[1]:.1f}",
                f"{percentile(large, 0.95):.1f}",
                f"{p50s[1] / p50s[0]:.1f}x",
            ]
        )
        print(f"{backend}: done", file=sys.stderr)
    header = ["backend", "1k p50 ms", "1k p95 ms", "10k p50 ms", "10k p95 ms", "10k/1k"]
    table = markdown_table(header, rows)
    print(table)
    if args.out:
        note = (
            f"\n\n{DIMS} dimensions, limit 80, {args.queries} queries per size; one client's "
            "vectors searched while another client holds as many. `python -m benchmarks.vector_search_cost`\n"
        )
        args.out.write_text("# Dense search cost (brute force, per backend)\n\n" + table + note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
