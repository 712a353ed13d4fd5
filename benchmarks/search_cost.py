"""Time of one store search, and of one turn's recall, as a client's transcript grows; beside a full scan.

Two corpora, each at 1,000 then 10,000 messages of one client:

- ``synthetic``: sessions of 100 messages drawn from a 50-word vocabulary (seeded), asked
  "When did we talk about the X and Y?": every query word is in ~6.5% of the messages, the
  worst case for an inverted index (long posting lists to rank).
- ``locomo``: the LoCoMo conversations (read at run time from ``shared/data/locomo`` or
  ``$ROLLING_MEMORY_LOCOMO``, never copied) concatenated, then repeated, with their sessions,
  speakers and dates; asked LoCoMo's own questions about the conversations inside the first
  1,000 messages, so that both sizes answer the same questions.

For SQLite (FTS5), PostgreSQL (tsvector + GIN) and Redis (no search module here: the
documented fallback, BM25 in Python over the scope's entries) it times:

- ``search``: ``store.search(question, client_id=...)``, limit 10;
- ``search + injection``: the recall step of a turn, ``Recaller(store, 2000).recall(...)``
  from `langchain_rolling_memory.engine.recaller` (search with the limit sized to the budget by
  `recaller.recall_limit`, the answers that follow recalled questions, the quoted and dated
  block rendered within 2,000 tokens);
- ``full scan``: every message of the client read back and ranked in Python with `Bm25Index`,
  what recall would cost without an index (fewer questions: it is slow).

The first search after filling the store is timed apart (in the note under the table): SQLite
indexes the messages appended since the last search then, so it pays for the whole fill.

``--huge-mb 5`` adds to each filled store one message of that many megabytes (a pasted
document: the corpus's words, drawn at random) in a session of its own, before anything is
timed: a search should cost what it costs without it.

Prints p50 and p95 milliseconds and the 10k/1k ratio of the p50 for both corpora side by side,
and writes the table as Markdown. Timings are wall clock on a shared machine: read the p50.

    python -m benchmarks.search_cost --out benchmarks/results/search_cost.md
    python -m benchmarks.search_cost --backends redis --huge-mb 5
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from benchmarks._shared import locomo_path, markdown_table, percentile
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory import open_store
from langchain_rolling_memory.core.lexical_search import Bm25Index, message_index_text, query_terms
from langchain_rolling_memory.engine.recaller import Recaller, recall_limit
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory_lab.locomo import EvalConversation, read_locomo

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
SIZES = (1_000, 10_000)
QUERIES = 40
SCANS = 8
RECALL_TOKENS = 2000
WHATS = ("search", "search + injection", "full scan")

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


@dataclass(frozen=True)
class Batch:
    """One session's messages to append, with their dates (None: now)."""

    session: str
    messages: list[BaseMessage]
    created_at: list[float] | None = None


@dataclass(frozen=True)
class Corpus:
    """A way to fill one client's transcript to `n` messages, and the questions asked of it."""

    name: str
    batches: Callable[[int], list[Batch]]
    questions: list[str]


# ------------------------------------------------------------------------------ corpora


def _synthetic_batches(n: int) -> list[Batch]:
    rng = random.Random(n)
    out = []
    for start in range(0, n, 100):
        messages: list[BaseMessage] = []
        for i in range(start, start + 100):
            words = rng.choices(_VOCABULARY, k=4) + rng.choices(_FILLER, k=8)
            rng.shuffle(words)
            messages.append(HumanMessage(" ".join(words)) if i % 2 == 0 else AIMessage(" ".join(words)))
        out.append(Batch(f"s{start // 100}", messages))
    return out


def synthetic() -> Corpus:
    rng = random.Random(7)
    questions = [
        f"When did we talk about the {rng.choice(_VOCABULARY)} and {rng.choice(_VOCABULARY)}?"
        for _ in range(QUERIES)
    ]
    return Corpus("synthetic", _synthetic_batches, questions)


def _locomo_batches(conversations: Sequence[EvalConversation], n: int) -> list[Batch]:
    """The conversations one after the other, repeated until `n` messages; each LoCoMo session
    is one session of the client (a repeat gets new session ids, same dates)."""
    out: list[Batch] = []
    left = n
    for round_, (number, conversation) in zip(
        itertools.count(), itertools.cycle(list(enumerate(conversations)))
    ):
        if left <= 0:
            break
        for session, group in itertools.groupby(conversation.turns, key=lambda t: t.session):
            turns = list(group)[:left]
            if not turns:
                break
            dates = [t.created_at if t.created_at is not None else 0.0 for t in turns]
            name = f"r{round_ // len(conversations)}-c{number}-s{session}"
            out.append(Batch(name, [t.message for t in turns], dates))
            left -= len(turns)
    return out


def locomo() -> Corpus:
    conversations = read_locomo(locomo_path())
    # The questions of the conversations wholly inside the first 1,000 messages: both sizes
    # hold their answers, so the 10k/1k ratio compares the same work on a larger index.
    inside: list[str] = []
    seen = 0
    for conversation in conversations:
        seen += len(conversation.turns)
        if seen > SIZES[0]:
            break
        inside += [q.question for q in conversation.questions]
    questions = random.Random(7).sample(inside, min(QUERIES, len(inside)))
    return Corpus("locomo", lambda n: _locomo_batches(conversations, n), questions)


CORPORA: dict[str, Callable[[], Corpus]] = {"synthetic": synthetic, "locomo": locomo}


# ------------------------------------------------------------------------------ timing


def _fill(store: RollingStore, client: str, batches: list[Batch], huge_mb: float = 0) -> None:
    for batch in batches:
        store.append(
            f"{client}-{batch.session}", batch.messages, client_id=client, created_at=batch.created_at
        )
    if huge_mb > 0:
        store.append(f"{client}-huge", [HumanMessage(_huge_text(huge_mb))], client_id=client)


def _huge_text(megabytes: float) -> str:
    """About `megabytes` MB of the synthetic corpus's words, drawn at random (seeded)."""
    rng = random.Random(5)
    words = rng.choices(_VOCABULARY + _FILLER, k=int(megabytes * 1_000_000 / 6))
    return " ".join(words)


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
        return open_store(f"sqlite:///{folder / f'{prefix}search.db'}")
    if kind == "postgresql":
        return open_store(f"{POSTGRES_URL}?prefix={prefix}")
    return open_store(f"{REDIS_URL}?prefix={prefix.replace('_', ':')}")


Times = dict[tuple[str, str, str, int], list[float]]
"""(corpus, backend, what, messages) -> milliseconds per question."""


def measure(corpus: Corpus, kind: str, folder: Path, times: Times, huge_mb: float = 0) -> None:
    """Fill a fresh store at each size (and one huge message if `huge_mb`), time the three
    ways to find the questions, erase it."""
    for n in SIZES:
        store = _open(kind, folder)
        client = f"client-{n}"
        recaller = Recaller(store, RECALL_TOKENS)
        start = time.perf_counter()
        try:
            _fill(store, client, corpus.batches(n), huge_mb)
            filled = time.perf_counter() - start
            # The first search after the fill: SQLite indexes the whole fill then (lazy index).
            first = time.perf_counter()
            store.search(corpus.questions[0], client_id=client)
            times[(corpus.name, kind, "first search", n)] = [(time.perf_counter() - first) * 1000]
            times[(corpus.name, kind, "search", n)] = _time(
                lambda q, s=store, c=client: s.search(q, client_id=c), corpus.questions
            )
            # A new session of the client asks: its own view is empty, nothing is skipped.
            times[(corpus.name, kind, "search + injection", n)] = _time(
                lambda q, r=recaller, c=client: r.recall(q, client_id=c, session_id=f"{c}-asking"),
                corpus.questions,
            )
            times[(corpus.name, kind, "full scan", n)] = _time(
                lambda q, s=store, c=client: _full_scan(s, c, q), corpus.questions[:SCANS]
            )
        finally:
            store.forget(client)
            _drop_ours(store)  # its tables or keys too, not only the client's rows
            store.close()
        p50 = percentile(times[(corpus.name, kind, "search", n)], 0.5)
        print(
            f"{corpus.name} {kind} {n}: filled in {filled:.1f} s, first search "
            f"{times[(corpus.name, kind, 'first search', n)][0]:.0f} ms, search p50 {p50:.2f} ms, "
            f"{time.perf_counter() - start:.1f} s in all",
            file=sys.stderr,
        )


def table(times: Times, corpora: Sequence[str], kinds: Sequence[str]) -> str:
    """One row per backend and measure; per corpus: p50 and p95 at each size, 10k/1k of the p50."""
    small, large = SIZES
    header = ["backend", "what"]
    for name in corpora:
        header += [f"{name} p50 1k", "p50 10k", "p95 1k", "p95 10k", "10k/1k"]
    rows: list[list[object]] = []
    for kind in kinds:
        for what in WHATS:
            row: list[object] = [kind, what]
            for name in corpora:
                one, ten = times[(name, kind, what, small)], times[(name, kind, what, large)]
                row += [
                    f"{percentile(one, 0.5):.2f}",
                    f"{percentile(ten, 0.5):.2f}",
                    f"{percentile(one, 0.95):.2f}",
                    f"{percentile(ten, 0.95):.2f}",
                    f"{percentile(ten, 0.5) / percentile(one, 0.5):.2f}x",
                ]
            rows.append(row)
    return markdown_table(header, rows, "ll" + "r" * (len(header) - 2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the table as Markdown here")
    parser.add_argument("--backends", default="sqlite,postgresql,redis")
    parser.add_argument("--corpora", default="synthetic,locomo")
    parser.add_argument(
        "--huge-mb", type=float, default=0, help="add one message of this many MB to each store"
    )
    args = parser.parse_args(argv)
    kinds, names = args.backends.split(","), args.corpora.split(",")
    corpora = [CORPORA[name]() for name in names]
    times: Times = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for corpus in corpora:
            for kind in kinds:
                measure(corpus, kind, Path(tmp), times, args.huge_mb)
    elapsed = time.perf_counter() - start
    text = table(times, names, kinds)
    firsts = "; ".join(
        f"{name} {kind} {n:,}: {times[(name, kind, 'first search', n)][0]:.0f} ms"
        for name in names
        for kind in kinds
        for n in SIZES
    )
    counts = ", ".join(f"{c.name}: {len(c.questions)}" for c in corpora)
    note = (
        f"Milliseconds per question (wall clock), questions per size ({counts}); full scan: the first "
        f"{SCANS}. search: limit 10. search + injection: `Recaller(store, {RECALL_TOKENS}).recall` "
        f"(limit {recall_limit(RECALL_TOKENS)}, neighbours, rendering). {elapsed:.0f} s in all. "
        f"The first search after filling the store (not in the table; SQLite indexes the fill "
        f"then): {firsts}."
    )
    if args.huge_mb:
        note += f" Each store also holds one message of {args.huge_mb:g} MB (`--huge-mb`)."
    print(text)
    print(note)
    if args.out:
        command = "python -m benchmarks.search_cost --out benchmarks/results/search_cost.md"
        args.out.write_text(f"# search_cost\n\n`{command}`\n\n{text}\n\n{note}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
