"""`trigger=` / `keep=` in `SummarizationMiddleware`'s forms: how each maps onto our limits, that
each changes when a compaction happens and what it keeps, through the histories, the agent
middleware and `with_rolling_memory`, and that contradictions are refused before any work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store, with_rolling_memory
from langchain_rolling_memory.core.trigger_keep import fold_policy
from langchain_rolling_memory.errors import ConfigurationError

SUMMARY = (
    "Ana, a client from Lyon, wants every order delivered on Saturdays only; "
    "the assistant noted it and will apply it to her next deliveries."
)


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{len(messages)} folded"


def ten_each(messages: Sequence[BaseMessage]) -> int:
    """A token counter that makes every message weigh 10 tokens."""
    return 10 * len(messages)


def turns(n: int, start: int = 0) -> list[BaseMessage]:
    return [
        HumanMessage(f"question {i}") if i % 2 == 0 else AIMessage(f"answer {i}")
        for i in range(start, start + n)
    ]


def history(**limits: Any) -> RollingSummaryChatMessageHistory:
    options: dict[str, Any] = {"summarizer": summarize, "token_counter": ten_each, **limits}
    return RollingSummaryChatMessageHistory("s1", **options)


def first_compaction(**limits: Any) -> tuple[int, list[str]]:
    """After how many messages the first summary lands, and the messages the view then keeps."""
    h = history(**limits)
    for i in range(40):
        h.add_messages(turns(1, start=i))
        if h.summary:
            return i + 1, [m.text for m in h.messages[1:]]
    raise AssertionError("no compaction in 40 messages")


# ---------------------------------------------------------------- the mapping, pure


@pytest.mark.parametrize(
    ("forms", "expected"),
    [
        ({"trigger": ("messages", 10)}, {"max_turns": 9, "max_tokens": None, "keep_last": 6}),
        ({"trigger": ("tokens", 4000)}, {"max_turns": None, "max_tokens": 3999}),
        ({"trigger": {"tokens": 4000}}, {"max_turns": None, "max_tokens": 3999}),
        ({"trigger": [("messages", 50), ("tokens", 3000)]}, {"max_turns": 49, "max_tokens": 2999}),
        ({"trigger": [("tokens", 3000), {"tokens": 2000}]}, {"max_tokens": 1999}),
        ({"trigger": ("fraction", 0.5)}, {"max_turns": None, "max_tokens": 4999}),
        ({"trigger": [("fraction", 0.8), ("tokens", 9000)]}, {"max_tokens": 7999}),
        ({"keep": ("messages", 4)}, {"max_turns": 12, "keep_last": 4, "keep_by": "messages"}),
        ({"keep": ("tokens", 500)}, {"max_turns": 12, "keep_tokens": 500, "keep_by": "tokens"}),
        (
            {"trigger": ("tokens", 4000), "keep": ("fraction", 0.1)},
            {"max_tokens": 3999, "keep_tokens": 1000, "keep_by": "tokens"},
        ),
        ({"trigger": ("tokens", 4000), "keep": ("messages", 20)}, {"max_tokens": 3999, "keep_last": 20}),
    ],
)
def test_each_form_maps_onto_the_policy(forms: dict[str, Any], expected: dict[str, Any]) -> None:
    policy = fold_policy(**forms, context_window=lambda: 10_000)
    assert {name: getattr(policy, name) for name in expected} == expected


@pytest.mark.parametrize(
    ("forms", "message"),
    [
        ({"trigger": ("messages", 10), "max_turns": 12}, r"not both.*max_turns=12"),
        ({"trigger": ("tokens", 4000), "max_tokens": 3000}, r"not both.*max_tokens=3000"),
        ({"keep": ("messages", 4), "keep_last": 6}, r"not both.*keep_last=6"),
        ({"keep": ("tokens", 400), "keep_tokens": 300}, r"not both.*keep_tokens=300"),
        ({"trigger": {"tokens": 4000, "messages": 10}}, r"AND.*pass a list"),
        ({"keep": [("messages", 4)]}, r"not a list"),
        ({"trigger": []}, r"sets no limit"),
        ({"trigger": ("turns", 10)}, r"'messages', 'tokens' or 'fraction'"),
        ({"trigger": ("messages", 0)}, r"positive integer"),
        ({"trigger": ("messages", 2.5)}, r"positive integer"),
        ({"trigger": ("messages", True)}, r"must be a number"),
        ({"trigger": ("fraction", 1.5)}, r"in \(0, 1\]"),
        ({"trigger": "messages"}, r"takes \('messages', N\)"),
        ({"trigger": ("messages", 5), "keep": ("messages", 4)}, r"contradict.*keep_last must be"),
        ({"trigger": ("messages", 5)}, r"contradict.*keep_last=6"),
        ({"trigger": ("tokens", 1000), "keep": ("tokens", 2000)}, r"contradict.*keep_tokens must be"),
    ],
)
def test_malformed_and_contradictory_forms_are_refused(forms: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        fold_policy(**forms, context_window=lambda: 10_000)
    assert "\n" not in str(info.value)


def test_a_fraction_without_a_context_window_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="context window"):
        fold_policy(trigger=("fraction", 0.5))


# ---------------------------------------------------------------- when it compacts, what it keeps


def test_a_messages_trigger_compacts_when_the_count_is_reached() -> None:
    # As in SummarizationMiddleware, ("messages", 5) fires at 5; max_turns=5 fires past 5.
    assert first_compaction(trigger=("messages", 5), keep=("messages", 2)) == (5, ["answer 3", "question 4"])
    assert first_compaction(max_turns=5, keep_last=2) == (6, ["question 4", "answer 5"])


def test_keep_messages_changes_what_is_kept() -> None:
    at, kept = first_compaction(trigger=("messages", 9), keep=("messages", 4))
    assert (at, len(kept)) == (9, 4)
    at, kept = first_compaction(trigger=("messages", 9), keep=("messages", 2))
    assert (at, len(kept)) == (9, 2)


def test_a_tokens_trigger_compacts_when_the_tokens_are_reached() -> None:
    # 10 tokens a message: 50 tokens are reached at the 5th message; by default half is kept.
    assert first_compaction(trigger=("tokens", 50)) == (5, ["answer 3", "question 4"])
    assert first_compaction(trigger=("tokens", 90))[0] == 9


def test_keep_tokens_after_a_messages_trigger() -> None:
    # A mix today's names cannot say: fire on the count, keep a token budget.
    assert first_compaction(trigger=("messages", 8), keep=("tokens", 30)) == (
        8,
        ["answer 5", "question 6", "answer 7"],
    )


def test_keep_messages_after_a_tokens_trigger() -> None:
    at, kept = first_compaction(trigger=("tokens", 80), keep=("messages", 5))
    assert (at, len(kept)) == (8, 5)


def test_a_list_fires_at_the_first_threshold_reached() -> None:
    assert first_compaction(trigger=[("messages", 20), ("tokens", 60)], keep=("messages", 2))[0] == 6
    assert first_compaction(trigger=[("messages", 4), ("tokens", 600)], keep=("messages", 2))[0] == 4


def profiled(max_input_tokens: int | None) -> GenericFakeChatModel:
    profile = None if max_input_tokens is None else {"max_input_tokens": max_input_tokens}
    return GenericFakeChatModel(messages=iter([AIMessage(SUMMARY)] * 20), profile=profile)  # type: ignore[arg-type]


def test_a_fraction_is_of_the_summarizer_models_context_window() -> None:
    # 100 input tokens: ("fraction", 0.5) fires at 50 tokens (5 messages), 0.2 keeps 20 (2).
    h = RollingSummaryChatMessageHistory(
        "s1",
        summarizer=profiled(100),
        token_counter=ten_each,
        trigger=("fraction", 0.5),
        keep=("fraction", 0.2),
    )
    h.add_messages(turns(4))
    assert h.summary == ""
    h.add_messages(turns(1, start=4))
    assert h.summary == SUMMARY
    assert [m.text for m in h.messages[1:]] == ["answer 3", "question 4"]
    bigger = RollingSummaryChatMessageHistory(
        "s2", summarizer=profiled(1000), token_counter=ten_each, trigger=("fraction", 0.5)
    )
    bigger.add_messages(turns(20))
    assert bigger.summary == ""


def test_a_fraction_reads_the_model_inside_an_lcel_chain() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "Summarize."), MessagesPlaceholder("messages")])
    h = RollingSummaryChatMessageHistory(
        "s1", summarizer=prompt | profiled(1000) | StrOutputParser(), trigger=("fraction", 0.25)
    )
    assert h.compactor.policy.max_tokens == 249


def test_a_fraction_reads_a_model_strings_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    h = RollingSummaryChatMessageHistory("s1", summarizer="openai:gpt-4o-mini", trigger=("fraction", 0.5))
    assert h.compactor.policy.max_tokens == 64_000 - 1  # gpt-4o-mini's profile: 128k input tokens


@pytest.mark.parametrize(
    ("summarizer", "message"),
    [(profiled(None), "profile gives no max_input_tokens"), (summarize, "has no chat model")],
)
def test_a_fraction_without_a_profile_is_one_clear_error(summarizer: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        RollingSummaryChatMessageHistory("s1", summarizer=summarizer, trigger=("fraction", 0.8))
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigurationError, match=message):
        RollingSummaryChatMessageHistory("s1", summarizer=summarizer, keep=("fraction", 0.1))


# ---------------------------------------------------------------- every entry point


def test_with_rolling_memory_takes_the_forms() -> None:
    store = open_store("memory://")
    model = GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(10)]))
    chat = with_rolling_memory(
        model, store=store, summarizer=summarize, trigger=("messages", 4), keep=("messages", 2)
    )
    config = {"configurable": {"session_id": "s1"}}
    chat.invoke([HumanMessage("q0")], config=config)  # 2 messages stored
    assert store.summary("s1") is None
    chat.invoke([HumanMessage("q1")], config=config)  # 4: reached
    record = store.summary("s1")
    assert record is not None and record.text == "2 folded"


def test_with_rolling_memory_refuses_a_mix_when_built() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        with_rolling_memory(
            GenericFakeChatModel(messages=iter([])),
            store=open_store("memory://"),
            summarizer=summarize,
            trigger=("messages", 10),
            max_turns=8,
        )


def test_the_agent_middleware_takes_the_forms() -> None:
    pytest.importorskip("langgraph")
    from langchain_rolling_memory import RollingMemoryMiddleware

    store = open_store("memory://")
    memory = RollingMemoryMiddleware(
        store=store,
        summarizer=summarize,
        token_counter=ten_each,
        trigger=("tokens", 60),
        keep=("messages", 3),
    )
    store.append("s1", turns(5), token_counts=[10] * 5)
    assert memory.compactor.advance("s1").record is None
    store.append("s1", turns(1, start=5), token_counts=[10])
    state = memory.compactor.advance("s1")
    assert state.record is not None and state.record.text == "3 folded"
    assert [m.text for m in state.messages] == ["answer 3", "question 4", "answer 5"]
    with pytest.raises(ConfigurationError, match="not both"):
        RollingMemoryMiddleware(store=store, summarizer=summarize, keep=("messages", 3), keep_last=3)
