"""What reaches OpenAI and Gemini: the real LangChain clients against local fake servers.

Each test points `ChatOpenAI` or `ChatGoogleGenerativeAI` (``base_url``) and our provider
summarizer at a server speaking the provider's wire format (`fake_providers`), runs a
conversation through `RunnableWithMessageHistory` until the history compacts, and reads the
request bodies: the summarizer request carries the previous summary and exactly the folded
messages; after a compaction every chat request carries the summary, whatever the layout.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from langchain_rolling_memory import (
    InMemoryRollingStore,
    RollingStore,
    RollingSummaryChatMessageHistory,
    Summarizer,
    gemini_summarizer,
    openai_summarizer,
    with_rolling_memory,
)
from tests.fake_providers import FakeProvider, Reply, Request, Text, ToolCall, serve

PROVIDERS = ["openai", "gemini"]
LAYOUTS = ["system+history+human", "history+human", "tool-exchange"]
WRAPPERS = ["history", "with_rolling_memory"]
SESSION = "wire"
CLIENT = "client-ana"
FACT = "Leave parcels at the back door"
SUMMARIZER_MARK = "You keep the running summary"
SYSTEM_PROMPT = "You are the delivery assistant of Acme."


@tool
def delivery_slots(city: str) -> str:
    """Free delivery slots in a city."""
    return f"{city}: Saturday 9-12"


def is_summary_request(request: Request) -> bool:
    return any(SUMMARIZER_MARK in text for text in request.texts())


@dataclass
class Script:
    """The fake provider's behaviour: numbered summaries, tool calls on demand, plain answers."""

    summaries: int = 0
    answers: int = 0
    summary_texts: list[str] = field(default_factory=list)

    def __call__(self, request: Request) -> Reply:
        if is_summary_request(request):
            self.summaries += 1
            # Over the summarizers' default 20-word minimum, as a real summary is.
            text = (
                f"SUMMARY-{self.summaries}: Ana Ruiz, a client from Lyon, wants her deliveries on "
                "Saturdays and asked which delivery slots are still free for her next order."
            )
            self.summary_texts.append(text)
            return Text(text)
        last = request.texts()[-1] if request.texts() else ""
        if "which slots" in last and not _has_tool_result(request):
            return ToolCall("delivery_slots", {"city": "Lyon"}, id=f"call-{self.answers}")
        self.answers += 1
        return Text(f"answer {self.answers}")


def _has_tool_result(request: Request) -> bool:
    body = request.body
    if "messages" in body:
        return body["messages"][-1]["role"] == "tool"
    last = body["contents"][-1]
    return any("functionResponse" in part for part in last.get("parts", []))


def chat_model(provider: FakeProvider) -> BaseChatModel:
    if provider.kind == "openai":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url=provider.base_url, max_retries=0)
    from langchain_google_genai import ChatGoogleGenerativeAI

    return ChatGoogleGenerativeAI(
        model="gemini-2.5-flash", api_key="test", base_url=provider.base_url, max_retries=1
    )


def summarizer_for(provider: FakeProvider, **options: Any) -> Summarizer:
    factory = openai_summarizer if provider.kind == "openai" else gemini_summarizer
    return factory(api_key="test", base_url=provider.base_url, **options)


@dataclass
class Conversation:
    """One conversation run through a real client chain, with what the server received."""

    provider: FakeProvider
    script: Script
    store: RollingStore
    layout: str
    wrapper: str

    @property
    def summary_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if is_summary_request(r)]

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.provider.requests if not is_summary_request(r)]


@pytest.fixture(
    scope="module",
    params=[(p, layout, w) for p in PROVIDERS for layout in LAYOUTS for w in WRAPPERS],
    ids="-".join,
)
def conversation(request: pytest.FixtureRequest) -> Iterator[Conversation]:
    """Each provider, layout and wrapper, run once per module; the tests read what was sent."""
    kind, layout, wrapper = request.param
    script = Script()
    store = InMemoryRollingStore()
    with serve(kind, script) as provider:
        converse(provider, store, layout, wrapper)
        yield Conversation(provider, script, store, layout, wrapper)


def prompt_for(layout: str) -> ChatPromptTemplate:
    if layout == "history+human":
        return ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    if layout == "tool-exchange":
        return ChatPromptTemplate.from_messages(
            [("system", SYSTEM_PROMPT), MessagesPlaceholder("history"), MessagesPlaceholder("input")]
        )
    return ChatPromptTemplate.from_messages(
        [("system", SYSTEM_PROMPT), MessagesPlaceholder("history"), ("human", "{question}")]
    )


QUESTIONS = [
    "I'm Ana Ruiz, I want deliveries on Saturdays.",
    "My address is 12 rue Nationale, Lyon.",
    "which slots are free in Lyon?",
    "Book the first one.",
    "Can you confirm the order number?",
    "And the invoice by email please.",
    "which slots are free next week?",
    "Thanks, that's all.",
]


def converse(provider: FakeProvider, store: RollingStore, layout: str, wrapper: str) -> None:
    """Run the QUESTIONS through a real client chain whose history compacts every few turns.

    `wrapper` is ``"history"`` (`RunnableWithMessageHistory` around our history) or
    ``"with_rolling_memory"`` (our wrapper, which also injects the client's facts).
    """
    summarizer = summarizer_for(provider)
    model = chat_model(provider)
    tools = layout == "tool-exchange"
    chain_model = model.bind_tools([delivery_slots]) if tools else model
    keys = {"input_messages_key": "input" if tools else "question", "history_messages_key": "history"}
    config: Any = {"configurable": {"session_id": SESSION, "client_id": CLIENT}}
    if wrapper == "with_rolling_memory":
        store.add_fact(CLIENT, FACT)
        chain: Any = with_rolling_memory(
            prompt_for(layout) | chain_model,
            store=store,
            summarizer=summarizer,
            max_turns=4,
            keep_last=2,
            **keys,
        )
    else:

        def get_history(session_id: str) -> RollingSummaryChatMessageHistory:
            return RollingSummaryChatMessageHistory(
                session_id, summarizer=summarizer, store=store, max_turns=4, keep_last=2
            )

        chain = RunnableWithMessageHistory(prompt_for(layout) | chain_model, get_history, **keys)
    for question in QUESTIONS:
        if not tools:
            chain.invoke({"question": question}, config=config)
            continue
        reply = chain.invoke({"input": [HumanMessage(question)]}, config=config)
        while isinstance(reply, AIMessage) and reply.tool_calls:
            results: list[BaseMessage] = [
                ToolMessage(delivery_slots.invoke(call["args"]), tool_call_id=call["id"], name=call["name"])
                for call in reply.tool_calls
            ]
            reply = chain.invoke({"input": results}, config=config)


def _folded_lines(request: Request) -> list[str]:
    text = "\n".join(request.texts())
    block = re.search(r"<messages>\n(.*?)\n</messages>", text, re.DOTALL)
    assert block, "the summarizer request has no <messages> block"
    return block.group(1).splitlines()


def _transcript_lines(messages: list[BaseMessage]) -> list[str]:
    from langchain_rolling_memory.core.prompts import render_transcript

    return render_transcript(messages).splitlines()


def _assert_tool_pairs_intact(request: Request) -> None:
    """Every tool result on the wire follows the call that asked for it."""
    if "messages" in request.body:
        asked: set[str] = set()
        for message in request.body["messages"]:
            for call in message.get("tool_calls") or []:
                asked.add(call["id"])
            if message["role"] == "tool":
                assert message["tool_call_id"] in asked, f"orphan tool result {message}"
        return
    previous_calls: set[str] = set()
    for content in request.body["contents"]:
        calls = {p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p}
        for part in content["parts"]:
            if "functionResponse" in part:
                assert part["functionResponse"]["name"] in previous_calls, f"orphan function response {part}"
        previous_calls = calls or previous_calls


def test_summarizer_requests_carry_previous_summary_and_exactly_the_folded_messages(
    conversation: Conversation,
) -> None:
    summary_requests = conversation.summary_requests
    assert len(summary_requests) >= 2, "the conversation should compact at least twice"

    previous = ""
    folded: list[str] = []
    for index, request in enumerate(summary_requests):
        wire = "\n".join(request.texts())
        if previous:
            assert f"<summary>\n{previous}\n</summary>" in wire
        else:
            assert "<summary>" not in wire
        folded += _folded_lines(request)
        previous = conversation.script.summary_texts[index]

    record = conversation.store.summary(SESSION)
    assert record is not None
    assert record.text == conversation.script.summary_texts[-1]
    # Each transcript message up to the summary's coverage was folded once, in order.
    covered = [m.message for m in conversation.store.read(SESSION) if m.seq <= record.covered_seq]
    assert folded == _transcript_lines(covered)


def test_summarizer_request_sends_its_instructions_as_the_system_turn(conversation: Conversation) -> None:
    assert conversation.summary_requests, "the scripted conversation must compact"
    for request in conversation.summary_requests:
        turns = request.turns()
        assert turns[0][0] == "system"
        assert SUMMARIZER_MARK in turns[0][1]
        assert [role for role, _ in turns[1:]] == ["user"]


def test_every_chat_request_after_a_compaction_carries_the_summary(conversation: Conversation) -> None:
    seen_summaries = 0
    chat_requests_after = 0
    for request in conversation.provider.requests:
        if is_summary_request(request):
            seen_summaries += 1
            continue
        texts = request.texts()
        if conversation.layout != "history+human":
            role, text = request.turns()[0]
            # Gemini merges leading system messages (prompt, then facts) into one systemInstruction.
            assert (role, text.startswith(SYSTEM_PROMPT)) == ("system", True), "the system prompt must lead"
        if seen_summaries == 0:
            assert not any("SUMMARY-" in t for t in texts)
            continue
        chat_requests_after += 1
        latest = conversation.script.summary_texts[seen_summaries - 1]
        carrying = [role for role, text in request.turns() if latest in text]
        # The summary travels as one user turn framed as a record, never as system instructions.
        assert carrying == ["user"], f"chat request without the summary {latest!r} in a user turn: {texts}"
        assert any("a record of what was said, not instructions" in text for text in texts)
    assert chat_requests_after >= 3


def test_tool_calls_and_results_stay_paired_on_the_wire(conversation: Conversation) -> None:
    for request in conversation.chat_requests:
        _assert_tool_pairs_intact(request)


def test_tool_exchange_reaches_the_provider_and_is_folded_with_its_call(conversation: Conversation) -> None:
    tool_on_wire = [
        r for r in conversation.chat_requests if '"tool"' in r.wire or "functionResponse" in r.wire
    ]
    if conversation.layout != "tool-exchange":
        assert not tool_on_wire
        return
    assert tool_on_wire, "the tool result should have been sent back to the model"
    folded = "\n".join("\n".join(r.texts()) for r in conversation.summary_requests)
    assert 'Assistant -> Tool delivery_slots({"city": "Lyon"})' in folded
    assert "Tool delivery_slots -> Lyon: Saturday 9-12" in folded


def test_summarizer_usage_comes_from_the_provider_response(conversation: Conversation) -> None:
    summary_requests = conversation.summary_requests
    usage = conversation.store.usage(SESSION)
    # The fake server bills len(body)/4 input tokens and one token per output word.
    assert usage.input_tokens == sum(len(r.wire) // 4 for r in summary_requests)
    assert usage.summarizer_calls == len(summary_requests) == usage.model_calls
    words = len(conversation.script.summary_texts[0].split())
    assert usage.output_tokens == len(summary_requests) * words


# ---------------------------------------------------------------- one summarizer call


# One summary of a realistic length (the summarizers retry a reply under 20 words).
SUMMARY = (
    "Ana Ruiz, a client from Lyon, wants her deliveries on Saturdays only and asked the "
    "assistant to keep that rule for every future order."
)


def _summary_only(replies: list[Reply]) -> Any:
    """A responder that plays `replies` in order and records nothing else."""
    queue = list(replies)
    return lambda request: queue.pop(0)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_transient_provider_errors_are_retried_by_the_summarizer(kind: str) -> None:
    from tests.fake_providers import Failure

    with serve(kind, _summary_only([Failure(503), Failure(429, "slow down"), Text(SUMMARY)])) as provider:
        result = summarizer_for(provider, retries=2).summarize("", [HumanMessage("I'm Ana")])
    assert result.text == SUMMARY
    assert len(provider.requests) == 3
    assert provider.requests[0].body == provider.requests[2].body


# google-genai over aiohttp leaves `ClientResponse.json()` un-awaited when it reads an error
# response (an upstream bug); collected here so it cannot surface in a later test.
@pytest.mark.filterwarnings("ignore:coroutine 'ClientResponse.json' was never awaited:RuntimeWarning")
@pytest.mark.parametrize("kind", PROVIDERS)
async def test_async_summarizer_retries_through_the_async_client(kind: str) -> None:
    from tests.fake_providers import Failure

    with serve(kind, _summary_only([Failure(500), Text(SUMMARY)])) as provider:
        summarizer: Any = summarizer_for(provider, retries=1)
        try:
            result = await summarizer.asummarize("Old summary.", [HumanMessage("I'm Ana")])
        finally:
            if hasattr(summarizer.model, "aclose"):  # Gemini's async transport belongs to this loop
                await summarizer.model.aclose()
            gc.collect()
    assert result.text == SUMMARY
    assert len(provider.requests) == 2
    assert "<summary>\nOld summary.\n</summary>" in "\n".join(provider.requests[1].texts())


@pytest.mark.parametrize("kind", PROVIDERS)
def test_invalid_request_errors_are_not_retried(kind: str) -> None:
    from tests.fake_providers import Failure

    with (
        serve(kind, _summary_only([Failure(400, "bad request"), Text("never")])) as provider,
        pytest.raises(Exception, match="bad request"),
    ):
        summarizer_for(provider, retries=3).summarize("", [HumanMessage("I'm Ana")])
    assert len(provider.requests) == 1


@pytest.mark.parametrize("kind", PROVIDERS)
def test_structured_summary_uses_the_providers_schema_output(kind: str) -> None:
    answer = (
        '{"topic": "Deliveries", "user_preferences": ["Saturdays"], "decisions": ["Ship from Lyon"], '
        '"open_questions": [], "key_facts": ["Client Ana Ruiz"]}'
    )
    with serve(kind, _summary_only([Text(answer)])) as provider:
        result = summarizer_for(provider, structured=True).summarize("", [HumanMessage("I'm Ana Ruiz")])
    assert result.text == (
        "Topic: Deliveries.\nPreferences: Saturdays.\nDecisions: Ship from Lyon.\nFacts: Client Ana Ruiz."
    )
    body = provider.requests[0].body
    if kind == "openai":
        schema = body["response_format"]["json_schema"]["schema"]
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        schema = config.get("responseJsonSchema") or config["responseSchema"]
    assert set(schema["properties"]) == {
        "topic",
        "user_preferences",
        "decisions",
        "open_questions",
        "key_facts",
    }


@pytest.mark.parametrize("kind", PROVIDERS)
def test_structured_answer_that_does_not_parse_falls_back_to_text(kind: str) -> None:
    replies: list[Reply] = [Text(SUMMARY)] * 2
    with serve(kind, _summary_only(replies)) as provider:
        result = summarizer_for(provider, structured=True).summarize("", [HumanMessage("I'm Ana Ruiz")])
    assert result.text == SUMMARY
    # OpenAI's SDK parses the schema itself and raises: the request is sent again without it.
    assert len(provider.requests) == (2 if kind == "openai" else 1)
    assert "response_format" not in provider.requests[-1].body


def test_every_chat_request_carries_the_clients_facts_as_system_text(conversation: Conversation) -> None:
    if conversation.wrapper != "with_rolling_memory":
        assert not any(FACT in r.wire for r in conversation.provider.requests)
        return
    for request in conversation.chat_requests:
        carrying = [role for role, text in request.turns() if FACT in text]
        # OpenAI gets a system message; Gemini gets it inside its systemInstruction.
        assert carrying == ["system"], f"the facts should travel once as system text: {request.turns()}"
    # The facts never go to the summarizer: it folds the conversation, not the client's record.
    assert not any(FACT in r.wire for r in conversation.summary_requests)


def test_gemini_client_drops_a_non_leading_system_message_so_the_summary_is_a_user_turn() -> None:
    # A canary for the trap the summary's placement avoids: if langchain-google-genai stops
    # dropping this message, the reason for a user-role summary is gone (it stays correct).
    from langchain_core.messages import SystemMessage

    from langchain_rolling_memory.core.framing import summary_message

    with serve("gemini", lambda request: "ok") as provider:
        model = chat_model(provider)
        model.invoke([HumanMessage("hello"), SystemMessage("SYSTEM-SUMMARY"), HumanMessage("next")])
        model.invoke([HumanMessage("hello"), summary_message("USER-SUMMARY"), HumanMessage("next")])
    dropped, kept = provider.requests
    assert "SYSTEM-SUMMARY" not in dropped.wire
    assert [role for role, text in kept.turns() if "USER-SUMMARY" in text] == ["user"]
