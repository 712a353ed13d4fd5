"""What our layer costs per turn, against a bare `InMemoryChatMessageHistory` and against the
floor of each backend (one raw read plus one raw write), with a profile of what sits above.

A turn is what `RunnableWithMessageHistory` does to a history: build it (the factory), read
`.messages`, then `add_messages([user, reply])`. The floor is the backend's own primitives for
the same work with nothing of ours around them: read the unsummarized tail (the backend's `read`) and append
two pre-serialized rows (the backend's `append`). Between them: validation, serialization, token counts,
the summary read that notices a compaction landed, the policy, the view. *Through the runnable*:
the same turn made by `with_rolling_memory` around a chain that answers at once (what the
runnable adds: config, ids, the memory reads, the chain's run and callbacks). Medians of
interleaved rounds (the machine is shared: medians, not means).

    python -m benchmarks.overhead --out benchmarks/results
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from benchmarks._shared import markdown_table
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory import (
    RollingStore,
    RollingSummaryChatMessageHistory,
    open_store,
    with_rolling_memory,
)
from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.serde import dumps_message
from langchain_rolling_memory.stores.contract import AppendBatch

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
MAX_TURNS, KEEP_LAST = 12, 6


def exchange(i: int) -> list[BaseMessage]:
    return [
        HumanMessage(f"question {i}: when does the parcel arrive, and can you leave it with the neighbour?"),
        AIMessage(
            f"answer {i}: on saturday morning between 9 and 11; yes, I noted the neighbour at number 12."
        ),
    ]


def instant_summary(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{previous[:200]} then {len(messages)} messages about a parcel".strip()


Turn = Callable[[int], None]


def bare_memory() -> Turn:
    histories: dict[str, InMemoryChatMessageHistory] = {}

    def turn(i: int) -> None:
        history = histories.setdefault("s", InMemoryChatMessageHistory())
        _ = history.messages
        history.add_messages(exchange(i))

    return turn


def floor(store: RollingStore) -> Turn:
    """One raw tail read and one raw append of two pre-serialized rows (sessions of 12)."""
    rows = [[(dumps_message(m), count_tokens([m])) for m in exchange(i)] for i in range(64)]
    session = f"floor-{uuid.uuid4().hex[:6]}"

    backend = store.backend

    def turn(i: int) -> None:
        sid = f"{session}-{i // (MAX_TURNS // 2)}"
        backend.read(sid, 0, MAX_TURNS * 3 + 1, True)
        backend.append(AppendBatch(sid, None, rows[i % 64], time.time()))

    return turn


def ours(store: RollingStore, *, compactions: bool) -> Turn:
    """Our history as a factory makes it; sessions of 6 turns never compact, one long session does."""
    session = f"ours-{uuid.uuid4().hex[:6]}"

    def turn(i: int) -> None:
        sid = session if compactions else f"{session}-{i // (MAX_TURNS // 2)}"
        history = RollingSummaryChatMessageHistory(
            sid,
            summarizer=instant_summary,
            store=store,
            max_turns=MAX_TURNS,
            keep_last=KEEP_LAST,
            timeout=None,
        )
        _ = history.messages
        history.add_messages(exchange(i))

    return turn


def through_runnable(store: RollingStore) -> Turn:
    """The turn of `ours` (sessions of 6 turns) made by `with_rolling_memory` around a chain
    that answers at once: what the runnable adds around the history."""
    session = f"run-{uuid.uuid4().hex[:6]}"
    answers = [exchange(i)[1] for i in range(64)]

    def answer(messages: list[BaseMessage]) -> BaseMessage:
        return answers[len(messages) % 64]

    chat = with_rolling_memory(
        RunnableLambda(answer),
        store=store,
        summarizer=instant_summary,
        max_turns=MAX_TURNS,
        keep_last=KEEP_LAST,
        timeout=None,
    )

    def turn(i: int) -> None:
        sid = f"{session}-{i // (MAX_TURNS // 2)}"
        chat.invoke([exchange(i)[0]], config={"configurable": {"session_id": sid}})

    return turn


def measure(turns: dict[str, Turn], rounds: int, per_round: int) -> dict[str, float]:
    """Median microseconds per turn, rounds interleaved across the candidates."""
    for turn in turns.values():  # warm-up: connections, statements, imports
        for i in range(10):
            turn(i)
    samples: dict[str, list[float]] = {name: [] for name in turns}
    counter = 10
    for _ in range(rounds):
        for name, turn in turns.items():
            for _ in range(per_round):
                start = time.perf_counter()
                turn(counter)
                samples[name].append((time.perf_counter() - start) * 1e6)
                counter += 1
    return {name: statistics.median(values) for name, values in samples.items()}


MACHINERY = ("runnables", "callbacks", "tracers")
"""langchain-core's packages that run a Runnable: config, callbacks, runs, listeners."""


def profile(turn: Turn, turns: int, top: int = 14) -> str:
    """The functions where a turn spends its own time (cProfile, tottime)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(turns):
        turn(10_000 + i)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_, calls, tottime, _cumtime, _) in sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: -item[1][2],
    )[:top]:
        where = filename.split("site-packages/")[-1].split("/work/")[-1] if "/" in filename else filename
        rows.append(
            [
                f"`{name}`",
                f"{where}:{line}",
                f"{calls / turns:.1f}",
                f"{1e6 * tottime / turns:.0f}",
                f"{100 * tottime / total:.0f}%",
            ]
        )
    machinery = sum(
        tottime
        for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items()  # type: ignore[attr-defined]
        if any(f"langchain_core/{part}/" in filename for part in MACHINERY)
    )
    return (
        markdown_table(["function", "where", "calls per turn", "own µs per turn", "share"], rows, "llrrr")
        + f"\n\nOwn time in langchain-core's {', '.join(MACHINERY)}: {1e6 * machinery / turns:.0f} µs "
        f"per turn ({100 * machinery / total:.0f}%).\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=12)
    parser.add_argument("--backends", nargs="+", default=["memory", "sqlite", "postgresql", "redis"])
    parser.add_argument("--out", type=Path, help="folder for overhead.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = []
    profiles = []
    with TemporaryDirectory() as tmp:
        prefix = f"ovh{uuid.uuid4().hex[:6]}_"
        urls = {
            "memory": "memory://",
            "sqlite": f"sqlite:///{tmp}/overhead.db?prefix={prefix}",
            "postgresql": f"{POSTGRES_URL}?prefix={prefix}",
            "redis": f"{REDIS_URL}?prefix={prefix}",
        }
        bare = measure({"bare": bare_memory()}, args.rounds, args.per_round)["bare"]
        for backend in args.backends:
            try:
                store = open_store(urls[backend])
            except Exception as exc:
                print(f"{backend}: could not open: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            try:
                result = measure(
                    {
                        "floor": floor(store),
                        "ours": ours(store, compactions=False),
                        "ours+compactions": ours(store, compactions=True),
                        "runnable": through_runnable(store),
                    },
                    args.rounds,
                    args.per_round,
                )
                rows.append(
                    [
                        backend,
                        f"{bare:.0f}",
                        f"{result['floor']:.0f}",
                        f"{result['ours']:.0f}",
                        f"{result['ours'] - result['floor']:+.0f}",
                        f"{result['ours'] / result['floor']:.2f}x",
                        f"{result['ours+compactions']:.0f}",
                        f"{result['runnable']:.0f}",
                        f"{result['runnable'] - result['ours']:+.0f}",
                    ]
                )
                print(rows[-1], flush=True)
                if backend in ("sqlite", "postgresql"):
                    profiles.append(
                        f"### {backend}: where a turn of ours spends its time\n\n"
                        f"{profile(ours(store, compactions=False), 300)}\n\n"
                        f"### {backend}: where a turn through `with_rolling_memory` spends its time\n\n"
                        f"{profile(through_runnable(store), 300)}\n"
                    )
            finally:
                _drop_ours(store)
                store.close()
    header = [
        "backend",
        "bare InMemoryChatMessageHistory µs",
        "floor: raw read + raw write µs",
        "ours µs",
        "ours above the floor µs",
        "ours / floor",
        "ours with compactions (instant summarizer) µs",
        "through with_rolling_memory µs",
        "the runnable above ours µs",
    ]
    text = (
        "# Overhead of our layer per turn\n\n"
        f"`python -m benchmarks.overhead{_args(argv)}` "
        f"({time.perf_counter() - started:.0f} s; {os.cpu_count()} CPUs shared with other work)\n\n"
        "A turn: build the history (a factory does, at every call), read `.messages`, `add_messages("
        "[user, reply])`. *Floor*: the same backend's primitives alone, one tail read (`read`) and one "
        "append of two pre-serialized rows (the backend's `append`). *Ours*: `RollingSummaryChatMessageHistory("
        f"max_turns={MAX_TURNS}, keep_last={KEEP_LAST})` in sessions of 6 turns (no compaction due); *with "
        "compactions*: one long session, an instant summarizer, a compaction every 4 turns inline; *through "
        "with_rolling_memory*: the turn of *ours* made by `with_rolling_memory` around a chain that answers "
        "at once (anonymous sessions: no facts to read). Median "
        f"of {args.rounds} interleaved rounds of {args.per_round} turns.\n\n"
        f"{markdown_table(header, rows)}\n\n" + "\n".join(profiles)
    )
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "overhead.md").write_text(text, encoding="utf-8")
    return 0


def _args(argv: Sequence[str] | None) -> str:
    """The command-line arguments as typed, for the reproduce line of the results."""
    given = list(sys.argv[1:] if argv is None else argv)
    return " " + " ".join(given) if given else ""


if __name__ == "__main__":
    raise SystemExit(main())
