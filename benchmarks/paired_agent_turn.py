"""An agent turn's time on two checkouts, paired: A B A B ..., each run in a fresh process.

A steady agent turn (`create_agent` with `RollingMemoryMiddleware`, a fake chat model that
answers at once, no tool call, the session holding a fact, no compaction due) without and with
a checkpointer (`InMemorySaver`), on each backend: what is timed is the graph, the middleware
and the store's round trips (`benchmarks.round_trips` counts them). Each run prints the median
milliseconds of `--turns` turns after 10 warm-up turns; the table gives, per backend and mode,
the median of the runs' medians with their [min-max], and B/A. The turn's code is sent to each
checkout's interpreter as it is (it imports only the package), so any checkout with the
middleware can be A.

    python -m benchmarks.paired_agent_turn --a /path/to/old/checkout --b . --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._shared import markdown_table

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")

_RUN = """
import json, statistics, sys, time, uuid
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langchain_rolling_memory import RollingMemoryMiddleware, open_store

class Model(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self

def replies():
    while True:
        yield AIMessage("Noted: the parcel goes to the neighbour at number 12.")

url, turns = sys.argv[1], int(sys.argv[2])
out = {}
for checkpointer in (False, True):
    store = open_store(url)
    client, session = f"c-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    store.add_fact(client, "Prefers deliveries on Saturday mornings")
    memory = RollingMemoryMiddleware(
        store=store, summarizer=lambda p, m: "s", client_id=client, max_turns=10_000, keep_last=4
    )
    agent = create_agent(
        Model(messages=replies()), [], middleware=[memory],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    config = {"configurable": {"thread_id": session}}
    times = []
    for i in range(10 + turns):
        start = time.perf_counter()
        agent.invoke({"messages": [HumanMessage(f"question {i}: when does the parcel arrive?")]}, config)
        if i >= 10:
            times.append((time.perf_counter() - start) * 1000)
    store.close()
    out["checkpointer" if checkpointer else "no checkpointer"] = statistics.median(times)
print(json.dumps(out))
"""


def _url(backend: str, folder: Path, tag: str) -> str:
    # Each checkout on its own tables or keys: an older one refuses a schema a newer one wrote.
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{folder / f'agent-{tag}.db'}"
    if backend == "postgresql":
        return f"{POSTGRES_URL}?prefix=pairedagent{tag}_"
    return f"{REDIS_URL}?prefix=pairedagent{tag}:"


def _one(checkout: Path, url: str, turns: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, url, str(turns)],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
        env=env,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        msg = f"the run from {checkout} failed: {last}"
        raise SystemExit(msg)
    return {mode: float(ms) for mode, ms in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--a", type=Path, required=True, help="checkout A (e.g. the commit before)")
    parser.add_argument("--b", type=Path, default=Path(), help="checkout B (default: this one)")
    parser.add_argument("--runs", type=int, default=5, help="runs per checkout and backend")
    parser.add_argument("--turns", type=int, default=60, help="measured turns per mode in a run")
    parser.add_argument("--backends", default="memory,sqlite,postgresql,redis")
    parser.add_argument("--out", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    a, b = args.a.resolve(), args.b.resolve()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="lrm-paired-agent-") as tmp:
        for backend in args.backends.split(","):
            got: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
            for run in range(args.runs):
                for tag, checkout in (("a", a), ("b", b)):
                    for mode, ms in _one(checkout, _url(backend, Path(tmp), tag), args.turns).items():
                        got[tag].setdefault(mode, []).append(ms)
                print(f"{backend}: run {run + 1}/{args.runs} done", file=sys.stderr)
            for mode in got["a"]:
                ratio = statistics.median(got["b"][mode]) / statistics.median(got["a"][mode])
                rows.append([backend, mode, _cell(got["a"][mode]), _cell(got["b"][mode]), f"{ratio:.2f}x"])
    table = markdown_table(
        ["backend", "agent turn", f"A: {a.name} (ms)", f"B: {b.name} (ms)", "B/A"], rows, "llrrr"
    )
    print(table)
    if args.out:
        command = "python -m benchmarks.paired_agent_turn " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        args.out.write_text(
            f"# An agent turn's time, two checkouts paired\n\n`{command}`\n\nMedian ms per steady agent "
            f"turn: the median of {args.runs} runs (each the median of {args.turns} turns) [min-max].\n\n"
            f"{table}\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
