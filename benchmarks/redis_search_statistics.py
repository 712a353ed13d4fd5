"""Redis search with the client's statistics against the visit of every session, paired in one
process: two clients hold the same transcript, one searches from its statistics, the other
(its statistics replaced by the `#ttl` mark, what a client whose sessions expire keeps) visits
each of its sessions, as every client search did before; the questions alternate between them.

Same corpora and questions as `search_cost` (synthetic and LoCoMo, 1,000 and 10,000 messages);
times ``store.search`` (limit 10) and ``Recaller(store, 2000).recall`` (search + injection),
checks that both clients get the same hits with the same scores, and prints p50/p95 (ms).

    python -m benchmarks.redis_search_statistics
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from benchmarks._shared import markdown_table, percentile
from benchmarks.search_cost import CORPORA, REDIS_URL, SIZES, _fill
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory import open_store
from langchain_rolling_memory.engine.recaller import Recaller

ROUNDS = 3


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _hits(found: list[Any]) -> list[tuple[Any, ...]]:
    """Hits without their client's name (the two clients' session ids differ only by it)."""
    return [(h.key[0], str(h.key[1]).partition("-")[2], h.key[2], h.score) for h in found]


def main() -> int:
    rows: list[list[object]] = []
    for name, make in CORPORA.items():
        corpus = make()
        for n in SIZES:
            store = open_store(f"{REDIS_URL}?prefix=benchstat{n}:")
            try:
                for client in ("kept", "visits"):
                    _fill(store, client, corpus.batches(n))
                with redis.Redis.from_url(REDIS_URL) as r:
                    key = store.keys.client_terms("visits")  # type: ignore[attr-defined]
                    r.delete(key)
                    r.hset(key, "#ttl", 1)
                times: dict[tuple[str, str], list[float]] = {}
                recallers = {c: Recaller(store, 2000) for c in ("kept", "visits")}
                for q in corpus.questions:  # the same hits, scores to the bit
                    a, b = (_hits(store.search(q, client_id=c)) for c in ("kept", "visits"))
                    assert a == b, (q, a, b)
                for _ in range(ROUNDS):
                    for q in corpus.questions:
                        for client in ("kept", "visits"):
                            times.setdefault(("search", client), []).append(
                                _timed(lambda c=client, q=q, s=store: s.search(q, client_id=c))
                            )
                            times.setdefault(("search + injection", client), []).append(
                                _timed(
                                    lambda c=client, q=q, r=recallers: r[c].recall(
                                        q, client_id=c, session_id=f"{c}-asking"
                                    )
                                )
                            )
                for what in ("search", "search + injection"):
                    before, after = times[(what, "visits")], times[(what, "kept")]
                    rows.append(
                        [
                            name,
                            f"{n:,}",
                            what,
                            f"{percentile(before, 0.5):.2f} -> {percentile(after, 0.5):.2f}",
                            f"{percentile(before, 0.95):.2f} -> {percentile(after, 0.95):.2f}",
                        ]
                    )
                print(rows[-2], rows[-1], file=sys.stderr)
            finally:
                store.forget("kept")
                store.forget("visits")
                _drop_ours(store)
                store.close()
    header = ["corpus", "messages", "what", "p50 every session -> statistics", "p95"]
    print(markdown_table(header, rows, "lllrr"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
