"""`search_cost`'s search and search + injection on two checkouts, paired question by question.

Each checkout runs in a process of its own (imported from its own folder, ``PYTHONPATH``), on
its own tables or keys, filled with the same corpus (`search_cost.CORPORA`) at 10,000 messages
of one client (and one message of ``--huge-mb`` MB, as `search_cost --huge-mb`). The two
processes then take turns: each question is asked of A then B, or B then A (alternating), so
that the load of other processes on a shared machine falls on both alike; ``--rounds`` times
over the questions. The table gives each checkout's p50 and the median of the paired B - A
differences (negative: B is faster).

    python -m benchmarks.paired_search_cost --a /path/to/old/checkout --b . --backends postgresql,redis

Each checkout must hold `benchmarks/search_cost.py` with ``CORPORA``, ``_fill``, ``_open`` and
``RECALL_TOKENS`` (true since 2026-12-03).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._shared import markdown_table, percentile

SIZE = 10_000

_WORKER = """
import sys, time
from benchmarks import search_cost as sc
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory.engine.recaller import Recaller

kind, name, size, huge, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
from pathlib import Path
store = sc._open(kind, Path(folder))
corpus = sc.CORPORA[name]()
client = f"client-{size}"
recaller = Recaller(store, sc.RECALL_TOKENS)
try:
    sc._fill(store, client, corpus.batches(size), huge)
    store.search(corpus.questions[0], client_id=client)  # the first search, apart
    print(len(corpus.questions), flush=True)
    for line in sys.stdin:
        what, i = line.split()
        question = corpus.questions[int(i)]
        start = time.perf_counter()
        if what == "search":
            store.search(question, client_id=client)
        else:
            recaller.recall(question, client_id=client, session_id=f"{client}-asking")
        print((time.perf_counter() - start) * 1000, flush=True)
finally:
    store.forget(client)
    _drop_ours(store)
    store.close()
"""

WHATS = ("search", "recall")
LABELS = {"search": "search", "recall": "search + injection"}


class Worker:
    """One checkout's process: a filled store answering timing requests line by line."""

    def __init__(self, checkout: Path, kind: str, corpus: str, huge_mb: float, folder: str) -> None:
        path = f"{checkout}{os.pathsep}{checkout / 'lab'}"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, kind, corpus, str(SIZE), str(huge_mb), folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": path},
        )

    def ready(self) -> int:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            msg = "a worker failed before it was ready (see its stderr)"
            raise RuntimeError(msg)
        return int(line)

    def time(self, what: str, question: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{what} {question}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def paired(
    a: Path, b: Path, kind: str, corpus: str, rounds: int, huge_mb: float
) -> dict[str, tuple[list[float], list[float]]]:
    """Milliseconds per question of A and B, what by what, taken in turns."""
    with tempfile.TemporaryDirectory() as folder:
        workers = []
        for checkout in (a, b):  # filled one after the other: neither fill slows the other
            worker = Worker(checkout, kind, corpus, huge_mb, folder)
            questions = worker.ready()
            workers.append(worker)
        out: dict[str, tuple[list[float], list[float]]] = {what: ([], []) for what in WHATS}
        try:
            for what in WHATS:
                for i in range(questions):  # warm both, untimed
                    for worker in workers:
                        worker.time(what, i)
                for r in range(rounds):
                    for i in range(questions):
                        order = (0, 1) if (i + r) % 2 == 0 else (1, 0)
                        for side in order:
                            out[what][side].append(workers[side].time(what, i))
        finally:
            for worker in workers:
                worker.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", type=Path, required=True, help="checkout A (e.g. the commit before)")
    parser.add_argument("--b", type=Path, default=Path(), help="checkout B (default: this one)")
    parser.add_argument("--backends", default="postgresql,redis")
    parser.add_argument("--corpora", default="synthetic,locomo")
    parser.add_argument("--rounds", type=int, default=5, help="times each question is asked of each")
    parser.add_argument("--huge-mb", type=float, default=0, help="add one message of this many MB")
    parser.add_argument("--out", type=Path, help="append the table as Markdown here")
    args = parser.parse_args(argv)
    a, b = args.a.resolve(), args.b.resolve()
    rows: list[list[object]] = []
    for kind in args.backends.split(","):
        for corpus in args.corpora.split(","):
            times = paired(a, b, kind, corpus, args.rounds, args.huge_mb)
            for what in WHATS:
                ta, tb = times[what]
                diff = statistics.median(y - x for x, y in zip(ta, tb, strict=True))
                rows.append(
                    [
                        kind,
                        corpus,
                        LABELS[what],
                        f"{percentile(ta, 0.5):.2f}",
                        f"{percentile(tb, 0.5):.2f}",
                        f"{diff:+.2f}",
                        f"{percentile(ta, 0.95):.2f}",
                        f"{percentile(tb, 0.95):.2f}",
                    ]
                )
                print(" | ".join(str(c) for c in rows[-1]), file=sys.stderr)
    header = ["backend", "corpus", "what", "A p50", "B p50", "B - A (median of pairs)", "A p95", "B p95"]
    text = markdown_table(header, rows, "lll" + "r" * 5)
    note = (
        f"Milliseconds per question at {SIZE:,} messages of one client, {args.rounds} rounds of the "
        f"corpus's questions, A and B in turns. A: {a}; B: {b}."
        + (f" Each store also holds one message of {args.huge_mb:g} MB." if args.huge_mb else "")
    )
    print(text)
    print(note)
    if args.out:
        with args.out.open("a", encoding="utf-8") as out:
            out.write(f"\n{text}\n\n{note}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
