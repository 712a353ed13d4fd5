"""The run plumbing of the agent middleware: pure helpers, no agent."""

from __future__ import annotations

from typing import Any

import pytest
from agent_models import tool_call
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_rolling_memory.adapters.agent_run import resolve_ids
from langchain_rolling_memory.core.tool_pairs import pair_tool_calls
from langchain_rolling_memory.errors import ConfigurationError, InvalidIdError


def invalid_call(call_id: str) -> AIMessage:
    return AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "remember",
                "args": "{oops",
                "id": call_id,
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )


def shape(messages: list[BaseMessage]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, ToolMessage):
            out.append(f"tool:{m.tool_call_id}:{m.status}")
        elif isinstance(m, AIMessage):
            out.append("ai+calls" if m.tool_calls or m.invalid_tool_calls else "ai")
        else:
            out.append(m.type)
    return out


H, A = HumanMessage("q"), AIMessage("a")
CALL = tool_call("weather", {"city": "Paris"}, "c1")
RESULT = ToolMessage("sunny", tool_call_id="c1")

CASES: list[tuple[str, list[BaseMessage], list[str]]] = [
    (
        "well-formed-unchanged",
        [H, CALL, RESULT, A, H],
        ["human", "ai+calls", "tool:c1:success", "ai", "human"],
    ),
    ("unanswered-call-gets-an-error-result", [H, CALL, H], ["human", "ai+calls", "tool:c1:error", "human"]),
    ("call-at-the-end-gets-an-error-result", [H, CALL], ["human", "ai+calls", "tool:c1:error"]),
    ("orphan-result-at-the-start-is-dropped", [RESULT, A, H], ["ai", "human"]),
    (
        "late-answer-to-a-malformed-call-moves-into-place",
        [H, invalid_call("b1"), H, ToolMessage("malformed", tool_call_id="b1", status="error")],
        ["human", "ai+calls", "tool:b1:error", "human"],
    ),
]


@pytest.mark.parametrize(("messages", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_pair_tool_calls(messages: list[BaseMessage], expected: list[str]) -> None:
    assert shape(pair_tool_calls(messages)) == expected


def test_pair_tool_calls_keeps_a_well_formed_list_identical() -> None:
    messages = [H, CALL, RESULT, A]
    assert pair_tool_calls(messages) == messages


@pytest.mark.parametrize(
    ("context", "configurable", "thread", "expected"),
    [
        ({"session_id": "a", "client_id": "c"}, {"thread_id": "t", "client_id": "x"}, None, ("a", "c")),
        (None, {"session_id": "s", "thread_id": "t"}, None, ("s", None)),
        (None, {}, "t", ("t", "d")),
    ],
    ids=["context-first", "configurable-session-before-thread", "thread-and-default-client"],
)
def test_resolve_ids(
    context: Any, configurable: dict[str, Any], thread: str | None, expected: tuple[str, Any]
) -> None:
    ids = resolve_ids(context, configurable, thread_id=thread, default_client_id="d" if thread else None)
    assert (ids.session_id, ids.client_id) == expected


def test_resolve_ids_without_a_session_names_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="thread_id"):
        resolve_ids(None, {})


def test_resolve_ids_refuses_an_unsafe_client_id() -> None:
    with pytest.raises(InvalidIdError):
        resolve_ids({"session_id": "s", "client_id": "../x"}, {})
