"""Property: with a checkpointer, the model is sent the graph state's messages, whatever was done
to the state before (turns, removals, edits, forks to older checkpoints), inline or background;
and the store's transcript (what recall searches) holds only the branch's messages: those in
the state and those folded into its summary, never a removed one or one of a branch left."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_models import ScriptedChatModel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, summary_text

CONFIG: dict[str, Any] = {"configurable": {"thread_id": "s1", "client_id": "ana"}}

actions = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(0, 9)),
        st.tuples(st.just("remove"), st.integers(0, 30)),
        st.tuples(st.just("edit"), st.integers(0, 30)),
        st.tuples(st.just("fork"), st.integers(0, 30)),
    ),
    min_size=1,
    max_size=14,
)


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{previous} / " + " | ".join(m.text for m in messages)


def _said(messages: Sequence[BaseMessage]) -> list[tuple[str | None, str]]:
    """(id, text) of each message, the summary by its text (the view frames it afresh)."""
    out = []
    for m in messages:
        text = summary_text(m) if m.id == SUMMARY_MESSAGE_ID else m.text
        out.append((m.id, text or ""))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=actions, background=st.booleans())
def test_the_model_is_sent_the_states_messages_whatever_was_done_to_it(
    steps: list[tuple[str, int]], background: bool
) -> None:
    model = ScriptedChatModel()
    store = open_store("memory://")
    memory = RollingMemoryMiddleware(
        store=store,
        summarizer=summarize,
        max_turns=4,
        keep_last=2,
        max_words=400,
        background=background,
        memory_tools=(),
    )
    agent = create_agent(model, [], middleware=[memory], checkpointer=InMemorySaver())
    config = CONFIG
    for number, (action, pick) in enumerate(steps):
        state = agent.get_state(config).values.get("messages", [])
        said = [m for m in state if m.id != SUMMARY_MESSAGE_ID]
        if action == "turn":
            before = len(model.requests)
            out = agent.invoke({"messages": [HumanMessage(f"turn {number} says {pick}")]}, config)
            memory.flush("s1")
            assert len(model.requests) == before + 1
            after = out["messages"]
            # Exactly the state the model call ran on: what the turn left, but its reply.
            assert _said(model.requests[-1]) == _said(after[:-1])
            on_branch = {m.text for m in after if m.id != SUMMARY_MESSAGE_ID}
            summary = next((summary_text(m) or "" for m in after if m.id == SUMMARY_MESSAGE_ID), "")
            for stored in store.transcript("s1"):
                text = stored.text
                assert text in on_branch or f" {text}" in summary or f"{text} " in summary, (
                    f"the store holds {text!r}, which the branch does not"
                )
            config = CONFIG
        elif action == "remove" and said:
            config = agent.update_state(
                config, {"messages": [RemoveMessage(id=str(said[pick % len(said)].id))]}
            )
        elif action == "edit" and said:
            target = said[pick % len(said)]
            edited = target.model_copy(update={"content": f"edited at {number}"})
            config = agent.update_state(config, {"messages": [edited]})
        elif action == "fork":
            finished = [s for s in agent.get_state_history(config) if not s.next]
            if finished:
                config = {"configurable": {**finished[pick % len(finished)].config["configurable"]}}
