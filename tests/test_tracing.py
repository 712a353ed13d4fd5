"""Memory's own model calls as callbacks, LangSmith and streams see them.

A real tracer (a `BaseTracer` that keeps every run) and LangChain's fake chat models: a summary
made in the background is a child of the chain or agent run that scheduled it, summarizer and
extractor calls are named and tagged as the memory's, and a stream filtered the way LangGraph
filters (the ``nostream`` tag) shows the answer's tokens only.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

import langchain_rolling_memory
from langchain_rolling_memory import (
    RollingStore,
    RollingSummaryChatMessageHistory,
    open_store,
    with_rolling_memory,
)
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.runtime.background import Workers
from langchain_rolling_memory.runtime.tracing import EXTRACT_FACTS, LOGGER_NAME, SUMMARIZE, TAG, TAG_NOSTREAM

SUMMARY = "Summary: " + " ".join(f"point{i}" for i in range(30))  # long enough: no stricter retry
ANSWER = "the answer is here"
SUMMARY_MODEL = "summary-model"  # the summarizer model's own tag: how a test finds its runs
EXTRACT_MODEL = "extract-model"
TURN = "turn"  # run_name of the chain or agent call each test makes


class RunCollector(BaseTracer):
    """Keeps every run it is told about (root or not, from any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[UUID, Run] = {}
        self._lock = threading.Lock()

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_run_create(self, run: Run) -> None:
        with self._lock:
            self.runs[run.id] = run

    def tagged(self, tag: str) -> list[Run]:
        with self._lock:
            return [r for r in self.runs.values() if tag in (r.tags or [])]

    def lineage(self, run: Run) -> list[Run]:
        """The run's ancestors, parent first, up to the root."""
        found: list[Run] = []
        parent = run.parent_run_id
        while parent is not None:
            ancestor = self.runs[parent]
            found.append(ancestor)
            parent = ancestor.parent_run_id
        return found


def summary_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(SUMMARY)), tags=[SUMMARY_MODEL])


def answer_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(ANSWER)))


def turn_config(collector: RunCollector, session: str = "s1", **configurable: str) -> dict[str, Any]:
    return {
        "configurable": {"client_id": "ana", "session_id": session, **configurable},
        "callbacks": [collector],
        "run_name": TURN,
    }


def assert_children_of_a_turn(collector: RunCollector) -> list[Run]:
    """Every summarizer run descends from a `TURN` root run; returns the summarizer runs."""
    summaries = collector.tagged(SUMMARY_MODEL)
    assert summaries, "no summarizer run reached the callbacks of the chain"
    for run in summaries:
        lineage = collector.lineage(run)
        assert lineage, f"the summarizer run {run.name!r} is an orphan root run"
        assert lineage[-1].name == TURN
        assert lineage[-1].parent_run_id is None
    return summaries


# ---------------------------------------------------------------- background runs in the caller's context


def test_a_worker_runs_its_job_in_a_copy_of_the_submitting_context() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    token = marker.set("the caller's")
    try:
        future = Workers(size=1, name="test-context").submit(marker.get)
    finally:
        marker.reset(token)
    assert future.result(timeout=30) == "the caller's"


def _chat(store: RollingStore, **options: Any) -> Any:
    return with_rolling_memory(
        answer_model(), store=store, summarizer=summary_model(), max_turns=3, keep_last=1, **options
    )


def test_a_background_summary_of_with_rolling_memory_is_a_child_of_the_chain_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    chat = _chat(store, background=True)
    for i in range(4):
        chat.invoke([HumanMessage(f"question {i}")], config=turn_config(collector))
    RollingSummaryChatMessageHistory("s1", client_id="ana", store=store, summarizer=summary_model()).flush(30)
    assert store.summary("s1") is not None
    assert_children_of_a_turn(collector)


async def test_an_async_background_summary_of_with_rolling_memory_is_a_child_of_the_chain_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    chat = _chat(store, background=True)
    history = RollingSummaryChatMessageHistory("s1", client_id="ana", store=store, summarizer=summary_model())
    for i in range(4):
        await chat.ainvoke([HumanMessage(f"question {i}")], config=turn_config(collector))
        await history.aflush(30)
    assert await store.asummary("s1") is not None
    assert_children_of_a_turn(collector)


def _with_history(store: RollingStore) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])

    def get_history(session_id: str) -> BaseChatMessageHistory:
        return RollingSummaryChatMessageHistory(
            session_id, store=store, summarizer=summary_model(), max_turns=3, keep_last=1, background=True
        )

    return RunnableWithMessageHistory(
        prompt | answer_model(), get_history, input_messages_key="question", history_messages_key="history"
    )


def _history_config(collector: RunCollector) -> dict[str, Any]:
    return {"configurable": {"session_id": "s1"}, "callbacks": [collector], "run_name": TURN}


def test_a_background_summary_of_a_history_is_a_child_of_the_runnable_with_message_history_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    chain = _with_history(store)
    for i in range(4):
        chain.invoke({"question": f"question {i}"}, config=_history_config(collector))
    RollingSummaryChatMessageHistory("s1", store=store, summarizer=summary_model()).flush(30)
    assert store.summary("s1") is not None
    assert_children_of_a_turn(collector)


async def test_an_async_background_summary_of_a_history_is_a_child_of_the_chain_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    chain = _with_history(store)
    history = RollingSummaryChatMessageHistory("s1", store=store, summarizer=summary_model())
    for i in range(4):
        await chain.ainvoke({"question": f"question {i}"}, config=_history_config(collector))
        await history.aflush(30)
    assert await store.asummary("s1") is not None
    assert_children_of_a_turn(collector)


def _agent(store: RollingStore) -> tuple[Any, Any]:
    from agent_models import ScriptedChatModel
    from langchain.agents import create_agent

    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

    memory = RollingMemoryMiddleware(
        store=store, summarizer=summary_model(), max_turns=3, keep_last=1, background=True
    )
    return create_agent(ScriptedChatModel(), [], middleware=[memory]), memory


def _agent_config(collector: RunCollector) -> dict[str, Any]:
    return {
        "configurable": {"thread_id": "s1", "client_id": "ana"},
        "callbacks": [collector],
        "run_name": TURN,
    }


def test_a_background_summary_of_the_agent_middleware_is_a_child_of_the_agent_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    agent, memory = _agent(store)
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"question {i}")]}, config=_agent_config(collector))
        memory.flush("s1", 30)
    assert store.summary("s1") is not None
    for run in assert_children_of_a_turn(collector):
        assert run.name == SUMMARIZE


async def test_an_async_background_summary_of_the_agent_middleware_is_a_child_of_the_agent_run() -> None:
    store, collector = open_store("memory://"), RunCollector()
    agent, memory = _agent(store)
    for i in range(4):
        await agent.ainvoke({"messages": [HumanMessage(f"question {i}")]}, config=_agent_config(collector))
        await memory.aflush("s1", 30)
    assert await store.asummary("s1") is not None
    for run in assert_children_of_a_turn(collector):
        assert run.name == SUMMARIZE


# ---------------------------------------------------------------- what memory's calls say they are


def test_langgraph_uses_the_same_nostream_tag() -> None:
    from langgraph.constants import TAG_NOSTREAM as LANGGRAPH_NOSTREAM

    assert TAG_NOSTREAM == LANGGRAPH_NOSTREAM


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_summarizer_and_extractor_calls_carry_their_run_name_tags_and_metadata(background: bool) -> None:
    store, collector = open_store("memory://"), RunCollector()
    reply = '{"add": [{"text": "Drinks tea", "key": "drink"}]}'
    extractor = FactExtractor(
        GenericFakeChatModel(messages=itertools.repeat(AIMessage(reply)), tags=[EXTRACT_MODEL])
    )
    chat = _chat(store, background=background, extractor=extractor)
    for i in range(4):
        chat.invoke([HumanMessage(f"I drink tea {i}")], config=turn_config(collector))
    RollingSummaryChatMessageHistory("s1", client_id="ana", store=store, summarizer=summary_model()).flush(30)
    assert [f.text for f in store.facts("ana")] == ["Drinks tea"]
    for tag, name in [(SUMMARY_MODEL, SUMMARIZE), (EXTRACT_MODEL, EXTRACT_FACTS)]:
        runs = collector.tagged(tag)
        assert runs, f"no {name} run"
        for run in runs:
            assert run.name == name
            assert {TAG_NOSTREAM, TAG} <= set(run.tags or [])
            metadata = run.extra.get("metadata", {})
            assert metadata["lc_source"] == TAG
            assert metadata["rolling_memory_call"] == name.rpartition(".")[2]
    # The chain's own answer is neither renamed nor hidden from streams.
    answers = [
        r for r in collector.runs.values() if r.run_type == "llm" and SUMMARY_MODEL not in (r.tags or [])
    ]
    answers = [r for r in answers if EXTRACT_MODEL not in (r.tags or [])]
    assert len(answers) == 4
    assert all(TAG_NOSTREAM not in (r.tags or []) and r.name == "GenericFakeChatModel" for r in answers)


class StructuredFakeChatModel(GenericFakeChatModel):
    """A fake model with `with_structured_output`: itself, then a parse of its JSON reply."""

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        return self | RunnableLambda(lambda raw: {"raw": raw, "parsed": schema.model_validate_json(raw.text)})


def _structured_summarizer() -> tuple[Any, str]:
    from langchain_rolling_memory.summarizers import chat_model_summarizer

    reply = AIMessage('{"topic": "tea", "key_facts": ["Ana drinks tea"]}')
    model = StructuredFakeChatModel(messages=itertools.repeat(reply), tags=[SUMMARY_MODEL])
    return chat_model_summarizer(model, structured=True), "Ana drinks tea"


def _lcel_summarizer() -> tuple[Any, str]:
    from langchain_core.output_parsers import StrOutputParser

    return summary_model() | StrOutputParser(), "point0"


@pytest.mark.parametrize("build", [_structured_summarizer, _lcel_summarizer], ids=["structured", "lcel"])
def test_a_structured_or_lcel_summarizer_call_is_named_and_its_model_call_tagged(
    build: Callable[[], tuple[Any, str]],
) -> None:
    collector = RunCollector()
    summarizer, expected = build()
    history = RollingSummaryChatMessageHistory(
        "s1", summarizer=summarizer, max_turns=3, keep_last=1, store=open_store("memory://")
    )
    chain = RunnableWithMessageHistory(answer_model(), lambda session_id: history)
    for i in range(3):
        chain.invoke([HumanMessage(f"q{i}")], config=_history_config(collector))
    assert expected in history.summary
    for run in assert_children_of_a_turn(collector):
        # The named run is the summarizer's call (for a structured model: model, then parser;
        # for an LCEL chain: the chain); the model call inside it inherits tags and metadata.
        assert SUMMARIZE in [r.name for r in collector.lineage(run)]
        assert TAG_NOSTREAM in (run.tags or [])
        assert run.extra["metadata"]["lc_source"] == TAG


# ---------------------------------------------------------------- streams show the answer only


def _streamed_text(events: Sequence[dict[str, Any]]) -> str:
    return "".join(e["data"]["chunk"].text for e in events if e["event"] == "on_chat_model_stream")


def _summary_events(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"].startswith("on_chat_model") and SUMMARY_MODEL in e["tags"]]


def _prefilled(store: RollingStore, client_id: str | None = "ana") -> None:
    # Four unsummarized messages: the turn's two make six, over max_turns=3, so the history
    # compacts inline at the end of the streamed call.
    turns: list[BaseMessage] = [
        HumanMessage("hi"),
        AIMessage("hello"),
        HumanMessage("tea?"),
        AIMessage("yes"),
    ]
    store.append("s1", turns, client_id=client_id)


async def test_astream_events_of_a_compacting_chain_show_the_summary_only_tagged_nostream() -> None:
    store = open_store("memory://")
    _prefilled(store)
    chat = _chat(store)
    config = {"configurable": {"client_id": "ana", "session_id": "s1"}}
    events = [e async for e in chat.astream_events([HumanMessage("and now?")], config=config, version="v2")]
    assert (await store.asummary("s1")) is not None  # it compacted during the call
    summaries = _summary_events(events)
    assert any(e["event"] == "on_chat_model_stream" for e in summaries), "the summary was not streamed at all"
    assert all(TAG_NOSTREAM in e["tags"] and e["name"] == SUMMARIZE for e in summaries)
    # A consumer that drops nostream events, as LangGraph's "messages" mode does, sees the answer only.
    shown = [e for e in events if TAG_NOSTREAM not in e["tags"]]
    assert _streamed_text(shown) == ANSWER
    assert SUMMARY.split()[1] in _streamed_text(events)  # unfiltered, the summary's tokens are there


async def test_astream_events_excluding_nostream_stream_the_answer_only() -> None:
    store = open_store("memory://")
    _prefilled(store)
    chat = _chat(store)
    config = {"configurable": {"client_id": "ana", "session_id": "s1"}}
    stream = chat.astream_events(
        [HumanMessage("and now?")], config=config, version="v2", exclude_tags=[TAG_NOSTREAM]
    )
    events = [e async for e in stream]
    assert (await store.asummary("s1")) is not None
    assert _streamed_text(events) == ANSWER


def test_a_compacting_chain_in_a_langgraph_node_streams_only_its_answer_in_messages_mode() -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    store = open_store("memory://")
    _prefilled(store)
    chat = _chat(store)

    def answer(state: MessagesState) -> dict[str, Any]:
        config = {"configurable": {"client_id": "ana", "session_id": "s1"}}
        return {"messages": [chat.invoke(state["messages"][-1:], config=config)]}

    graph = StateGraph(MessagesState).add_node("answer", answer).add_edge(START, "answer").compile()
    streamed = [
        chunk.text
        for chunk, _ in graph.stream({"messages": [HumanMessage("and now?")]}, stream_mode="messages")
    ]
    assert store.summary("s1") is not None  # it compacted during the node
    assert "".join(streamed) == ANSWER


async def test_a_users_summarizer_function_calling_a_model_is_not_streamed_as_the_answer() -> None:
    store = open_store("memory://")
    _prefilled(store, client_id=None)
    model = summary_model()

    async def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
        reply = await model.ainvoke([HumanMessage(previous + "\n".join(m.text for m in messages))])
        return reply.text

    history = RollingSummaryChatMessageHistory(
        "s1", store=store, summarizer=summarize, max_turns=3, keep_last=1
    )
    chain = RunnableWithMessageHistory(answer_model(), lambda session_id: history)
    config = {"configurable": {"session_id": "s1"}}
    events = [e async for e in chain.astream_events([HumanMessage("and now?")], config=config, version="v2")]
    assert history.summary.endswith("point29")
    summaries = _summary_events(events)
    assert summaries
    assert all(TAG_NOSTREAM in e["tags"] for e in summaries)
    assert _streamed_text([e for e in events if TAG_NOSTREAM not in e["tags"]]) == ANSWER


async def test_agent_astream_events_show_the_summary_named_and_tagged_nostream() -> None:
    from agent_models import ScriptedChatModel
    from langchain.agents import create_agent

    from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

    store = open_store("memory://")
    _prefilled(store)
    memory = RollingMemoryMiddleware(store=store, summarizer=summary_model(), max_turns=3, keep_last=1)
    agent = create_agent(ScriptedChatModel(), [], middleware=[memory])
    config = {"configurable": {"thread_id": "s1", "client_id": "ana"}}
    stream = agent.astream_events({"messages": [HumanMessage("and now?")]}, config=config, version="v2")
    events = [e async for e in stream]
    assert (await store.asummary("s1")) is not None
    summaries = _summary_events(events)
    assert summaries
    assert all(TAG_NOSTREAM in e["tags"] and e["name"] == SUMMARIZE for e in summaries)


# ---------------------------------------------------------------- the logger


def test_every_module_logs_to_the_one_documented_logger() -> None:
    package = Path(langchain_rolling_memory.__file__).parent
    names = {
        name
        for path in package.rglob("*.py")
        for name in re.findall(r"logging\.getLogger\(([^)]*)\)", path.read_text(encoding="utf-8"))
    }
    assert names == {f'"{LOGGER_NAME}"'}
    reference = (package.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert f'`logging.getLogger("{LOGGER_NAME}")`' in reference
    assert logging.getLogger(LOGGER_NAME) is logging.getLogger("langchain_rolling_memory")
