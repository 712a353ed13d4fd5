"""The token bill of a long conversation, per memory strategy, against the issue's targets.

Replays real LoCoMo conversations (read at run time from ../shared/data/locomo/, all sessions
of one conversation run together as one long chat; 1,000 messages chain two conversations)
the way `RunnableWithMessageHistory` calls a chat model: the system prompt, the memory's
view, then the user's messages; the recorded reply is stored. Every strategy uses the same
fake summarizer (a chat model that answers 100 words whatever it is asked) and tokens are
counted with `count_tokens_approximately` on what each model actually received.

Strategies: the full buffer; a `trim_messages` window; LangChain's `SummarizationMiddleware`
in a real `create_agent` (its defaults; a trigger must be given or it never summarizes);
our `RollingSummaryChatMessageHistory` by counts (its defaults) and by tokens.

    python -m benchmarks.token_bill --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langgraph.checkpoint.memory import InMemorySaver

from benchmarks._shared import (
    SUMMARY_WORDS,
    SYSTEM,
    Bill,
    RecordingModel,
    long_conversation,
    markdown_table,
    summary_model,
    tokens,
)
from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store
from langchain_rolling_memory_lab.conversations import ConversationMessage

WINDOW_TOKENS = 1000
"""Token budget of the trim_messages window, and trigger of our token policy."""
KEEP_TOKENS = 400
MIDDLEWARE_TRIGGER = 4000
"""SummarizationMiddleware has no default trigger; 4000 tokens is its default summarizer-input trim."""

TARGET_SAVING = 0.80
TARGET_MESSAGES_PER_CALL = 3.0


@dataclass
class Outcome:
    strategy: str
    messages: int
    bill: Bill
    summarizer: RecordingModel

    @property
    def summarizer_calls(self) -> int:
        return len(self.summarizer.requests)

    @property
    def summarizer_tokens(self) -> int:
        return sum(tokens(r) for r in self.summarizer.requests) + sum(
            tokens([m]) for m in self.summarizer.outputs
        )

    @property
    def total(self) -> int:
        return self.bill.input_tokens + self.summarizer_tokens


def turns(conversation: Sequence[ConversationMessage]) -> list[tuple[list[BaseMessage], AIMessage]]:
    """(user messages since the last reply, the recorded reply); trailing user lines dropped."""
    out: list[tuple[list[BaseMessage], AIMessage]] = []
    waiting: list[BaseMessage] = []
    for item in conversation:
        if item.role == "user":
            waiting.append(item.to_message())
        else:
            out.append((waiting, AIMessage(item.content)))
            waiting = []
    return out


Memory = tuple[Callable[[], list[BaseMessage]], Callable[[list[BaseMessage]], None]]


def replay(
    name: str, convo: list[tuple[list[BaseMessage], AIMessage]], make: Callable[[RecordingModel], Memory]
) -> Outcome:
    summarizer = summary_model()
    view, add = make(summarizer)
    bill = Bill()
    for user, reply in convo:
        bill.add([SystemMessage(SYSTEM), *view(), *user])
        add([*user, reply])
    return Outcome(name, sum(len(u) + 1 for u, _ in convo), bill, summarizer)


def full_buffer(summarizer: RecordingModel) -> Memory:
    kept: list[BaseMessage] = []
    return (lambda: list(kept)), kept.extend


def trim_window(summarizer: RecordingModel) -> Memory:
    kept: list[BaseMessage] = []

    def view() -> list[BaseMessage]:
        return trim_messages(
            kept,
            max_tokens=WINDOW_TOKENS,
            strategy="last",
            token_counter=count_tokens_approximately,
            start_on="human",
        )

    return view, kept.extend


def ours(**policy: Any) -> Callable[[RecordingModel], Memory]:
    def make(summarizer: RecordingModel) -> Memory:
        history = RollingSummaryChatMessageHistory(
            "long", summarizer=summarizer, store=open_store("memory://"), timeout=None, **policy
        )
        return (lambda: history.messages), history.add_messages

    return make


def middleware(name: str, convo: list[tuple[list[BaseMessage], AIMessage]]) -> Outcome:
    """`SummarizationMiddleware` for real: `create_agent`, a checkpointer, one thread."""
    summarizer = summary_model()
    model = RecordingModel(replies=[reply for _, reply in convo])
    agent = create_agent(
        model,
        [],
        system_prompt=SYSTEM,
        middleware=[SummarizationMiddleware(summarizer, trigger=("tokens", MIDDLEWARE_TRIGGER))],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "long"}}
    for user, _ in convo:
        agent.invoke({"messages": user}, config)
    bill = Bill()
    for request in model.requests:
        bill.add(request)
    return Outcome(name, sum(len(u) + 1 for u, _ in convo), bill, summarizer)


STRATEGIES: list[tuple[str, Callable[[RecordingModel], Memory] | None]] = [
    ("full buffer", full_buffer),
    (f"trim_messages window ({WINDOW_TOKENS} tokens)", trim_window),
    (f"SummarizationMiddleware (trigger {MIDDLEWARE_TRIGGER} tokens, other defaults)", None),
    ("ours by counts (max_turns=12, keep_last=6)", ours()),
    (
        f"ours by tokens (max_tokens={WINDOW_TOKENS}, keep_tokens={KEEP_TOKENS})",
        ours(max_turns=None, max_tokens=WINDOW_TOKENS, keep_tokens=KEEP_TOKENS),
    ),
]


def _start(k: int, length: int) -> tuple[int, int]:
    """The k-th conversation: LoCoMo number k, or above 689 messages (the longest one) the
    k-th disjoint pair among 41+42, 43+44, 47+48, 49+50 (each over 1,000 messages)."""
    return (k if length <= 689 else 2 + 2 * k), length


def run_all(length: int, conversations: int) -> tuple[list[str], dict[str, list[Outcome]]]:
    sources: list[str] = []
    outcomes: dict[str, list[Outcome]] = {name: [] for name, _ in STRATEGIES}
    for k in range(conversations):
        source, conversation = long_conversation(*_start(k, length))
        sources.append(source)
        convo = turns(conversation)
        for name, make in STRATEGIES:
            outcome = middleware(name, convo) if make is None else replay(name, convo, make)
            outcomes[name].append(outcome)
    return sources, outcomes


@dataclass
class Row:
    strategy: str
    messages: int
    requests: int
    chat_tokens: int
    summarizer_calls: int
    summarizer_tokens: int
    total: int
    saving: float
    messages_per_call: float
    cacheable: float
    peak: int


def summarize(outcomes: dict[str, list[Outcome]]) -> list[Row]:
    full = sum(o.total for o in outcomes["full buffer"])
    rows = []
    for name, runs in outcomes.items():
        total = sum(o.total for o in runs)
        calls = sum(o.summarizer_calls for o in runs)
        messages = sum(o.messages for o in runs)
        chat = sum(o.bill.input_tokens for o in runs)
        rows.append(
            Row(
                strategy=name,
                messages=messages,
                requests=sum(o.bill.requests for o in runs),
                chat_tokens=chat,
                summarizer_calls=calls,
                summarizer_tokens=sum(o.summarizer_tokens for o in runs),
                total=total,
                saving=1 - total / full,
                messages_per_call=messages / calls if calls else float("inf"),
                cacheable=sum(o.bill.cacheable_tokens for o in runs) / chat,
                peak=max(o.bill.peak for o in runs),
            )
        )
    return rows


def table(rows: Sequence[Row]) -> str:
    header = [
        "strategy",
        "messages",
        "chat requests",
        "chat input tokens",
        "summarizer calls",
        "summarizer tokens (in+out)",
        "total tokens",
        "saved vs full buffer",
        "messages per summarizer call",
        "cacheable share",
        "largest request",
    ]
    body = [
        [
            r.strategy,
            r.messages,
            r.requests,
            f"{r.chat_tokens:,}",
            r.summarizer_calls,
            f"{r.summarizer_tokens:,}",
            f"{r.total:,}",
            "-" if r.strategy == "full buffer" else f"{100 * r.saving:.1f}%",
            "-" if r.summarizer_calls == 0 else f"{r.messages_per_call:.1f}",
            f"{100 * r.cacheable:.1f}%",
            f"{r.peak:,}",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def targets(rows: Sequence[Row]) -> str:
    """Each of our strategies against the issue's three targets (stated at 200 messages)."""
    trim = next(r for r in rows if r.strategy.startswith("trim_messages"))
    lines = []
    for r in rows:
        if not r.strategy.startswith("ours"):
            continue
        checks = [
            (
                f"total tokens {100 * r.saving:.1f}% below the full buffer (target >= {100 * TARGET_SAVING:.0f}%)",
                r.saving >= TARGET_SAVING,
            ),
            (
                f"{r.messages_per_call:.1f} messages per summarizer call (target >= {TARGET_MESSAGES_PER_CALL:.0f})",
                r.messages_per_call >= TARGET_MESSAGES_PER_CALL,
            ),
            (
                f"cacheable share {100 * r.cacheable:.1f}% vs {100 * trim.cacheable:.1f}% for the trim_messages "
                f"window ({r.cacheable / trim.cacheable:.1f}x; target > 1x)",
                r.cacheable > trim.cacheable,
            ),
        ]
        lines.append(
            f"- **{r.strategy}**: "
            + "; ".join(f"{text} **{'met' if ok else 'MISSED'}**" for text, ok in checks)
        )
    return "\n".join(lines)


SWEEP = [(12, 6), (12, 4), (12, 2), (16, 6), (20, 6), (24, 6)]


def sweep(length: int, count: int) -> str:
    """Our count policy at other settings, same conversations: where the targets are met."""
    convos = [turns(long_conversation(*_start(k, length))[1]) for k in range(count)]
    full = sum(replay("full", c, full_buffer).total for c in convos)
    trim = [replay("trim", c, trim_window).bill for c in convos]
    trim_share = sum(b.cacheable_tokens for b in trim) / sum(b.input_tokens for b in trim)
    body = []
    for max_turns, keep_last in SWEEP:
        runs = [replay("ours", c, ours(max_turns=max_turns, keep_last=keep_last)) for c in convos]
        total = sum(o.total for o in runs)
        calls = sum(o.summarizer_calls for o in runs)
        chat = sum(o.bill.input_tokens for o in runs)
        share = sum(o.bill.cacheable_tokens for o in runs) / chat
        saving = 1 - total / full
        per_call = sum(o.messages for o in runs) / calls
        body.append(
            [
                f"max_turns={max_turns}, keep_last={keep_last}",
                f"{chat:,}",
                calls,
                f"{total:,}",
                f"{100 * saving:.1f}%" + (" met" if saving >= TARGET_SAVING else " missed"),
                f"{per_call:.1f}" + (" met" if per_call >= TARGET_MESSAGES_PER_CALL else " missed"),
                f"{100 * share:.1f}% vs {100 * trim_share:.1f}%"
                + (" met" if share > trim_share else " missed"),
            ]
        )
    header = [
        "ours by counts",
        "chat input tokens",
        "summarizer calls",
        "total tokens",
        "saved vs full (>= 80%)",
        "messages per call (>= 3)",
        "cacheable vs trim window",
    ]
    return markdown_table(header, body)


def plot(results: dict[int, list[Row]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (length, rows) in zip(axes[0], sorted(results.items()), strict=True):
        names = [r.strategy.split(" (")[0] for r in rows]
        chat = [r.chat_tokens / 1000 for r in rows]
        summ = [r.summarizer_tokens / 1000 for r in rows]
        ax.barh(names, chat, label="chat input")
        ax.barh(names, summ, left=chat, label="summarizer in+out")
        for y, r in enumerate(rows):
            ax.text((r.total / 1000) * 1.01, y, f"cache {100 * r.cacheable:.0f}%", va="center", fontsize=8)
        ax.set_title(f"{length} messages (LoCoMo, all conversations)")
        ax.set_xlabel("thousand tokens")
        ax.invert_yaxis()
        ax.set_xlim(0, max(r.total for r in rows) / 1000 * 1.25)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[200, 1000], help="messages per conversation"
    )
    parser.add_argument(
        "--conversations", type=int, default=0, help="how many (default: 10 up to 689 messages, 4 above)"
    )
    parser.add_argument("--out", type=Path, help="folder for token_bill.md and token_bill.png")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    sections = []
    results: dict[int, list[Row]] = {}
    for length in args.lengths:
        count = args.conversations or (10 if length <= 689 else 4)
        sources, outcomes = run_all(length, count)
        rows = summarize(outcomes)
        results[length] = rows
        sections.append(
            f"## {length} messages per conversation\n\n"
            f"LoCoMo conversations {', '.join(sources)} (each one long session), summed over all of them.\n\n"
            f"{table(rows)}\n\n### Against the targets\n\n{targets(rows)}\n\n"
            f"### Other count settings (same conversations)\n\n{sweep(length, count)}\n"
        )
        print(sections[-1], flush=True)
    intro = (
        "# Token bill per memory strategy\n\n"
        f"`python -m benchmarks.token_bill{_args(argv)}` "
        f"({time.perf_counter() - started:.0f} s)\n\n"
        "Every strategy sees the same requests: the system prompt, the memory's view, the user's "
        "messages; the recorded LoCoMo reply is then stored. One fake summarizer for all, a chat model "
        f"that answers {SUMMARY_WORDS} words whatever it is asked; each strategy sends it its own prompt "
        "(ours: `prompts.default_prompt`; SummarizationMiddleware: its `DEFAULT_SUMMARY_PROMPT`). Tokens: "
        "`count_tokens_approximately` on what each model received. *Cacheable share*: tokens of each "
        "request that repeat the previous request's leading messages exactly (what a provider's prompt "
        "cache can serve), over all chat input tokens. Summaries land inline here (the bill is the same "
        "in background mode, one turn later). SummarizationMiddleware's default trigger is None (it "
        "never summarizes: its bill is the full buffer's); the row uses `trigger=('tokens', "
        f"{MIDDLEWARE_TRIGGER})` and its defaults otherwise (keep 20 messages, summarizer input trimmed "
        "to 4000 tokens).\n"
    )
    text = intro + "\n" + "\n".join(sections)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "token_bill.md").write_text(text, encoding="utf-8")
        plot(results, args.out / "token_bill.png")
        print(f"wrote {args.out / 'token_bill.md'} and token_bill.png", file=sys.stderr)
    return 0


def _args(argv: Sequence[str] | None) -> str:
    """The command-line arguments as typed, for the reproduce line of the results."""
    given = list(sys.argv[1:] if argv is None else argv)
    return " " + " ".join(given) if given else ""


if __name__ == "__main__":
    raise SystemExit(main())
