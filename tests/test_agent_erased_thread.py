"""An erased conversation is never sent again, though a checkpointer still holds it: after
`clear_session`, `forget` or `purge` of a checkpointed thread's session (our store's erasures,
which know no checkpointer), the next run sends the model none of the erased messages nor the
summary that folded them, and its state update removes them from the thread, with recall on
or off, inline or background folds, sync and async, on the four backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_models import ScriptedChatModel, text_of
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from test_agent_graph_state import PARIS, ROME, config, three_turns, user

from langchain_rolling_memory import RollingStore
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID

SUMMARIZED: list[str] = []  # what the summarizer was sent (the memory's own model call)


def _summarize(previous: str, messages: Any) -> str:
    SUMMARIZED.append(" | ".join(m.text for m in messages))
    return "they said " + SUMMARIZED[-1]


def _agent(store: RollingStore, **options: Any) -> tuple[Any, ScriptedChatModel, RollingMemoryMiddleware]:
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(
        store=store,
        summarizer=_summarize,
        memory_tools=(),
        **options,
    )
    return create_agent(model, [], middleware=[memory], checkpointer=InMemorySaver()), model, memory


def _erase(store: RollingStore, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "clear_session":
        store.clear_session("s1")
    elif how == "forget":
        store.forget("ana")
    else:
        now = store._now()
        monkeypatch.setattr(store, "_now", lambda: now + 3600)
        assert store.purge(older_than=60) >= 1


@pytest.mark.parametrize("how", ["clear_session", "forget", "purge"])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"recall_tokens": 500},
        {"max_turns": 2, "keep_last": 1},
        {"max_turns": 2, "keep_last": 1, "background": True},
    ],
    ids=["plain", "recall", "folded", "background"],
)
def test_an_erased_conversation_is_never_sent_again(
    store: RollingStore, how: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, model, memory = _agent(store, **options)
    three_turns(agent, config())
    memory.flush("s1")
    _erase(store, how, monkeypatch)
    SUMMARIZED.clear()
    agent.invoke(user("Hello again"), config())
    sent = text_of(model.requests[-1])
    assert "Paris" not in sent and "Rome" not in sent, sent
    state = agent.get_state(config()).values["messages"]
    assert [m.text for m in state if m.id != SUMMARY_MESSAGE_ID] == ["Hello again", state[-1].text]
    assert not any(m.id == SUMMARY_MESSAGE_ID for m in state)
    agent.invoke(user("And now?"), config())
    sent = text_of(model.requests[-1])
    assert "Paris" not in sent and "Hello again" in sent
    memory.flush("s1")
    assert not any("Paris" in text or "Rome" in text for text in SUMMARIZED), SUMMARIZED
    assert [m.text for m in store.transcript("s1")][:1] == ["Hello again"]


def test_the_async_hooks_never_send_an_erased_conversation(store: RollingStore) -> None:
    async def run() -> None:
        agent, model, _ = _agent(store)
        for text in (PARIS, ROME):
            await agent.ainvoke(user(text), config())
        await store.aclear_session("s1")
        await agent.ainvoke(user("Hello again"), config())
        assert "Paris" not in text_of(model.requests[-1])
        state = await agent.aget_state(config())
        assert [m.text for m in state.values["messages"]][:1] == ["Hello again"]

    asyncio.run(run())
