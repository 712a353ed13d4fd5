"""`graph_state`: a LangGraph state's messages read as a session, and when a planned fold applies."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.core.graph_state import (
    REMOVE_ALL,
    Conversation,
    Fold,
    conversation,
    fingerprint,
    state_summary,
)
from langchain_rolling_memory.core.planner import Planner
from langchain_rolling_memory.core.records import CompactionResult
from langchain_rolling_memory.core.serde import dumps_message, loads_message

PLANNER = Planner(FoldPolicy(max_turns=4, keep_last=2))


def turns(n: int, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(start, start + n):
        out += [HumanMessage(f"q{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")]
    return out


def folded(messages: list[BaseMessage]) -> tuple[Conversation, Fold, list[BaseMessage]]:
    """A fold of `messages`' due part, and the state once it landed."""
    planned = conversation(messages, PLANNER)
    plan = PLANNER.plan(planned.state, planned.oldest, False)
    assert plan is not None
    result = CompactionResult("s", len(plan.batch), plan.batch[-1].seq, planned.state.version + 1, "the gist")
    fold = Fold.of(planned, result)
    return planned, fold, add_messages(messages, fold.update(planned, "en"))


def test_remove_all_is_langgraphs() -> None:
    assert REMOVE_ALL == REMOVE_ALL_MESSAGES


def test_a_fold_replaces_the_folded_messages_by_the_summary_at_the_head() -> None:
    messages = turns(3)
    _, fold, state = folded(messages)
    assert state[0].id == "rolling-memory-summary"
    record = state_summary(state)
    assert record is not None
    assert (record.text, record.covered_seq, record.version) == ("the gist", fold.result.covered_seq, 1)
    assert [m.id for m in state[1:]] == [m.id for m in messages[fold.result.covered_seq :]]
    # The next fold removes by id and replaces the head in place.
    _, second, again = folded([*state, *turns(2, start=3)])
    update = second.update(conversation([*state, *turns(2, start=3)], PLANNER), "en")
    assert all(isinstance(m, RemoveMessage) and m.id != REMOVE_ALL for m in update[:-1])
    assert again[0].id == "rolling-memory-summary"
    assert state_summary(again).version == 2  # type: ignore[union-attr]


def _removed(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if m.id != "h0"]


def _edited(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [HumanMessage("I moved", id="h0") if m.id == "h0" else m for m in messages]


def _forked(messages: list[BaseMessage]) -> list[BaseMessage]:
    return messages[:2]


def _grown(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [*messages, *turns(2, start=10)]


def _round_tripped(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [loads_message(dumps_message(m)) for m in messages]


@pytest.mark.parametrize(
    ("change", "applies"),
    [
        (_grown, True),
        (_round_tripped, True),
        (_removed, False),
        (_edited, False),
        (_forked, False),
    ],
    ids=[
        "more-messages-after",
        "serialized-again",
        "a-covered-message-removed",
        "one-edited",
        "a-fork-before",
    ],
)
def test_a_planned_fold_applies_only_while_the_state_starts_with_what_it_covers(
    change: Callable[[list[BaseMessage]], list[BaseMessage]], applies: bool
) -> None:
    messages = turns(3)
    _, fold, _ = folded(messages)
    assert fold.applies_to(conversation(change(messages), PLANNER)) is applies


def test_a_fold_planned_before_another_landed_does_not_apply() -> None:
    messages = turns(3)
    _, first, state = folded(messages)
    assert not first.applies_to(conversation(state, PLANNER))


def test_the_fingerprint_sees_tool_calls_and_answers() -> None:
    call = AIMessage(
        "", id="x", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}]
    )
    other = AIMessage(
        "", id="x", tool_calls=[{"name": "f", "args": {"a": 2}, "id": "c1", "type": "tool_call"}]
    )
    assert fingerprint(call) != fingerprint(other)
    assert fingerprint(ToolMessage("r", tool_call_id="c1", id="t")) != fingerprint(
        ToolMessage("r", tool_call_id="c2", id="t")
    )


def test_past_the_cap_the_oldest_chunk_is_folded_first_and_the_question_found() -> None:
    long = [HumanMessage("the question", id="q"), *[AIMessage(f"step {i}", id=f"s{i}") for i in range(30)]]
    read = conversation(long, PLANNER)
    assert read.state.truncated
    assert read.oldest is not None and read.oldest[0].message.id == "q"
    assert read.state.question is not None and read.state.question.message.id == "q"
