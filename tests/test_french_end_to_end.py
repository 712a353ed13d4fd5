"""French end to end (issue 24, item 1): ``language="fr"`` on the memory alone reaches every text
the memory writes for a model, whatever summarizer it was given.

The summarizers are built beforehand without a language (`openai_summarizer`,
`gemini_summarizer`, `chat_model_summarizer`, `extractive_summarizer`); the chain
(`with_rolling_memory`) and the agent (`RollingMemoryMiddleware`) get ``language="fr"`` and
nothing else. The real `ChatOpenAI` / `ChatGoogleGenerativeAI` clients talk to the local fake
servers (`fake_providers`): the tests read the request bodies that would reach the provider.
Every memory text must be there in French (summary prompt, transcript labels, the stricter
retry, the summary's frame, the facts, state and recall blocks) and no English one anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import (
    InMemoryRollingStore,
    RollingStore,
    RollingSummaryChatMessageHistory,
    Summarizer,
    chat_model_summarizer,
    extractive_summarizer,
    with_rolling_memory,
)
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.recall_block import recall_block
from langchain_rolling_memory.core.texts import LANGUAGES, MemoryTexts, memory_texts
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.errors import ConfigurationError
from tests.fake_providers import FakeProvider, Request, Text, serve
from tests.test_provider_wire import chat_model, summarizer_for

CLIENT = "client-ana"
SESSION = "fr-session"
SUMMARY_MARKS = ("You keep the running summary", "Tu tiens le résumé courant")

# Every English text the memory writes for a model (prompts, labels, headers, frames).
ENGLISH = [
    "I will take this summary of our conversation",
    "You keep the running summary",
    "Rules:",
    "Keep decisions, open requests",
    "Messages to summarize:",
    "Write the summary",
    "Write the first summary",
    "Write in the third person",
    "problems already solved",
    "must fit in",
    "customer-support conversation",
    "about five short lines",
    "You maintain the list of durable facts",
    "Known facts (id",
    "(none)",
    "New messages:",
    "Current summary:",
    "New messages to fold into it",
    "Write the updated summary",
    "Your previous answer was unusable",
    "Instead of sentences, answer with one JSON",
    "User:",
    "Tool ",
    "System:",
    "[Summary of the earlier conversation",
    "Memory about this client",
    "Facts about the client",
    "older fact",
    "Session state (exact values",
    "Summary of the earlier conversation (quoted)",
    "Excerpts of earlier conversations",
    "undated",
    "week of ",
    "weekend of ",
    ", user:",
    ", fact:",
    "Here is a summary of the conversation",
    "Topic ",
    "Current topic",
    "Preferences:",
    "Decisions:",
    "Open questions:",
    "Facts:",
]
ENGLISH_DATE = re.compile(
    r"\d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December) \d{4}"
)

# What the French texts must bring to the wire.
FRENCH_SUMMARY_REQUEST = ["Tu tiens le résumé courant", "Messages à résumer", "Utilisateur : "]
FRENCH_UPDATE_REQUEST = ["Résumé actuel :", "Nouveaux messages à y intégrer"]
FRENCH_RETRY = "Ta réponse précédente était inutilisable"
FRENCH_CHAT = [
    "[Résumé de la conversation précédente",
    "Ce que l'on sait du client",
    "État de la session",
]
FRENCH_RECALL = "Extraits de conversations précédentes"
FRENCH_FACTS_LEFT_OUT = "plus ancien"

QUESTIONS = [
    "Bonjour, je suis Ana Ruiz et je veux être livrée le samedi.",
    "Mon adresse est 12 rue Nationale à Lyon.",
    "Quels créneaux sont libres à Lyon ?",
    "Je prends le premier créneau.",
    "Pouvez-vous confirmer le numéro de commande ?",
    "Comment s'appelle mon chat déjà ?",
    "Et la facture par courriel, s'il vous plaît.",
    "Merci, ce sera tout.",
]


def english_in(text: str) -> list[str]:
    found = [s for s in ENGLISH if s in text]
    found += [m.group(0) for m in ENGLISH_DATE.finditer(text)]
    return found


def is_summary_request(request: Request) -> bool:
    return any(mark in text for text in request.texts() for mark in SUMMARY_MARKS)


@dataclass
class FrenchScript:
    """Summaries in French; the first one too short, so its stricter retry is on the wire."""

    summaries: int = 0
    answers: int = 0
    seen: list[str] = field(default_factory=list)

    def __call__(self, request: Request) -> Text:
        if is_summary_request(request):
            self.summaries += 1
            if self.summaries == 1:
                return Text("Ana, Lyon.")  # under the 20-word minimum: the stricter retry follows
            return Text(
                f"Résumé {self.summaries} : Ana Ruiz, cliente à Lyon, veut être livrée le samedi "
                "et attend la confirmation de sa commande et de son créneau de livraison."
            )
        self.answers += 1
        return Text(f"réponse {self.answers}")


def prepared_store() -> RollingStore:
    """A client with facts (more than the budget shows), a session state and an older session."""
    store = InMemoryRollingStore()
    store.add_fact(CLIENT, "Livre le samedi matin", key="jour_livraison")
    for n in range(6):
        store.add_fact(CLIENT, f"Ancienne commande numéro {n} livrée à Lyon sans incident signalé")
    store.set_state(SESSION, {"panier": ["A-1"], "étape": "paiement"}, client_id=CLIENT)
    store.append(
        "ancienne-session",
        [HumanMessage("Mon chat s'appelle Oscar."), AIMessage("C'est noté, Oscar.")],
        client_id=CLIENT,
    )
    return store


FAMILIES = ["openai", "gemini", "chat_model", "extractive"]


def french_summarizer(family: str, provider: FakeProvider) -> Summarizer:
    """A summarizer built beforehand, given no language."""
    if family == "chat_model":
        return chat_model_summarizer(chat_model(provider))
    if family == "extractive":
        return extractive_summarizer()
    return summarizer_for(provider)


@dataclass
class Run:
    family: str
    provider: FakeProvider
    store: RollingStore

    @property
    def summary_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if is_summary_request(r)]

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if not is_summary_request(r)]


def _family_server(family: str) -> str:
    return "gemini" if family == "gemini" else "openai"


@pytest.fixture(scope="module", params=FAMILIES)
def chain_run(request: pytest.FixtureRequest) -> Iterator[Run]:
    """A French conversation through `with_rolling_memory`, the only French setting ``language``."""
    family = request.param
    store = prepared_store()
    with serve(_family_server(family), FrenchScript()) as provider:  # type: ignore[arg-type]
        chain = with_rolling_memory(
            chat_model(provider),
            store=store,
            summarizer=french_summarizer(family, provider),
            max_turns=4,
            keep_last=2,
            max_fact_tokens=40,
            recall_tokens=400,
            language="fr",
        )
        config: Any = {"configurable": {"client_id": CLIENT, "session_id": SESSION}}
        for question in QUESTIONS:
            chain.invoke([HumanMessage(question)], config=config)
        yield Run(family, provider, store)


@pytest.fixture(scope="module", params=["openai", "gemini"])
def agent_run(request: pytest.FixtureRequest) -> Iterator[Run]:
    """The same conversation through an agent with `RollingMemoryMiddleware(language="fr")`."""
    family = request.param
    store = prepared_store()
    with serve(family, FrenchScript()) as provider:
        memory = RollingMemoryMiddleware(
            store=store,
            summarizer=french_summarizer(family, provider),
            max_turns=4,
            keep_last=2,
            max_fact_tokens=40,
            recall_tokens=400,
            language="fr",
        )
        agent = create_agent(
            chat_model(provider),
            [],
            system_prompt="Tu es l'assistant de livraison d'Acme.",
            middleware=[memory],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": SESSION, "client_id": CLIENT}}
        for question in QUESTIONS:
            agent.invoke({"messages": [HumanMessage(question)]}, config)
        yield Run(family, provider, store)


def _check_summary_requests(run: Run) -> None:
    if run.family == "extractive":
        assert not run.summary_requests, "the extractive summarizer calls no model"
        return
    requests = run.summary_requests
    assert len(requests) >= 3, "a first summary, its stricter retry, then an update"
    texts = ["\n".join(r.texts()) for r in requests]
    for text in texts:
        for french in FRENCH_SUMMARY_REQUEST[:1]:
            assert french in text
        assert english_in(text) == [], text
    assert all(s in texts[0] for s in FRENCH_SUMMARY_REQUEST), texts[0]
    assert FRENCH_RETRY in texts[1], "the stricter retry is in French"
    assert any(all(s in t for s in FRENCH_UPDATE_REQUEST) for t in texts[2:])


def _check_chat_requests(run: Run) -> None:
    requests = run.chat_requests
    assert requests
    for request in requests:
        text = "\n".join(request.texts())
        assert english_in(text) == [], text
    # Once the session has a summary, every memory text is there in French.
    last = "\n".join(requests[-1].texts())
    for french in FRENCH_CHAT:
        assert french in last, f"{french!r} missing from the last request:\n{last}"
    assert FRENCH_FACTS_LEFT_OUT in last
    # The question about the cat recalls the older session, under a French header and speaker.
    recalled = [t for t in ("\n".join(q.texts()) for q in requests) if "Oscar" in t]
    assert recalled, "the older session should be recalled"
    assert FRENCH_RECALL in recalled[0] and '\n- utilisateur : "Mon chat s\'appelle Oscar."' in recalled[0]


def test_a_french_chain_sends_french_summary_requests(chain_run: Run) -> None:
    _check_summary_requests(chain_run)


def test_a_french_chain_sends_french_memory_to_the_model(chain_run: Run) -> None:
    _check_chat_requests(chain_run)
    if chain_run.family == "extractive":
        # The extract carries the transcript's speaker labels: French ones.
        summary = chain_run.store.summary(SESSION)
        assert summary is not None and "Utilisateur : " in summary.text


def test_a_french_agent_sends_french_summary_requests(agent_run: Run) -> None:
    _check_summary_requests(agent_run)


def test_a_french_agent_sends_french_memory_to_the_model(agent_run: Run) -> None:
    _check_chat_requests(agent_run)


# ---------------------------------------------------------------- what decides the language


def test_a_summarizer_given_its_own_language_keeps_it() -> None:
    """The memory's language applies to a summarizer built without one; one given explicitly wins."""
    from memory_fakes import recording_model

    model = recording_model(["Ana Ruiz lives in Lyon and wants Saturday deliveries of her orders. " * 3] * 2)
    history = RollingSummaryChatMessageHistory(
        "explicit",
        summarizer=chat_model_summarizer(model, language="en"),
        max_turns=2,
        keep_last=1,
        language="fr",
    )
    history.add_messages([HumanMessage("Je suis Ana."), AIMessage("Bonjour."), HumanMessage("Lyon.")])
    sent = "\n".join(m.text for m in model.received[0])
    assert "You keep the running summary" in sent and "User: Je suis Ana." in sent


def test_a_structured_summary_built_without_language_gets_french_labels() -> None:
    from memory_fakes import recording_model

    reply = '{"topic": "Livraisons", "decisions": ["Envoi le samedi"], "open_questions": ["Quel tarif ?"]}'
    model = recording_model([reply])
    history = RollingSummaryChatMessageHistory(
        "structured",
        summarizer=chat_model_summarizer(model, structured=True),
        max_turns=2,
        keep_last=1,
        language="fr",
    )
    history.add_messages([HumanMessage("Je suis Ana."), AIMessage("Bonjour."), HumanMessage("Lyon.")])
    assert (
        history.summary
        == "Sujet : Livraisons.\nDécisions : Envoi le samedi.\nQuestions ouvertes : Quel tarif ?"
    )


def test_a_runnable_summarizer_gets_the_previous_summary_under_a_french_lead() -> None:
    from langchain_core.runnables import RunnableLambda

    received: list[list[BaseMessage]] = []

    def summarize(messages: list[BaseMessage]) -> str:
        received.append(messages)
        return f"Résumé {len(received)}"

    history = RollingSummaryChatMessageHistory(
        "runnable", summarizer=RunnableLambda(summarize), max_turns=2, keep_last=1, language="fr"
    )
    for text in ("a", "b", "c", "d", "e"):
        history.add_messages([HumanMessage(text)])
    assert len(received) >= 2
    lead = received[1][0].text
    assert lead.startswith("Voici un résumé de la conversation jusqu'ici :"), lead


@pytest.mark.parametrize(
    "build",
    [
        lambda: RollingSummaryChatMessageHistory("s", summarizer=lambda p, m: "x", language="de"),
        lambda: with_rolling_memory(
            __import__("memory_fakes").recording_model(["x"]),
            store=InMemoryRollingStore(),
            summarizer=lambda p, m: "x",
            language="de",
        ),
        lambda: RollingMemoryMiddleware(
            store=InMemoryRollingStore(), summarizer=lambda p, m: "x", language="de"
        ),
        lambda: extractive_summarizer(language="de"),
    ],
    ids=["history", "with_rolling_memory", "middleware", "extractive"],
)
def test_an_unknown_language_is_refused_naming_the_known_ones(build: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"language must be one of .*'en'.*'fr'.*got 'de'"):
        build()


def test_a_middleware_language_that_differs_from_its_compactors_is_refused() -> None:
    store = InMemoryRollingStore()
    compactor = Compactor.build(store, lambda p, m: "x", language="en")
    with pytest.raises(ConfigurationError, match=r"language='fr' differs from the compactor's \('en'\)"):
        RollingMemoryMiddleware(store=store, compactor=compactor, language="fr")
    french = Compactor.build(store, lambda p, m: "x", language="fr")
    assert RollingMemoryMiddleware(store=store, compactor=french).language == "fr"


# ---------------------------------------------------------------- the catalogue


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [s for item in value for s in _strings(item)]
    return []


SAME_IN_BOTH = {"Assistant", "assistant", "message", "human", "ai", "fact", "1"}
"""Words the two catalogues share (a role's key, "Assistant"), and the keys of speaker pairs."""


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(MemoryTexts) if f.name != "language"])
def test_every_english_text_has_a_french_one_with_the_same_placeholders(name: str) -> None:
    english, french = getattr(memory_texts("en"), name), getattr(memory_texts("fr"), name)
    assert type(english) is type(french)
    if name == "recall_speakers":  # keyed by role: compare the words of the roles English has
        english, french = tuple(dict(english).values()), tuple(dict(french)[k] for k in dict(english))
    pairs = list(zip(_strings(english), _strings(french), strict=True))
    assert pairs
    for en, fr in pairs:
        assert en != fr or en in SAME_IN_BOTH, f"{name}: {en!r} is not translated"
        assert set(re.findall(r"\{\w+\}", en)) == set(re.findall(r"\{\w+\}", fr)), name


def test_the_english_texts_the_wire_tests_look_for_cover_the_catalogue() -> None:
    """A new English text must be added to ENGLISH, or the wire tests would not see it leak."""
    uncovered = []
    for item in dataclasses.fields(MemoryTexts):
        if item.name in {"language", "separator", "first_day", "months", "recall_speakers"}:
            continue  # dates and speakers: checked as rendered (ENGLISH_DATE, ", user:")
        for text in _strings(getattr(memory_texts("en"), item.name)):
            if text in SAME_IN_BOTH:
                continue
            if not any(s in text or text.strip() in s for s in ENGLISH):
                uncovered.append((item.name, text))
    assert uncovered == []


def test_an_unknown_language_names_the_known_ones() -> None:
    with pytest.raises(ConfigurationError) as caught:
        memory_texts("es")
    assert str(caught.value) == (
        "language must be one of 'en', 'fr' (the languages the memory writes in), got 'es'"
    )
    assert LANGUAGES == ("en", "fr")


FRENCH_GROUP = re.compile(
    r"(sans date|(?:1er|[12]?\d|3[01]) (?:janvier|février|mars|avril|mai|juin|juillet|août|septembre|"
    r'octobre|novembre|décembre) \d{1,4}), "s1":'
)
FRENCH_LINE = re.compile(
    r'- (utilisateur|assistant|"[^"]*") : ("(?:[^"\\]|\\.)*")'
    r"( \([^()]*\))?"  # the relative dates of the text, resolved (`recall_block.date_note`)
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=30), st.booleans(), st.one_of(st.none(), st.floats(0, 4e9))),
        max_size=5,
    )
)
def test_a_french_recall_block_is_french_one_quoted_line_per_excerpt(
    drawn: list[tuple[str, bool, float | None]],
) -> None:
    hits = [
        SearchHit("message", "s1", i, created, 1.0, AIMessage(text) if ai else HumanMessage(text), text=text)
        for i, (text, ai, created) in enumerate(drawn, start=1)
    ]
    block = recall_block(hits, max_tokens=100_000, language="fr").text
    if not hits:
        assert block == ""
        return
    header, *lines = block.split("\n")
    assert header == memory_texts("fr").recall_header
    groups = [line for line in lines if FRENCH_GROUP.fullmatch(line)]
    excerpts = [line for line in lines if line not in groups]
    assert len(excerpts) == len(hits)
    assert len(groups) == len({None if h.created_at is None else h.created_at // 86400 for h in hits})
    for line in excerpts:
        match = FRENCH_LINE.fullmatch(line)
        assert match, line
        assert isinstance(json.loads(match.group(2)), str)
    for line in lines:
        assert english_in(line) == []


def test_a_french_excerpt_resolves_its_relative_dates_in_french() -> None:
    hit = SearchHit(
        "message", "s1", 1, 1683554160.0, 1.0, HumanMessage("On s'est vus hier et le week-end dernier")
    )
    (group, line) = recall_block([hit], max_tokens=500, language="fr", header=None).text.split("\n")
    assert group == '8 mai 2023, "s1":'
    assert FRENCH_LINE.fullmatch(line)
    assert line.endswith("(hier = 7 mai 2023; le week-end dernier = week-end du 6 mai 2023)")
    assert english_in(line) == []
