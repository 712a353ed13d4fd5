"""The LoCoMo memory evaluation: what each memory strategy puts in front of the model, and whether
the gold answer is in it. Reads the release at run time; calls no model and writes no store.

"Answer in context" (the rule, also in the README): a question counts as covered when every
content word of its gold answer - folded to lower case without accents, split on anything that
is not a letter or a digit, English and French stop words and lone letters dropped, numbers
kept (`search.content_words`) - is a word of the text the model would be sent as memory.
Categories 1-4 of LoCoMo are scored (5, adversarial, has no gold answer). Memory tokens are
`count_tokens_approximately` of the memory messages; search time is the strategy's own work
per question (search and rendering; the summary is built once per conversation, not timed).

The conversations come from `locomo.read_locomo`, the one LoCoMo reader (re-exported here
with its records). Strategies are a small registry (`STRATEGIES`): a name, a label and a
function that prepares a conversation and returns ``question -> memory messages``; a
store-backed recall is one more entry.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_rolling_memory.errors import ConfigurationError, require
from langchain_rolling_memory.history import RollingSummaryChatMessageHistory
from langchain_rolling_memory.lab.eval_store import recall_tokens_within, store_recall
from langchain_rolling_memory.lab.locomo import (
    CATEGORIES,
    EvalConversation,
    EvalQuestion,
    EvalTurn,
    parse_date,
    read_locomo,
)
from langchain_rolling_memory.policy import count_tokens
from langchain_rolling_memory.recall import recall_block
from langchain_rolling_memory.search import Bm25Index, SearchHit, content_words, query_terms, tokens
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.summarizers import extractive_summarizer

__all__ = [
    "CATEGORIES",
    "DEFAULT_STRATEGIES",
    "STRATEGIES",
    "EvalConversation",
    "EvalQuestion",
    "EvalReport",
    "EvalTurn",
    "Strategy",
    "answer_in_context",
    "format_table",
    "parse_date",
    "read_locomo",
    "run_eval",
    "sample_questions",
]

# ------------------------------------------------------------------------------ the rule


def answer_in_context(answer: str, context: str | set[str]) -> bool:
    """Whether every content word of `answer` is a word of `context` (see the module docstring).

    An answer with no content word (only stop words) counts as covered.

    Example:
        >>> answer_in_context("7 May 2023", "On 7 may, 2023 she went")
        True
        >>> answer_in_context("Psychology, counseling", "psychology")
        False
    """
    words = context if isinstance(context, set) else set(tokens(context))
    return all(w in words for w in content_words(answer))


# ------------------------------------------------------------------------------ strategies

Responder = Callable[[str], list[BaseMessage]]
"""``question -> the memory messages the model would be sent`` for one prepared conversation."""


@dataclass(frozen=True)
class Strategy:
    """One way to choose memory: `prepare` reads a conversation once and returns a responder."""

    name: str
    label: str
    prepare: Callable[[EvalConversation], Responder]


def _date_line(turn: EvalTurn) -> str:
    if turn.created_at is None:
        return f"Session {turn.session}"
    day = datetime.fromtimestamp(turn.created_at, tz=timezone.utc)
    return f"Session {turn.session}, {day.day} {day:%B} {day.year}"


def _transcript(conversation: EvalConversation) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i, turn in enumerate(conversation.turns):
        if i == 0 or turn.session != conversation.turns[i - 1].session:
            out.append(SystemMessage(_date_line(turn)))
        out.append(turn.message)
    return out


def _whole(conversation: EvalConversation) -> Responder:
    messages = _transcript(conversation)
    return lambda question: messages


def _last(budget: int) -> Callable[[EvalConversation], Responder]:
    def prepare(conversation: EvalConversation) -> Responder:
        kept: list[BaseMessage] = []
        used = 0
        for message in reversed([t.message for t in conversation.turns]):
            used += count_tokens([message])
            if used > budget:
                break
            kept.append(message)
        tail = kept[::-1]
        return lambda question: tail

    return prepare


def _summary_view(
    conversation: EvalConversation,
) -> tuple[list[BaseMessage], set[tuple[str, str | None, int]]]:
    """The rolling summary's view after the whole conversation, as one session with the product's defaults."""
    store = InMemoryRollingStore()
    history = RollingSummaryChatMessageHistory(
        "eval", summarizer=extractive_summarizer(), store=store, max_turns=12, keep_last=6, timeout=None
    )
    for turn in conversation.turns:
        history.add_messages([turn.message])
    view = history.messages
    # The view ends with the conversation's last messages, word for word: recall skips them.
    shown = {m.text for m in view}
    tail = conversation.turns[len(conversation.turns) - len(view) :] if view else []
    keys: set[tuple[str, str | None, int]] = {
        ("message", t.session_id, t.seq) for t in tail if t.message.text in shown
    }
    return view, keys


def _summary(conversation: EvalConversation) -> Responder:
    view, _ = _summary_view(conversation)
    return lambda question: view


@dataclass
class _Searcher:
    """BM25 over one conversation's messages, as a store-backed search would return them."""

    conversation: EvalConversation
    stem: bool = False
    hits: dict[int, SearchHit] = field(default_factory=dict)
    neighbours: dict[Any, SearchHit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = Bm25Index(stem=self.stem)
        turns = self.conversation.turns
        for i, turn in enumerate(turns):
            name = turn.message.name or ""
            self.index.add(i, f"{name} {turn.message.text}")
            self.hits[i] = SearchHit("message", turn.session_id, turn.seq, turn.created_at, 0.0, turn.message)
        for i in range(len(turns) - 1):
            if turns[i + 1].session == turns[i].session:
                self.neighbours[self.hits[i].key] = self.hits[i + 1]

    def search(self, question: str, limit: int) -> list[SearchHit]:
        return [self.hits[int(str(doc))] for doc, _ in self.index.search(query_terms(question), limit=limit)]


def _recall(
    budget: int, *, stem: bool = True, neighbours: bool = True, with_summary: bool = False
) -> Callable[[EvalConversation], Responder]:
    def prepare(conversation: EvalConversation) -> Responder:
        searcher = _Searcher(conversation, stem=stem)
        view: list[BaseMessage] = []
        skip: set[tuple[str, str | None, int]] = set()
        if with_summary:
            view, skip = _summary_view(conversation)
        # The block travels as one more message: its envelope is charged to the budget too.
        left = budget - (count_tokens(view) if view else 0) - count_tokens([SystemMessage("")])

        def respond(question: str) -> list[BaseMessage]:
            block = recall_block(
                searcher.search(question, limit=100),
                max_tokens=max(0, left),
                skip=skip,
                neighbours=searcher.neighbours if neighbours else None,
            )
            return [*view, SystemMessage(block.text)] if block.text else list(view)

        return respond

    return prepare


# The store-backed recall whose WHOLE memory message (frame + block) fits 2,000 tokens: the
# frame is measured with the library's rendering, not guessed (`eval_store.memory_frame_tokens`).
_WITHIN_2000 = recall_tokens_within(2000)

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("transcript", "whole transcript", _whole),
        Strategy("last-2000", "last 2,000 tokens", _last(2000)),
        Strategy("summary", "rolling summary (keyless, 12/6)", _summary),
        Strategy("recall-500", "recall 500", _recall(500)),
        Strategy("recall-1000", "recall 1,000", _recall(1000)),
        Strategy("recall-2000", "recall 2,000", _recall(2000)),
        Strategy("summary+recall-2000", "summary + recall, 2,000 in all", _recall(2000, with_summary=True)),
        Strategy("store-recall-1000", "with_rolling_memory, SQLite, recall_tokens=1,000", store_recall(1000)),
        Strategy("store-recall-2000", "with_rolling_memory, SQLite, recall_tokens=2,000", store_recall(2000)),
        Strategy(
            "store-recall-fit-2000",
            f"with_rolling_memory, SQLite, recall_tokens={_WITHIN_2000:,} (memory message <= 2,000)",
            store_recall(_WITHIN_2000),
        ),
        # Variants kept for measuring what helps; not in the default table.
        Strategy("recall-2000-plain", "recall 2,000, no neighbours", _recall(2000, neighbours=False)),
        Strategy("recall-2000-nostem", "recall 2,000, no stemming", _recall(2000, stem=False)),
    )
}
DEFAULT_STRATEGIES: tuple[str, ...] = (
    "transcript",
    "last-2000",
    "summary",
    "recall-500",
    "recall-1000",
    "recall-2000",
    "summary+recall-2000",
    "store-recall-2000",
    "store-recall-fit-2000",
)


# ------------------------------------------------------------------------------ running


@dataclass
class _Tally:
    covered: int = 0
    total: int = 0
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, hit: bool, tokens: int, seconds: float) -> None:
        self.covered += hit
        self.total += 1
        self.tokens.append(tokens)
        self.seconds.append(seconds)

    def row(self) -> dict[str, float | int]:
        ordered = sorted(self.tokens)
        p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0
        return {
            "questions": self.total,
            "answer_in_context": round(self.covered / self.total, 4) if self.total else 0.0,
            "tokens_mean": round(statistics.fmean(self.tokens), 1) if self.tokens else 0.0,
            "tokens_p95": p95,
            "ms_per_question": round(1000 * statistics.fmean(self.seconds), 3) if self.seconds else 0.0,
        }


@dataclass
class EvalReport:
    """Per strategy, overall and per category: answer-in-context rate, tokens, time."""

    source: str
    conversations: int
    strategies: list[Strategy]
    overall: dict[str, _Tally]
    by_category: dict[str, dict[int, _Tally]]

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "strategy": s.name,
                "label": s.label,
                **self.overall[s.name].row(),
                "categories": {
                    CATEGORIES[c]: self.by_category[s.name][c].row()["answer_in_context"]
                    for c in sorted(self.by_category[s.name])
                },
            }
            for s in self.strategies
        ]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "conversations": self.conversations, "strategies": self.rows()}


def run_eval(
    conversations: Sequence[EvalConversation],
    *,
    strategies: Sequence[str | Strategy] = DEFAULT_STRATEGIES,
    source: str = "",
    on_progress: Callable[[str, str], None] | None = None,
    on_answer: Callable[[str, EvalQuestion, list[BaseMessage]], None] | None = None,
) -> EvalReport:
    """Score every question of every conversation under each strategy.

    `strategies` are names of `STRATEGIES` or `Strategy` objects, used as they are (a
    store-backed recall on a server, say); their names must differ. A responder that has a
    ``close`` method is closed once its conversation's questions are asked.

    `on_answer` sees each (strategy name, question, memory) once it is scored: the keyed path
    (`judge.AnswerGrader`) asks a real model there, outside the timed search.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> turns = [EvalTurn(1, 1, HumanMessage("I adopted a cat named Oscar"), 0.0)]
        >>> conv = EvalConversation("c", turns, [EvalQuestion("Cat's name?", "Oscar", 4)])
        >>> run_eval([conv], strategies=["recall-500"]).rows()[0]["answer_in_context"]
        1.0
    """
    unknown = [n for n in strategies if not isinstance(n, Strategy) and n not in STRATEGIES]
    if unknown or not strategies:
        msg = f"unknown strategies {unknown or '(none given)'}; choose among {sorted(STRATEGIES)}"
        raise ConfigurationError(msg)
    chosen = [s if isinstance(s, Strategy) else STRATEGIES[s] for s in strategies]
    names = [s.name for s in chosen]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        msg = f"strategies must have different names, got {twice} more than once; rename or drop the repeats"
        raise ConfigurationError(msg)
    overall = {s.name: _Tally() for s in chosen}
    by_category: dict[str, dict[int, _Tally]] = {s.name: {} for s in chosen}
    for conversation in conversations:
        for strategy in chosen:
            if on_progress is not None:
                on_progress(conversation.name, strategy.name)
            respond = strategy.prepare(conversation)
            try:
                for question in conversation.questions:
                    start = time.perf_counter()
                    memory = respond(question.question)
                    seconds = time.perf_counter() - start
                    words = set(tokens("\n".join(m.text for m in memory)))
                    covered = answer_in_context(question.answer, words)
                    used = count_tokens(memory) if memory else 0
                    overall[strategy.name].add(covered, used, seconds)
                    by_category[strategy.name].setdefault(question.category, _Tally()).add(
                        covered, used, seconds
                    )
                    if on_answer is not None:
                        on_answer(strategy.name, question, memory)
            finally:
                # A store-backed responder owns a store (a server's, perhaps): not left to the collector.
                close = getattr(respond, "close", None)
                if callable(close):
                    close()
    return EvalReport(source, len(conversations), chosen, overall, by_category)


def sample_questions(
    conversations: Sequence[EvalConversation], count: int, *, seed: int = 0
) -> list[EvalConversation]:
    """The conversations with `count` of their questions drawn at random over all of them
    (the same draw for a seed), in their original order; the conversations left with none dropped."""
    if count < 1:
        msg = f"the number of questions must be at least 1, got {count!r}; pass --questions N with N >= 1"
        raise ConfigurationError(msg)
    every = [(i, j) for i, c in enumerate(conversations) for j in range(len(c.questions))]
    chosen = set(random.Random(seed).sample(every, min(count, len(every))))
    out = []
    for i, c in enumerate(conversations):
        kept = [q for j, q in enumerate(c.questions) if (i, j) in chosen]
        if kept:
            out.append(EvalConversation(c.name, c.turns, kept))
    return out


def format_table(report: EvalReport) -> str:
    """The report as a plain-text table (Markdown), one row per strategy."""
    categories = sorted({c for tallies in report.by_category.values() for c in tallies})
    head = ["strategy", "answer in context", *[f"{CATEGORIES[c]} ({c})" for c in categories]]
    head += ["tokens mean", "tokens p95", "ms/question"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for s in report.strategies:
        row = report.overall[s.name].row()
        cells = [s.label, f"{100 * float(row['answer_in_context']):.1f}%"]
        for c in categories:
            tally = report.by_category[s.name].get(c)
            cells.append(f"{100 * tally.covered / tally.total:.1f}%" if tally and tally.total else "-")
        cells += [
            f"{float(row['tokens_mean']):,.0f}",
            f"{int(row['tokens_p95']):,}",
            f"{float(row['ms_per_question']):.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    questions = report.overall[report.strategies[0].name].total if report.strategies else 0
    lines.append(
        f"\n{report.conversations} conversations, {questions} questions (categories 1-4), {report.source}"
    )
    return "\n".join(lines)


def plot_eval(report: EvalReport, *, path: str | Path) -> None:
    """Answer in context against mean memory tokens, one point per strategy (the ``plot`` extra)."""
    require("matplotlib", "plot", feature="the eval plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in report.strategies:
        row = report.overall[s.name].row()
        ax.scatter(float(row["tokens_mean"]), 100 * float(row["answer_in_context"]))
        ax.annotate(s.label, (float(row["tokens_mean"]), 100 * float(row["answer_in_context"])), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("memory tokens per question (mean, log scale)")
    ax.set_ylabel("answer in context (%)")
    ax.set_title(f"LoCoMo, categories 1-4 ({report.conversations} conversations)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
