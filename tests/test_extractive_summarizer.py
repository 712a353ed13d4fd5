"""The keyless extractive summarizer: what it keeps, what it drops, the newest value, the cap."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, extractive_summarizer
from langchain_rolling_memory.errors import ConfigurationError


def _summary(messages: list[BaseMessage], previous: str = "", **options: object) -> str:
    return extractive_summarizer(**options).summarize(previous, messages).text  # type: ignore[arg-type]


def test_keeps_names_numbers_decisions_and_requests_and_drops_pleasantries() -> None:
    text = _summary(
        [
            HumanMessage("Hello! I'm Ana Ruiz from Lyon."),
            AIMessage("Nice to meet you."),
            HumanMessage("Could you ship order 4512 before Friday? Thanks."),
            AIMessage("Sure. We decided to ship it with the express carrier."),
            HumanMessage("Great."),
        ]
    )
    assert "Ana Ruiz" in text
    assert "4512" in text
    assert "decided to ship it with the express carrier" in text
    for pleasantry in ("Hello", "Nice to meet you", "Thanks", "Great"):
        assert pleasantry not in text


def test_newest_value_of_a_thing_replaces_the_older_one() -> None:
    text = _summary(
        [
            HumanMessage("My budget is 500 euros."),
            AIMessage("Noted."),
            HumanMessage("I need 3 tickets for the Friday show."),
            HumanMessage("My budget is 800 euros."),
            HumanMessage("I need 4 tickets for the Friday show."),
        ]
    )
    assert "800" in text
    assert "500" not in text
    assert "4 tickets" in text
    assert "3 tickets" not in text


def test_newest_value_wins_over_the_previous_summary() -> None:
    previous = _summary([HumanMessage("I'm Ana. My delivery day is Monday, 9 March.")])
    assert "Monday" in previous
    text = _summary([HumanMessage("My delivery day is Saturday, 14 March.")], previous=previous)
    assert "Saturday" in text
    assert "Monday" not in text
    assert "I'm Ana" in text  # what was not replaced stays


@pytest.mark.parametrize("max_words", [5, 12, 30])
def test_summary_stays_within_the_word_cap(max_words: int) -> None:
    messages: list[BaseMessage] = []
    for i in range(20):
        messages.append(HumanMessage(f"Please add item {i} named Widget{i} to order {1000 + i}."))
        messages.append(AIMessage(f"Confirmed: item {i} is booked for 20{i:02d}."))
    text = _summary(messages, max_words=max_words)
    assert text
    assert len(text.split()) <= max_words


def test_when_the_cap_is_tight_the_newest_notable_sentences_win() -> None:
    text = _summary(
        [HumanMessage("Please call me at 0601020304."), HumanMessage("Please ship to 12 rue Nationale.")],
        max_words=7,
    )
    assert "12 rue Nationale" in text
    assert "0601020304" not in text


# ---------------------------------------------------------------- newest information over the cap (issue 15)

FOLDS: list[list[BaseMessage]] = [
    [
        HumanMessage("Hi, I'm Ana Ruiz from Lyon. I run a bakery with 4 employees."),
        AIMessage("Welcome, Ana."),
        HumanMessage("My budget for the new oven is 8000 euros."),
        AIMessage("Noted: a budget of 8000 euros."),
    ],
    [
        HumanMessage("We deliver to 12 restaurants every Saturday morning."),
        AIMessage("Saturday deliveries noted."),
        HumanMessage("Please send me the brochures of the X200 and the K7 ovens."),
        AIMessage("I will email both brochures today."),
    ],
    [
        HumanMessage("Actually my budget is now 9500 euros."),
        AIMessage("Budget updated to 9500 euros."),
        HumanMessage("We decided to order the K7 oven with 2 trays."),
        AIMessage("Order of the K7 with 2 trays confirmed for delivery on 14 March."),
    ],
]


def _fold_all(max_words: int) -> list[str]:
    summarizer, summaries, previous = extractive_summarizer(max_words=max_words), [], ""
    for batch in FOLDS:
        previous = summarizer.summarize(previous, batch).text
        summaries.append(previous)
    return summaries


@pytest.mark.parametrize("max_words", [40, 60])
def test_each_fold_brings_its_newest_facts_into_the_summary(max_words: int) -> None:
    # The lessons' first rule, "the newest value wins", under the demo's 60-word cap and a
    # tighter one (where the old selection kept the previous summary and lost "9500").
    first, second, third = _fold_all(max_words=max_words)
    assert "8000" in first
    assert "12 restaurants" in second
    assert "X200" in second
    assert "9500" in third
    assert "8000" not in third  # replaced, not kept beside the new value
    assert "decided to order the K7 oven with 2 trays" in third
    assert len({first, second, third}) == 3  # every fold changes the summary
    for summary in (first, second, third):
        assert len(summary.split()) <= max_words


def test_who_the_user_is_survives_the_folds() -> None:
    # Notebook 01's first message used to be dropped as a greeting.
    for summary in _fold_all(max_words=60):
        assert "I'm Ana Ruiz from Lyon." in summary


def test_a_full_previous_summary_does_not_crowd_out_the_news() -> None:
    # Before issue 15 the previous summary's high-scoring sentences won over the cap, so the
    # next summary repeated the previous one word for word.
    previous = (
        "User: I'm Ana Ruiz from Lyon. Please ship order 4512 to 3 rue Victor Hugo before 12 May. "
        "We decided to pay invoice 9981 by card on 2 June. Please book 2 seats for Paris on 5 June."
    )
    news: list[BaseMessage] = [HumanMessage("I prefer calls after 17:00, never before.")]
    text = extractive_summarizer(max_words=30).summarize(previous, news).text
    assert text != previous
    assert "I prefer calls after 17:00, never before." in text
    assert len(text.split()) <= 30


def test_a_value_named_with_a_complement_is_replaced_by_its_newer_value() -> None:
    # Notebook 01: "my budget for the new oven is 8000" then "my budget is now 9500".
    text = _summary(
        [
            HumanMessage("My budget for the new oven is 8000 euros."),
            HumanMessage("Actually my budget is now 9500 euros."),
        ]
    )
    assert "9500" in text
    assert "8000" not in text


def test_a_greeting_that_introduces_the_user_is_kept() -> None:
    text = _summary(
        [HumanMessage("Hi, I'm Ana from Lyon."), AIMessage("Hello Ana!"), HumanMessage("Thanks!")]
    )
    assert text == "User: Hi, I'm Ana from Lyon."


def test_is_deterministic() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("I'm Bruno, I prefer emails. My order is 778."),
        AIMessage("I will email you the invoice for order 778."),
    ]
    first = _summary(messages)
    assert first == _summary(messages)
    # The same input in fresh interpreters with other hash seeds: no set or dict order leaks in.
    code = (
        "from langchain_core.messages import AIMessage, HumanMessage\n"
        "from langchain_rolling_memory import extractive_summarizer\n"
        "s = extractive_summarizer()\n"
        f"print(s.summarize('', [HumanMessage({messages[0].text!r}), AIMessage({messages[1].text!r})]).text)\n"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        assert out.stdout.strip() == first


def test_french_labels_and_cues() -> None:
    text = _summary(
        [
            HumanMessage("Bonjour !"),
            HumanMessage("Je m'appelle Chloé, je voudrais être livrée le samedi 14 mars."),
            AIMessage("C'est noté, la livraison est confirmée pour le samedi 14 mars."),
            HumanMessage("Merci !"),
        ],
        language="fr",
    )
    assert text.startswith("Utilisateur : Je m'appelle Chloé")
    assert "Assistant : C'est noté" in text
    assert "Bonjour" not in text
    assert "Merci" not in text


def test_tool_results_keep_their_tool_name_and_system_messages_are_skipped() -> None:
    text = _summary(
        [
            SystemMessage("You are a weather bot with 12 rules."),
            HumanMessage("What's the weather in Paris?"),
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
            ToolMessage("18°C, cloudy", tool_call_id="c1", name="weather"),
        ]
    )
    assert "Tool weather: 18°C, cloudy" in text
    assert "12 rules" not in text


def test_nothing_notable_keeps_the_last_user_sentences_rather_than_nothing() -> None:
    text = _summary([HumanMessage("hi"), AIMessage("hello"), HumanMessage("ok")])
    assert text == "User: hi ok"


def test_costs_no_tokens_and_no_model_call() -> None:
    result = extractive_summarizer().summarize("", [HumanMessage("My budget is 800 euros.")])
    assert (result.input_tokens, result.output_tokens, result.calls) == (0, 0, 0)


async def test_async_twin_gives_the_same_summary() -> None:
    messages: list[BaseMessage] = [HumanMessage("I'm Ana. Please book table 12 for Friday.")]
    summarizer = extractive_summarizer()
    assert (await summarizer.asummarize("", messages)).text == summarizer.summarize("", messages).text


@pytest.mark.parametrize(("options", "needle"), [({"max_words": 0}, "max_words"), ({"language": "de"}, "de")])
def test_bad_settings_are_refused(options: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        extractive_summarizer(**options)  # type: ignore[arg-type]


def test_drives_a_rolling_history_without_a_key() -> None:
    history = RollingSummaryChatMessageHistory(
        "demo", summarizer=extractive_summarizer(max_words=60), max_turns=4, keep_last=2
    )
    history.add_messages(
        [
            HumanMessage("I'm Dana, my flight number is AF 1234."),
            AIMessage("Thanks Dana."),
            HumanMessage("I'd like a window seat please."),
            AIMessage("Done, seat 14A is yours."),
            HumanMessage("What time is boarding?"),
        ]
    )
    # The first three messages are folded; the last two stay word for word.
    assert "AF 1234" in history.summary
    assert "window seat" in history.summary
    assert "14A" not in history.summary
    assert "14A" in history.messages[1].text
    assert history.usage.summarizer_calls == 1
    assert history.usage.model_calls == 0
