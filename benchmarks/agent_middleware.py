"""Agent memory side by side: model and summarizer calls and tokens sent, per middleware.

Replays one scripted agent run (user turns and replies from a LoCoMo conversation, read at
run time from ../shared/data/locomo/, with a tool call every few turns) through
`create_agent` with no memory middleware, LangChain's `SummarizationMiddleware`, and our
`RollingMemoryMiddleware`, under a count and a token policy. Fake chat models record every
request; tokens are counted with `count_tokens_approximately`. No timings: counts only.

    python -m benchmarks.agent_middleware --turns 60 --out benchmarks/results/agent_middleware.md
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_rolling_memory import InMemoryRollingStore, RollingStore
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware


def _locomo() -> Path:
    """../shared/data/locomo/locomo10.zip seen from the checkout (or one of its parents)."""
    for parent in Path(__file__).resolve().parents[1:]:
        candidate = parent / "shared" / "data" / "locomo" / "locomo10.zip"
        if candidate.exists():
            return candidate
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.zip"


LOCOMO = _locomo()
FACT = "Prefers to be reminded of plans the evening before"
SYSTEM = "You are a friendly assistant who keeps up with the user's life."


class RecordingModel(BaseChatModel):
    """Replies from a script (or a function of the request) and records each request."""

    replies: list[AIMessage] = Field(default_factory=list)
    reply_fn: Callable[[list[BaseMessage]], str] | None = None
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    outputs: list[AIMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingModel:  # type: ignore[override]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if self.reply_fn is not None:
            reply = AIMessage(self.reply_fn(messages))
        else:
            reply = self.replies.pop(0).model_copy() if self.replies else AIMessage("ok")
        self.outputs.append(reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def summary_reply(messages: list[BaseMessage]) -> str:
    """A summary of about 80 words: the last words of the request (a stand-in for an LLM)."""
    words = messages[-1].text.split()
    return " ".join(words[-80:])


_OPERATIONS = frozenset(
    {
        "append",
        "read",
        "last_seq",
        "summary",
        "summary_and_tail",
        "read_turn",
        "read_memory",
        "append_and_summary",
        "install_summary",
        "claim",
        "release",
        "session_info",
        "get_state",
        "set_state",
        "facts",
        "add_fact",
    }
)


class CountingStore(InMemoryRollingStore):
    """The in-memory store, counting the operations asked of it from outside (each one is a
    round trip, or a few, on PostgreSQL or Redis); calls the store makes to itself are not
    counted."""

    def __init__(self) -> None:
        super().__init__()
        self.operations = 0
        self._depth = 0

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name not in _OPERATIONS:
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self.operations += 1
            self._depth += 1
            try:
                return attribute(*args, **kwargs)
            finally:
                self._depth -= 1

        return counted


@tool
def lookup_calendar(day: str) -> str:
    """What is planned on a day."""
    return f"Calendar for {day}: one event, a dinner with friends at 7pm."


@dataclass(frozen=True)
class Turn:
    user: str
    reply: str
    tool_call: bool


def locomo_turns(conversation: str, limit: int, tool_every: int) -> list[Turn]:
    """User turns (speaker A) and replies (speaker B), in order, across sessions."""
    with zipfile.ZipFile(LOCOMO) as archive:
        data = json.loads(archive.read(f"data/multimodal_dialog/locomo10_v2/{conversation}.json"))
    lines: list[tuple[str, str]] = []
    for n in range(1, 100):
        for line in data.get(f"session_{n}", []):
            lines.append((line["speaker"], line["text"]))
    speaker_a = data["speaker_a"]
    turns: list[Turn] = []
    i = 0
    while i + 1 < len(lines) and len(turns) < limit:
        if lines[i][0] == speaker_a and lines[i + 1][0] != speaker_a:
            turns.append(Turn(lines[i][1], lines[i + 1][1], len(turns) % tool_every == tool_every - 1))
            i += 2
        else:
            i += 1
    return turns


def synthetic_turns(limit: int, tool_every: int) -> list[Turn]:
    return [
        Turn(
            f"Turn {i}: here is what happened today, with a few details worth remembering later on.",
            f"Reply {i}: that sounds great, tell me more about how it went and who was there.",
            i % tool_every == tool_every - 1,
        )
        for i in range(limit)
    ]


def script(turns: Sequence[Turn]) -> list[AIMessage]:
    replies: list[AIMessage] = []
    for i, turn in enumerate(turns):
        if turn.tool_call:
            call = {
                "name": "lookup_calendar",
                "args": {"day": f"day {i}"},
                "id": f"call-{i}",
                "type": "tool_call",
            }
            replies.append(AIMessage("", tool_calls=[call]))
        replies.append(AIMessage(turn.reply))
    return replies


def tool_pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AIMessage):
            open_calls = {str(c["id"]) for c in message.tool_calls}
    return not open_calls


@dataclass
class Row:
    name: str
    model_calls: int
    model_tokens: int
    facts_tokens: int
    max_request_tokens: int
    summarizer_calls: int
    summarizer_in: int
    summarizer_out: int
    state_messages: int
    store_operations: int
    transcript_messages: str
    pairs_intact: bool
    facts_in_prompt: bool


def run(
    name: str,
    turns: Sequence[Turn],
    make: Callable[[RecordingModel, RollingStore], AgentMiddleware[Any, Any, Any] | None],
) -> Row:
    store = CountingStore()
    store.add_fact("client-1", FACT)
    store.operations = 0
    model = RecordingModel(replies=script(turns))
    summarizer = RecordingModel(reply_fn=summary_reply)
    middleware = make(summarizer, store)
    agent = create_agent(
        model,
        [lookup_calendar],
        system_prompt=SYSTEM,
        middleware=[middleware] if middleware is not None else [],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "session-1", "client_id": "client-1"}}
    for turn in turns:
        agent.invoke({"messages": [HumanMessage(turn.user)]}, config)
    state = agent.get_state(config).values["messages"]
    counts = [count_tokens_approximately(r) for r in model.requests]
    plain_system = count_tokens_approximately([SystemMessage(SYSTEM)])
    system_counts = [
        count_tokens_approximately([m for m in r if isinstance(m, SystemMessage)]) for r in model.requests
    ]
    ours = isinstance(middleware, RollingMemoryMiddleware)
    return Row(
        name=name,
        model_calls=len(model.requests),
        model_tokens=sum(counts),
        facts_tokens=sum(c - plain_system for c in system_counts),
        max_request_tokens=max(counts),
        summarizer_calls=len(summarizer.requests),
        summarizer_in=sum(count_tokens_approximately(r) for r in summarizer.requests),
        summarizer_out=sum(count_tokens_approximately([m]) for m in summarizer.outputs),
        state_messages=len(state),
        store_operations=store.operations,
        transcript_messages=str(len(store.transcript("session-1"))) if ours else "-",
        pairs_intact=all(
            tool_pairs_intact([m for m in r if not isinstance(m, SystemMessage)]) for r in model.requests
        ),
        facts_in_prompt=all(
            FACT in "".join(m.text for m in r if isinstance(m, SystemMessage)) for r in model.requests
        ),
    )


def configurations(
    max_turns: int, keep_last: int, max_tokens: int, keep_tokens: int
) -> list[tuple[str, Callable[[RecordingModel, RollingStore], AgentMiddleware[Any, Any, Any] | None]]]:
    return [
        ("no memory middleware", lambda s, store: None),
        (
            f"SummarizationMiddleware messages {max_turns}/{keep_last}",
            lambda s, store: SummarizationMiddleware(
                s, trigger=("messages", max_turns + 1), keep=("messages", keep_last)
            ),
        ),
        (
            f"RollingMemoryMiddleware max_turns {max_turns}/{keep_last}",
            lambda s, store: RollingMemoryMiddleware(
                store=store, summarizer=s, max_turns=max_turns, keep_last=keep_last
            ),
        ),
        (
            f"SummarizationMiddleware tokens {max_tokens}/{keep_tokens}",
            lambda s, store: SummarizationMiddleware(
                s, trigger=("tokens", max_tokens), keep=("tokens", keep_tokens)
            ),
        ),
        (
            f"RollingMemoryMiddleware max_tokens {max_tokens}/{keep_tokens}",
            lambda s, store: RollingMemoryMiddleware(
                store=store, summarizer=s, max_turns=None, max_tokens=max_tokens, keep_tokens=keep_tokens
            ),
        ),
    ]


HEADER = (
    "| middleware | model calls | tokens sent to the model | of which client facts | largest request | summarizer calls "
    "| summarizer tokens in | summarizer tokens out | messages in agent state | messages in our transcript "
    "| store operations per model call | tool pairs intact | client facts in every request |\n"
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
)


def table(rows: Sequence[Row]) -> str:
    lines = [HEADER]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.model_calls} | {r.model_tokens} | {r.facts_tokens} | {r.max_request_tokens} | {r.summarizer_calls} "
            f"| {r.summarizer_in} | {r.summarizer_out} | {r.state_messages} | {r.transcript_messages} "
            f"| {r.store_operations / r.model_calls:.1f} | {'yes' if r.pairs_intact else 'NO'} | {'yes' if r.facts_in_prompt else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60, help="user turns to replay (default 60)")
    parser.add_argument("--conversation", default="26", help="LoCoMo conversation id (default 26)")
    parser.add_argument("--tool-every", type=int, default=4, help="a tool call every N turns (default 4)")
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument("--keep-last", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=1500)
    parser.add_argument("--keep-tokens", type=int, default=600)
    parser.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = parser.parse_args(argv)

    if LOCOMO.exists():
        turns = locomo_turns(args.conversation, args.turns, args.tool_every)
        source = f"LoCoMo conversation {args.conversation}"
    else:
        print(f"note: {LOCOMO} not found, replaying synthetic turns", file=sys.stderr)
        turns = synthetic_turns(args.turns, args.tool_every)
        source = "synthetic turns"
    rows = [
        run(name, turns, make)
        for name, make in configurations(args.max_turns, args.keep_last, args.max_tokens, args.keep_tokens)
    ]
    calls = sum(t.tool_call for t in turns)
    intro = (
        f"{len(turns)} user turns from {source}, a tool call every {args.tool_every} turns ({calls} in all), "
        "one agent thread with an InMemorySaver checkpointer; tokens by `count_tokens_approximately`.\n"
        "SummarizationMiddleware triggers at max_turns + 1 messages in the state (its summary message "
        "counts), ours when the unsummarized messages exceed max_turns.\n"
    )
    text = f"{intro}\n{table(rows)}\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = "python -m benchmarks.agent_middleware " + " ".join(sys.argv[1:] if argv is None else argv)
        args.out.write_text(
            f"# Agent middleware: calls and tokens\n\n`{command.strip()}`\n\n{text}", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
