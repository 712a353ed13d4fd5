"""A LangGraph state's messages read as a session, and the updates that fold them; pure, no I/O.

Owns how the agent middleware keeps compaction in the graph state itself (as LangChain's
`SummarizationMiddleware` does), so that forks, time travel, `RemoveMessage`, `update_state`
and human edits follow the checkpointer by construction and each checkpoint stays bounded:

- the summary message at the head of the state (the view's framed summary, id
  ``rolling-memory-summary``), carrying the record it stands for and the *lineage* of the
  messages it covers (a digest chained over the id and content of each folded message, so its
  size never grows);
- the `SessionState` a state's messages stand for (positions as seqs), so that the pure
  `planner` decides folds and views exactly as it does for a store's transcript;
- the update that replaces folded messages by the new summary (`RemoveMessage` by id);
- whether a fold planned on one state (in the background, before a fork or an edit) still
  applies to another: only if the messages it covers are the other's prefix, unchanged.

Hooks, store I/O and summarizer calls are elsewhere (`middleware`, `agent_state`, `compaction`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage

from langchain_rolling_memory.core.cuts import latest_human
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, summary_message, summary_text
from langchain_rolling_memory.core.planner import Planner
from langchain_rolling_memory.core.records import CompactionResult, SessionState, StoredMessage, SummaryRecord

SUMMARY_KEY = "rolling_memory"
"""Key, in the state's summary message's ``additional_kwargs``, of what the summary stands for:
``{"covered", "version", "lineage", "meta"}``."""

REMOVE_ALL = "__remove_all__"
"""LangGraph's `REMOVE_ALL_MESSAGES` (a `RemoveMessage` id that clears the list first)."""


def fingerprint(message: BaseMessage) -> str:
    """A digest of what a message says and who it is: id, kind, content, tool calls (an edit
    that keeps the id changes it; the checkpointer's serialization does not)."""
    body: dict[str, Any] = {"id": message.id, "type": message.type, "content": message.content}
    if isinstance(message, AIMessage):
        body["calls"] = [[c.get("id"), c.get("name"), c.get("args")] for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        body["answers"] = message.tool_call_id
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _chained(lineage: str, prints: Sequence[str]) -> str:
    return hashlib.sha256("|".join([lineage, *prints]).encode()).hexdigest()[:32]


def _record_of(head: BaseMessage) -> tuple[SummaryRecord, str] | None:
    """The record and lineage a state's head summary stands for (None: not a summary)."""
    text = summary_text(head)
    if text is None:
        return None
    info = head.additional_kwargs.get(SUMMARY_KEY)
    info = info if isinstance(info, Mapping) else {}
    covered, version, meta = info.get("covered"), info.get("version"), info.get("meta")
    record = SummaryRecord(
        text,
        covered if isinstance(covered, int) and covered >= 0 else 0,
        version if isinstance(version, int) and version >= 0 else 0,
        dict(meta) if isinstance(meta, Mapping) else {},
    )
    lineage = info.get("lineage")
    return record, lineage if isinstance(lineage, str) else ""


def state_summary(messages: Sequence[BaseMessage]) -> SummaryRecord | None:
    """The summary record a graph state's messages carry at their head, if any.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> state_summary([HumanMessage("hi", id="h1")]) is None
        True
    """
    found = _record_of(messages[0]) if messages else None
    return found[0] if found else None


def _head_message(result: CompactionResult, lineage: str, language: str) -> BaseMessage:
    info = {
        "covered": result.covered_seq,
        "version": result.version,
        "lineage": lineage,
        "meta": dict(result.meta),
    }
    return summary_message(result.summary, language).model_copy(
        update={"additional_kwargs": {SUMMARY_KEY: info}}
    )


@dataclass(frozen=True)
class Conversation:
    """A graph state's messages read as a session.

    Attributes:
        head: the summary message at the head of the state, if any.
        lineage: digest of every message folded into that summary ("" without one).
        messages: the messages after the head, in order.
        state: what the `Planner` reads: the summary record, the messages as a tail (each at seq
            ``covered + 1 + position``), truncated past the policy's cap as a store's is, the
            latest user message found wherever it is.
        oldest: past the cap, the oldest chunk a fold takes first (as a store's backlog).
    """

    head: BaseMessage | None
    lineage: str
    messages: list[BaseMessage]
    state: SessionState
    oldest: list[StoredMessage] | None

    @property
    def covered(self) -> int:
        return self.state.covered_seq

    def folded(self, result: CompactionResult) -> list[BaseMessage]:
        """The messages `result` folds: those up to its covered seq."""
        return self.messages[: max(0, result.covered_seq - self.covered)]


def conversation(
    messages: Sequence[BaseMessage], planner: Planner, generation: str | None = None
) -> Conversation:
    """`messages` (a graph state's, or a model request's) read as a session."""
    found = _record_of(messages[0]) if messages else None
    head = messages[0] if found else None
    record, lineage = found if found else (None, "")
    rest = list(messages[1:] if head is not None else messages)
    start = record.covered_seq if record else 0
    rows = [StoredMessage(start + 1 + i, m) for i, m in enumerate(rest)]
    state = planner.state(record, rows, generation)
    oldest = None
    if state.truncated:
        oldest = rows[: planner.policy.cap]
        while len(oldest) < len(rows) and planner.group_rest(oldest) is not None:
            oldest = rows[: len(oldest) + planner.policy.cap]  # to the end of its tool group
        if planner.lacks_question(state):  # the question is in the messages past the cap
            index = latest_human(rest)
            state = planner.with_found(state, None if index is None else rows[index])
    return Conversation(head, lineage, rest, state, oldest)


@dataclass(frozen=True)
class Fold:
    """A compaction planned on one conversation, to land on any whose prefix it covers.

    Attributes:
        base: lineage of the summary it updates ("" for none).
        covers: fingerprints of the messages it folds, oldest first.
        result: the compaction (its folded messages dropped once summarized).
    """

    base: str
    covers: tuple[str, ...]
    result: CompactionResult

    @classmethod
    def of(cls, planned: Conversation, result: CompactionResult) -> Fold:
        prints = tuple(fingerprint(m) for m in planned.folded(result))
        return cls(planned.lineage, prints, replace(result, messages=()))

    def applies_to(self, current: Conversation) -> bool:
        """True if `current` still starts with what this fold covers: the same summary, then
        the same messages (by id and content). A fork before them, a removal or an edit of
        one of them, or another fold landed first: False, and the fold is not used."""
        n = len(self.covers)
        return (
            current.lineage == self.base
            and current.covered + n == self.result.covered_seq
            and len(current.messages) >= n
            and tuple(fingerprint(m) for m in current.messages[:n]) == self.covers
        )

    def update(self, current: Conversation, language: str, *, whole: bool = False) -> list[BaseMessage]:
        """The ``messages`` update that lands this fold on `current` (see `applies_to`).

        The folded messages are removed by id and the summary replaces the head in place; a
        state without a head summary (or `whole`: the state is being rewritten) is cleared and
        written again as summary then kept messages, so the summary comes first.
        """
        head = _head_message(self.result, _chained(self.base, self.covers), language)
        folded = current.folded(self.result)
        kept = current.messages[len(folded) :]
        if current.head is None or whole or any(m.id is None for m in folded):
            return [RemoveMessage(id=REMOVE_ALL), head, *kept]
        return [*(RemoveMessage(id=str(m.id)) for m in folded), head]


def seeded(view: SessionState, session_id: str, language: str) -> list[BaseMessage]:
    """A store session's view (summary record and tail) as the messages a new thread starts
    from: the summary as the state's head, then the tail, each message given an id if it has
    none (``<session>:<seq>``) so that the state never stores it again."""
    rows = view.tail
    out: list[BaseMessage] = []
    if view.record is not None:
        covered = rows[0].seq - 1 if rows else view.record.covered_seq
        result = CompactionResult(
            session_id, 0, covered, view.record.version, view.record.text, (), dict(view.record.meta)
        )
        lineage = _chained("store", [session_id, str(view.record.version), str(covered)])
        out.append(_head_message(result, lineage, language))
    out.extend(as_seeded(row, session_id) for row in rows)
    return out


def as_seeded(row: StoredMessage, session_id: str) -> BaseMessage:
    """A stored row's message as a thread seeded from it holds it: with an id
    (``<session>:<seq>`` when it was stored without one)."""
    message = row.message
    return message if message.id else message.model_copy(update={"id": f"{session_id}:{row.seq}"})


def is_summary(message: BaseMessage) -> bool:
    """True for a state's (or a view's) summary message: never a message to store."""
    return message.id == SUMMARY_MESSAGE_ID
