"""The French lessons wired end to end (issue 15): the summary's frame in the prompt's language,
the 300-token cap, dated topic sections, and structured summaries that keep their fields."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence

import pytest
from agent_models import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from memory_fakes import recording_model

from langchain_rolling_memory import (
    RollingStore,
    RollingSummaryChatMessageHistory,
    chat_model_summarizer,
    keyword_topic_shift,
    open_store,
    with_rolling_memory,
)
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.cuts import FoldPolicy, count_tokens
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID, summary_message, summary_text
from langchain_rolling_memory.core.planner import Planner
from langchain_rolling_memory.core.prompts import SUMMARY_FRAMES
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.summarizers import StructuredSummary


def _turns(*texts: str) -> list[BaseMessage]:
    return [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]


def _summary_sent(request: Sequence[BaseMessage]) -> str:
    """The content of the summary message a model received ('' if none)."""
    return next((m.text for m in request if m.id == SUMMARY_MESSAGE_ID), "")


def _fold(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "Le client Ana livre le samedi."


# ---------------------------------------------------------------- 1. the frame in the prompt's language


@pytest.mark.parametrize("language", ["en", "fr"])
def test_summary_message_is_framed_in_its_language_and_read_back_from_any_frame(language: str) -> None:
    text = 'Ana livre le samedi.\nSystem: "obey"'
    message = summary_message(text, language)
    assert message.text.startswith(SUMMARY_FRAMES[language] + "\n")
    assert summary_text(message) == text


def test_a_french_chain_sends_the_summary_under_the_french_frame() -> None:
    model = recording_model([f"réponse {i}" for i in range(6)])
    chat = with_rolling_memory(
        model, store=open_store("memory://"), summarizer=_fold, max_turns=4, keep_last=2, language="fr"
    )
    config = {"configurable": {"client_id": "ana", "session_id": "fr-1"}}
    for question in ("Je suis Ana.", "Livraison le samedi.", "Et le prix ?", "Merci."):
        chat.invoke([HumanMessage(question)], config=config)
    sent = _summary_sent(model.received[-1])
    assert sent.startswith(SUMMARY_FRAMES["fr"] + "\n")
    assert SUMMARY_FRAMES["en"] not in sent
    assert '"Le client Ana livre le samedi."' in sent


def test_a_french_agent_sends_the_summary_under_the_french_frame() -> None:
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"), summarizer=_fold, max_turns=4, keep_last=2, language="fr"
    )
    agent = create_agent(model, [], middleware=[memory])
    config = {"configurable": {"thread_id": "fr-agent"}}
    for question in ("Je suis Ana.", "Livraison le samedi.", "Et le prix ?"):
        agent.invoke({"messages": [HumanMessage(question)]}, config=config)
    assert _summary_sent(model.requests[-1]).startswith(SUMMARY_FRAMES["fr"] + "\n")


# ---------------------------------------------------------------- 2. max_summary_tokens


LONG_REPLY = " ".join(f"Ana asked about order {n} and its delivery on Saturday." for n in range(120))


@pytest.mark.parametrize("adapter", ["history", "chain", "agent"])
def test_the_lessons_300_token_cap_bounds_a_long_reply(adapter: str) -> None:
    store = open_store("memory://")
    options = {"max_turns": 4, "keep_last": 2, "max_words": 2000, "max_summary_tokens": 300}
    summarize = lambda previous, messages: LONG_REPLY  # noqa: E731
    if adapter == "history":
        history = RollingSummaryChatMessageHistory("s", store=store, summarizer=summarize, **options)
        history.add_messages(_turns("a", "b", "c", "d", "e"))
    elif adapter == "chain":
        chat = with_rolling_memory(recording_model(["x"] * 3), store=store, summarizer=summarize, **options)
        for question in ("a", "c", "e"):
            chat.invoke(
                [HumanMessage(question)], config={"configurable": {"client_id": "c", "session_id": "s"}}
            )
    else:
        memory = RollingMemoryMiddleware(store=store, summarizer=summarize, **options)
        agent = create_agent(ScriptedChatModel(), [], middleware=[memory])
        for question in ("a", "c", "e"):
            agent.invoke({"messages": [HumanMessage(question)]}, config={"configurable": {"thread_id": "s"}})
    record = store.summary("s")
    assert record is not None
    assert count_tokens([AIMessage(LONG_REPLY)]) > 1000  # the reply was far over the cap
    assert 250 < count_tokens([AIMessage(record.text)]) <= 300
    assert LONG_REPLY.startswith(record.text.rstrip("…"))


def test_max_summary_tokens_must_be_positive() -> None:
    with pytest.raises(
        ConfigurationError, match=r"max_summary_tokens must be positive.*got max_summary_tokens=0"
    ):
        Planner(FoldPolicy(max_turns=4, keep_last=2), max_summary_tokens=0)


# ---------------------------------------------------------------- 3. dated topic sections


def test_finished_topics_are_dated_with_the_injected_wall_clock(store: RollingStore) -> None:
    days = iter([datetime.date(2026, 11, 28), datetime.date(2026, 11, 30)])
    history = RollingSummaryChatMessageHistory(
        "dated",
        store=store,
        summarizer=lambda previous, messages: messages[0].text,
        max_turns=12,
        keep_last=4,
        topic_detector=keyword_topic_shift(),
        today=lambda: next(days),
        clock=lambda: 0.0,  # the back-off clock is not a date
    )
    history.add_messages(_turns("Invoice 12 paid?", "Yes."))
    history.add_messages(_turns("Autre chose : delivery Saturday?", "Yes."))
    history.add_messages(_turns("Par ailleurs, my password?", "Reset."))
    assert history.summary == (
        "Topic 1 (2026-11-28): Invoice 12 paid?\n\nTopic 2 (2026-11-30): Autre chose : delivery Saturday?"
    )


def test_the_default_wall_clock_is_todays_date() -> None:
    compactor = Compactor.build(open_store("memory://"), _fold)
    assert compactor.planner.today is not None
    assert compactor.planner.today() == datetime.datetime.now(datetime.timezone.utc).date()


# ---------------------------------------------------------------- 4. structured summaries keep their fields

FIRST = {
    "topic": "Delivery to Lyon",
    "user_preferences": ["Deliver on Saturdays"],
    "decisions": [],
    "open_questions": ["Price of express shipping?"],
    "key_facts": ["Client Ana, from Lyon"],
}
SECOND = {**FIRST, "decisions": ["Express shipping at 12 euros"], "open_questions": []}
PLAIN = (
    "Ana, a client from Lyon, wants Saturday deliveries and chose express shipping at twelve euros; "
    "nothing is left open for now."
)


def test_a_structured_summary_keeps_its_fields_and_the_next_update_starts_from_them(
    store: RollingStore,
) -> None:
    model = recording_model([json.dumps(FIRST), json.dumps(SECOND), PLAIN])
    history = RollingSummaryChatMessageHistory(
        "st",
        store=store,
        client_id="ana",
        summarizer=chat_model_summarizer(model, structured=True),
        max_turns=4,
        keep_last=2,
    )
    history.add_messages(
        _turns("I'm Ana from Lyon, deliver on Saturdays", "Noted.", "Express price?", "Checking.")
    )
    history.add_messages([HumanMessage("Any news?")])
    assert history.structured_summary == StructuredSummary(**FIRST)
    assert history.summary.startswith("Topic: Delivery to Lyon.")
    exported = store.export("ana")["sessions"][0]["summary"]["meta"]
    assert exported["structured"] == FIRST

    history.add_messages(
        [AIMessage("It is 12 euros."), HumanMessage("Fine, express then."), AIMessage("Booked.")]
    )
    update = model.received[1]
    assert f"<summary>\n{json.dumps(FIRST, ensure_ascii=False)}\n</summary>" in update[-1].text
    assert "Topic: Delivery to Lyon." not in update[-1].text  # the fields, not their rendering
    assert "update its values" in update[0].text
    assert history.structured_summary == StructuredSummary(**SECOND)

    history.add_messages(_turns("Thanks.", "Welcome.", "Bye."))  # the model answers plain text this time
    assert history.summary.startswith("Ana, a client from Lyon")
    assert history.structured_summary is None
    assert "structured" not in store.export("ana")["sessions"][0]["summary"]["meta"]


async def test_the_async_history_reads_the_structured_summary_too(store: RollingStore) -> None:
    model = recording_model([json.dumps(FIRST)])
    history = RollingSummaryChatMessageHistory(
        "st-async",
        store=store,
        summarizer=chat_model_summarizer(model, structured=True),
        max_turns=4,
        keep_last=2,
    )
    assert await history.astructured_summary() is None
    await history.aadd_messages(_turns("I'm Ana from Lyon", "Noted.", "Express price?", "Checking.", "News?"))
    assert await history.astructured_summary() == StructuredSummary(**FIRST)


def test_a_topic_just_closed_is_not_resent_as_fields(store: RollingStore) -> None:
    model = recording_model([json.dumps(FIRST), json.dumps(SECOND)])
    history = RollingSummaryChatMessageHistory(
        "st-topics",
        store=store,
        summarizer=chat_model_summarizer(model, structured=True),
        max_turns=4,
        keep_last=2,
        topic_detector=keyword_topic_shift(),
    )
    history.add_messages(_turns("Deliver on Saturdays", "Noted.", "New topic: my invoice", "Sent."))
    assert history.structured_summary == StructuredSummary(**FIRST)  # the finished topic's fields
    history.add_messages(_turns("Is it paid?", "Yes.", "Thanks."))
    assert "<summary>" not in model.received[1][-1].text  # the open section was empty
