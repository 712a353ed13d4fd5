"""Time of one store search as a client's transcript grows, beside a full scan in Python.

For SQLite (FTS5), PostgreSQL (tsvector + GIN) and Redis (no search module: the documented
fallback, BM25 in Python over the scope's entries), one client gets 1,000 then 10,000
messages (sessions of 100, words drawn from a fixed vocabulary, seeded), and the same
questions are searched (``store.search(question, client_id=...)``, limit 10; no injection).
The full scan reads every message of the client back and ranks them in Python with
`Bm25Index`: what recall would cost without an index. Prints p50 and p95 milliseconds and
the 10k/1k ratio of the p50, and writes the table as Markdown.

    python -m benchmarks.search_cost --out benchmarks/results/search_cost.md
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from benchmarks._shared import markdown_table, percentile
from langchain_rolling_memory import open_store
from langchain_rolling_memory.search import Bm25Index, message_index_text, query_terms
from langchain_rolling_memory.stores import RollingStore

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
SIZES = (1_000, 10_000)
QUERIES = 40

_VOCABULARY = [
    "delivery",
    "parcel",
    "saturday",
    "address",
    "invoice",
    "refund",
    "paris",
    "lyon",
    "train",
    "cat",
    "oscar",
    "garden",
    "tomato",
    "birthday",
    "sister",
    "brother",
    "wedding",
    "painting",
    "guitar",
    "concert",
    "museum",
    "hiking",
    "camping",
    "beach",
    "summer",
    "winter",
    "allergy",
    "peanuts",
    "doctor",
    "school",
    "teacher",
    "project",
    "deadline",
    "meeting",
    "budget",
    "coffee",
    "recipe",
    "pasta",
    "marathon",
    "running",
    "yoga",
    "football",
    "match",
    "ticket",
    "flight",
    "hotel",
    "passport",
    "visa",
    "adoption",
    "dog",
]
_FILLER = [
    "i",
    "we",
    "the",
    "a",
    "to",
    "and",
    "it",
    "was",
    "so",
    "that",
    "really",
    "just",
    "my",
    "for",
    "with",
    "on",
    "at",
    "of",
    "you",
]


def _message(rng: random.Random, i: int) -> HumanMessage | AIMessage:
    words = rng.choices(_VOCABULARY, k=4) + rng.choices(_FILLER, k=8)
    rng.shuffle(words)
    text = " ".join(words)
    return HumanMessage(text) if i % 2 == 0 else AIMessage(text)


def _fill(store: RollingStore, client: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    for start in range(0, n, 100):
        session = f"{client}-s{start // 100}"
        store.append(session, [_message(rng, start + i) for i in range(100)], client_id=client)


def _questions(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"When did we talk about the {rng.choice(_VOCABULARY)} and {rng.choice(_VOCABULARY)}?"
        for _ in range(QUERIES)
    ]


def _full_scan(store: RollingStore, client: str, question: str) -> int:
    index = Bm25Index()
    for session in store.sessions(client):
        for row in store.read(session):
            index.add((session, row.seq), message_index_text(row.message))
    return len(index.search(query_terms(question), limit=10))


def _time(fn: Callable[[str], object], questions: list[str]) -> list[float]:
    fn(questions[0])  # warm caches and connections
    out = []
    for question in questions:
        start = time.perf_counter()
        fn(question)
        out.append((time.perf_counter() - start) * 1000)
    return out


def _open(kind: str, folder: Path) -> RollingStore:
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    if kind == "sqlite":
        return open_store(f"sqlite:///{folder / 'search.db'}?prefix={prefix}")
    if kind == "postgresql":
        return open_store(f"{POSTGRES_URL}?prefix={prefix}")
    return open_store(f"{REDIS_URL}?prefix={prefix.replace('_', ':')}")


def _wipe(store: RollingStore, client: str) -> None:
    store.forget(client)
    store.close()


def run(kinds: list[str]) -> list[list[object]]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            p50: dict[tuple[str, int], float] = {}
            for n in SIZES:
                store = _open(kind, Path(tmp))
                client = f"client-{n}"
                try:
                    _fill(store, client, n, seed=n)
                    questions = _questions(seed=7)
                    searched = _time(lambda q, s=store, c=client: s.search(q, client_id=c), questions)
                    scanned = _time(lambda q, s=store, c=client: _full_scan(s, c, q), questions[:10])
                finally:
                    _wipe(store, client)
                for what, times in (("search", searched), ("full scan", scanned)):
                    p50[(what, n)] = percentile(times, 0.5)
                    rows.append(
                        [kind, what, f"{n:,}", f"{p50[(what, n)]:.2f}", f"{percentile(times, 0.95):.2f}"]
                    )
                print(f"{kind} {n}: search p50 {p50[('search', n)]:.2f} ms", file=sys.stderr)
            for what in ("search", "full scan"):
                ratio = p50[(what, SIZES[1])] / p50[(what, SIZES[0])]
                rows.append([kind, what, "10k/1k", f"{ratio:.2f}x", ""])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="write the table as Markdown here")
    parser.add_argument("--backends", default="sqlite,postgresql,redis")
    args = parser.parse_args(argv)
    rows = run(args.backends.split(","))
    table = markdown_table(["backend", "what", "messages", "p50 ms", "p95 ms"], rows, "lllrr")
    print(table)
    if args.out:
        args.out.write_text(f"# search_cost\n\n{table}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
