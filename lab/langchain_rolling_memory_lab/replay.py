"""Replaying a recorded conversation under several memory strategies, counting every token.

Owns the simulation (what each strategy sends at every model call and what its memory
costs) and the figures drawn from it: totals, the share of each request that repeats the
previous request's prefix (what a provider's prompt cache could serve), and the break-even
message count. It drives the package's real histories on an in-memory store. It does not
print or plot: the CLI and the notebooks do.

A *request* is one chat-model call: one per assistant message of the recording, made the
way `RunnableWithMessageHistory` makes it (system prompt, the history's view, then the user
messages since the last reply). The view is per session; facts are per client and are the
only memory that crosses sessions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langchain_rolling_memory.adapters.chat_histories import (
    RollingSummaryChatMessageHistory,
    WindowedChatMessageHistory,
)
from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.framing import memory_message, memory_text
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.summarizers.base import SummarizerLike
from langchain_rolling_memory.summarizers.coerce import as_summarizer
from langchain_rolling_memory.summarizers.estimated import EstimatedCostSummarizer
from langchain_rolling_memory_lab.conversations import ConversationMessage
from langchain_rolling_memory_lab.details import DetailRetention, detail_retention
from langchain_rolling_memory_lab.offline import keyless_extractor, keyless_summarizer

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly and accurately."

Kind = Literal["full", "window", "summary"]


@dataclass(frozen=True)
class Strategy:
    """One way of choosing what a request carries.

    Attributes:
        name: short id (``full``, ``window``, ``summary``, ``summary+facts``).
        kind: ``full`` (every message of the session), ``window`` (the last `window`
            messages) or ``summary`` (rolling summary with `max_turns` / `keep_last`).
        facts: add the client's facts block to the system prompt (summary only).
    """

    name: str
    kind: Kind
    window: int = 12
    max_turns: int = 12
    keep_last: int = 6
    facts: bool = False

    @property
    def label(self) -> str:
        if self.kind == "full":
            return "full buffer"
        if self.kind == "window":
            return f"window of {self.window} messages"
        extra = " + client facts" if self.facts else ""
        return f"rolling summary (max_turns={self.max_turns}, keep_last={self.keep_last}){extra}"


def default_strategies(*, window: int = 12, max_turns: int = 12, keep_last: int = 6) -> list[Strategy]:
    """Full buffer, window, rolling summary, rolling summary + facts."""
    return [
        Strategy("full", "full"),
        Strategy("window", "window", window=window),
        Strategy("summary", "summary", max_turns=max_turns, keep_last=keep_last),
        Strategy("summary+facts", "summary", max_turns=max_turns, keep_last=keep_last, facts=True),
    ]


@dataclass(frozen=True)
class CompactionDetails:
    """One compaction of a summary strategy, read through the named details it folded
    (see `details`): how many of the folded messages' names, numbers, dates and codes the
    new summary still carries."""

    session: str
    at_message: int
    """The recording's message (1-based) whose arrival made the summary fold."""
    folded: int
    """Messages folded by this compaction."""
    retention: DetailRetention

    @property
    def ratio(self) -> float | None:
        """Share of the folded details the new summary keeps; None when they had none."""
        return self.retention.ratio


@dataclass
class StrategyResult:
    """What one strategy sent and what its memory cost, over the whole replay."""

    strategy: Strategy
    requests: int = 0
    input_tokens: int = 0
    """Tokens sent to the chat model, summed over requests."""
    cacheable_tokens: int = 0
    """Of those, tokens that repeat the previous request's prefix (prompt-cacheable)."""
    peak_request_tokens: int = 0
    summarizer_calls: int = 0
    summarizer_tokens: int = 0
    """Summarizer input + output tokens."""
    extractor_calls: int = 0
    extractor_tokens: int = 0
    facts: int = 0
    """Facts known at the end (all clients)."""
    cumulative: list[int] = field(default_factory=list)
    """After each message of the recording: input tokens + memory tokens so far."""
    request_sizes: list[tuple[int, int]] = field(default_factory=list)
    """``(message index, tokens)`` of each request."""
    compactions: list[CompactionDetails] = field(default_factory=list)
    """Summary strategies: each compaction and the named details its summary kept."""

    @property
    def memory_calls(self) -> int:
        return self.summarizer_calls + self.extractor_calls

    @property
    def memory_tokens(self) -> int:
        return self.summarizer_tokens + self.extractor_tokens

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.memory_tokens

    @property
    def cacheable_share(self) -> float:
        return self.cacheable_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def mean_request_tokens(self) -> float:
        return self.input_tokens / self.requests if self.requests else 0.0

    @property
    def detail_retention(self) -> float | None:
        """Mean over the compactions (those that folded any detail) of the share of named
        details the new summary kept; None without such a compaction."""
        ratios = [c.ratio for c in self.compactions if c.ratio is not None]
        return sum(ratios) / len(ratios) if ratios else None


@dataclass
class ReplayReport:
    """Results of every strategy over one recording."""

    messages: int
    sessions: int
    clients: int
    results: list[StrategyResult]

    def result(self, name: str) -> StrategyResult:
        for result in self.results:
            if result.strategy.name == name:
                return result
        msg = f"no strategy named {name!r} in this replay; have {[r.strategy.name for r in self.results]}"
        raise KeyError(msg)

    def break_even(self, name: str, *, baseline: str = "full") -> int | None:
        """Smallest message count from which `name` costs less than `baseline` (memory
        included) until the end of the recording; None if it never does."""
        mine, base = self.result(name).cumulative, self.result(baseline).cumulative
        point = None
        for i in range(len(mine) - 1, -1, -1):
            if mine[i] < base[i]:
                point = i + 1
            else:
                break
        return point

    def rows(self, *, baseline: str = "full") -> list[dict[str, object]]:
        """One plain dict per strategy, for tables and data frames."""
        base = (
            self.result(baseline).total_tokens
            if any(r.strategy.name == baseline for r in self.results)
            else 0
        )
        rows: list[dict[str, object]] = []
        for r in self.results:
            has_base = base and r.strategy.name != baseline
            rows.append(
                {
                    "strategy": r.strategy.name,
                    "label": r.strategy.label,
                    "requests": r.requests,
                    "input_tokens": r.input_tokens,
                    "mean_request_tokens": round(r.mean_request_tokens, 1),
                    "peak_request_tokens": r.peak_request_tokens,
                    "memory_calls": r.memory_calls,
                    "memory_tokens": r.memory_tokens,
                    "total_tokens": r.total_tokens,
                    "saved_vs_full": round(1 - r.total_tokens / base, 4) if has_base else None,
                    "cacheable_share": round(r.cacheable_share, 4),
                    "break_even": (
                        self.break_even(r.strategy.name, baseline=baseline)
                        if has_base and r.strategy.kind == "summary"
                        else None
                    ),
                    "facts": r.facts,
                    "detail_retention": (
                        None if r.detail_retention is None else round(r.detail_retention, 4)
                    ),
                }
            )
        return rows

    def compaction_rows(self, name: str) -> list[dict[str, object]]:
        """One plain dict per compaction of strategy `name`: where it happened, what it folded,
        the named details found there, those the new summary kept and those it lost."""
        return [
            {
                "session": c.session,
                "at_message": c.at_message,
                "folded": c.folded,
                "details": len(c.retention.details),
                "kept": len(c.retention.kept),
                "retention": None if c.ratio is None else round(c.ratio, 4),
                "missing": [d.text for d in c.retention.missing],
            }
            for c in self.result(name).compactions
        ]


class _Runner:
    """Plays one strategy: keeps its memory, builds each request, counts the cost."""

    def __init__(
        self,
        strategy: Strategy,
        summarizer: SummarizerLike,
        counter: TokenCounter,
        extractor: FactExtractor,
        facts_budget: int,
    ) -> None:
        self.strategy = strategy
        self.result = StrategyResult(strategy)
        self.counter = counter
        self.extractor = extractor
        self.facts_budget = facts_budget
        self.summarizer = summarizer
        self.store = InMemoryRollingStore(max_facts=10_000)
        self.histories: dict[str, WindowedChatMessageHistory | RollingSummaryChatMessageHistory] = {}
        self.full: dict[str, list[BaseMessage]] = {}
        self.seen: dict[str, tuple[int, int, int]] = {}  # session -> (calls, tokens, covered_seq)
        self.previous: list[BaseMessage] = []
        self._sizes: dict[tuple[str, str], int] = {}
        self.at = 0  # the recording's message being replayed (1-based)

    def size(self, message: BaseMessage) -> int:
        key = (message.type, message.text)
        if key not in self._sizes:
            self._sizes[key] = self.counter([message])
        return self._sizes[key]

    def history(
        self, session: str, client: str
    ) -> WindowedChatMessageHistory | RollingSummaryChatMessageHistory:
        if session not in self.histories:
            s = self.strategy
            if s.kind == "window":
                self.histories[session] = WindowedChatMessageHistory(
                    session,
                    store=self.store,
                    client_id=client,
                    max_messages=s.window,
                    token_counter=self.counter,
                )
            else:
                self.histories[session] = RollingSummaryChatMessageHistory(
                    session,
                    summarizer=self.summarizer,
                    store=self.store,
                    client_id=client,
                    max_turns=s.max_turns,
                    keep_last=s.keep_last,
                    token_counter=self.counter,
                    timeout=None,
                )
        return self.histories[session]

    def view(self, session: str, client: str) -> list[BaseMessage]:
        if self.strategy.kind == "full":
            return list(self.full.get(session, []))
        return self.history(session, client).messages

    def add(self, session: str, client: str, messages: list[BaseMessage]) -> None:
        if self.strategy.kind == "full":
            self.full.setdefault(session, []).extend(messages)
            return
        self.history(session, client).add_messages(messages)
        if self.strategy.kind == "summary":
            self._account(session, client)

    def _account(self, session: str, client: str) -> None:
        record = self.store.summary(session)
        if record is None:
            return
        usage = SummaryUsage.from_record(record)
        calls, tokens = usage.summarizer_calls, usage.summarizer_tokens
        old_calls, old_tokens, old_covered = self.seen.get(session, (0, 0, 0))
        self.result.summarizer_calls += calls - old_calls
        self.result.summarizer_tokens += tokens - old_tokens
        self.seen[session] = (calls, tokens, record.covered_seq)
        if record.covered_seq <= old_covered:
            return
        rows = self.store.read(session, after_seq=old_covered, newest=False)
        folded = [m.message for m in rows if m.seq <= record.covered_seq]
        self.result.compactions.append(
            CompactionDetails(
                session, self.at, len(folded), detail_retention([m.text for m in folded], record.text)
            )
        )
        if self.strategy.facts:
            self._extract(client, folded)

    def end_session(self, session: str, client: str) -> None:
        """Facts from what the summary has not folded yet (the end of a session is kept
        verbatim, so only the extractor can carry it to the next session)."""
        if not self.strategy.facts or session not in self.histories:
            return
        covered = self.seen.get(session, (0, 0, 0))[2]
        tail = self.store.read(session, after_seq=covered, newest=False)
        self._extract(client, [m.message for m in tail])

    def _extract(self, client: str, messages: list[BaseMessage]) -> None:
        if not messages:
            return
        request = self.extractor.request(self.store.facts(client), messages)
        result = self.extractor.extract(self.store, client, messages)
        # Billed as an LLM extractor would be: its request, and a reply listing the changes.
        reply = json.dumps(
            {
                "add": [{"text": f.text, "key": f.key} for f in result.added],
                "update": [{"id": f.id, "text": f.text} for f in result.updated],
                "delete": result.deleted,
            }
        )
        self.result.extractor_calls += 1
        self.result.extractor_tokens += self.counter(request) + self.counter([AIMessage(reply)])

    def prefix(self, prompt: str, client: str) -> list[BaseMessage]:
        """The system prompt, then (facts strategy) the memory message with the client's facts."""
        head: list[BaseMessage] = [SystemMessage(prompt)]
        if self.strategy.facts:
            text = memory_text(self.store.facts(client), max_fact_tokens=self.facts_budget)
            message = memory_message(text)
            if message is not None:
                head.append(message)
        return head

    def request(self, index: int, request: list[BaseMessage]) -> None:
        sizes = [self.size(m) for m in request]
        total = sum(sizes)
        prefix = 0
        for i, (old, new) in enumerate(zip(self.previous, request, strict=False)):
            if old.type != new.type or old.text != new.text:
                break
            prefix += sizes[i]
        r = self.result
        r.requests += 1
        r.input_tokens += total
        r.cacheable_tokens += prefix
        r.peak_request_tokens = max(r.peak_request_tokens, total)
        r.request_sizes.append((index, total))
        self.previous = request

    def tick(self) -> None:
        self.result.cumulative.append(self.result.input_tokens + self.result.memory_tokens)

    def finish(self, clients: set[str]) -> StrategyResult:
        self.result.facts = sum(len(self.store.facts(c)) for c in clients)
        return self.result


def replay(
    conversation: Sequence[ConversationMessage],
    *,
    strategies: Sequence[Strategy] | None = None,
    summarizer: SummarizerLike | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    token_counter: TokenCounter = count_tokens,
    fact_extractor: FactExtractor | None = None,
    facts_budget: int = 400,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay a recorded conversation under each strategy and count what it sends.

    Args:
        conversation: messages in order (see `conversations.load_conversation`).
        strategies: what to compare (default: `default_strategies()`).
        summarizer: used by every summary strategy (default: the keyless summarizer). A
            summarizer that calls no model is billed as an LLM would be, see
            `EstimatedCostSummarizer`, so that summarizing never looks free.
        system_prompt: the system message every request starts with (a ``system`` line of
            the recording replaces it from there on).
        token_counter: counts a message list's tokens.
        fact_extractor: the facts strategy's `FactExtractor`, run after each compaction and at
            the end of each session (default: `offline.keyless_extractor()`, rule-based). Its
            tokens are billed as an LLM extractor's would be: its request plus its changes.
        facts_budget: most tokens of the facts block.
        on_progress: called as ``(messages done, total)`` after each message.

    Example:
        >>> from langchain_rolling_memory_lab.conversations import ConversationMessage as M
        >>> talk = [M("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(40)]
        >>> report = replay(talk)
        >>> report.result("full").input_tokens > report.result("summary").input_tokens
        True
    """
    chosen = list(strategies) if strategies is not None else default_strategies()
    if not chosen:
        msg = "replay needs at least one strategy"
        raise ValueError(msg)
    shared = EstimatedCostSummarizer(
        as_summarizer(summarizer) if summarizer is not None else keyless_summarizer(),
        token_counter=token_counter,
    )
    extractor = fact_extractor or keyless_extractor()
    runners = [_Runner(s, shared, token_counter, extractor, facts_budget) for s in chosen]
    pending: dict[str, list[BaseMessage]] = {}
    prompt = system_prompt
    current: tuple[str, str] | None = None
    clients: set[str] = set()
    total = len(conversation)
    for index, item in enumerate(conversation):
        for runner in runners:
            runner.at = index + 1
        clients.add(item.client)
        here = (item.session, item.client)
        if current is not None and here != current:
            _close(runners, pending, *current)
        current = here
        if item.role == "system":
            prompt = item.content
        elif item.role == "user":
            pending.setdefault(item.session, []).append(item.to_message())
        else:
            waiting = pending.pop(item.session, [])
            for runner in runners:
                request = [
                    *runner.prefix(prompt, item.client),
                    *runner.view(item.session, item.client),
                    *waiting,
                ]
                runner.request(index, request)
                runner.add(item.session, item.client, [*waiting, item.to_message()])
        for runner in runners:
            runner.tick()
        if on_progress is not None:
            on_progress(index + 1, total)
    if current is not None:
        _close(runners, pending, *current)
        for runner in runners:  # the last session's closing extraction counts too
            runner.result.cumulative[-1] = runner.result.total_tokens
    return ReplayReport(
        messages=total,
        sessions=len({m.session for m in conversation}),
        clients=len(clients),
        results=[runner.finish(clients) for runner in runners],
    )


def _close(runners: list[_Runner], pending: dict[str, list[BaseMessage]], session: str, client: str) -> None:
    """A session is left: store its unanswered messages and let the facts strategy extract."""
    waiting = pending.pop(session, [])
    for runner in runners:
        if waiting:
            runner.add(session, client, waiting)
        runner.end_session(session, client)
