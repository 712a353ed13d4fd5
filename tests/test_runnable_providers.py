"""What `with_rolling_memory` sends reaches OpenAI and Gemini intact: real clients, local fake servers."""

from __future__ import annotations

from typing import Any

import pytest
from fake_providers import serve
from langchain_core.messages import HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_rolling_memory import open_store, with_rolling_memory

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_google_genai")


def client(kind: str, base_url: str) -> Any:
    if kind == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=base_url, max_retries=0)
    from langchain_google_genai import ChatGoogleGenerativeAI

    return ChatGoogleGenerativeAI(model="gemini-2.5-flash", api_key="test", base_url=base_url, max_retries=0)


def summarize(previous: str, messages: Any) -> str:
    return "Ana asked about order A-1001."


CFG = {"configurable": {"client_id": "ana", "session_id": "s1"}}


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_facts_state_and_summary_reach_the_provider_from_a_message_list(kind: str) -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Delivers on Saturdays")
    store.set_state("s1", {"order": "A-1001"}, client_id="ana")
    with serve(kind, lambda request: "ok") as provider:  # type: ignore[arg-type]
        chat = with_rolling_memory(
            client(kind, provider.base_url), store=store, summarizer=summarize, max_turns=4, keep_last=2
        )
        for i in range(4):
            chat.invoke([HumanMessage(f"question {i}")], config=CFG)
    last = provider.requests[-1]
    texts = last.texts()
    assert last.roles()[0] == "system"
    assert '- "Delivers on Saturdays"' in texts[0]
    assert '{"order": "A-1001"}' in texts[0]
    assert any("Ana asked about order A-1001." in t for t in texts[1:])
    assert texts[-1] == "question 3"


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_facts_reach_the_provider_after_the_prompts_own_system_message(kind: str) -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Works in the Logistics team", key="team")
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a delivery assistant."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with serve(kind, lambda request: "ok") as provider:  # type: ignore[arg-type]
        chat = with_rolling_memory(
            prompt | client(kind, provider.base_url),
            store=store,
            summarizer=summarize,
            input_messages_key="question",
            history_messages_key="history",
        )
        chat.invoke({"question": "Hello"}, config=CFG)
    request = provider.requests[-1]
    wire = request.wire
    assert "You are a delivery assistant." in wire
    assert '[\\"team\\"] \\"Works in the Logistics team\\"' in wire
    # Gemini merges both system messages into its system instruction; nothing is dropped.
    assert wire.index("You are a delivery assistant.") < wire.index("Logistics")
    assert request.texts()[-1] == "Hello"
