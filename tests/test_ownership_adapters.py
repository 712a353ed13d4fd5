"""No client named, no access (issue 12, defect 4): a session owned by a client is reachable
through every adapter only by naming that client; anonymous sessions stay usable anonymously."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel, text_of
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_rolling_memory import (
    OwnershipError,
    RollingStore,
    RollingSummaryChatMessageHistory,
    WindowedChatMessageHistory,
    with_rolling_memory,
)
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.adapters.runnable import client_session_config_specs, session_history_factory
from langchain_rolling_memory.engine.memory_reads import aload_memory, load_memory

SECRET = "ana's IBAN is FR76 3000 6000"


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary: " + " | ".join(m.text for m in messages)


@pytest.fixture
def owned(store: RollingStore) -> RollingStore:
    """`store` with session s-a owned by client ana: transcript, summary and state."""
    store.append("s-a", [HumanMessage(SECRET), AIMessage("noted")], client_id="ana")
    store.install_summary("s-a", "summary: " + SECRET, covered_seq=1, expected_version=0)
    store.set_state("s-a", {"iban": "FR76"}, client_id="ana")
    return store


def untouched(store: RollingStore) -> None:
    assert [m.text for m in store.transcript("s-a")] == [SECRET, "noted"]
    info = store.session_info("s-a")
    assert info is not None and info.client_id == "ana"


HISTORIES = {
    "rolling": lambda store, client: RollingSummaryChatMessageHistory(
        "s-a", store=store, client_id=client, summarizer=summarize
    ),
    "window": lambda store, client: WindowedChatMessageHistory("s-a", store=store, client_id=client),
}


@pytest.mark.parametrize("kind", sorted(HISTORIES))
def test_a_history_naming_no_client_cannot_read_or_write_an_owned_session(
    owned: RollingStore, kind: str
) -> None:
    history = HISTORIES[kind](owned, None)
    with pytest.raises(OwnershipError, match="another client"):
        history.messages  # noqa: B018 - reading is what is refused
    with pytest.raises(OwnershipError):
        HISTORIES[kind](owned, None).add_messages([HumanMessage("let me in")])
    with pytest.raises(OwnershipError):
        _ = HISTORIES[kind](owned, None).transcript
    with pytest.raises(OwnershipError):
        HISTORIES[kind](owned, None).clear()
    untouched(owned)
    assert [m.text for m in HISTORIES[kind](owned, "ana").messages][-1] == "noted"


@pytest.mark.parametrize("kind", sorted(HISTORIES))
async def test_a_history_naming_no_client_is_refused_async(owned: RollingStore, kind: str) -> None:
    with pytest.raises(OwnershipError):
        await HISTORIES[kind](owned, None).aget_messages()
    with pytest.raises(OwnershipError):
        await HISTORIES[kind](owned, None).aadd_messages([HumanMessage("let me in")])
    untouched(owned)


@pytest.mark.parametrize("kind", sorted(HISTORIES))
def test_anonymous_sessions_stay_usable_anonymously(store: RollingStore, kind: str) -> None:
    history = WindowedChatMessageHistory("s-anon", store=store)
    if kind == "rolling":
        history = RollingSummaryChatMessageHistory("s-anon", store=store, summarizer=summarize)
    history.add_messages([HumanMessage("hello"), AIMessage("hi")])
    assert [m.text for m in history.messages] == ["hello", "hi"]
    info = store.session_info("s-anon")
    assert info is not None and info.client_id is None


def test_the_session_history_factory_without_a_client_is_refused_before_the_model(
    owned: RollingStore,
) -> None:
    model = ScriptedChatModel()
    get_history = session_history_factory(owned, summarize)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chat = RunnableWithMessageHistory(
            model, get_history, history_factory_config=client_session_config_specs()
        )
    with pytest.raises(OwnershipError):
        chat.invoke([HumanMessage("hi")], config={"configurable": {"client_id": "", "session_id": "s-a"}})
    assert model.requests == []
    untouched(owned)
    chat.invoke([HumanMessage("hi")], config={"configurable": {"client_id": "", "session_id": "s-anon"}})
    assert len(owned.transcript("s-anon")) == 2  # anonymous stays anonymous


def test_with_rolling_memory_without_a_client_is_refused_before_the_model(owned: RollingStore) -> None:
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=owned, summarizer=summarize)
    with pytest.raises((OwnershipError, ValueError)):
        chat.invoke([HumanMessage("hi")], config={"configurable": {"session_id": "s-a"}})
    with pytest.raises(OwnershipError):
        chat.invoke([HumanMessage("hi")], config={"configurable": {"session_id": "s-a", "client_id": "bob"}})
    assert model.requests == []
    untouched(owned)


def test_load_memory_refuses_a_session_of_another_client(owned: RollingStore) -> None:
    with pytest.raises(OwnershipError):
        load_memory(owned, "bob", "s-a")
    assert "FR76" in load_memory(owned, "ana", "s-a").state


async def test_aload_memory_refuses_a_session_of_another_client(owned: RollingStore) -> None:
    with pytest.raises(OwnershipError):
        await aload_memory(owned, "bob", "s-a")


def _agent(store: RollingStore, model: ScriptedChatModel, **options: Any) -> Any:
    memory = RollingMemoryMiddleware(
        store=store, summarizer=summarize, memory_tools=("remember", "update_session_state"), **options
    )
    return create_agent(model, [], middleware=[memory], system_prompt="SYS")


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_the_middleware_with_only_a_thread_id_on_an_owned_session_sends_and_writes_nothing(
    owned: RollingStore, background: bool
) -> None:
    model = ScriptedChatModel()
    agent = _agent(owned, model, background=background)
    with pytest.raises(OwnershipError, match="another client"):
        agent.invoke(
            {"messages": [HumanMessage("what do you know?")]}, {"configurable": {"thread_id": "s-a"}}
        )
    assert model.requests == []
    untouched(owned)
    assert owned.get_state("s-a") == {"iban": "FR76"}


async def test_the_middleware_with_only_a_thread_id_is_refused_async(owned: RollingStore) -> None:
    model = ScriptedChatModel()
    agent = _agent(owned, model)
    with pytest.raises(OwnershipError):
        await agent.ainvoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "s-a"}})
    assert model.requests == []
    untouched(owned)


def test_the_middleware_hooks_naming_no_client_are_refused_one_by_one(owned: RollingStore) -> None:
    from langgraph.runtime import Runtime

    memory = RollingMemoryMiddleware(store=owned, summarizer=summarize, background=True)
    runtime = Runtime(context={"session_id": "s-a"})
    for hook in (memory.before_model, memory.after_model, memory.after_agent):
        with pytest.raises(OwnershipError):
            hook({"messages": [HumanMessage("let me in")]}, runtime)
    with pytest.raises(OwnershipError):
        memory.before_model({"messages": []}, runtime)
    with pytest.raises(OwnershipError):
        memory.after_agent({"messages": []}, runtime)
    untouched(owned)


def test_the_middleware_keeps_anonymous_sessions_anonymous(store: RollingStore) -> None:
    model = ScriptedChatModel()
    agent = _agent(store, model)
    agent.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "s-anon"}})
    assert "hello" in text_of(model.requests[-1])
    assert [m.text for m in store.transcript("s-anon")] == ["hello", "ok 1"]


# The owner check rides in the store's read, not in a look before it: client ana claims a fresh
# session right after the adapter's first call to the store returns (the worst moment for a
# check-then-read), and the adapter still never shows her message to a run that is not hers.
_SESSION_READS = (
    "session_info",
    "read",
    "read_turn",
    "read_memory",
    "summary_and_tail",
    "summary",
    "get_state",
    "last_seq",
    "transcript",
)


def _claimed_after_first_call(store: RollingStore, monkeypatch: pytest.MonkeyPatch, session_id: str) -> None:
    """Patch `store` so that ana's first append to `session_id` lands as the first session read
    (or owner look-up) of the adapter returns."""
    claim = store.append
    pending = [True]

    def after(name: str) -> Any:
        original = getattr(store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if pending and args and args[0] == session_id:
                pending.clear()
                claim(session_id, [HumanMessage(SECRET)], client_id="ana")
            return result

        return call

    for name in _SESSION_READS:
        monkeypatch.setattr(store, name, after(name))


@pytest.mark.parametrize("client", [None, "bob"], ids=["no-client", "bob"])
@pytest.mark.parametrize("kind", sorted(HISTORIES))
def test_a_history_never_shows_a_session_claimed_between_its_check_and_its_read(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch, kind: str, client: str | None
) -> None:
    store.append("s-a", [HumanMessage("an anonymous hello")])
    _claimed_after_first_call(store, monkeypatch, "s-a")
    history = HISTORIES[kind](store, client)
    try:
        shown = [m.text for m in history.messages]
    except OwnershipError:
        shown = []
    assert SECRET not in " ".join(shown)
    with pytest.raises(OwnershipError):  # from then on the session is ana's
        HISTORIES[kind](store, client).add_messages([HumanMessage("mine now?")])
    assert [m.text for m in store.transcript("s-a")] == ["an anonymous hello", SECRET]


@pytest.mark.parametrize("client", [None, "bob"], ids=["no-client", "bob"])
def test_the_middleware_never_sends_a_session_claimed_between_its_check_and_its_read(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch, client: str | None
) -> None:
    store.append("s-a", [HumanMessage("an anonymous hello")])
    _claimed_after_first_call(store, monkeypatch, "s-a")
    model = ScriptedChatModel()
    configurable = {"thread_id": "s-a"} if client is None else {"thread_id": "s-a", "client_id": client}
    with pytest.raises(OwnershipError):
        _agent(store, model).invoke(
            {"messages": [HumanMessage("what do you know?")]}, {"configurable": configurable}
        )
    assert SECRET not in " ".join(text_of(request) for request in model.requests)
    assert [m.text for m in store.transcript("s-a")] == ["an anonymous hello", SECRET]
