"""A recall is a traced retriever run: named ``rolling_memory.recall``, a child of the run that
recalled (a chain, an agent's model call), its query as input and the excerpts shown as documents,
so LangSmith and any callback handler see what recall put in front of the model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from agent_models import ScriptedChatModel
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run

from langchain_rolling_memory import RollingMemoryMiddleware, RollingStore, open_store, with_rolling_memory
from langchain_rolling_memory.runtime.tracing import RECALL, TAG

TURN = "turn"


class RunCollector(BaseTracer):
    """Keeps every run it is told about, ended or not."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[UUID, Run] = {}
        self._lock = threading.Lock()

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_run_create(self, run: Run) -> None:
        with self._lock:
            self.runs[run.id] = run

    def named(self, name: str) -> list[Run]:
        return [r for r in self.runs.values() if r.name == name]

    def root_of(self, run: Run) -> Run:
        while run.parent_run_id is not None:
            run = self.runs[run.parent_run_id]
        return run


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary"


def seeded() -> RollingStore:
    store = open_store("memory://")
    store.append(
        "old", [HumanMessage("We stayed at the Hotel Aurora in Lisbon"), AIMessage("Noted")], client_id="ana"
    )
    store.add_fact("ana", "Prefers window seats on trains")
    return store


def config(collector: RunCollector, session: str = "new") -> dict[str, Any]:
    return {
        "configurable": {"client_id": "ana", "session_id": session},
        "callbacks": [collector],
        "run_name": TURN,
    }


def the_recall(collector: RunCollector) -> Run:
    runs = collector.named(RECALL)
    assert len(runs) == 1, f"expected one {RECALL} run, got {[r.name for r in collector.runs.values()]}"
    return runs[0]


def assert_a_retriever_run_of_the_turn(collector: RunCollector, query: str) -> list[Document]:
    run = the_recall(collector)
    assert run.run_type == "retriever"
    assert run.inputs == {"query": query}
    assert TAG in (run.tags or [])
    assert run.parent_run_id is not None, "the recall is an orphan root run"
    assert collector.root_of(run).name == TURN
    assert run.end_time is not None and run.error is None
    documents = run.outputs["documents"] if run.outputs else []
    assert all(isinstance(d, Document) for d in documents)
    return documents


def test_a_chain_recall_is_a_retriever_run_under_the_chain_with_its_hits_as_documents() -> None:
    collector = RunCollector()
    chat = with_rolling_memory(ScriptedChatModel(), store=seeded(), summarizer=summarize, recall_tokens=500)
    chat.invoke([HumanMessage("Which hotel in Lisbon?")], config=config(collector))
    documents = assert_a_retriever_run_of_the_turn(collector, "Which hotel in Lisbon?")
    hotel = [d for d in documents if "Hotel Aurora" in d.page_content]
    assert hotel, documents
    assert hotel[0].metadata["kind"] == "message"
    assert hotel[0].metadata["session_id"] == "old"
    assert hotel[0].metadata["seq"] == 1


async def test_an_async_chain_recall_is_traced_the_same_way() -> None:
    collector = RunCollector()
    store = seeded()
    # A fact the facts block shows is not recalled again: the pinned fact fills its budget.
    store.add_fact("ana", "Lives in Porto", pinned=True)
    chat = with_rolling_memory(
        ScriptedChatModel(), store=store, summarizer=summarize, recall_tokens=500, max_fact_tokens=10
    )
    await chat.ainvoke([HumanMessage("Which seats on trains?")], config=config(collector))
    documents = assert_a_retriever_run_of_the_turn(collector, "Which seats on trains?")
    facts = [d for d in documents if d.metadata["kind"] == "fact"]
    assert [d.page_content for d in facts] == ["Prefers window seats on trains"]
    assert facts[0].metadata["fact_id"]


def _agent(store: RollingStore) -> Any:
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize, memory_tools=(), recall_tokens=500)
    return create_agent(ScriptedChatModel(), [], middleware=[memory])


def test_an_agent_recall_is_a_retriever_run_inside_the_agents_run() -> None:
    collector = RunCollector()
    _agent(seeded()).invoke({"messages": [HumanMessage("Which hotel in Lisbon?")]}, config(collector))
    documents = assert_a_retriever_run_of_the_turn(collector, "Which hotel in Lisbon?")
    assert any("Hotel Aurora" in d.page_content for d in documents)


async def test_an_async_agent_recall_is_traced_too() -> None:
    collector = RunCollector()
    await _agent(seeded()).ainvoke({"messages": [HumanMessage("Which hotel in Lisbon?")]}, config(collector))
    documents = assert_a_retriever_run_of_the_turn(collector, "Which hotel in Lisbon?")
    assert any("Hotel Aurora" in d.page_content for d in documents)


class Notes(BaseRetriever):
    """A retriever of the app's own: two notes, or a failure."""

    fail: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.fail:
            raise RuntimeError("the vector store is down")
        return [Document("Oscar is a cat", metadata={"source": "notes"}), Document("Oscar likes tuna")]


def test_a_retriever_given_as_recall_is_searched_inside_the_recall_run() -> None:
    collector = RunCollector()
    chat = with_rolling_memory(ScriptedChatModel(), store=seeded(), summarizer=summarize, recall=Notes())
    chat.invoke([HumanMessage("What does Oscar eat?")], config=config(collector))
    documents = assert_a_retriever_run_of_the_turn(collector, "What does Oscar eat?")
    assert [d.page_content for d in documents] == ["Oscar is a cat", "Oscar likes tuna"]
    [inner] = collector.named("Notes")
    assert inner.parent_run_id == the_recall(collector).id


def test_a_failed_recall_ends_its_run_with_the_error() -> None:
    collector = RunCollector()
    chat = with_rolling_memory(
        ScriptedChatModel(), store=seeded(), summarizer=summarize, recall=Notes(fail=True)
    )
    with pytest.raises(RuntimeError, match="vector store is down"):
        chat.invoke([HumanMessage("What does Oscar eat?")], config=config(collector))
    run = the_recall(collector)
    assert run.error is not None and "vector store is down" in run.error


def test_no_recall_run_when_recall_is_off_or_the_query_has_no_words() -> None:
    collector = RunCollector()
    store = seeded()
    with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize).invoke(
        [HumanMessage("Which hotel?")], config=config(collector)
    )
    with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize, recall_tokens=500).invoke(
        [HumanMessage("the of and")], config=config(collector, "other")
    )
    assert collector.named(RECALL) == []
