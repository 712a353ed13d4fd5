"""`with_rolling_memory` and `session_history_factory`: what the model receives, on every backend."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from memory_fakes import prompt_text, recording_model

from langchain_rolling_memory import (
    MEMORY_MESSAGE_ID,
    OwnershipError,
    client_session_config_specs,
    session_history_factory,
    with_rolling_memory,
)
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID
from langchain_rolling_memory.stores import RollingStore


def cfg(client_id: str, session_id: str) -> dict[str, Any]:
    return {"configurable": {"client_id": client_id, "session_id": session_id}}


def summarize(previous: str, messages: Any) -> str:
    return (previous + " | " if previous else "") + " ".join(m.text for m in messages)


def replies(n: int = 50) -> list[str]:
    return [f"answer {i}" for i in range(n)]


def test_message_list_input_gets_one_leading_memory_system_message(store: RollingStore) -> None:
    store.add_fact("client-a", "Delivers on Saturdays")
    store.set_state("s1", {"cart": ["A-1"]}, client_id="client-a")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hello")], config=cfg("client-a", "s1"))
    chat.invoke([HumanMessage("again")], config=cfg("client-a", "s1"))

    sent = model.received[-1]
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].id == MEMORY_MESSAGE_ID
    assert '- "Delivers on Saturdays"' in sent[0].text
    assert '{"cart": ["A-1"]}' in sent[0].text
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert [m.text for m in sent[1:]] == ["hello", "answer 0", "again"]
    # The memory message is shown, never stored: the transcript has the conversation only.
    assert [m.text for m in store.transcript("s1")] == ["hello", "answer 0", "again", "answer 1"]


def test_the_memory_message_is_the_same_between_turns_when_nothing_changed(store: RollingStore) -> None:
    store.add_fact("client-a", "Delivers on Saturdays")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    for question in ("one", "two", "three"):
        chat.invoke([HumanMessage(question)], config=cfg("client-a", "s1"))
    heads = [sent[0] for sent in model.received]
    assert heads[0] == heads[1] == heads[2]


def test_no_memory_message_when_the_client_has_no_facts_or_state(store: RollingStore) -> None:
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hello")], config=cfg("client-a", "s1"))
    assert [type(m) for m in model.received[0]] == [HumanMessage]


def test_dict_input_puts_memory_after_the_prompts_system_message(store: RollingStore) -> None:
    store.add_fact("client-a", "Works in the Logistics team", key="team")
    model = recording_model(replies())
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a support agent."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chat = with_rolling_memory(
        prompt | model,
        store=store,
        summarizer=summarize,
        input_messages_key="question",
        history_messages_key="history",
        max_turns=4,
        keep_last=2,
    )
    for i in range(4):
        chat.invoke({"question": f"q{i}"}, config=cfg("client-a", "s1"))
    sent = model.received[-1]
    assert sent[0].text == "You are a support agent."
    assert sent[1].id == MEMORY_MESSAGE_ID
    assert '["team"] "Works in the Logistics team"' in sent[1].text
    # The summary stays where the history puts it: one user-role message framed as a record.
    assert sent[2].id == SUMMARY_MESSAGE_ID
    assert isinstance(sent[2], HumanMessage)
    assert sent[-1].text == "q3"
    assert sum(m.id == SUMMARY_MESSAGE_ID for m in sent) == 1


def test_a_prompt_that_places_facts_and_summary_itself_gets_them_once(store: RollingStore) -> None:
    store.add_fact("client-a", "Allergic to peanuts")
    model = recording_model(replies())
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a chef.\nKnown facts:\n{facts}\nEarlier: {summary}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    chat = with_rolling_memory(
        prompt | model,
        store=store,
        summarizer=summarize,
        input_messages_key="question",
        history_messages_key="history",
        max_turns=4,
        keep_last=2,
    )
    for i in range(4):
        chat.invoke({"question": f"q{i}"}, config=cfg("client-a", "s1"))
    sent = model.received[-1]
    assert '- "Allergic to peanuts"' in sent[0].text
    assert "Earlier: q0 answer 0" in sent[0].text
    assert not any(m.id in (MEMORY_MESSAGE_ID, SUMMARY_MESSAGE_ID) for m in sent)
    assert prompt_text(sent).count("Allergic to peanuts") == 1


def test_input_key_without_history_key_gets_the_message_in_the_same_list(store: RollingStore) -> None:
    store.add_fact("client-a", "Prefers email")
    model = recording_model(replies())
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("messages")])
    chat = with_rolling_memory(
        prompt | model, store=store, summarizer=summarize, input_messages_key="messages"
    )
    chat.invoke({"messages": [HumanMessage("hi")]}, config=cfg("client-a", "s1"))
    chat.invoke({"messages": [HumanMessage("again")]}, config=cfg("client-a", "s1"))
    assert [m.text for m in model.received[-1][1:]] == ["hi", "answer 0", "again"]
    assert model.received[-1][0].id == MEMORY_MESSAGE_ID
    assert [m.text for m in store.transcript("s1")] == ["hi", "answer 0", "again", "answer 1"]


def test_memory_message_false_leaves_the_messages_alone(store: RollingStore) -> None:
    store.add_fact("client-a", "Prefers email")
    model = recording_model(replies())
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    chat = with_rolling_memory(
        prompt | model,
        store=store,
        summarizer=summarize,
        input_messages_key="q",
        history_messages_key="history",
        memory_message=False,
    )
    chat.invoke({"q": "hi"}, config=cfg("client-a", "s1"))
    assert [m.text for m in model.received[0]] == ["hi"]


def test_one_client_never_sees_another_clients_facts(store: RollingStore) -> None:
    store.add_fact("client-a", "Secret of client A")
    store.set_state("sa", {"iban": "FR76-A"}, client_id="client-a")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hi")], config=cfg("client-b", "sb"))
    seen = prompt_text(model.received[0])
    assert "Secret of client A" not in seen
    assert "FR76" not in seen


def test_a_session_of_another_client_is_refused_before_the_model_is_called(store: RollingStore) -> None:
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("my card is 4242")], config=cfg("client-a", "sa"))
    with pytest.raises(OwnershipError, match="another client"):
        chat.invoke([HumanMessage("show me")], config=cfg("client-b", "sa"))
    assert len(model.received) == 1
    assert [m.text for m in store.transcript("sa")] == ["my card is 4242", "answer 0"]


async def test_a_session_of_another_client_is_refused_async(store: RollingStore) -> None:
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    await chat.ainvoke([HumanMessage("my card is 4242")], config=cfg("client-a", "sa"))
    with pytest.raises(OwnershipError):
        await chat.ainvoke([HumanMessage("show me")], config=cfg("client-b", "sa"))
    assert len(model.received) == 1


BAD_IDS = {
    "path-traversal": "../../etc/passwd",
    "sql-injection": "a'); DROP TABLE lrm_facts; --",
    "redis-glob": "client-*",
    "redis-newline": "a\r\nFLUSHALL",
    "empty": "",
    "too-long": "c" * 129,
    "dots-only": "..",
    "space": "client a",
}


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
@pytest.mark.parametrize("which", ["client_id", "session_id"])
def test_bad_ids_raise_value_error_and_write_nothing(store: RollingStore, bad: str, which: str) -> None:
    store.add_fact("client-a", "Delivers on Saturdays")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    ids = {"client_id": "client-a", "session_id": "s1", which: bad}
    with pytest.raises(ValueError, match=which):
        chat.invoke([HumanMessage("hi")], config={"configurable": ids})
    assert model.received == []
    assert store.transcript("s1") == []
    assert store.sessions("client-a") == []
    assert [f.text for f in store.facts("client-a")] == ["Delivers on Saturdays"]


def test_no_client_id_and_no_default_is_an_anonymous_session(store: RollingStore) -> None:
    # Issue 14: a client is no longer demanded; naming none (and no default) is anonymous.
    store.add_fact("client-a", "Delivers on Saturdays")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    chat.invoke([HumanMessage("hi")], config={"configurable": {"session_id": "s1"}})
    assert "Saturdays" not in " ".join(m.text for m in model.received[0])
    info = store.session_info("s1")
    assert info is not None and info.client_id is None


async def test_ainvoke_injects_the_same_memory(store: RollingStore) -> None:
    await store.aadd_fact("client-a", "Delivers on Saturdays")
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    await chat.ainvoke([HumanMessage("hello")], config=cfg("client-a", "s1"))
    assert model.received[0][0].id == MEMORY_MESSAGE_ID
    assert "Delivers on Saturdays" in model.received[0][0].text
    assert [m.text for m in await store.atranscript("s1")] == ["hello", "answer 0"]


def test_history_options_reach_the_rolling_history(store: RollingStore) -> None:
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize, max_turns=4, keep_last=2)
    for i in range(5):
        chat.invoke([HumanMessage(f"q{i}")], config=cfg("client-a", "s1"))
    record = store.summary("s1")
    assert record is not None
    assert record.text.startswith("q0 answer 0")
    assert len(store.transcript("s1")) == 10
    assert len(model.received[-1]) <= 1 + 4 + 1


def test_session_history_factory_serves_plain_runnable_with_message_history(store: RollingStore) -> None:
    model = recording_model(replies())
    get_history = session_history_factory(store, summarize, max_turns=4, keep_last=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chat = RunnableWithMessageHistory(
            model, get_history, history_factory_config=client_session_config_specs()
        )
    chat.invoke([HumanMessage("hi")], config=cfg("client-a", "s1"))
    chat.invoke([HumanMessage("again")], config=cfg("client-a", "s1"))
    assert [m.text for m in model.received[-1]] == ["hi", "answer 0", "again"]
    assert store.sessions("client-a") == ["s1"]
    assert get_history("client-a", "s1").client_id == "client-a"
    with pytest.raises(OwnershipError):
        get_history("client-b", "s1").messages  # noqa: B018 - reading is what is refused


def test_session_history_factory_rejects_bad_options_at_once(store: RollingStore) -> None:
    with pytest.raises(ValueError, match="keep_last"):
        session_history_factory(store, summarize, max_turns=4, keep_last=9)


def test_the_summary_message_placement_reaches_the_model_as_a_user_record(store: RollingStore) -> None:
    model = recording_model(replies())
    chat = with_rolling_memory(model, store=store, summarizer=summarize, max_turns=4, keep_last=2)
    for i in range(5):
        chat.invoke([HumanMessage(f"q{i}")], config=cfg("client-a", "s1"))
    summary = [m for m in model.received[-1] if m.id == SUMMARY_MESSAGE_ID]
    assert len(summary) == 1
    assert isinstance(summary[0], HumanMessage)
    assert "not instructions" in summary[0].text
    assert not isinstance(model.received[-1][-1], AIMessage)


def test_a_prompt_that_would_bury_the_memory_message_gets_a_warning(store: RollingStore) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("human", "Context: a shop."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    model = recording_model(replies())
    with pytest.warns(UserWarning, match="Gemini drops"):
        with_rolling_memory(
            prompt | model,
            store=store,
            summarizer=summarize,
            input_messages_key="q",
            history_messages_key="history",
        )


@pytest.mark.parametrize(
    "messages",
    [
        [("system", "You help."), MessagesPlaceholder("history"), ("human", "{q}")],
        [MessagesPlaceholder("history"), ("human", "{q}")],
        [
            ("system", "You help.\n{facts}"),
            ("human", "Context"),
            MessagesPlaceholder("history"),
            ("human", "{q}"),
        ],
    ],
    ids=["after-system", "placeholder-first", "prompt-places-facts"],
)
def test_prompts_where_the_memory_leads_get_no_warning(store: RollingStore, messages: list[Any]) -> None:
    prompt = ChatPromptTemplate.from_messages(messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with_rolling_memory(
            prompt | recording_model(replies()),
            store=store,
            summarizer=summarize,
            input_messages_key="q",
            history_messages_key="history",
        )
