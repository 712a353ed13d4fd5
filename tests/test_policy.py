"""The pure cutting rules: table-driven cases and property tests over random conversations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_rolling_memory.core.cuts import FoldPolicy, WindowPolicy, fold_cut, window_cut
from langchain_rolling_memory.core.tool_pairs import is_tool_safe, tool_safe_cut
from langchain_rolling_memory.errors import ConfigurationError


def h(text: str = "q") -> HumanMessage:
    return HumanMessage(text)


def a(text: str = "r") -> AIMessage:
    return AIMessage(text)


def call(*ids: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"i": i}, "id": i} for i in ids])


def result(call_id: str) -> ToolMessage:
    return ToolMessage(f"result {call_id}", tool_call_id=call_id)


def chat(n: int) -> list[BaseMessage]:
    return [h(str(i)) if i % 2 == 0 else a(str(i)) for i in range(n)]


@pytest.mark.parametrize(
    ("n", "max_turns", "keep_last", "expected"),
    [
        pytest.param(4, 4, 2, 0, id="at-max-turns-nothing-is-due"),
        pytest.param(5, 4, 2, 3, id="seeds-example-folds-the-three-oldest"),
        pytest.param(13, 12, 6, 7, id="defaults-fold-all-but-six"),
        pytest.param(12, 12, 6, 0, id="defaults-wait-until-twelve-is-exceeded"),
        pytest.param(3, 2, 1, 2, id="keep-one-folds-up-to-the-latest-human"),
    ],
)
def test_count_policy_hysteresis(n: int, max_turns: int, keep_last: int, expected: int) -> None:
    assert fold_cut(chat(n), max_turns=max_turns, keep_last=keep_last) == expected


def test_fold_never_folds_the_latest_human_message() -> None:
    messages = [h(), a(), h(), a(), h("latest"), a(), a(), a()]
    cut = fold_cut(messages, max_turns=4, keep_last=1)
    assert cut == 4
    assert messages[cut].content == "latest"


def test_cut_moves_back_to_the_ai_message_of_a_tool_pair() -> None:
    messages = [h(), a(), h(), call("c1"), result("c1"), a(), h()]
    # keep_last=3 would start the kept part at the ToolMessage (index 4).
    assert fold_cut(messages, max_turns=5, keep_last=3) == 3


def test_parallel_tool_calls_stay_with_all_their_results() -> None:
    messages = [h(), a(), h(), call("x", "y"), result("x"), result("y"), a(), h()]
    cut = fold_cut(messages, max_turns=6, keep_last=3)
    assert cut == 3
    assert is_tool_safe(messages, cut)


def test_token_policy_folds_down_to_keep_tokens() -> None:
    messages = chat(10)
    counts = [10] * 10
    assert fold_cut(messages, max_turns=None, max_tokens=90, keep_tokens=30, token_counts=counts) == 7
    assert fold_cut(messages, max_turns=None, max_tokens=100, keep_tokens=30, token_counts=counts) == 0


def test_token_policy_needs_one_count_per_message() -> None:
    with pytest.raises(ConfigurationError, match="one count per message"):
        fold_cut(chat(3), max_turns=None, max_tokens=10, token_counts=[1, 2])


def test_window_keeps_the_last_messages_and_skips_an_orphan_tool_result() -> None:
    messages = [h(), call("c1"), result("c1"), a("done")]
    assert window_cut(messages, max_messages=3) == 1
    assert window_cut(messages, max_messages=2) == 3  # would start at the ToolMessage
    # A partial read that starts with a tool result whose call is not in the list.
    assert window_cut([result("c0"), a(), h()], max_messages=5) == 1


def test_window_by_tokens_holds_the_budget() -> None:
    messages = chat(6)
    assert window_cut(messages, max_messages=None, max_tokens=25, token_counts=[10] * 6) == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"max_turns": 4, "keep_last": 4}, "keep_last must be", id="keep-equal-max"),
        pytest.param({"max_turns": 4, "keep_last": 0}, "keep_last must be", id="keep-zero"),
        pytest.param({"max_turns": None}, "set max_turns or max_tokens", id="no-limit"),
        pytest.param({"max_tokens": 10, "keep_tokens": 10}, "keep_tokens must be", id="keep-tokens-too-big"),
        pytest.param({"keep_tokens": 5}, "keep_tokens needs max_tokens", id="keep-tokens-alone"),
        pytest.param(
            {"max_turns": 6, "keep_last": 2, "hard_cap": 6}, "hard_cap must be larger", id="cap-too-small"
        ),
    ],
)
def test_bad_fold_settings_are_refused_with_the_values(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        FoldPolicy(**kwargs)  # type: ignore[arg-type]


def test_bad_window_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_messages must be at least 1"):
        WindowPolicy(max_messages=0)


def test_fallback_window_applies_only_beyond_the_cap() -> None:
    policy = FoldPolicy(max_turns=4, keep_last=2, hard_cap=8)
    assert policy.fallback_cut(chat(8)) == 0
    # Issue 15: the fallback window starts on a user message by default (5 is an AIMessage).
    assert policy.fallback_cut(chat(9)) == 6
    assert FoldPolicy(max_turns=4, keep_last=2, hard_cap=8, start_on=None).fallback_cut(chat(9)) == 5
    # A backlog (more unsummarized messages than were read) always falls back.
    assert policy.fallback_cut(chat(5), backlog=True) == 2  # 1 is an AIMessage (issue 15)
    assert (
        FoldPolicy(max_turns=4, keep_last=2, hard_cap=8, start_on=None).fallback_cut(chat(5), backlog=True)
        == 1
    )


# ---------------------------------------------------------------- windows start on a user message (issue 15)


def test_the_lessons_window_starts_on_the_user_message() -> None:
    # Lesson 3 ("tronquer"): keep the last messages, but the kept part starts with the user.
    history = [
        h("Bonjour, je suis Ana"),
        a("Bonjour Ana"),
        h("Livrez samedi"),
        a("Noté"),
        h("Et le prix ?"),
        a("30 €"),
    ]
    assert window_cut(history, max_messages=3) == 3  # today: opens on "Noté"
    assert window_cut(history, max_messages=3, start_on="human") == 4
    assert [m.text for m in history[4:]] == ["Et le prix ?", "30 €"]


@pytest.mark.parametrize(
    ("messages", "max_messages", "expected"),
    [
        pytest.param([h(), a(), h(), a()], 4, 0, id="already-on-a-user-message"),
        pytest.param([h(), a(), h(), a()], 3, 2, id="moves-forward-past-an-ai-reply"),
        pytest.param(
            [h(), call("c1"), result("c1"), a(), h("q2"), a()], 5, 4, id="moves-past-a-whole-tool-pair"
        ),
        pytest.param(
            [h("q"), call("c1"), result("c1"), result("c1b"), a("done")],
            2,
            0,
            id="no-user-message-in-the-window-keeps-the-latest-one",
        ),
        pytest.param([h("q"), a(), a(), a()], 2, 0, id="latest-user-message-wins-over-the-limit"),
        pytest.param([a(), a(), a()], 2, 1, id="no-user-message-at-all-keeps-the-plain-window"),
        pytest.param([], 2, 0, id="empty"),
    ],
)
def test_window_start_on_human(messages: list[BaseMessage], max_messages: int, expected: int) -> None:
    assert window_cut(messages, max_messages=max_messages, start_on="human") == expected


# ---------------------------------------------------------------- a window that fits is sent whole (issue 20, defect 10)


def s(text: str = "sys") -> SystemMessage:
    return SystemMessage(text)


@pytest.mark.parametrize(
    ("messages", "limits", "backlog", "expected"),
    [
        pytest.param([s(), h(), a()], {"max_messages": 20}, False, 0, id="leading-system-fits"),
        pytest.param([a("hello"), h(), a()], {"max_messages": 3}, False, 0, id="greeting-fits-exactly"),
        pytest.param(
            [s(), a("hello"), h(), a()], {"max_messages": 4}, False, 0, id="system-and-greeting-fit"
        ),
        pytest.param(
            [s(), h(), a()],
            {"max_messages": None, "max_tokens": 30, "token_counts": [10, 10, 10]},
            False,
            0,
            id="fits-the-token-budget",
        ),
        pytest.param([s(), a(), a()], {"max_messages": 5}, False, 0, id="no-user-message-fits"),
        pytest.param(
            [s(), call("c1"), result("c1"), h()], {"max_messages": 4}, False, 0, id="tool-pair-fits"
        ),
        pytest.param(
            [result("c0"), a(), h()], {"max_messages": 5}, False, 1, id="orphan-result-still-skipped"
        ),
        pytest.param(
            [s(), a("hello"), h(), a()], {"max_messages": 3}, False, 2, id="cut-by-count-starts-on-user"
        ),
        pytest.param(
            [s(), h(), a()],
            {"max_messages": None, "max_tokens": 29, "token_counts": [10, 10, 10]},
            False,
            1,
            id="cut-by-tokens-starts-on-user",
        ),
        pytest.param([a("hello"), h(), a()], {"max_messages": 3}, True, 1, id="earlier-messages-were-cut"),
        pytest.param([s(), h(), a(), a()], {"max_messages": 2}, False, 1, id="latest-user-message-kept"),
    ],
)
def test_a_window_starts_on_a_user_message_only_when_it_cuts(
    messages: list[BaseMessage], limits: dict[str, Any], backlog: bool, expected: int
) -> None:
    assert window_cut(messages, start_on="human", backlog=backlog, **limits) == expected
    assert (
        WindowPolicy(max_messages=limits["max_messages"], max_tokens=limits.get("max_tokens")).cut(
            messages, limits.get("token_counts"), backlog=backlog
        )
        == expected
    )


def test_window_start_on_human_with_a_token_budget() -> None:
    messages = chat(6)
    assert window_cut(messages, max_messages=None, max_tokens=30, token_counts=[10] * 6) == 3
    assert (
        window_cut(messages, max_messages=None, max_tokens=30, token_counts=[10] * 6, start_on="human") == 4
    )


def test_window_policy_starts_on_a_user_message_by_default() -> None:
    assert WindowPolicy(max_messages=3).cut(chat(4)) == 2
    assert WindowPolicy(max_messages=3, start_on=None).cut(chat(4)) == 1


@pytest.mark.parametrize("factory", [WindowPolicy, FoldPolicy], ids=["window", "fold"])
def test_bad_start_on_is_refused(factory: type) -> None:
    with pytest.raises(ConfigurationError, match="start_on must be \"human\" or None, got start_on='ai'"):
        factory(start_on="ai")
    with pytest.raises(ConfigurationError, match="start_on must be"):
        window_cut(chat(2), start_on="ai")  # type: ignore[arg-type]


# ---------------------------------------------------------------- properties


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """Random but well-formed conversations with single and parallel tool calls."""
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage("sys"))
    counter = 0
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["human", "ai", "tools"]))
        if kind == "human":
            messages.append(h())
        elif kind == "ai":
            messages.append(a())
        else:
            ids = [f"c{counter + k}" for k in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            messages.append(call(*ids))
            messages.extend(result(i) for i in ids)
    return messages


def _pairs_intact(folded: Sequence[BaseMessage], kept: Sequence[BaseMessage]) -> bool:
    folded_calls = {c["id"] for m in folded if isinstance(m, AIMessage) for c in m.tool_calls}
    return not any(isinstance(m, ToolMessage) and m.tool_call_id in folded_calls for m in kept)


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(2, 14), st.integers(1, 13))
def test_fold_never_splits_a_tool_pair(messages: list[BaseMessage], max_turns: int, keep: int) -> None:
    keep_last = min(keep, max_turns - 1)
    cut = fold_cut(messages, max_turns=max_turns, keep_last=keep_last)
    folded, kept = messages[:cut], messages[cut:]
    assert folded + kept == messages  # nothing lost
    assert _pairs_intact(folded, kept)
    if cut:
        assert not isinstance(kept[0], ToolMessage)
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        assert not humans or cut <= humans[-1]


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(1, 12), st.integers(0, 30))
def test_window_never_starts_with_a_tool_result(messages: list[BaseMessage], size: int, start: int) -> None:
    partial = messages[min(start, len(messages)) :]  # as read from the end of a transcript
    cut = window_cut(partial, max_messages=size)
    kept = partial[cut:]
    assert len(kept) <= size
    assert not kept or not isinstance(kept[0], ToolMessage)
    assert _pairs_intact(partial[:cut], kept)


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(1, 12), st.integers(0, 30))
def test_window_starting_on_human_keeps_the_question_and_the_tool_pairs(
    messages: list[BaseMessage], size: int, start: int
) -> None:
    backlog = start > 0 and bool(messages)  # the read stopped short of the first message
    partial = messages[min(start, len(messages)) :]
    cut = window_cut(partial, max_messages=size, start_on="human", backlog=backlog)
    kept = partial[cut:]
    assert partial[:cut] + kept == partial
    assert _pairs_intact(partial[:cut], kept)
    assert not kept or not isinstance(kept[0], ToolMessage)
    humans = [i for i, m in enumerate(partial) if isinstance(m, HumanMessage)]
    if not backlog and len(partial) <= size:
        assert cut == 0  # everything fits: everything is sent (issue 20, defect 10)
    elif humans:
        assert isinstance(kept[0], HumanMessage)
        assert cut <= humans[-1]  # the latest user message is always kept
        if len(kept) > size:  # over the limit only to keep the latest user message
            assert cut == humans[-1]
    else:
        assert cut == window_cut(partial, max_messages=size, backlog=backlog)


@settings(max_examples=300, deadline=None)
@given(
    conversations(),
    st.one_of(st.none(), st.integers(1, 12)),
    st.one_of(st.none(), st.integers(1, 120)),
    st.integers(0, 30),
    st.randoms(use_true_random=False),
)
def test_a_window_drops_nothing_when_it_fits_and_starts_on_a_user_message_when_it_cuts(
    messages: list[BaseMessage], size: int | None, budget: int | None, start: int, rng: Any
) -> None:
    if size is None and budget is None:
        size = 4
    backlog = start > 0 and bool(messages)
    partial = messages[min(start, len(messages)) :]
    counts = [rng.randint(1, 15) for _ in partial]
    cut = window_cut(
        partial, max_messages=size, max_tokens=budget, token_counts=counts, start_on="human", backlog=backlog
    )
    kept = partial[cut:]
    fits = (size is None or len(partial) <= size) and (budget is None or sum(counts) <= budget)
    assert _pairs_intact(partial[:cut], kept)  # tool calls stay with their results
    assert not kept or not isinstance(kept[0], ToolMessage)  # no orphan result opens the window
    humans = [i for i, m in enumerate(partial) if isinstance(m, HumanMessage)]
    assert not humans or cut <= humans[-1]  # the latest user message is always sent
    if fits and not backlog:
        assert kept == partial  # nothing dropped when it fits
    elif humans:
        assert isinstance(kept[0], HumanMessage)  # a cut window opens on a user message
        within = (size is None or len(kept) <= size) and (budget is None or sum(counts[cut:]) <= budget)
        assert within or cut == humans[-1]  # over the limits only to keep the latest user message


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(0, 40), st.booleans())
def test_tool_safe_cut_returns_a_safe_cut_in_the_asked_direction(
    messages: list[BaseMessage], wanted: int, keep_more: bool
) -> None:
    cut = tool_safe_cut(messages, wanted, keep_more=keep_more)
    wanted = min(wanted, len(messages))
    assert (cut <= wanted) if keep_more else (cut >= wanted)
    assert _pairs_intact(messages[:cut], messages[cut:])
