"""An agent turn with a checkpointer, as the thread grows: milliseconds per turn at 100, 1,000 and
10,000 messages, and what the checkpointed state holds.

One `create_agent` thread with `InMemorySaver` per middleware (none, LangChain's
`SummarizationMiddleware`, our `RollingMemoryMiddleware` on the in-memory store), driven by real
turns (a fake chat model that answers at once, a fake summarizer of fixed length: what is timed
is the graph, the checkpointer and the middleware) until the thread has said `size` messages;
then `--turns` more turns are timed (median, p95). A middleware whose turns grow too slow to
reach a size within `--budget` seconds is reported with where it stopped. No timed assertion
anywhere: the tests count messages, this script prints times.

Before / after a change: run it from each checkout (``PYTHONPATH=/path/to/checkout``) with the
same arguments and compare the tables (`--label` names the column).

    python -m benchmarks.agent_turn_cost --sizes 100 1000 10000 --out benchmarks/results/agent_turn_cost.md
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks._shared import markdown_table, percentile
from langchain_rolling_memory import open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

MAX_TURNS, KEEP_LAST = 12, 6
SUMMARY = " ".join(["The user told the assistant about the week, the family and the plans."] * 3)
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t1", "client_id": "client-1"}}


def _answers() -> Iterator[AIMessage]:
    for i in itertools.count():
        yield AIMessage(f"Answer {i}: that sounds good, tell me more about how it went.")


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return SUMMARY


def summarize_list(messages: list[BaseMessage]) -> str:
    return SUMMARY


def middlewares() -> list[tuple[str, Callable[[], AgentMiddleware[Any, Any, Any] | None]]]:
    summarizer = GenericFakeChatModel(messages=iter(()))
    return [
        ("no memory middleware", lambda: None),
        (
            f"SummarizationMiddleware messages {MAX_TURNS + 1}/{KEEP_LAST}",
            lambda: SummarizationMiddleware(
                summarizer,
                trigger=("messages", MAX_TURNS + 1),
                keep=("messages", KEEP_LAST),
                summarizer=summarize_list,
            ),
        ),
        (
            f"RollingMemoryMiddleware max_turns {MAX_TURNS}/{KEEP_LAST}",
            lambda: RollingMemoryMiddleware(
                store=open_store("memory://"),
                summarizer=summarize,
                max_turns=MAX_TURNS,
                keep_last=KEEP_LAST,
                memory_tools=(),
            ),
        ),
    ]


@dataclass
class Row:
    middleware: str
    size: int
    reached: int
    median_ms: float | None
    p95_ms: float | None
    state_messages: int
    grow_seconds: float


def measure(
    name: str, make: Callable[[], AgentMiddleware[Any, Any, Any] | None], size: int, turns: int, budget: float
) -> Row:
    middleware = make()
    agent = create_agent(
        GenericFakeChatModel(messages=_answers()),
        [],
        system_prompt="You are a friendly assistant.",
        middleware=[middleware] if middleware is not None else [],
        checkpointer=InMemorySaver(),
    )
    said, line = 0, 0
    start = time.perf_counter()
    while said < size:
        agent.invoke({"messages": [HumanMessage(f"Turn {line}: here is what happened today.")]}, CONFIG)
        said, line = said + 2, line + 1
        if time.perf_counter() - start > budget:
            break
    grown = time.perf_counter() - start
    times: list[float] = []
    if said >= size:
        for _ in range(turns):
            begin = time.perf_counter()
            agent.invoke({"messages": [HumanMessage(f"Turn {line}: and then this happened.")]}, CONFIG)
            times.append((time.perf_counter() - begin) * 1000)
            line += 1
    state = len(agent.get_state(CONFIG).values["messages"])
    return Row(
        name,
        size,
        said,
        statistics.median(times) if times else None,
        percentile(times, 0.95) if times else None,
        state,
        grown,
    )


def table(rows: Sequence[Row], label: str) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    body = [
        [
            r.middleware,
            f"{r.size:,}",
            ms(r.median_ms) if r.median_ms is not None else f"not reached in budget (at {r.reached:,})",
            ms(r.p95_ms),
            f"{r.state_messages:,}",
            f"{r.grow_seconds:.0f}",
        ]
        for r in rows
    ]
    header = [
        "middleware",
        "messages said",
        f"ms per turn, median ({label})",
        "p95",
        "messages in the checkpointed state",
        "seconds to grow",
    ]
    return markdown_table(header, body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--turns", type=int, default=30, help="turns timed at each size (default 30)")
    parser.add_argument("--budget", type=float, default=180.0, help="seconds to grow a thread (default 180)")
    parser.add_argument("--only", nargs="*", default=None, help="middlewares to run (substring of the name)")
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = parser.parse_args(argv)
    rows = []
    for name, make in middlewares():
        if args.only and not any(word in name for word in args.only):
            continue
        for size in args.sizes:
            row = measure(name, make, size, args.turns, args.budget)
            print(f"{name} at {size}: {row.median_ms} ms (state {row.state_messages})", file=sys.stderr)
            rows.append(row)
    intro = (
        f"One thread per middleware and size, `InMemorySaver`, fake models; fold at more than {MAX_TURNS} "
        f"messages, keep {KEEP_LAST}; {args.turns} turns timed once the thread has said the size "
        f"(grown by real turns, within {args.budget:.0f} s).\n"
    )
    text = f"{intro}\n{table(rows, args.label)}\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = "python -m benchmarks.agent_turn_cost " + " ".join(sys.argv[1:] if argv is None else argv)
        args.out.write_text(
            f"# Agent turn cost with a checkpointer\n\n`{command.strip()}`\n\n{text}", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
