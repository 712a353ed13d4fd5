"""What a compaction folds and what a turn shows, from a session's state: pure, no I/O, no clock.

Owns the decisions the engine takes on a `SessionState`: whether a compaction is due, the
batch to fold and the summary it updates (a topic's section in topic mode), the text and
meta to install (cleaned, usage counted, the latest user message pinned when it is folded),
the view (the question always in it, the summary framed in the prompt's language) with its
hard-cap fallback window, a structured summary's fields kept beside its text, and a state
extended or folded without a read. "Today" (the date of a finished topic) is injected. Reading and writing the store, calling the
summarizer, leases, back-off and scheduling are `compaction`'s; where to cut is `cuts`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date as Date
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_rolling_memory.core.cuts import (
    FoldPolicy,
    TokenCounter,
    count_tokens,
    latest_human,
    shorten_message,
    with_question,
)
from langchain_rolling_memory.core.framing import summary_message, with_summary_ack
from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, clean_summary
from langchain_rolling_memory.core.records import (
    CompactionResult,
    SessionState,
    StoredMessage,
    SummaryRecord,
    TurnRead,
)
from langchain_rolling_memory.core.serde import dumps_message, loads_message
from langchain_rolling_memory.core.settings import (
    DEFAULT_MAX_SUMMARY_CHARS,
    DEFAULT_MAX_TOPIC_SECTIONS,
    check_summary_limits,
)
from langchain_rolling_memory.core.structured_summary import StructuredSummary, parse_structured_summary
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.core.tool_pairs import pending_calls, tool_safe_cut
from langchain_rolling_memory.core.topics import (
    META_SECTIONS,
    TopicDetector,
    TopicLabels,
    compose_sections,
    open_section,
    topic_cut,
)
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.errors import SummarizerError

META_QUESTION = "question"
"""Summary meta key of the latest user message once it is folded: ``{"seq", "message"}``,
so that the view still sends it (with the tool exchanges after it folded, not it)."""

META_STRUCTURED = "structured"
"""Summary meta key of the structured summary's fields (a `StructuredSummary` as JSON), present
only while the installed summary came with fields."""


def structured_summary(record: SummaryRecord | None) -> StructuredSummary | None:
    """The fields of the structured summary installed in `record` (None: the summary has none,
    or they are not readable as a `StructuredSummary`)."""
    fields = record.meta.get(META_STRUCTURED) if record is not None else None
    return parse_structured_summary(fields) if isinstance(fields, dict) else None


def _with_fields(meta: dict[str, Any], fields: Mapping[str, Any] | None, limit: int) -> dict[str, Any]:
    """`meta` holding `fields` (JSON-ready) or, when this summary has none, without the old ones.
    Fields far beyond the text's own cap are not kept: the text alone is then the summary."""
    meta = {k: v for k, v in meta.items() if k != META_STRUCTURED}
    parsed = parse_structured_summary(dict(fields)) if fields else None
    if parsed is not None:
        value = parsed.model_dump(mode="json")
        if len(json.dumps(value, ensure_ascii=False)) <= limit:
            meta[META_STRUCTURED] = value
    return meta


def _pinned(record: SummaryRecord | None) -> StoredMessage | None:
    """The user message pinned in a summary record's meta, if any (a malformed one is ignored)."""
    pin = record.meta.get(META_QUESTION) if record is not None else None
    if (
        not isinstance(pin, dict)
        or not isinstance(pin.get("seq"), int)
        or not isinstance(pin.get("message"), str)
    ):
        return None
    try:
        tokens = pin.get("tokens")
        return StoredMessage(
            pin["seq"], loads_message(pin["message"]), tokens if isinstance(tokens, int) else None
        )
    except Exception:  # data written by something else: no pin rather than a broken view
        return None


def _latest_human(rows: Sequence[StoredMessage]) -> StoredMessage | None:
    index = latest_human([m.message for m in rows])
    return None if index is None else rows[index]


def _cap_chars(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a space when one is near the end."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.8 else cut).rstrip() + "…"


@dataclass(frozen=True)
class FoldPlan:
    """What one compaction folds: `batch` (oldest first) into `previous`."""

    batch: list[StoredMessage]
    previous: str

    @property
    def messages(self) -> list[BaseMessage]:
        return [m.message for m in self.batch]


@dataclass(frozen=True)
class Planner:
    """The pure side of compacting with one policy (see the module docstring).

    Args:
        policy: when to fold and how much to keep.
        token_counter: counts messages whose token count was not stored with them.
        max_words: word cap applied to every summary before it is stored.
        topic_detector: optional ``(message) -> bool``: a finished topic is folded at once
            into its own section of the summary.
        topic_labels: section labels (``Topic 1: ...``, ``Current topic: ...``).
        max_topic_sections: finished sections kept; beyond, the two oldest are joined.
        max_summary_chars: character cap applied with `max_words` (a text without spaces
            passes any word cap).
        max_summary_tokens: token cap applied after `max_words`, counted with
            `token_counter` (None: words and characters only; the lessons cap at 300).
        language: language of the frame the view sends the summary under
            (`prompts.summary_frame`).
        today: "today" for the date of a finished topic section, ``Topic 1 (2026-11-30): ...``
            (None: sections are not dated). The planner reads no clock of its own.
        summary_ack: the view follows the summary message with the assistant's short
            acknowledgement (`framing.with_summary_ack`).
    """

    policy: FoldPolicy
    token_counter: TokenCounter = count_tokens
    max_words: int = DEFAULT_MAX_WORDS
    topic_detector: TopicDetector | None = None
    topic_labels: TopicLabels = field(default_factory=TopicLabels)
    max_topic_sections: int = DEFAULT_MAX_TOPIC_SECTIONS
    max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS
    max_summary_tokens: int | None = None
    language: str = "en"
    today: Callable[[], Date] | None = None
    summary_ack: bool = False

    def __post_init__(self) -> None:
        check_summary_limits(
            max_summary_tokens=self.max_summary_tokens,
            max_summary_chars=self.max_summary_chars,
            max_topic_sections=self.max_topic_sections,
        )

    # ------------------------------------------------------------------ states

    @property
    def read_limit(self) -> int:
        """Unsummarized messages read per turn: one more than the cap, to detect a backlog."""
        return self.policy.cap + 1

    def state(
        self, record: SummaryRecord | None, rows: list[StoredMessage], generation: str | None = None
    ) -> SessionState:
        truncated = len(rows) > self.policy.cap
        tail = rows[-self.policy.cap :] if truncated else rows
        # Without a user message in the tail, the question is the one pinned when it was
        # folded; behind a backlog it may be in the unread part (`lacks_question`).
        pinned = None if truncated or _latest_human(tail) else _pinned(record)
        return SessionState(record, tail, truncated, pinned, generation)

    def lacks_question(self, state: SessionState) -> bool:
        """True if the latest user message may lie in the unread part of a backlog: the
        caller looks for it (`question_pages`) and sets it with `with_found`."""
        return state.truncated and state.question is None and _latest_human(state.tail) is None

    def question_pages(self, state: SessionState) -> list[dict[str, Any]]:
        """`read`'s keywords for the unread part of a backlog, newest page first (seqs are
        gap-free, so a page is addressed by seq)."""
        pages: list[dict[str, Any]] = []
        end = state.tail[0].seq - 1 if state.tail else state.covered_seq
        while end > state.covered_seq:
            size = min(self.policy.cap, end - state.covered_seq)
            pages.append({"after_seq": end - size, "limit": size, "newest": False})
            end -= size
        return pages

    def with_found(self, state: SessionState, found: StoredMessage | None) -> SessionState:
        """`state` with the latest user message found in the backlog (or the pinned one)."""
        return replace(state, question=found or _pinned(state.record))

    @staticmethod
    def latest(state: SessionState) -> StoredMessage | None:
        """The latest user message of the session, as far as `state` knows."""
        return _latest_human(state.tail) or state.question

    def extend(
        self, state: SessionState, appended: Sequence[StoredMessage], record: SummaryRecord | None
    ) -> SessionState | None:
        """The state after `appended` was written, without reading the tail again.

        `record` is the summary record read after the write. None when the shortcut cannot be
        sure to equal a fresh `load`: a summary landed meanwhile, another writer's messages
        sit in between, the tail was already truncated, or the session had no row when
        `state` was read (the erase generation of the row the append created is not known).
        The caller then reloads.
        """
        if state.truncated or not appended or (record.version if record else 0) != state.version:
            return None
        if state.generation is None:
            return None
        last = state.tail[-1].seq if state.tail else state.covered_seq
        if appended[0].seq != last + 1:
            return None
        extended = self.state(record, [*state.tail, *appended], state.generation)
        return None if self.lacks_question(extended) else extended

    def folded(self, state: SessionState, result: CompactionResult) -> SessionState | None:
        """The state after `result` was installed on top of `state`, without a read (None:
        reload, because the compaction did not start from this exact state)."""
        if state.truncated or result.version != state.version + 1:
            return None
        tail = [m for m in state.tail if m.seq > result.covered_seq]
        return self.state(result.record, tail, state.generation)

    def token_counts(self, rows: Sequence[StoredMessage]) -> list[int]:
        return [m.tokens if m.tokens is not None else self.token_counter([m.message]) for m in rows]

    def due(self, state: SessionState) -> int:
        """How many of the tail's messages a compaction would fold now (0: none due)."""
        if state.truncated:
            return 1  # a backlog beyond the cap: fold its oldest chunk
        finished = self.finished_topic(state)
        if finished:
            return finished
        counts = self.token_counts(state.tail) if self.policy.uses_tokens else None
        return self.policy.cut(state.messages, counts)

    def finished_topic(self, state: SessionState) -> int:
        """Messages of the tail that form a finished topic (0: none, or no detector)."""
        if self.topic_detector is None or state.truncated:
            return 0
        return topic_cut(state.messages, self.topic_detector)

    # ------------------------------------------------------------------ topic sections

    def topic_mode(self, state: SessionState) -> bool:
        return self.topic_detector is not None or (
            state.record is not None and META_SECTIONS in state.record.meta
        )

    def previous(self, state: SessionState) -> str:
        """What the summarizer is asked to update: the current topic's section in topic mode;
        the structured summary's fields as JSON when it has them, so that an update starts
        from the fields rather than from their rendering."""
        if state.record is None:
            return state.summary
        text = open_section(state.summary, state.record.meta) if self.topic_mode(state) else state.summary
        fields = structured_summary(state.record)
        if fields is None or not text.strip():
            return text  # a topic just closed: its fields are not the open section's
        return json.dumps(fields.model_dump(mode="json"), ensure_ascii=False)

    def compose(
        self, state: SessionState, text: str, batch: list[StoredMessage], meta: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The summary text to install (sections laid out in topic mode) and its meta."""
        if not self.topic_mode(state):
            return text, meta
        closing = self.finished_topic(state) == len(batch)
        return compose_sections(
            meta,
            text,
            closing=closing,
            labels=self.topic_labels,
            max_sections=self.max_topic_sections,
            max_words=self.max_words,
            date=self.today() if self.today is not None and closing else None,
        )

    def view(self, state: SessionState) -> list[BaseMessage]:
        """Summary message (if any), the latest user message if it was folded or cut, then
        the unsummarized tail (a capped window if too long). The question is always sent,
        shortened with a visible marker only beyond `FoldPolicy.question_tokens`."""
        return self.window(state)[0]

    def window(self, state: SessionState) -> tuple[list[BaseMessage], str | None]:
        """`view`, and how many unsummarized messages made it fall back to a plain window
        (``"12"``, ``"more than 40"``; None: it did not)."""
        messages = state.messages
        counts = self.token_counts(state.tail) if self.policy.uses_tokens else None
        cut = self.policy.fallback_cut(messages, counts, backlog=state.truncated)
        fell_back = None
        if cut:
            fell_back = f"more than {len(messages)}" if state.truncated else str(len(messages))
            messages = messages[cut:]
        latest = self.latest(state)
        question = latest.message if latest is not None else None
        messages = with_question(messages, question)
        limit = self.policy.question_tokens
        if latest is not None and limit is not None and self.token_counts([latest])[0] > limit:
            short = shorten_message(latest.message, limit, self.token_counter)
            messages = [short if m is question else m for m in messages]
        head: list[BaseMessage] = [summary_message(state.summary, self.language)] if state.summary else []
        if self.summary_ack:
            head = with_summary_ack(head, self.language)
        return head + messages, fell_back

    # ------------------------------------------------------------------ one compaction

    def backlog(self, state: SessionState) -> dict[str, Any]:
        """`read`'s keywords for the oldest chunk of a backlog beyond the cap."""
        return {"after_seq": state.covered_seq, "limit": self.policy.cap, "newest": False}

    def plan(self, state: SessionState, oldest: list[StoredMessage] | None, force: bool) -> FoldPlan | None:
        """What to fold (None: nothing): every unsummarized message with `force`, the oldest
        chunk of a backlog (`oldest`), else the policy's cut of the tail."""
        if force:
            batch = state.tail
        elif oldest is not None:
            batch = oldest[: self._backlog_cut([m.message for m in oldest])]
        else:
            batch = state.tail[: self.due(state)]
        return FoldPlan(batch, self.previous(state)) if batch else None

    def _backlog_cut(self, msgs: list[BaseMessage]) -> int:
        """How many of a backlog's oldest chunk to fold: all but `keep_last`, moved back to a
        tool-safe cut; when that leaves nothing (the chunk starts with a tool group reaching
        past it), forward to the group's end, provided the chunk holds every result of it (a
        chunk ending inside the group folds nothing: the caller reads it to the group's end,
        `group_rest`)."""
        cut = tool_safe_cut(msgs, max(1, len(msgs) - self.policy.keep_last), keep_more=True)
        if cut:
            return cut
        cut = tool_safe_cut(msgs, 1, keep_more=False)
        return cut if cut < len(msgs) or pending_calls(msgs) == len(msgs) else 0

    def group_rest(self, oldest: Sequence[StoredMessage]) -> dict[str, Any] | None:
        """`read`'s keywords for the rest of a tool group that starts a backlog's oldest chunk
        and reaches past it (None: the chunk holds a whole group or starts with none)."""
        msgs = [m.message for m in oldest]
        if not oldest or self._backlog_cut(msgs) or tool_safe_cut(msgs, 1, keep_more=False) < len(msgs):
            return None
        return {"after_seq": oldest[-1].seq, "limit": self.policy.cap, "newest": False}

    def clean(self, result: SummaryResult) -> SummaryResult:
        cleaned = clean_summary(
            result.text,
            max_words=self.max_words,
            max_summary_tokens=self.max_summary_tokens,
            token_counter=self.token_counter,
        )
        text = _cap_chars(cleaned, self.max_summary_chars)
        if not text:
            msg = f"the summarizer returned nothing usable: {result.text[:80]!r}"
            raise SummarizerError(msg)
        return SummaryResult(text, result.input_tokens, result.output_tokens, result.calls, result.fields)

    def outcome(
        self, session_id: str, state: SessionState, plan: FoldPlan, raw: SummaryResult
    ) -> CompactionResult:
        """The compaction to install on top of `state` (one version later): the cleaned text,
        laid out in topic sections if need be, and the record's meta with this one's cost."""
        result = self.clean(raw)
        input_tokens = result.input_tokens
        if input_tokens is None:
            input_tokens = self.token_counter([HumanMessage(plan.previous), *plan.messages])
        output_tokens = result.output_tokens
        if output_tokens is None:
            output_tokens = self.token_counter([HumanMessage(result.text)])
        kept = state.record.meta if state.record else {}
        usage = SummaryUsage.from_meta(kept).added(
            model_calls=result.calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            folded_messages=len(plan.batch),
            folded_tokens=sum(self.token_counts(plan.batch)),
            summary_tokens=self.token_counter([summary_message(result.text, self.language)]),
        )
        text, meta = self.compose(state, result.text, plan.batch, usage.to_meta(kept))
        meta = _with_fields(self._pin(state, plan, meta), result.fields, 2 * self.max_summary_chars)
        return CompactionResult(
            session_id,
            len(plan.batch),
            plan.batch[-1].seq,
            state.version + 1,
            text,
            tuple(plan.messages),
            meta,
            state.generation,
        )

    def _pin(self, state: SessionState, plan: FoldPlan, meta: dict[str, Any]) -> dict[str, Any]:
        """`meta` pinning the latest user message if this fold covers it, so the view still
        sends it; without the pin once a later user message is in the kept tail."""
        meta = {k: v for k, v in meta.items() if k != META_QUESTION}
        latest = self.latest(state)
        covered = plan.batch[-1].seq
        if latest is not None and latest.seq <= covered:
            meta[META_QUESTION] = {
                "seq": latest.seq,
                "message": dumps_message(latest.message),
                "tokens": self.token_counts([latest])[0],
            }
        return meta

    def fresh(self, state: SessionState, fresh: TurnRead) -> SessionState | None:
        """`state` with the record just read if neither its version nor the session's erase
        generation changed, else None (reload: an erase leaves nothing of `state` to fold)."""
        record = fresh.record
        if (record.version if record else 0) != state.version or fresh.generation != state.generation:
            return None
        return replace(state, record=record)
