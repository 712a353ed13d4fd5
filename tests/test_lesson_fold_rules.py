"""The lessons' fold rules as settings (issue 24, items 6 and 7).

* The summary-memory lesson folds the oldest half of the buffer when it is full:
  ``keep_last="half"`` (and the ``summary_memory`` preset, ``memoire_resumee`` in French).
* Structured summaries are a setting (``structured=True``) of the histories, the chains, the
  middleware and the presets, not only of a summarizer built by hand.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import (
    MemorySettings,
    RollingMemoryMiddleware,
    RollingSummaryChatMessageHistory,
    open_store,
    preset,
)
from langchain_rolling_memory.core.trigger_keep import fold_policy
from langchain_rolling_memory.errors import ConfigurationError


def _turns(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}") if i % 2 == 0 else AIMessage(f"answer {i}") for i in range(n)]


@given(max_turns=st.integers(min_value=2, max_value=400))
def test_half_keeps_the_newest_half_of_max_turns(max_turns: int) -> None:
    policy = fold_policy(max_turns=max_turns, keep_last="half")
    assert policy.keep_last == max_turns // 2
    assert MemorySettings(max_turns=max_turns, keep_last="half").fold_policy().keep_last == max_turns // 2


def test_the_lessons_buffer_of_ten_folds_its_oldest_half() -> None:
    # The lesson: a buffer of 10 messages; when it is full, the oldest 5 go into the summary.
    store = open_store("memory://")
    history = RollingSummaryChatMessageHistory(
        "s1",
        store=store,
        summarizer=lambda previous, msgs: f"{len(msgs)} folded",
        max_turns=10,
        keep_last="half",
    )
    history.add_messages(_turns(10))
    assert history.summary == ""  # full, not past it
    history.add_messages(_turns(1))
    assert history.summary == "6 folded"  # 11 unsummarized: all but the newest 5
    assert [m.text for m in history.messages[1:]] == [m.text for m in store.transcript("s1")[-5:]]
    assert len(store.transcript("s1")) == 11  # nothing lost


def test_the_summary_memory_preset_and_its_french_name_fold_half() -> None:
    for name in ("summary_memory", "memoire_resumee"):
        options = preset(name)
        assert options["keep_last"] == "half"
        settings = MemorySettings(**options)
        assert settings.fold_policy().keep_last == settings.max_turns // 2  # type: ignore[operator]


@pytest.mark.parametrize("max_turns", [None, 1])
def test_half_without_a_count_to_halve_is_refused_in_one_line(max_turns: int | None) -> None:
    with pytest.raises(ConfigurationError, match=r"keep_last='half' keeps half of max_turns"):
        MemorySettings(max_turns=max_turns, keep_last="half")


def _json_model(n: int) -> GenericFakeChatModel:
    reply = (
        '{"sujet_principal": "Livraison à Lyon", "préférences": ["le samedi"], '
        '"décisions": ["express"], "questions_ouvertes": [], "faits": ["Cliente : Ana"]}'
    )
    messages: Iterator[AIMessage] = iter(AIMessage(reply) for _ in range(n))
    return GenericFakeChatModel(messages=messages)


def test_a_history_with_structured_true_keeps_the_summarys_fields() -> None:
    history = RollingSummaryChatMessageHistory(
        "s1",
        store=open_store("memory://"),
        summarizer=_json_model(3),
        structured=True,
        max_turns=4,
        keep_last=2,
    )
    history.add_messages(_turns(5))
    fields = history.structured_summary
    assert fields is not None and fields.topic == "Livraison à Lyon" and fields.key_facts == ["Cliente : Ana"]


def test_structured_reaches_the_middleware_and_a_preset() -> None:
    store = open_store("memory://")
    memory = RollingMemoryMiddleware(
        store=store, summarizer=_json_model(1), **preset("support", structured=True)
    )
    assert memory.compactor.summarizer.structured is True  # type: ignore[attr-defined]
    plain = RollingMemoryMiddleware(store=store, summarizer=_json_model(1))
    assert plain.compactor.summarizer.structured is False  # type: ignore[attr-defined]


def test_structured_with_a_function_summarizer_is_refused_and_writes_nothing() -> None:
    store = open_store("memory://")
    with pytest.raises(ConfigurationError, match="structured=True needs a chat model"):
        RollingSummaryChatMessageHistory("s1", store=store, summarizer=lambda p, m: "s", structured=True)
    assert store.transcript("s1") == []


# ---------------------------------------------------------------- item 8: the summary acknowledged


def test_a_history_with_summary_ack_sends_the_summary_then_the_assistants_acknowledgement() -> None:
    # The short-memory lesson: the summary goes in as a user message, the assistant answers
    # "Compris", then the conversation goes on; roles alternate for the providers that need it.
    history = RollingSummaryChatMessageHistory(
        "s1",
        store=open_store("memory://"),
        summarizer=lambda previous, msgs: "Ana veut être livrée le samedi.",
        max_turns=4,
        keep_last=2,
        language="fr",
        summary_ack=True,
    )
    history.add_messages(_turns(5))
    first, second, *rest = history.messages
    assert first.type == "human" and "Ana veut être livrée le samedi." in first.text
    assert (
        second.type == "ai" and second.text == "Compris : je tiens compte de ce résumé de notre conversation."
    )
    assert [m.text for m in rest] == [m.text for m in _turns(5)[-len(rest) :]]
    assert len(history.transcript) == 5  # the acknowledgement is sent, never stored


def test_without_summary_ack_the_summary_stands_alone() -> None:
    history = RollingSummaryChatMessageHistory(
        "s1", store=open_store("memory://"), summarizer=lambda p, m: "s", max_turns=4, keep_last=2
    )
    history.add_messages(_turns(5))
    assert not any(m.id == "rolling-memory-summary-ack" for m in history.messages)


def test_an_agent_with_summary_ack_sends_the_acknowledgement_after_the_states_summary() -> None:
    from agent_models import ScriptedChatModel
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"),
        summarizer=lambda p, m: "Ana lives in Rome.",
        max_turns=4,
        keep_last=2,
        memory_tools=(),
        summary_ack=True,
    )
    agent = create_agent(model, [], middleware=[memory], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1", "client_id": "ana"}}
    for text in ("I live in Paris", "No, Rome", "Where do I live?"):
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    sent = [m for m in model.requests[-1] if m.type != "system"]
    assert sent[0].type == "human" and "Ana lives in Rome." in sent[0].text
    assert sent[1].type == "ai" and sent[1].text.startswith("Understood")
    state = agent.get_state(config).values["messages"]
    assert not any(m.id == "rolling-memory-summary-ack" for m in state)  # sent, never kept in the state
