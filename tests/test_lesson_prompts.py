"""What the summary prompts say (issue 24, items 2 and 3), read on what would reach OpenAI and
Gemini: the real `ChatOpenAI` / `ChatGoogleGenerativeAI` clients talk to the local fake servers
(`fake_providers`) and the tests read the request bodies.

The lessons ask the summary request to: write in the third person; keep the problems already
solved as solved; state its word limit and the memory's token limit; for a first summary, give
the main topic, the decisions, the preferences and the open questions; for customer support,
keep the products, references and quantities; for a compaction, about five lines. The
validation retry (a reply under 20 words) must require the four items: who the user is and what
they seek, their criteria, the options discussed, where things stand. In English and French.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory import (
    PRESETS,
    RollingSummaryChatMessageHistory,
    chat_model_summarizer,
    preset,
    preset_prompt,
)
from langchain_rolling_memory.core.prompts import PROMPT_KINDS, default_prompt
from langchain_rolling_memory.errors import ConfigurationError
from tests.fake_providers import FakeProvider, Request, Text, serve
from tests.test_provider_wire import chat_model, summarizer_for

PROVIDERS = ["openai", "gemini"]
LANGUAGES = ["en", "fr"]

# The lesson's support conversation: a product, a reference and a quantity to keep.
SUPPORT = [
    HumanMessage("Bonjour, il me faut 3 cartouches HP 305XL pour la commande CMD-4521."),
    AIMessage("Je vérifie le stock des cartouches HP 305XL."),
    HumanMessage("Mon imprimante ne s'allumait plus, mais c'est réglé depuis que j'ai changé le câble."),
]
LONG_SUMMARY = (
    "The user, Ana Ruiz, orders three HP 305XL cartridges for order CMD-4521 and wants them "
    "delivered on Saturday; her printer problem is solved since she changed the cable."
)

# What each language's request must say, rule by rule.
THIRD_PERSON = {"en": "Write in the third person", "fr": "Écris à la troisième personne"}
SOLVED = {
    "en": "Keep the problems already solved, stated as solved",
    "fr": "Garde les problèmes déjà résolus, indiqués comme résolus",
}
WORD_LIMIT = {"en": "At most 42 words", "fr": "Au plus 42 mots"}
TOKEN_LIMIT = {"en": "The summary must fit in 300 tokens.", "fr": "Le résumé doit tenir en 300 tokens."}
FIRST_SUMMARY = {
    "en": ["the main topic", "the decisions taken", "the user's preferences", "the open questions"],
    "fr": [
        "le sujet principal",
        "les décisions prises",
        "les préférences de l'utilisateur",
        "les questions en suspens",
    ],
}
SUPPORT_RULE = {
    "en": ["customer-support conversation", "every product", "every reference", "every quantity"],
    "fr": ["conversation de support client", "chaque produit", "chaque référence", "chaque quantité"],
}
COMPACT_RULE = {"en": "about five short lines", "fr": "environ cinq lignes courtes"}
FOUR_ITEMS = {
    "en": [
        "who the user is and what they are looking for",
        "their criteria",
        "the options discussed",
        "where things stand",
    ],
    "fr": [
        "qui est l'utilisateur et ce qu'il cherche",
        "ses critères",
        "les options évoquées",
        "où en est la conversation",
    ],
}


@dataclass
class Replies:
    """The fake provider's answers, in order (the last one repeated)."""

    texts: list[str]
    sent: list[Request] = field(default_factory=list)

    def __call__(self, request: Request) -> Text:
        self.sent.append(request)
        return Text(self.texts[min(len(self.sent), len(self.texts)) - 1])


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> Iterator[FakeProvider]:
    with serve(request.param, Replies([LONG_SUMMARY])) as running:
        yield running


def _sent(provider: FakeProvider, index: int = 0) -> str:
    return "\n".join(provider.requests[index].texts())


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_first_summary_request_asks_for_the_third_person_the_solved_problems_and_the_four_items(
    provider: FakeProvider, language: str
) -> None:
    summarizer = summarizer_for(provider, language=language, max_words=42)
    summarizer.summarize("", SUPPORT)
    sent = _sent(provider)
    assert THIRD_PERSON[language] in sent
    assert SOLVED[language] in sent
    assert WORD_LIMIT[language] in sent
    for item in FIRST_SUMMARY[language]:
        assert item in sent, f"{item!r} missing from the first summary's request:\n{sent}"
    assert "c'est réglé depuis que j'ai changé le câble" in sent  # the solved problem is folded


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_update_keeps_the_rules_but_not_the_first_summarys_list(
    provider: FakeProvider, language: str
) -> None:
    summarizer_for(provider, language=language).summarize("Ana commande des cartouches.", SUPPORT)
    sent = _sent(provider)
    assert THIRD_PERSON[language] in sent and SOLVED[language] in sent
    assert FIRST_SUMMARY[language][0] not in sent
    assert "Ana commande des cartouches." in sent


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_memorys_token_cap_is_stated_in_the_prompt(provider: FakeProvider, language: str) -> None:
    # Lesson: the summary is capped at 300 tokens, and the request says so. The summarizer is
    # built without a cap (nor a language): the memory's reach it.
    history = RollingSummaryChatMessageHistory(
        "capped",
        summarizer=summarizer_for(provider),
        max_turns=2,
        keep_last=1,
        max_summary_tokens=300,
        language=language,
    )
    history.add_messages(SUPPORT)
    assert history.summary == LONG_SUMMARY
    sent = _sent(provider)
    assert TOKEN_LIMIT[language] in sent, sent
    assert THIRD_PERSON[language] in sent


def test_without_a_token_cap_the_prompt_states_none(provider: FakeProvider) -> None:
    summarizer_for(provider).summarize("", SUPPORT)
    assert "tokens" not in _sent(provider)


def test_a_summarizer_given_its_own_token_cap_keeps_it(provider: FakeProvider) -> None:
    history = RollingSummaryChatMessageHistory(
        "own-cap",
        summarizer=chat_model_summarizer(chat_model(provider), max_summary_tokens=120),
        max_turns=2,
        keep_last=1,
        max_summary_tokens=300,
    )
    history.add_messages(SUPPORT)
    assert TOKEN_LIMIT["en"].replace("300", "120") in _sent(provider)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_support_preset_prompt_asks_for_products_references_and_quantities(
    provider: FakeProvider, language: str
) -> None:
    # The preset's settings go to the history, its prompt to the summarizer; the language is
    # the memory's alone.
    summarizer = chat_model_summarizer(chat_model(provider), prompt=preset_prompt("support_client"))
    history = RollingSummaryChatMessageHistory(
        "support", summarizer=summarizer, language=language, **preset("support", max_turns=2, keep_last=1)
    )
    history.add_messages(SUPPORT)
    sent = _sent(provider)
    for words in SUPPORT_RULE[language]:
        assert words in sent, f"{words!r} missing from the support request:\n{sent}"
    assert THIRD_PERSON[language] in sent
    assert "3 cartouches HP 305XL pour la commande CMD-4521" in sent


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_compaction_prompt_asks_for_about_five_lines(provider: FakeProvider, language: str) -> None:
    summarizer_for(provider, prompt="compact", language=language).summarize("", SUPPORT)
    sent = _sent(provider)
    assert COMPACT_RULE[language] in sent
    assert SUPPORT_RULE[language][1] not in sent


def test_the_general_prompt_has_neither_the_support_nor_the_compaction_rule(provider: FakeProvider) -> None:
    summarizer_for(provider).summarize("", SUPPORT)
    sent = _sent(provider)
    assert SUPPORT_RULE["en"][0] not in sent and COMPACT_RULE["en"] not in sent


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_validation_retry_requires_the_four_items(language: str) -> None:
    # Lesson 2: a summary under 20 words ("Client mécontent.") is asked again, and the second
    # request requires who the user is and what they seek, their criteria, the options
    # discussed and where things stand.
    for kind in PROVIDERS:
        with serve(kind, Replies(["Client mécontent.", LONG_SUMMARY])) as provider:
            result = summarizer_for(provider, language=language).summarize("", SUPPORT)
            assert (result.text, result.calls) == (LONG_SUMMARY, 2)
            first, retry = _sent(provider, 0), _sent(provider, 1)
            for item in FOUR_ITEMS[language]:
                assert item in retry, f"{kind}: {item!r} missing from the retry:\n{retry}"
                assert item not in first


def test_presets_name_a_known_prompt_and_support_is_the_support_one() -> None:
    assert {name: p.prompt for name, p in PRESETS.items()} == {
        "support": "support",
        "consultation": "general",
        "tutorial": "general",
        "chat": "general",
    }
    assert all(p.prompt in PROMPT_KINDS for p in PRESETS.values())
    assert preset_prompt("support_client") == "support"
    assert "prompt" not in preset("support")  # a history setting it is not
    with pytest.raises(ConfigurationError, match=r"unknown preset 'helpdesk'"):
        preset_prompt("helpdesk")


@pytest.mark.parametrize("prompt", ["", "five-lines", "Support"])
def test_an_unknown_prompt_name_is_refused_naming_the_built_in_ones(prompt: str) -> None:
    from memory_fakes import recording_model

    with pytest.raises(ConfigurationError, match=r"one of 'general', 'support', 'compact'.*got "):
        chat_model_summarizer(recording_model(["x"]), prompt=prompt)


@pytest.mark.parametrize("kind", PROMPT_KINDS)
def test_a_named_prompt_follows_the_memorys_language(kind: str) -> None:
    from memory_fakes import recording_model

    model = recording_model([LONG_SUMMARY])
    history = RollingSummaryChatMessageHistory(
        "named",
        summarizer=chat_model_summarizer(model, prompt=kind),
        max_turns=2,
        keep_last=1,
        language="fr",
    )
    history.add_messages(SUPPORT)
    system = model.received[0][0].text
    assert system.startswith(default_prompt("fr", kind).system.split("\n")[0])
    assert default_prompt("fr", kind).focus in system


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_a_bad_token_cap_on_the_summarizer_is_refused(bad: object) -> None:
    from memory_fakes import recording_model

    with pytest.raises(ConfigurationError, match=r"max_summary_tokens must be a positive int"):
        chat_model_summarizer(recording_model(["x"]), max_summary_tokens=bad)  # type: ignore[arg-type]
