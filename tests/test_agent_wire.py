"""What an agent with RollingMemoryMiddleware sends to OpenAI and Gemini: real clients, fake servers.

`create_agent` runs `ChatOpenAI` or `ChatGoogleGenerativeAI` (``base_url`` pointed at a local
server speaking the provider's format, see `fake_providers`) through a conversation with tool
calls until the session compacts; the tests read the request bodies the server received.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import InMemoryRollingStore, RollingStore
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from tests.fake_providers import FakeProvider, Request, serve
from tests.test_provider_wire import (
    FACT,
    QUESTIONS,
    SYSTEM_PROMPT,
    Script,
    _assert_tool_pairs_intact,
    chat_model,
    delivery_slots,
    is_summary_request,
    summarizer_for,
)

CLIENT = "client-ana"
SESSION = "agent-wire"


@dataclass
class AgentRun:
    provider: FakeProvider
    script: Script
    store: RollingStore

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if not is_summary_request(r)]

    @property
    def summary_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if is_summary_request(r)]


@pytest.fixture(scope="module", params=["openai", "gemini"])
def run(request: pytest.FixtureRequest) -> Iterator[AgentRun]:
    script = Script()
    store = InMemoryRollingStore()
    store.add_fact(CLIENT, FACT)
    with serve(request.param, script) as provider:
        memory = RollingMemoryMiddleware(
            store=store, summarizer=summarizer_for(provider), max_turns=4, keep_last=2
        )
        agent = create_agent(
            chat_model(provider),
            [delivery_slots],
            system_prompt=SYSTEM_PROMPT,
            middleware=[memory],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": SESSION, "client_id": CLIENT}}
        for question in QUESTIONS:
            agent.invoke({"messages": [HumanMessage(question)]}, config)
        yield AgentRun(provider, script, store)


def test_the_run_compacted_and_called_the_tool(run: AgentRun) -> None:
    assert run.summary_requests, "the session should have been summarized"
    assert any("Saturday 9-12" in r.wire for r in run.chat_requests), "the tool result should be sent"


def test_every_request_carries_system_prompt_and_facts_once_as_system_text(run: AgentRun) -> None:
    for request in run.chat_requests:
        role, text = request.turns()[0]
        assert role == "system"
        assert text.startswith(SYSTEM_PROMPT)
        assert [r for r, t in request.turns() if FACT in t] == ["system"]
    assert not any(FACT in r.wire for r in run.summary_requests)


def test_after_each_compaction_every_request_carries_the_current_summary(run: AgentRun) -> None:
    requests = run.provider.requests
    checked = 0
    for i, request in enumerate(requests):
        if is_summary_request(request):
            continue
        earlier = [r for r in requests[:i] if is_summary_request(r)]
        if not earlier:
            continue
        # The newest summary installed before this request; Gemini keeps the user-role
        # summary turn (a non-leading system message would be dropped).
        latest = run.script.summary_texts[len(earlier) - 1]
        assert latest in request.wire
        checked += 1
    assert checked


def test_tool_calls_and_results_stay_paired_on_the_wire(run: AgentRun) -> None:
    for request in run.chat_requests:
        _assert_tool_pairs_intact(request)


def test_the_remember_tool_reaches_the_provider_without_a_client_argument(run: AgentRun) -> None:
    request = run.chat_requests[0]
    wire = request.wire
    assert '"remember"' in wire
    assert "client_id" not in wire


def test_the_transcript_holds_every_message_sent_and_received(run: AgentRun) -> None:
    transcript = run.store.transcript(SESSION)
    questions = [m.text for m in transcript if isinstance(m, HumanMessage)]
    assert questions == QUESTIONS
    assert len(transcript) == len(QUESTIONS) * 2 + 2 * sum("which slots" in q for q in QUESTIONS)


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_without_a_system_prompt_the_facts_still_lead_as_system_text(kind: str) -> None:
    store = InMemoryRollingStore()
    store.add_fact(CLIENT, FACT)
    with serve(kind, Script()) as provider:
        memory = RollingMemoryMiddleware(store=store, summarizer=summarizer_for(provider))
        agent = create_agent(chat_model(provider), [], middleware=[memory])
        agent.invoke(
            {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "s", "client_id": CLIENT}}
        )
    turns = provider.requests[-1].turns()
    assert turns[0][0] == "system"
    assert FACT in turns[0][1]
    assert turns[-1] == ("user", "hello")
