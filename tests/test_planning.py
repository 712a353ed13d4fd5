"""The pure side of compaction: states extended or folded without a read, and the fold plan."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.core.planner import Planner
from langchain_rolling_memory.core.records import CompactionResult, SessionState, StoredMessage, SummaryRecord
from langchain_rolling_memory.errors import ConfigurationError

PLANNER = Planner(FoldPolicy(max_turns=4, keep_last=2, hard_cap=6))


def rows(first: int, last: int) -> list[StoredMessage]:
    make: list[type[BaseMessage]] = [HumanMessage, AIMessage]
    return [StoredMessage(seq, make[seq % 2](f"m{seq}")) for seq in range(first, last + 1)]


def record(version: int, covered: int = 0) -> SummaryRecord:
    return SummaryRecord("s", covered, version)


@pytest.mark.parametrize(
    ("appended", "fresh", "extends"),
    [
        (rows(4, 5), None, True),
        (rows(5, 5), None, False),  # another writer's row 4 sits in between
        (rows(4, 4), record(1, 2), False),  # a summary landed meanwhile
        ([], None, False),
    ],
    ids=["next-rows", "gap", "summary-landed", "nothing-appended"],
)
def test_extend_only_when_it_equals_a_fresh_read(
    appended: list[StoredMessage], fresh: SummaryRecord | None, extends: bool
) -> None:
    state = PLANNER.state(None, rows(1, 3), "gen-1")
    extended = PLANNER.extend(state, appended, fresh)
    assert (extended is not None) == extends
    if extended is not None:
        assert [m.seq for m in extended.tail] == [1, 2, 3, *[m.seq for m in appended]]
        assert extended.generation == "gen-1"


def test_a_state_read_before_the_session_had_a_row_is_reloaded_after_its_first_append() -> None:
    # The row the append created has a generation this state never saw: a write planned
    # from it could not be checked against an erase, so the caller reads it.
    assert PLANNER.extend(PLANNER.state(None, []), rows(1, 2), None) is None


def test_a_state_past_the_cap_is_truncated_and_always_due() -> None:
    state = PLANNER.state(None, rows(1, 7))
    assert state.truncated and [m.seq for m in state.tail] == [2, 3, 4, 5, 6, 7]
    assert PLANNER.due(state) == 1
    assert PLANNER.extend(state, rows(8, 8), None) is None


def test_folded_drops_what_the_result_covered_and_reloads_after_a_version_jump() -> None:
    state = SessionState(None, rows(1, 5), False)
    result = CompactionResult("s", 3, 3, 1, "summary", tuple(m.message for m in rows(1, 3)))
    folded = PLANNER.folded(state, result)
    assert folded is not None and folded.summary == "summary" and [m.seq for m in folded.tail] == [4, 5]
    assert PLANNER.folded(state, CompactionResult("s", 3, 3, 2, "later")) is None


def test_the_plan_folds_all_but_keep_last_and_updates_the_current_summary() -> None:
    state = SessionState(record(1), rows(1, 5), False)
    plan = PLANNER.plan(state, None, force=False)
    assert plan is not None and plan.previous == "s" and [m.seq for m in plan.batch] == [1, 2, 3]
    assert PLANNER.plan(SessionState(None, rows(1, 3), False), None, force=False) is None
    forced = PLANNER.plan(SessionState(None, rows(1, 3), False), None, force=True)
    assert forced is not None and [m.seq for m in forced.batch] == [1, 2, 3]


def test_max_topic_sections_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_topic_sections must be at least 1"):
        Planner(FoldPolicy(), max_topic_sections=0)


def fan_out(calls: int, answered: int, first: int = 1) -> list[StoredMessage]:
    """An AIMessage with `calls` parallel tool calls at seq `first`, then `answered` results."""
    ids = [f"c{k}" for k in range(calls)]
    ai = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": i, "type": "tool_call"} for i in ids])
    results = [ToolMessage("r", tool_call_id=i) for i in ids[:answered]]
    return [StoredMessage(first + k, m) for k, m in enumerate([ai, *results])]


SMALL = Planner(FoldPolicy(max_turns=3, keep_last=1, hard_cap=4))


@pytest.mark.parametrize(
    ("planner", "oldest", "folded"),
    [
        (SMALL, fan_out(3, 3), 4),  # the group fills the chunk: folded whole
        (SMALL, [*fan_out(3, 3), StoredMessage(5, HumanMessage("q"))], 4),
        (SMALL, fan_out(5, 3), 0),  # the chunk ends inside the group: never split
        (SMALL, fan_out(5, 5), 6),  # a chunk read to the group's end
        (PLANNER, fan_out(7, 7), 8),  # fan-out larger than cap - keep_last
        (Planner(FoldPolicy()), fan_out(40, 40), 41),  # the default policy (cap 36)
    ],
    ids=["fills-chunk", "then-user", "split-chunk", "extended-chunk", "beyond-keep", "default-40"],
)
def test_a_backlog_starting_with_a_tool_group_folds_the_whole_group(
    planner: Planner, oldest: list[StoredMessage], folded: int
) -> None:
    state = planner.state(None, [*oldest, *rows(len(oldest) + 1, len(oldest) + planner.policy.cap)])
    assert state.truncated
    plan = planner.plan(state, oldest, force=False)
    assert (len(plan.batch) if plan else 0) == folded
