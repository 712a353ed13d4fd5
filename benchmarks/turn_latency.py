"""How long the user waits for a turn when the summarizer takes 500 ms: inline, background,
LangChain's SummarizationMiddleware, and turns where no compaction is due, on SQLite and
PostgreSQL.

A turn is what the user waits for: `RunnableWithMessageHistory.invoke` around a fake chat
model that answers at once (ours), or `agent.invoke` of a `create_agent` with a checkpointer
on the same database (the middleware). The summarizer sleeps 500 ms. Between turns the user
"thinks" for `--think` seconds (not timed), so a background compaction overlaps the next
turns as it would in a chat. Same policy everywhere: fold when more than 12 messages, keep 6
(the middleware: trigger at 13 messages in its state, keep 6).

    python -m benchmarks.turn_latency --out benchmarks/results
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from benchmarks._shared import SYSTEM, RecordingModel, long_conversation, markdown_table, percentile
from benchmarks.store_turn_cost import _drop_ours
from langchain_rolling_memory import RollingStore, RollingSummaryChatMessageHistory, open_store

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
SUMMARY_SECONDS = 0.5
MAX_TURNS, KEEP_LAST = 12, 6
TARGET_MS = 5.0
SEED_SUMMARY = " ".join(["The user told the assistant about the week, the family and the plans."] * 4)
WARM_UP = 20


# Which summarizer started during which round (inline: inside the turn; background: on a
# worker, just after the turn that scheduled it; middleware: inside the turn).
_round = [-1]
_started: dict[str, set[int]] = {}


def slow_summarizer(mode: str) -> Callable[[str, Sequence[BaseMessage]], str]:
    def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
        _started.setdefault(mode, set()).add(_round[0])
        time.sleep(SUMMARY_SECONDS)
        return f"{previous[:300]} Then {len(messages)} more messages about the user's week.".strip()

    return summarize


def slow_middleware_summary(mode: str) -> Callable[[list[BaseMessage]], str]:
    def summarize(messages: list[BaseMessage]) -> str:
        _started.setdefault(mode, set()).add(_round[0])
        time.sleep(SUMMARY_SECONDS)
        return f"{len(messages)} messages about the user's week."

    return summarize


@dataclass
class Run:
    mode: str
    backend: str
    samples: list[float]  # ms per turn
    compaction_turns: list[int]  # indexes of turns that crossed the threshold

    def p(self, q: float) -> float:
        return percentile(self.samples, q)

    @property
    def quiet(self) -> list[float]:
        """The turns that did not cross the threshold."""
        crossed = set(self.compaction_turns)
        return [v for i, v in enumerate(self.samples) if i not in crossed] or [float("nan")]


def user_lines(turns: int) -> list[str]:
    _, conversation = long_conversation(0, 2 * turns + 50)
    return [m.content for m in conversation if m.role == "user"][:turns]


def reply(messages: list[BaseMessage]) -> str:
    return "Sounds good, tell me more."


@dataclass
class Mode:
    """One way of running turns: `prepare(i)` (untimed), then `turn(i, line)` (timed)."""

    name: str
    turn: Callable[[int, str], None]
    prepare: Callable[[int], None] = lambda i: None
    finish: Callable[[], None] = lambda: None


def ours(
    name: str,
    store: RollingStore,
    *,
    background: bool,
    session_length: int | None,
    prefix: str = "",
    seed: int = 0,
) -> Mode:
    """Turns through RunnableWithMessageHistory; `session_length` turns per session (None: one)."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | RecordingModel(reply_fn=reply)
    made: list[RollingSummaryChatMessageHistory] = []

    def get_history(session_id: str) -> RollingSummaryChatMessageHistory:
        history = RollingSummaryChatMessageHistory(
            session_id,
            summarizer=slow_summarizer(name),
            store=store,
            max_turns=MAX_TURNS,
            keep_last=KEEP_LAST,
            background=background,
        )
        made.append(history)
        return history

    chat = RunnableWithMessageHistory(
        chain, get_history, input_messages_key="question", history_messages_key="history"
    )

    def session_of(i: int) -> str:
        return f"{prefix}{name.replace(' ', '_')}-" + (
            "one" if session_length is None else f"s{i // session_length}"
        )

    def prepare(i: int) -> None:
        if seed and session_length is not None and i % session_length == 0:
            # The state right after a compaction: a summary, `seed` messages after it.
            session = session_of(i)
            store.append(session, [HumanMessage(f"earlier {k}") for k in range(seed)])
            store.install_summary(session, SEED_SUMMARY, covered_seq=0, expected_version=0)

    def turn(i: int, line: str) -> None:
        chat.invoke({"question": line}, config={"configurable": {"session_id": session_of(i)}})

    def finish() -> None:
        for history in made[-1:]:
            history.flush()

    return Mode(name, turn, prepare, finish)


def middleware(name: str, saver: Any, prefix: str = "") -> Mode:
    summarizer_model = RecordingModel(reply_fn=reply)  # not called: `summarizer=` writes the summary
    agent_middleware = SummarizationMiddleware(
        summarizer_model,
        trigger=("messages", MAX_TURNS + 1),
        keep=("messages", KEEP_LAST),
        summarizer=slow_middleware_summary(name),
    )
    agent = create_agent(
        RecordingModel(reply_fn=reply),
        [],
        system_prompt=SYSTEM,
        middleware=[agent_middleware],
        checkpointer=saver,
    )
    thread = f"{prefix}t{uuid.uuid4().hex[:8]}"

    def turn(i: int, line: str) -> None:
        agent.invoke({"messages": [HumanMessage(line)]}, {"configurable": {"thread_id": thread}})

    return Mode(name, turn, finish=lambda: saver.delete_thread(thread))


class _checkpointer:
    """A langgraph checkpointer on the same database as our store (the `bench` dependency group)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._context: Any = None

    def __enter__(self) -> Any:
        if self.url.startswith("sqlite"):
            from langgraph.checkpoint.sqlite import SqliteSaver

            path = self.url.removeprefix("sqlite:///").split("?")[0]
            self._context = SqliteSaver.from_conn_string(path.replace(".db", "-graph.db"))
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            self._context = PostgresSaver.from_conn_string(self.url.split("?")[0])
        saver = self._context.__enter__()
        saver.setup()
        return saver

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(*exc)


def modes(store: RollingStore, saver: Any, prefix: str, chosen: Sequence[str]) -> list[Mode]:
    # The baseline: sessions that start as the long session looks right after a compaction
    # (a summary and keep_last messages) and end before the next one is due: the same view
    # sizes, and no turn ever compacts.
    short = (MAX_TURNS - KEEP_LAST) // 2
    makers: dict[str, Callable[[], Mode]] = {
        "no compaction due": lambda: ours(
            "no compaction due", store, background=False, session_length=short, seed=KEEP_LAST, prefix=prefix
        ),
        "inline": lambda: ours("inline", store, background=False, session_length=None, prefix=prefix),
        "background": lambda: ours("background", store, background=True, session_length=None, prefix=prefix),
        "SummarizationMiddleware": lambda: middleware("SummarizationMiddleware", saver, prefix),
    }
    return [makers[name]() for name in chosen]


def interleaved(chosen: list[Mode], lines: list[str], think: float) -> dict[str, list[float]]:
    """Turn i of every mode, then turn i+1...: the machine's load falls on all modes alike."""
    samples: dict[str, list[float]] = {m.name: [] for m in chosen}
    for i, line in enumerate(lines):
        for mode in chosen:
            mode.prepare(i)
            _round[0] = i
            start = time.perf_counter()
            mode.turn(i, line)
            samples[mode.name].append((time.perf_counter() - start) * 1000)
        time.sleep(think)
    _round[0] = -1
    for mode in chosen:
        mode.finish()
    return samples


def measure(backend: str, url: str, lines: list[str], think: float, chosen: Sequence[str]) -> list[Run]:
    store = open_store(url.replace("PREFIX", f"lat{uuid.uuid4().hex[:6]}_"))
    try:
        with _checkpointer(url) as saver:
            interleaved(
                modes(store, saver, "warm-", chosen), lines[:WARM_UP], think
            )  # connections, statements
            _started.clear()
            samples = interleaved(modes(store, saver, "", chosen), lines, think)
    finally:
        _drop_ours(store)
        store.close()
    runs = [Run(name, backend, values, sorted(_started.get(name, set()))) for name, values in samples.items()]
    for r in runs:
        print(f"  {backend:10} {r.mode:24} p50 {r.p(0.5):8.2f} ms  p99 {r.p(0.99):8.2f} ms", flush=True)
    return runs


def table(runs: Sequence[Run]) -> str:
    rows = []
    for r in runs:
        base = next(b for b in runs if b.backend == r.backend and b.mode == "no compaction due")
        crossing = [r.samples[i] for i in r.compaction_turns] or [float("nan")]
        rows.append(
            [
                r.backend,
                r.mode,
                len(r.samples),
                len(r.compaction_turns),
                f"{r.p(0.5):.2f}",
                f"{r.p(0.99):.2f}",
                f"{max(r.samples):.2f}",
                f"{percentile(crossing, 0.5):.2f}",
                f"{percentile(r.quiet, 0.99):.2f}",
                f"{r.p(0.99) - base.p(0.99):+.2f}",
            ]
        )
    header = [
        "backend",
        "turns",
        "timed turns",
        "turns that crossed the threshold",
        "p50 ms",
        "p99 ms",
        "max ms",
        "median of crossing turns ms",
        "p99 of the other turns ms",
        "p99 minus no-compaction p99 (ms)",
    ]
    return markdown_table(header, rows, "llrrrrrrrr")


def verdict(runs: Sequence[Run]) -> str:
    lines = []
    for backend in dict.fromkeys(r.backend for r in runs):
        base = next(r for r in runs if r.backend == backend and r.mode == "no compaction due")
        for r in runs:
            if r.backend == backend and r.mode == "background":
                gap = r.p(0.99) - base.p(0.99)
                ok = gap <= TARGET_MS
                lines.append(
                    f"- {backend}: background p99 {r.p(0.99):.2f} ms vs no-compaction p99 {base.p(0.99):.2f} ms: "
                    f"{gap:+.2f} ms (target <= {TARGET_MS:.0f} ms) **{'met' if ok else 'MISSED'}**"
                )
                inline = next((x for x in runs if x.backend == backend and x.mode == "inline"), None)
                if inline is not None:
                    same = r.p(0.99) - percentile(inline.quiet, 0.99)
                    lines.append(
                        f"  - against the inline run's turns that did not compact (the same long session, "
                        f"the same view sizes): p99 {percentile(inline.quiet, 0.99):.2f} ms, background "
                        f"{same:+.2f} ms **{'met' if same <= TARGET_MS else 'MISSED'}**"
                    )
    return "\n".join(lines)


def plot(runs: Sequence[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(dict.fromkeys(r.backend for r in runs))
    fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4.2), squeeze=False)
    for ax, backend in zip(axes[0], backends, strict=True):
        for r in runs:
            if r.backend == backend:
                ax.plot(
                    sorted(r.samples),
                    [100 * (k + 1) / len(r.samples) for k in range(len(r.samples))],
                    label=r.mode,
                )
        ax.set_xscale("log")
        ax.set_xlabel("user-visible turn (ms, log)")
        ax.set_ylabel("% of turns at most")
        ax.set_title(f"{backend}: summarizer sleeps {int(1000 * SUMMARY_SECONDS)} ms")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


MODES = ["no compaction due", "inline", "background", "SummarizationMiddleware"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per mode (default 200)")
    parser.add_argument(
        "--think", type=float, default=0.1, help="seconds between turns, not timed (default 0.1)"
    )
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    parser.add_argument("--out", type=Path, help="folder for turn_latency.md and turn_latency.png")
    args = parser.parse_args(argv)

    lines = user_lines(args.turns)
    runs: list[Run] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        urls = {
            "sqlite": f"sqlite:///{tmp}/latency.db?prefix=PREFIX",
            "postgresql": f"{POSTGRES_URL}?prefix=PREFIX",
        }
        for backend in args.backends:
            try:
                runs += measure(backend, urls[backend], lines, args.think, args.modes)
            except Exception as exc:  # a server that is down is reported, not fatal
                print(f"{backend}: could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
    text = (
        "# User-visible turn latency with a 500 ms summarizer\n\n"
        f"`python -m benchmarks.turn_latency{_args(argv)}` "
        f"({time.perf_counter() - started:.0f} s; {os.cpu_count()} CPUs shared with other work)\n\n"
        f"{args.turns} timed turns per mode after {WARM_UP} warm-up turns, user lines from LoCoMo "
        f"conversation 26; the modes take turns (turn i of each mode, then turn i+1) so that the shared "
        f"machine's load falls on all alike, and {args.think:.2f} s pass between rounds (not timed). Ours: `RunnableWithMessageHistory` + "
        f"`RollingSummaryChatMessageHistory(max_turns={MAX_TURNS}, keep_last={KEEP_LAST})`, a new history "
        "object per call (the usual factory), a fake chat model that answers at once. *No compaction due*: "
        f"the same in sessions of {(MAX_TURNS - KEEP_LAST) // 2} turns that start with a summary and {KEEP_LAST} "
        "messages (as the long session right after a compaction; set up outside the timed call) and end before "
        "one is due: the same view sizes, no compaction ever. "
        "SummarizationMiddleware: `create_agent` with a `SqliteSaver` / `PostgresSaver` checkpointer on the same "
        f"database, `trigger=('messages', {MAX_TURNS + 1}), keep=('messages', {KEEP_LAST})`, the same 500 ms "
        "summarizer passed as `summarizer=`.\n\n"
        f"{table(runs)}\n\n### Against the target\n\n{verdict(runs)}\n"
    )
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "turn_latency.md").write_text(text, encoding="utf-8")
        plot(runs, args.out / "turn_latency.png")
    return 0


def _args(argv: Sequence[str] | None) -> str:
    """The command-line arguments as typed, for the reproduce line of the results."""
    given = list(sys.argv[1:] if argv is None else argv)
    return " " + " ".join(given) if given else ""


if __name__ == "__main__":
    raise SystemExit(main())
