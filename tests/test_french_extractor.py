"""The fact extractor asks in the memory's language (issue 24): a `FactExtractor` built without a
language, given to a memory with ``language="fr"``, sends French instructions, headers and
speaker labels; one given a language keeps it. Read on the request bodies the real `ChatOpenAI`
/ `ChatGoogleGenerativeAI` clients send to the local fake servers (`fake_providers`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import InMemoryRollingStore, with_rolling_memory
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from tests.fake_providers import Request, Text, serve
from tests.test_french_end_to_end import english_in
from tests.test_provider_wire import chat_model

EXTRACTION_MARKS = ("You maintain the list of durable facts", "Tu tiens la liste des faits durables")
SUMMARY_MARKS = ("You keep the running summary", "Tu tiens le résumé courant")
FRENCH_EXTRACTION = [
    "Tu tiens la liste des faits durables",
    "à la troisième personne, dans la langue de la conversation",
    'Faits connus (id, ["clé"], texte) :',
    "Nouveaux messages :",
    "Utilisateur : Je m'appelle Ana et je travaille dans l'équipe Logistique.",
]
QUESTIONS = [
    "Je m'appelle Ana et je travaille dans l'équipe Logistique.",
    "Livrez-moi le samedi, s'il vous plaît.",
    "Quel est le délai pour Lyon ?",
    "Merci beaucoup.",
]
SUMMARY = (
    "Ana, de l'équipe Logistique, veut être livrée le samedi et demande le délai de livraison "
    "pour Lyon ; l'assistant lui a répondu."
)


class Script:
    def __init__(self) -> None:
        self.extractions: list[Request] = []

    def __call__(self, request: Request) -> Text:
        texts = "\n".join(request.texts())
        if any(mark in texts for mark in EXTRACTION_MARKS):
            self.extractions.append(request)
            return Text(
                json.dumps({"add": [{"text": "Travaille dans l'équipe Logistique", "key": "equipe"}]})
            )
        if any(mark in texts for mark in SUMMARY_MARKS):
            return Text(SUMMARY)
        return Text("D'accord.")


def _check(script: Script, store: InMemoryRollingStore) -> None:
    assert script.extractions, "a compaction ran the extractor"
    sent = "\n".join(script.extractions[0].texts())
    for french in FRENCH_EXTRACTION:
        assert french in sent, f"{french!r} missing from the extraction request:\n{sent}"
    assert english_in(sent) == [], sent
    assert [(f.key, f.text) for f in store.facts("ana")] == [("equipe", "Travaille dans l'équipe Logistique")]


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_a_french_chain_sends_a_french_extraction_request(kind: str) -> None:
    script, store = Script(), InMemoryRollingStore()
    with serve(kind, script) as provider:  # type: ignore[arg-type]
        chain = with_rolling_memory(
            chat_model(provider),
            store=store,
            summarizer=chat_model(provider),
            extractor=FactExtractor(chat_model(provider)),
            max_turns=4,
            keep_last=2,
            language="fr",
        )
        config: Any = {"configurable": {"client_id": "ana", "session_id": "fr-facts"}}
        for question in QUESTIONS:
            chain.invoke([HumanMessage(question)], config=config)
    _check(script, store)


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_a_french_agent_sends_a_french_extraction_request(kind: str) -> None:
    script, store = Script(), InMemoryRollingStore()
    with serve(kind, script) as provider:  # type: ignore[arg-type]
        memory = RollingMemoryMiddleware(
            store=store,
            summarizer=chat_model(provider),
            extractor=chat_model(provider),  # a chat model: the extractor is built for the memory
            max_turns=4,
            keep_last=2,
            language="fr",
        )
        agent = create_agent(chat_model(provider), [], middleware=[memory], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "fr-facts", "client_id": "ana"}}
        for question in QUESTIONS:
            agent.invoke({"messages": [HumanMessage(question)]}, config)
    _check(script, store)


def test_an_extractor_given_its_own_language_or_prompt_keeps_it() -> None:
    from memory_fakes import recording_model

    english = FactExtractor(recording_model(["{}"]), language="en")
    assert english.with_language("fr") is english
    own = FactExtractor(recording_model(["{}"]), prompt="Mes règles.").with_language("fr")
    request = own.request([], [HumanMessage("Bonjour")])
    assert request[0].text == "Mes règles."
    assert "Utilisateur : Bonjour" in request[1].text and "Faits connus" in request[1].text
    assert FactExtractor(recording_model(["{}"])).with_language("fr").language == "fr"
