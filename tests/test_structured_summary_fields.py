"""The lessons' own structured-summary field names (French, and common English variants) are
read into `StructuredSummary`'s fields instead of being dropped (issue 24)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import chat_model_summarizer
from langchain_rolling_memory.summarizers import StructuredSummary, parse_structured_summary

FOLDED: list[BaseMessage] = [
    HumanMessage("Bonjour, je suis Ana, je voudrais être livrée le samedi à Lyon."),
    AIMessage("C'est noté, Ana. L'express coûte 12 euros."),
]

# A reply shaped like the lesson's example: its French keys, accents and all.
LESSON_REPLY = """```json
{
  "sujet_principal": "Livraison à Lyon",
  "préférences": ["Livraison le samedi"],
  "décisions": ["Envoi en express"],
  "questions_ouvertes": ["Le tarif du samedi ?"],
  "faits": ["Cliente : Ana", "Express à 12 euros"]
}
```"""

EXPECTED = StructuredSummary(
    topic="Livraison à Lyon",
    user_preferences=["Livraison le samedi"],
    decisions=["Envoi en express"],
    open_questions=["Le tarif du samedi ?"],
    key_facts=["Cliente : Ana", "Express à 12 euros"],
)


def _model(*replies: str) -> GenericFakeChatModel:
    messages: Iterator[AIMessage] = iter(AIMessage(r) for r in replies)
    return GenericFakeChatModel(messages=messages)


def test_the_lessons_french_reply_fills_every_field_through_the_summarizer() -> None:
    summarizer = chat_model_summarizer(_model(LESSON_REPLY), structured=True, language="fr")
    result = summarizer.summarize("", FOLDED)
    assert result.fields == EXPECTED.model_dump()
    assert result.text == (
        "Sujet : Livraison à Lyon.\n"
        "Préférences : Livraison le samedi.\n"
        "Décisions : Envoi en express.\n"
        "Questions ouvertes : Le tarif du samedi ?\n"
        "Faits : Cliente : Ana. Express à 12 euros."
    )


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            {"sujet": "Remboursement", "preferences": "Par virement", "decisions": ["Rembourser"]},
            StructuredSummary(
                topic="Remboursement", user_preferences=["Par virement"], decisions=["Rembourser"]
            ),
            id="fr-short-names-without-accents",
        ),
        pytest.param(
            {
                "Sujet Principal": "Remboursement",
                "DÉCISIONS": ["Rembourser"],
                "Questions-Ouvertes": ["Quand ?"],
            },
            StructuredSummary(topic="Remboursement", decisions=["Rembourser"], open_questions=["Quand ?"]),
            id="fr-case-spaces-and-hyphens",
        ),
        pytest.param(
            {
                "main_topic": "Refund",
                "preferences": ["By transfer"],
                "open_questions": ["When?"],
                "facts": ["Order 12"],
            },
            StructuredSummary(
                topic="Refund",
                user_preferences=["By transfer"],
                open_questions=["When?"],
                key_facts=["Order 12"],
            ),
            id="en-variants",
        ),
        pytest.param(
            {"topic": "Refund", "sujet": "Autre chose", "key_facts": ["Order 12"], "faits": ["Commande 13"]},
            StructuredSummary(topic="Refund", key_facts=["Order 12"]),
            id="our-own-name-wins-over-an-alias",
        ),
        pytest.param(
            {"sujet_principal": "Livraison", "faits": {"client": "Ana", "ville": "Lyon"}},
            StructuredSummary(topic="Livraison", key_facts=["client: Ana", "ville: Lyon"]),
            id="facts-as-an-object",
        ),
    ],
)
def test_alias_field_names_are_mapped(reply: dict[str, object], expected: StructuredSummary) -> None:
    assert parse_structured_summary(reply) == expected
    assert parse_structured_summary(json.dumps(reply, ensure_ascii=False)) == expected


def test_unknown_field_names_are_still_ignored() -> None:
    assert parse_structured_summary({"résumé": "Ana livre le samedi", "humeur": "bonne"}) is None


_ALIASES = {
    "topic": ["sujet_principal", "sujet", "main_topic", "topic"],
    "user_preferences": ["préférences", "preferences", "user_preferences"],
    "decisions": ["décisions", "decisions"],
    "open_questions": ["questions_ouvertes", "open_questions"],
    "key_facts": ["faits", "key_facts", "facts"],
}


def _spelled(name: str, upper: list[bool], strip: bool) -> str:
    if strip:
        name = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    return "".join(c.upper() if up else c for c, up in zip(name, upper + [False] * len(name), strict=False))


@given(
    field=st.sampled_from(sorted(_ALIASES)),
    data=st.data(),
    upper=st.lists(st.booleans(), max_size=20),
    strip=st.booleans(),
)
def test_any_spelling_of_an_alias_lands_in_its_field(
    field: str, data: st.DataObject, upper: list[bool], strip: bool
) -> None:
    name = _spelled(data.draw(st.sampled_from(_ALIASES[field])), upper, strip)
    parsed = parse_structured_summary({name: "Ana"})
    assert parsed is not None
    value = getattr(parsed, field)
    assert value == ("Ana" if field == "topic" else ["Ana"])


def test_an_empty_field_gives_way_to_a_filled_alias() -> None:
    parsed = parse_structured_summary({"topic": "", "sujet_principal": "Livraison", "decisions": []})
    assert parsed == StructuredSummary(topic="Livraison")
