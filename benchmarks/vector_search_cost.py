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

Prints p50 and p95 milliseconds per size and the ratio of the last size's p50 to the first's;
wall clock on a shared machine: read the p50. ``--sizes 1000,10000,30000`` goes further (past
about 20,000 vectors of 384 dimensions, a SQLite client's vectors outgrow the connection's 64 MiB
page cache under the WITHOUT ROWID layout of schema 6-7).

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


def measure(backend: str, queries: int, sizes: tuple[int, ...] = SIZES) -> list[list[float]]:
    """Per size, the search times in ms."""
    rng = random.Random(7)
    out = []
    with tempfile.TemporaryDirectory() as folder:
        store = _open(backend, Path(folder))
        try:
            filled = 0
            for size in sizes:
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
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="vectors per client, ascending")
    args = parser.parse_args(argv)
    sizes = tuple(int(n) for n in args.sizes.split(","))
    if len(sizes) < 2 or list(sizes) != sorted(set(sizes)) or sizes[0] < 100:
        parser.error(f"--sizes needs two or more ascending sizes of at least 100, got {args.sizes!r}")
    rows = []
    for backend in args.backends.split(","):
        times = measure(backend, args.queries, sizes)
        p50s = [percentile(t, 0.5) for t in times]
        cells = [f"{v:.1f}" for t, p50 in zip(times, p50s, strict=True) for v in (p50, percentile(t, 0.95))]
        rows.append([backend, *cells, f"{p50s[-1] / p50s[0]:.1f}x"])
        print(f"{backend}: done", file=sys.stderr)
    names = [f"{n // 1000}k" if n % 1000 == 0 else str(n) for n in sizes]
    header = ["backend", *[f"{n} {q} ms" for n in names for q in ("p50", "p95")], f"{names[-1]}/{names[0]}"]
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
