"""Cleaning of summarizer replies and the built-in prompts."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.prompts import clean_summary, default_prompt, render_transcript


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("Ana likes tea.", "Ana likes tea.", id="plain-text-unchanged"),
        pytest.param(
            "**Nouveau résumé :**\nLe client livre le samedi.",
            "Le client livre le samedi.",
            id="fr-bold-title",
        ),
        pytest.param("Summary: Ana likes tea.", "Ana likes tea.", id="inline-label"),
        pytest.param("## Résumé\n\nAna aime le thé.", "Ana aime le thé.", id="markdown-heading"),
        pytest.param("# Summary of the conversation\nAna likes tea.", "Ana likes tea.", id="long-heading"),
        pytest.param("Here is the updated summary:\nAna likes tea.", "Ana likes tea.", id="en-preamble"),
        pytest.param("Voici le résumé mis à jour :\nAna aime le thé.", "Ana aime le thé.", id="fr-preamble"),
        pytest.param("```\nAna likes tea.\n```", "Ana likes tea.", id="code-fence"),
        pytest.param("```markdown\nSummary:\nAna likes tea.\n```", "Ana likes tea.", id="fence-and-title"),
        pytest.param('"Ana likes tea."', "Ana likes tea.", id="wrapping-quotes"),
        pytest.param("« Ana aime le thé. »", "Ana aime le thé.", id="french-quotes"),
        pytest.param("**Summary:**", "", id="title-only-is-empty"),
        pytest.param("   \n  ", "", id="blank-is-empty"),
        pytest.param(
            "Summary of costs is due Friday.",
            "Summary of costs is due Friday.",
            id="word-summary-in-text-kept",
        ),
    ],
)
def test_clean_summary(raw: str, expected: str) -> None:
    assert clean_summary(raw) == expected


def test_word_cap_cuts_at_a_sentence_end_when_it_can() -> None:
    text = "One two three. Four five six seven. Eight nine ten eleven twelve."
    assert clean_summary(text, max_words=8) == "One two three. Four five six seven."


def test_word_cap_marks_a_cut_inside_a_sentence() -> None:
    assert clean_summary("a b c d e f g h", max_words=3) == "a b c…"


def test_word_cap_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_words must be positive"):
        clean_summary("x", max_words=0)


def test_prompts_exist_in_english_and_french_and_say_no_title() -> None:
    assert "no title" in default_prompt("en").system
    assert "pas de titre" in default_prompt("fr").system
    with pytest.raises(ConfigurationError, match="language must be one of"):
        default_prompt("de")


def test_update_prompt_carries_the_previous_summary_and_the_messages() -> None:
    request = default_prompt("en").messages(
        "Ana likes tea.", [HumanMessage("Now I prefer coffee")], max_words=50
    )
    body = request[1].text
    assert "Ana likes tea." in body
    assert "User: Now I prefer coffee" in body
    assert "At most 50 words" in request[0].text
    first = default_prompt("en").messages("", [HumanMessage("hi")], max_words=50)
    assert "<summary>" not in first[1].text


def test_transcript_spells_out_tool_calls_and_results() -> None:
    text = render_transcript(
        [
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
            ToolMessage("18C", tool_call_id="c1", name="weather"),
        ]
    )
    assert 'Assistant -> Tool weather({"city": "Paris"})' in text
    assert "Tool weather -> 18C" in text
