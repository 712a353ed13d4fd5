"""What `with_rolling_memory` sends on a fork when a LangGraph node calls it with only the
newest message: the store's linear transcript of the thread, abandoned turns included (the
runnable keeps its own history per thread, and ignores the checkpoint lineage). The documented
way to fork correctly is `RollingMemoryMiddleware` in `create_agent`, whose view is the state's."""

from __future__ import annotations

from typing import Any

from agent_models import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from langchain_rolling_memory import RollingMemoryMiddleware, open_store, with_rolling_memory

PARIS = "I live in Paris"
ROME = "Actually, forget that: I live in Rome"
WHERE = "Where do I live?"
CONFIG = {"configurable": {"thread_id": "t1", "client_id": "ana"}}


def summarize(previous: str, messages: Any) -> str:
    return "A summary of the earlier turns."  # four turns stay under the window: never called


def three_turns_and_a_fork(graph: Any, fork_config: Any) -> list[str]:
    """Paris, Rome, the question; then the question again on a fork from the checkpoint after
    the first turn. Returns the human messages of the fork's state."""
    for text in (PARIS, ROME, WHERE):
        graph.invoke({"messages": [HumanMessage(text)]}, CONFIG)
    first = next(s for s in graph.get_state_history(CONFIG) if not s.next and len(s.values["messages"]) == 2)
    graph.invoke({"messages": [HumanMessage(WHERE)]}, fork_config(first.config))
    return [m.text for m in graph.get_state(CONFIG).values["messages"] if m.type == "human"]


def conversation(request: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, m.text) for m in request if not isinstance(m, SystemMessage)]


def test_a_node_calling_with_rolling_memory_sends_the_abandoned_turns_on_a_fork() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)

    def respond(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke([state["messages"][-1]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("respond", respond)
    builder.add_edge(START, "respond")
    graph = builder.compile(checkpointer=InMemorySaver())

    # The snapshot's config names no client; the runnable needs it (the thread is Ana's).
    fork_humans = three_turns_and_a_fork(
        graph, lambda snapshot: {"configurable": {**snapshot["configurable"], "client_id": "ana"}}
    )

    assert fork_humans == [PARIS, WHERE]  # the graph's fork holds Paris only...
    assert conversation(model.requests[-1]) == [  # ...but the model is sent the thread's whole past
        ("human", PARIS),
        ("ai", "ok 1"),
        ("human", ROME),
        ("ai", "ok 2"),
        ("human", WHERE),
        ("ai", "ok 3"),
        ("human", WHERE),
    ]


def test_the_middleware_follows_the_fork_so_the_abandoned_turns_are_not_sent() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize, memory_tools=())
    agent = create_agent(model, [], middleware=[memory], checkpointer=InMemorySaver())

    # The snapshot's config is replayed as it is: the thread recorded its client.
    fork_humans = three_turns_and_a_fork(agent, lambda snapshot: snapshot)

    assert fork_humans == [PARIS, WHERE]
    assert conversation(model.requests[-1]) == [("human", PARIS), ("ai", "ok 1"), ("human", WHERE)]
    # The store holds the branch the graph follows (the checkpointer's history keeps the other).
    assert [m.text for m in store.transcript("t1") if m.type == "human"] == [PARIS, WHERE]
