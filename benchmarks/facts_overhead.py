"""What client facts cost per turn: time, tokens of the facts block, and prompt-prefix stability.

Runs the same scripted conversation through a plain `RunnableWithMessageHistory` over our
rolling history (no facts) and through `with_rolling_memory` with 0, 20 and 200 facts, on the
backends given, and prints one table. A fake chat model records each request; the summarizer
is a keyless function, so the figures are the library's own overhead (store reads, rendering),
not a provider's latency.

    python -m benchmarks.facts_overhead --turns 40 --backends memory sqlite
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic import Field

from langchain_rolling_memory import (
    MEMORY_MESSAGE_ID,
    RollingStore,
    client_session_config_specs,
    open_store,
    session_history_factory,
    with_rolling_memory,
)


class Model(GenericFakeChatModel):
    requests: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return (previous + " " if previous else "") + " ".join(m.text[:20] for m in messages)


def _store(backend: str, folder: Path, n: int) -> RollingStore:
    urls = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{folder}/bench{n}.db",
        "postgres": f"postgresql://postgres@127.0.0.1:5432/test?prefix=bench{n}_{int(time.time())}_",
        "redis": f"redis://127.0.0.1:6379/0?prefix=bench{n}:{int(time.time())}:",
    }
    return open_store(urls[backend])


def run(backend: str, facts: int | None, turns: int, folder: Path, n: int) -> dict[str, Any]:
    store = _store(backend, folder, n)
    model = Model(messages=iter([AIMessage(f"answer {i}") for i in range(turns)]))
    options = {"max_turns": 12, "keep_last": 6}
    if facts is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chat: Any = RunnableWithMessageHistory(
                model,
                session_history_factory(store, summarize, **options),
                history_factory_config=client_session_config_specs(),
            )
    else:
        for i in range(facts):
            store.add_fact(
                "client",
                f"Fact number {i} about the client's deliveries",
                key=f"k{i}" if i % 4 == 0 else None,
            )
        chat = with_rolling_memory(model, store=store, summarizer=summarize, **options)
    config = {"configurable": {"client_id": "client", "session_id": "session"}}
    times = []
    for i in range(turns):
        start = time.perf_counter()
        chat.invoke([HumanMessage(f"question {i} about my order")], config=config)
        times.append((time.perf_counter() - start) * 1000)
    heads = [r[0] for r in model.requests if r and r[0].id == MEMORY_MESSAGE_ID]
    same = sum(a == b for a, b in itertools.pairwise(heads))
    block = count_tokens_approximately([heads[0]]) if heads else 0
    store.forget("client")
    store.close()
    return {
        "backend": backend,
        "chain": "plain RunnableWithMessageHistory"
        if facts is None
        else f"with_rolling_memory, {facts} facts",
        "median_ms": statistics.median(times),
        "p90_ms": sorted(times)[int(0.9 * (len(times) - 1))],
        "memory_tokens": block,
        "stable": f"{same}/{max(0, len(heads) - 1)}",
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--backends", nargs="+", default=["memory", "sqlite"])
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        n = 0
        for backend in args.backends:
            for facts in (None, 0, 20, 200):
                n += 1
                rows.append(run(backend, facts, args.turns, Path(folder), n))
    print(f"{args.turns} turns, max_turns=12, keep_last=6, facts budget 400 tokens\n")
    print(
        "| backend | chain | median ms/turn | p90 ms/turn | memory message tokens | same memory message as previous turn |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['backend']} | {r['chain']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
            f"{r['memory_tokens']} | {r['stable']} |"
        )


if __name__ == "__main__":
    main()
