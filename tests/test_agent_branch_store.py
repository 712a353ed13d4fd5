"""With a checkpointer, the store's transcript is the graph's branch (what recall searches and
`search_memory` finds): after a fork, a return to a branch left before, a `RemoveMessage`, a
failed model call, and when another process (another middleware, its own memory of the
threads) continues the thread, sync and async, on the four backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_models import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from store_kit import reopen
from test_agent_graph_state import (
    PARIS,
    ROME,
    WHERE,
    config,
    end_of_turn,
    find,
    three_turns,
    user,
    with_client,
)

from langchain_rolling_memory import InMemoryRollingStore, RollingStore
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware


def _agent(store: RollingStore, saver: Any, model: Any = None) -> Any:
    memory = RollingMemoryMiddleware(
        store=store,
        summarizer=lambda previous, messages: "They talked of " + ", ".join(m.text for m in messages),
        max_turns=50,
        memory_tools=(),
    )
    return create_agent(model or ScriptedChatModel(), [], middleware=[memory], checkpointer=saver)


def _branch(agent: Any, cfg: dict[str, Any]) -> list[str]:
    return [m.text for m in agent.get_state(cfg).values["messages"]]


def _stored(store: RollingStore, session: str = "s1") -> list[str]:
    return [m.text for m in store.transcript(session)]


def test_a_return_to_a_branch_left_before_stores_that_branch(store: RollingStore) -> None:
    saver = InMemorySaver()
    agent = _agent(store, saver)
    three_turns(agent, config())
    rome_end = end_of_turn(agent, config(), 6)  # the Rome branch, finished
    agent.invoke(user("I live in Paris, yes"), with_client(end_of_turn(agent, config(), 2).config))
    assert "Rome" not in " ".join(_stored(store))
    agent.invoke(user("And my city?"), with_client(rome_end.config))
    branch = _branch(agent, config())
    assert ROME in branch and "I live in Paris, yes" not in branch
    assert _stored(store) == branch
    assert store.search("yes", session_id="s1", client_id="ana") == []


def test_another_process_continuing_after_a_fork_stores_the_branch(store: RollingStore) -> None:
    saver = InMemorySaver()
    first = _agent(store, saver)
    three_turns(first, config())
    fork = end_of_turn(first, config(), 2)
    first.invoke(user("I live in Paris, yes"), with_client(fork.config))
    # Another process: its own store object and middleware, which never wrote this thread.
    other = store if isinstance(store, InMemoryRollingStore) else reopen(store)
    second = _agent(other, saver)
    second.invoke(user("Thanks"), with_client(end_of_turn(first, config(), 6).config))
    assert _stored(store) == _branch(second, config())
    second.invoke(user(WHERE), config())
    assert _stored(store) == _branch(second, config())
    if other is not store:
        other.close()


def test_a_middleware_built_per_request_reads_no_more_than_one_built_once(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = InMemorySaver()
    three_turns(_agent(store, saver), config())
    reads: list[str] = []
    for name in ("read", "read_turn"):
        original = getattr(store, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            reads.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(store, name, spy)
    for text in ("again", "and again"):
        _agent(store, saver).invoke(user(text), config())  # a new middleware each request
    assert reads == []  # no reconcile, no second read of the stored rows
    assert _stored(store) == _branch(_agent(store, saver), config())


def test_a_removed_message_is_withdrawn_and_the_later_rows_keep_their_dates(store: RollingStore) -> None:
    agent = _agent(store, InMemorySaver())
    three_turns(agent, config())
    before = {m.seq: m for m in store.read("s1")}
    rome = find(agent, config(), ROME)
    agent.update_state(config(), {"messages": [RemoveMessage(id=str(rome.id))]})
    agent.invoke(user("Still there?"), config())
    assert _stored(store) == _branch(agent, config())
    assert ROME not in _stored(store)
    dates = {m.message.id: m.created_at for m in store.read("s1")}
    for row in before.values():
        if row.message.id in dates:
            assert dates[row.message.id] == row.created_at, row.message.text


class _Failing(ScriptedChatModel):
    fail: bool = False

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if self.fail:
            self.fail = False
            raise RuntimeError("provider down")
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_failed_model_call_then_a_fork_stores_the_branch(store: RollingStore) -> None:
    model = _Failing()
    saver = InMemorySaver()
    agent = _agent(store, saver, model)
    three_turns(agent, config())
    model.fail = True
    with pytest.raises(RuntimeError):
        agent.invoke(user("This one fails"), config())
    assert "This one fails" in _stored(store)  # what was said is kept
    agent.invoke(user("I live in Paris, yes"), with_client(end_of_turn(agent, config(), 2).config))
    assert _stored(store) == _branch(agent, config())


def test_the_async_hooks_store_the_branch(store: RollingStore) -> None:
    async def run() -> None:
        agent = _agent(store, InMemorySaver())
        for text in (PARIS, ROME, WHERE):
            await agent.ainvoke(user(text), config())
        fork = None
        async for snapshot in agent.aget_state_history(config()):
            if not snapshot.next and len(snapshot.values["messages"]) == 2:
                fork = snapshot
        assert fork is not None
        await agent.ainvoke(user("I live in Paris, yes"), with_client(fork.config))
        state = await agent.aget_state(config())
        assert _stored(store) == [m.text for m in state.values["messages"]]
        paris = next(m for m in state.values["messages"] if m.text == PARIS)
        await agent.aupdate_state(config(), {"messages": [RemoveMessage(id=str(paris.id))]})
        await agent.ainvoke({"messages": [HumanMessage("Where then?")]}, config())
        state = await agent.aget_state(config())
        assert _stored(store) == [m.text for m in state.values["messages"]]
        assert PARIS not in _stored(store)

    asyncio.run(run())


def test_a_thread_seeded_from_a_summarized_chain_session_stores_no_summary_and_keeps_its_rows(
    store: RollingStore,
) -> None:
    from langchain_rolling_memory import RollingSummaryChatMessageHistory

    history = RollingSummaryChatMessageHistory(
        "s1",
        summarizer=lambda previous, messages: "They talked of " + ", ".join(m.text for m in messages),
        store=store,
        client_id="ana",
        max_turns=4,
        keep_last=2,
    )
    for i in range(3):
        history.add_messages([HumanMessage(f"chain question {i}"), AIMessage(f"chain answer {i}")])
    assert store.summary("s1") is not None
    chain_rows = _stored(store)
    saver = InMemorySaver()
    _agent(store, saver).invoke(user("agent question"), config())
    # Another process (its own memory of the threads) continues the thread.
    second = _agent(store, saver)
    second.invoke(user("again"), config())
    stored = _stored(store)
    assert stored[: len(chain_rows)] == chain_rows
    assert stored[len(chain_rows) :] == ["agent question", "ok 1", "again", "ok 1"]
    assert not any(text.startswith("[Summary") for text in stored)


def test_an_edited_message_is_stored_as_the_state_holds_it(store: RollingStore) -> None:
    agent = _agent(store, InMemorySaver())
    three_turns(agent, config())
    rome = find(agent, config(), ROME)
    dated = {m.message.id: m.created_at for m in store.read("s1")}
    agent.update_state(config(), {"messages": [rome.model_copy(update={"content": "I live in Lyon"})]})
    agent.invoke(user("Still there?"), config())
    assert _stored(store) == _branch(agent, config())
    assert ROME not in _stored(store) and "I live in Lyon" in _stored(store)
    assert store.search("rome", session_id="s1", client_id="ana") == []
    assert {m.message.id: m.created_at for m in store.read("s1")}[rome.id] == dated[rome.id]
