"""One settings object: `MemorySettings`, the keywords every entry point takes, checked once.

A misspelt keyword is refused with the closest name by each entry point (and by mypy), before
anything is written; one settings object gives a history and the agent middleware the same
policy; an invalid value is refused with the same line wherever it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import store_kit
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

import langchain_rolling_memory
from langchain_rolling_memory import (
    Compactor,
    MemorySettings,
    RollingSummaryChatMessageHistory,
    keyword_topic_shift,
    preset,
    session_history_factory,
    with_rolling_memory,
)
from langchain_rolling_memory.core.settings import CompactionOptions, HistoryOptions, MemoryOptions
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores.api import RollingStore


def summarize(previous: str, messages: list[BaseMessage]) -> str:
    return f"{len(messages)} folded"


def _history(store: RollingStore, **options: Any) -> object:
    return RollingSummaryChatMessageHistory("s1", store=store, summarizer=summarize, **options)


def _middleware(store: RollingStore, **options: Any) -> object:
    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

    return RollingMemoryMiddleware(store=store, summarizer=summarize, **options)


def _chain(store: RollingStore, **options: Any) -> object:
    model = GenericFakeChatModel(messages=iter([AIMessage("ok")]))
    return with_rolling_memory(model, store=store, summarizer=summarize, **options)


def _compactor(store: RollingStore, **options: Any) -> object:
    return Compactor.build(store, summarize, **options)


def _factory(store: RollingStore, **options: Any) -> object:
    return session_history_factory(store, summarize, **options)


ENTRY_POINTS: dict[str, Callable[..., object]] = {
    "RollingSummaryChatMessageHistory": _history,
    "RollingMemoryMiddleware": _middleware,
    "with_rolling_memory": _chain,
    "Compactor.build": _compactor,
    "session_history_factory": _factory,
}


def test_the_option_names_are_the_settings_fields() -> None:
    fields = {f.name for f in dataclasses.fields(MemorySettings)}
    assert set(MemoryOptions.__optional_keys__) == fields
    assert CompactionOptions.__optional_keys__ < HistoryOptions.__optional_keys__ < fields
    assert MemoryOptions.__required_keys__ == frozenset()


def test_memory_settings_is_exported_at_the_top_level() -> None:
    assert langchain_rolling_memory.MemorySettings is MemorySettings
    assert "MemorySettings" in langchain_rolling_memory.__all__


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
async def test_a_misspelt_option_is_refused_with_the_closest_name_and_writes_nothing(
    entry: str, store: RollingStore
) -> None:
    before = store_kit.raw_contents(store)
    with pytest.raises(ConfigurationError) as caught:
        ENTRY_POINTS[entry](store, max_turn=12)
    assert str(caught.value) == f"unknown option 'max_turn' for {entry}; did you mean 'max_turns'?"
    assert store_kit.raw_contents(store) == before


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_misspelt_option_is_refused_even_beside_a_settings_object(entry: str) -> None:
    store = langchain_rolling_memory.open_store("memory://")
    with pytest.raises(ConfigurationError, match=r"unknown option 'keep_lats' .*did you mean 'keep_last'\?"):
        ENTRY_POINTS[entry](store, settings=MemorySettings(), keep_lats=2)


def test_an_option_of_another_entry_point_is_named_as_such() -> None:
    store = langchain_rolling_memory.open_store("memory://")
    with pytest.raises(
        ConfigurationError, match="'recall_tokens' is not one of RollingSummaryChatMessageHistory's"
    ):
        _history(store, recall_tokens=200)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"max_turns": 4, "keep_last": 4},
            "keep_last must be at least 1 and smaller than max_turns, got keep_last=4, max_turns=4",
        ),
        (
            {"language": "de"},
            "language must be one of 'en', 'fr' (the languages the memory writes in), got 'de'",
        ),
        ({"max_words": 0}, "max_words must be positive, got max_words=0"),
        ({"timeout": -1}, "timeout must be positive (or None), got timeout=-1"),
        ({"max_summary_chars": 10}, "max_summary_chars must be at least 100, got max_summary_chars=10"),
        (
            {"hard_cap": 5, "max_turns": 8, "keep_last": 2},
            "hard_cap must be larger than max_turns, got hard_cap=5, max_turns=8",
        ),
    ],
    ids=[
        "keep_last-not-below-max_turns",
        "language",
        "max_words",
        "timeout",
        "max_summary_chars",
        "hard_cap",
    ],
)
def test_an_invalid_value_is_refused_with_the_same_line_everywhere(bad: dict[str, Any], message: str) -> None:
    store = langchain_rolling_memory.open_store("memory://")
    seen = set()
    with pytest.raises(ConfigurationError) as caught:
        MemorySettings(**bad)
    seen.add(str(caught.value))
    for entry in ENTRY_POINTS.values():
        with pytest.raises(ConfigurationError) as caught:
            entry(store, **bad)
        seen.add(str(caught.value))
    assert seen == {message}
    assert store_kit.raw_contents(store) == []


def test_settings_plus_options_is_the_settings_with_those_replaced() -> None:
    store = langchain_rolling_memory.open_store("memory://")
    shared = MemorySettings(max_turns=12, keep_last=4, language="fr")
    history = RollingSummaryChatMessageHistory(
        "s1", store=store, summarizer=summarize, settings=shared, keep_last=2
    )
    assert history.settings == dataclasses.replace(shared, keep_last=2)
    assert history.compactor.policy.keep_last == 2
    assert history.compactor.policy.max_turns == 12
    assert history.compactor.language == "fr"


def test_one_settings_object_gives_a_history_and_the_middleware_the_same_policy() -> None:
    pytest.importorskip("langchain.agents")
    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

    store = langchain_rolling_memory.open_store("memory://")
    settings = MemorySettings(max_turns=12, keep_last=4, language="fr", max_words=80, max_summary_tokens=300)
    history = RollingSummaryChatMessageHistory("s1", store=store, summarizer=summarize, settings=settings)
    middleware = RollingMemoryMiddleware(store=store, summarizer=summarize, settings=settings)
    chain = with_rolling_memory(
        GenericFakeChatModel(messages=iter([AIMessage("ok")])),
        store=store,
        summarizer=summarize,
        settings=settings,
    )
    by_chain = chain.get_session_history("ana", "s2")
    for compactor in (middleware.compactor, by_chain.compactor):
        assert compactor.policy == history.compactor.policy
        assert compactor.planner == history.compactor.planner
        assert compactor.language == "fr"
    assert middleware.settings == settings


def test_the_same_settings_fold_the_same_way_in_a_history_and_its_keywords() -> None:
    store = langchain_rolling_memory.open_store("memory://")
    settings = MemorySettings(max_turns=4, keep_last=2)
    by_settings = RollingSummaryChatMessageHistory("a", store=store, summarizer=summarize, settings=settings)
    by_keywords = RollingSummaryChatMessageHistory(
        "b", store=store, summarizer=summarize, max_turns=4, keep_last=2
    )
    turns = [HumanMessage("1"), AIMessage("2"), HumanMessage("3"), AIMessage("4"), HumanMessage("5")]
    by_settings.add_messages(turns)
    by_keywords.add_messages(turns)
    assert by_settings.summary == by_keywords.summary == "3 folded"
    assert [m.text for m in by_settings.messages] == [m.text for m in by_keywords.messages]


def test_a_preset_gives_settings_compatible_options() -> None:
    settings = MemorySettings(**preset("support", keep_last=3))
    assert (settings.max_turns, settings.keep_last, settings.max_words) == (6, 3, 100)
    assert settings.topic_detector is not None


def test_a_settings_object_that_is_not_one_is_refused() -> None:
    store = langchain_rolling_memory.open_store("memory://")
    with pytest.raises(ConfigurationError, match="settings must be a MemorySettings, got dict"):
        RollingSummaryChatMessageHistory("s", store=store, summarizer=summarize, settings={"max_turns": 4})  # type: ignore[arg-type]


def test_keyword_topic_shift_and_the_other_engine_options_still_pass_through() -> None:
    store = langchain_rolling_memory.open_store("memory://")
    detector = keyword_topic_shift()
    history = RollingSummaryChatMessageHistory(
        "s",
        store=store,
        summarizer=summarize,
        topic_detector=detector,
        backoff=5.0,
        lease_ttl=30.0,
        start_delay=0,
    )
    assert history.compactor.planner.topic_detector is detector
    assert (history.compactor.backoff, history.compactor.lease_ttl, history.compactor.start_delay) == (
        5.0,
        30.0,
        0,
    )
