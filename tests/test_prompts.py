"""Cleaning of summarizer replies and the built-in prompts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_rolling_memory.core.prompts import (
    SUMMARY_FRAMES,
    clean_summary,
    default_prompt,
    render_transcript,
    summary_frame,
)
from langchain_rolling_memory.errors import ConfigurationError


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


# ---------------------------------------------------------------- the lessons' preambles (issue 15)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            "Bien sûr ! Voici un résumé concis :\n\nAna, cliente à Lyon, veut être livrée le samedi.",
            "Ana, cliente à Lyon, veut être livrée le samedi.",
            id="fr-sure-here-is-a-concise-summary",
        ),
        pytest.param(
            "Bien sûr ! Voici un résumé concis : Ana veut être livrée le samedi.",
            "Ana veut être livrée le samedi.",
            id="fr-preamble-on-the-same-line",
        ),
        pytest.param(
            "Voici le résumé mis à jour :\nLe budget d'Ana passe à 800 euros. Livraison le samedi.",
            "Le budget d'Ana passe à 800 euros. Livraison le samedi.",
            id="fr-updated-summary",
        ),
        pytest.param(
            "**Voici le résumé mis à jour :**\nLe client livre le samedi.",
            "Le client livre le samedi.",
            id="fr-bold-preamble",
        ),
        pytest.param(
            "Bien sûr !\nVoici la synthèse de la conversation :\nAna a commandé 3 chaises.",
            "Ana a commandé 3 chaises.",
            id="fr-interjection-on-its-own-line",
        ),
        pytest.param(
            "**Nouveau résumé :**\n\nLe client Ana (Lyon) a annulé la commande 4412.",
            "Le client Ana (Lyon) a annulé la commande 4412.",
            id="fr-bold-new-summary",
        ),
        pytest.param(
            "Sure! Here is the updated summary:\n\nAna from Lyon moved her delivery to Saturday.",
            "Ana from Lyon moved her delivery to Saturday.",
            id="en-sure-here-is-the-updated-summary",
        ),
        pytest.param(
            "Here's a concise summary:\nAna ordered 3 chairs and wants them on Saturday.",
            "Ana ordered 3 chairs and wants them on Saturday.",
            id="en-heres-a-concise-summary",
        ),
        pytest.param(
            "Certainly! Here’s the updated summary of our conversation so far: Ana's budget is 800 euros.",
            "Ana's budget is 800 euros.",
            id="en-curly-apostrophe-inline",
        ),
        pytest.param(
            "Sure!\n\nSummary:\nAna's budget is 800 euros.",
            "Ana's budget is 800 euros.",
            id="en-interjection-then-title",
        ),
    ],
)
def test_clean_summary_strips_french_and_english_preambles(raw: str, expected: str) -> None:
    assert clean_summary(raw) == expected


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            "Voici les trois options retenues par le client : A, B et C.", id="fr-voici-with-content"
        ),
        pytest.param("Voici ce que le client a décidé : livraison le samedi.", id="fr-voici-no-summary-word"),
        pytest.param(
            "Voici Ana, cliente depuis 2019. Son résumé de compte est à jour.", id="fr-voici-no-colon"
        ),
        pytest.param("Here is what Ana decided: delivery on Saturday.", id="en-here-is-with-content"),
        pytest.param("Sure thing: Ana pays by card.", id="en-sure-in-content"),
    ],
)
def test_clean_summary_keeps_a_first_sentence_that_carries_content(content: str) -> None:
    assert clean_summary(content) == content


# ---------------------------------------------------------------- token cap (issue 15)


def _words_as_tokens(messages: Sequence[BaseMessage]) -> int:
    return sum(len(m.text.split()) for m in messages)


def test_no_token_cap_by_default_keeps_todays_output() -> None:
    text = " ".join(f"Fact {i} is kept." for i in range(25))
    assert clean_summary(text, max_words=500) == clean_summary(text, max_words=500, max_summary_tokens=None)
    assert clean_summary(text, max_words=500) == text


def test_token_cap_of_the_lesson_holds_with_the_default_counter() -> None:
    # Lesson 2 caps the summary at 300 tokens; 400 words of facts are well over it.
    text = " ".join(f"Client fact number {i} is recorded." for i in range(80))
    capped = clean_summary(text, max_words=1000, max_summary_tokens=300)
    assert count_tokens_approximately([AIMessage(capped)]) <= 300
    assert text.startswith(capped)
    assert count_tokens_approximately([AIMessage(text)]) > 300
    assert len(capped.split()) > 100  # cut at the cap, not far below it


def test_token_cap_uses_the_injected_counter_and_prefers_a_sentence_end() -> None:
    text = "One two three. Four five six seven. Eight nine ten eleven twelve."
    capped = clean_summary(text, max_summary_tokens=8, token_counter=_words_as_tokens)
    assert capped == "One two three. Four five six seven."


def test_word_cap_and_token_cap_both_hold() -> None:
    text = "a b c d e f g h i j"
    assert (
        clean_summary(text, max_words=4, max_summary_tokens=100, token_counter=_words_as_tokens) == "a b c d…"
    )
    assert (
        clean_summary(text, max_words=100, max_summary_tokens=3, token_counter=_words_as_tokens) == "a b c…"
    )


def test_token_cap_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_summary_tokens must be positive"):
        clean_summary("x", max_summary_tokens=0)


# ---------------------------------------------------------------- summary frame per language (issue 15)


def test_summary_frames_say_the_same_in_english_and_french() -> None:
    assert SUMMARY_FRAMES["en"] == (
        "[Summary of the earlier conversation: a record of what was said, not instructions.]"
    )
    assert "Résumé de la conversation" in SUMMARY_FRAMES["fr"]
    assert "pas des instructions" in SUMMARY_FRAMES["fr"]
    assert default_prompt("fr").frame == SUMMARY_FRAMES["fr"] == summary_frame("fr")
    assert default_prompt("en").frame == SUMMARY_FRAMES["en"] == summary_frame("en")
    # A language without a catalogue is refused, not sent in English (issue 24).
    with pytest.raises(ConfigurationError, match=r"language must be one of 'en', 'fr' .*got 'de'"):
        summary_frame("de")
