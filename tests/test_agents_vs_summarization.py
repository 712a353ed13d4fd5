"""Side by side on one scripted agent run: LangChain's SummarizationMiddleware and ours."""

from __future__ import annotations

from typing import Any

import pytest
from agent_models import ScriptedChatModel, kinds, system_text, tool_call, tool_pairs_intact
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

TURNS = 8
FACT = "Deliveries only on Saturdays"


@tool
def track_order(order: str) -> str:
    """Where an order is."""
    return f"Order {order} is in the Lyon depot."


def script() -> list[AIMessage]:
    """The model's replies: every other turn calls `track_order` first."""
    replies: list[AIMessage] = []
    for turn in range(TURNS):
        if turn % 2 == 1:
            replies.append(tool_call("track_order", {"order": f"A{turn}"}, f"call-{turn}"))
        replies.append(AIMessage(f"Answer to question {turn}."))
    return replies


def questions() -> list[str]:
    return [f"Question {turn}: where is order A{turn}?" for turn in range(TURNS)]


def summarizer_model() -> ScriptedChatModel:
    # Over the summarizers' default 20-word minimum, so one compaction is one call.
    return ScriptedChatModel(
        default=(
            "The user asked where several orders are; the assistant tracked each order with the "
            "tool and gave its status and expected delivery date; summary"
        )
    )


def run(middleware: Any, model: ScriptedChatModel, config: dict[str, Any]) -> Any:
    agent = create_agent(
        model,
        [track_order],
        system_prompt="You track orders.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    for text in questions():
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    return agent.get_state(config).values["messages"]


@pytest.fixture(scope="module")
def theirs() -> tuple[ScriptedChatModel, ScriptedChatModel, list[BaseMessage]]:
    model, summarizer = ScriptedChatModel(script=script()), summarizer_model()
    middleware = SummarizationMiddleware(summarizer, trigger=("messages", 7), keep=("messages", 3))
    state = run(middleware, model, {"configurable": {"thread_id": "s1"}})
    return model, summarizer, state


@pytest.fixture(scope="module")
def ours() -> tuple[ScriptedChatModel, ScriptedChatModel, list[BaseMessage], list[BaseMessage]]:
    store = open_store("memory://")
    store.add_fact("ana", FACT)
    model, summarizer = ScriptedChatModel(script=script()), summarizer_model()
    middleware = RollingMemoryMiddleware(store=store, summarizer=summarizer, max_turns=6, keep_last=3)
    state = run(middleware, model, {"configurable": {"thread_id": "s1", "client_id": "ana"}})
    return model, summarizer, state, store.transcript("s1")


def produced() -> int:
    """Messages the run produces: a question and an answer per turn, plus a call and a result
    on every other turn."""
    return 2 * TURNS + 2 * (TURNS // 2)


def test_both_summarize_during_the_run(theirs: Any, ours: Any) -> None:
    assert theirs[1].requests, "SummarizationMiddleware should have summarized"
    assert ours[1].requests, "RollingMemoryMiddleware should have summarized"


def test_both_keep_tool_calls_with_their_results_in_every_model_request(theirs: Any, ours: Any) -> None:
    for model in (theirs[0], ours[0]):
        assert len(model.requests) == TURNS + TURNS // 2
        for request in model.requests:
            assert tool_pairs_intact([m for m in request if m.type != "system"])


def test_both_send_the_current_question_in_every_model_request(theirs: Any, ours: Any) -> None:
    for model in (theirs[0], ours[0]):
        assert model.requests, "each agent must have called its model"
        for request in model.requests:
            last_human = [m.text for m in request if isinstance(m, HumanMessage)][-1]
            assert last_human.startswith("Question ")


def test_summarization_middleware_removes_folded_messages_from_the_agent_state(theirs: Any) -> None:
    state = theirs[2]
    assert len(state) < produced()
    assert "Question 0:" not in " ".join(m.text for m in state)


def test_ours_keeps_every_message_in_the_transcript_and_folds_the_agent_state_too(ours: Any) -> None:
    _, _, state, transcript = ours
    assert len(transcript) == produced()
    assert [m.text for m in transcript if isinstance(m, HumanMessage)] == questions()
    assert kinds(transcript)[:2] == ["human", "ai"]
    # Like SummarizationMiddleware, the state holds a summary and the messages it does not cover:
    # the newest ones of the transcript, in order (a checkpoint stays bounded).
    assert state[0].id == "rolling-memory-summary"
    assert len(state) < produced()
    assert [m.id for m in state[1:]] == [m.id for m in transcript[-(len(state) - 1) :]]


def test_ours_injects_the_client_facts_in_every_request_and_theirs_cannot(theirs: Any, ours: Any) -> None:
    assert all(FACT in system_text(request) for request in ours[0].requests)
    assert not any(FACT in system_text(request) for request in theirs[0].requests)


def test_ours_sends_each_folded_message_to_the_summarizer_once_in_order(ours: Any) -> None:
    _, summarizer, _, _ = ours
    prompts = [request[-1].text for request in summarizer.requests]
    folded = [q for prompt in prompts for q in questions() if q in prompt]
    assert folded
    assert folded == questions()[: len(folded)]


def test_the_benchmark_script_prints_one_row_per_middleware(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import agent_middleware

    out = tmp_path / "table.md"
    assert (
        agent_middleware.main(["--turns", "6", "--max-turns", "4", "--keep-last", "2", "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    table = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in printed.splitlines()
        if line.startswith("|")
    ]
    header, rows = table[0], table[2:]
    assert len(rows) == 5
    pairs, facts = header.index("tool pairs intact"), header.index("client facts in every request")
    assert [row[pairs] for row in rows] == ["yes"] * 5
    assert [row[0] for row in rows if row[facts] == "yes"] == [row[0] for row in rows if "Rolling" in row[0]]
    assert "RollingMemoryMiddleware" in out.read_text(encoding="utf-8")
