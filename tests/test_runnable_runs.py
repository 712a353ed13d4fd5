"""The runs and the threads of a turn through `with_rolling_memory` (issue 22, no deprecated base):
one run of its own around the chain's, the memory's runs (recall, summaries, extraction) its
children in every mode, and an async turn that runs no store statement on the event loop."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from pathlib import Path
from uuid import UUID

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from test_runnable_turns import cfg, streaming_model, summarize

from langchain_rolling_memory import RollingStore, open_store, with_rolling_memory
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.runtime.tracing import RECALL
from langchain_rolling_memory.stores.sqlite.store import SQLiteBackend


class RunCollector(BaseTracer):
    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[UUID, Run] = {}
        self._lock = threading.Lock()

    def _persist_run(self, run: Run) -> None:
        pass

    def _on_run_create(self, run: Run) -> None:
        with self._lock:
            self.runs[run.id] = run


@pytest.mark.parametrize("mode", ["invoke", "stream"])
def test_a_turn_is_one_run_around_the_chains_run(mode: str) -> None:
    """The runs a turn makes: its own, then the chain's (here a model) as its child; no
    history-loading, inserting or listener runs in between."""
    collector = RunCollector()
    chat = with_rolling_memory(streaming_model(), store=open_store("memory://"), summarizer=summarize)
    config = {**cfg(), "callbacks": [collector], "run_name": "turn"}
    if mode == "invoke":
        chat.invoke([HumanMessage("q0")], config=config)
    else:
        list(chat.stream([HumanMessage("q0")], config=config))
    runs = sorted(collector.runs.values(), key=lambda r: r.dotted_order)
    assert [r.name for r in runs] == ["turn", "GenericFakeChatModel"]
    assert runs[1].parent_run_id == runs[0].id


# ---------------------------------------------------------------- async is real


class TracedSQLite(SQLiteBackend):
    """A SQLite backend that notes the thread of every statement it runs."""

    def __init__(self, path: Path) -> None:
        self.threads: list[int] = []
        super().__init__(path)

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        conn.set_trace_callback(lambda statement: self.threads.append(threading.get_ident()))
        return conn


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
async def test_an_async_turn_runs_no_statement_on_the_event_loop(tmp_path: Path, mode: str) -> None:
    """Facts, state, recall, the view, the append and an inline compaction: every statement of
    an async turn runs off the loop's thread (SQLite's driver has no async: a worker does)."""
    traced = TracedSQLite(tmp_path / "m.db")
    store = RollingStore(traced)
    store.add_fact("ana", "Delivers on Saturdays")
    store.set_state("s1", {"cart": ["A-1"]}, client_id="ana")
    store.append("old", [HumanMessage("We stayed at the Hotel Aurora"), AIMessage("Noted")], client_id="ana")
    chat = with_rolling_memory(
        streaming_model(), store=store, summarizer=summarize, max_turns=2, keep_last=1, recall_tokens=300
    )
    traced.threads.clear()
    loop_thread = threading.get_ident()
    for i in range(3):
        question = [HumanMessage(f"Which hotel, Saturday {i}?")]
        if mode == "ainvoke":
            await chat.ainvoke(question, config=cfg())
        else:
            _ = [c async for c in chat.astream(question, config=cfg())]
    threads = list(traced.threads)
    assert threads, "no statement was traced"
    assert loop_thread not in threads
    assert store.summary("s1", client_id="ana") is not None  # it compacted inline
    store.close()


# ---------------------------------------------------------------- the memory's runs are the turn's


def _root(collector: RunCollector, run: Run) -> Run:
    while run.parent_run_id is not None:
        run = collector.runs[run.parent_run_id]
    return run


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("mode", ["invoke", "stream", "ainvoke", "astream"])
async def test_summaries_extractions_and_recalls_are_runs_of_the_turn(mode: str, background: bool) -> None:
    collector = RunCollector()
    store = open_store("memory://")
    store.append("old", [HumanMessage("We stayed at the Hotel Aurora"), AIMessage("Noted")], client_id="ana")
    reply = '{"add": [{"text": "Drinks tea", "key": "drink"}]}'
    chat = with_rolling_memory(
        streaming_model(),
        store=store,
        summarizer=GenericFakeChatModel(
            messages=itertools.repeat(AIMessage("a summary")), tags=["summarize"]
        ),
        extractor=FactExtractor(
            GenericFakeChatModel(messages=itertools.repeat(AIMessage(reply)), tags=["extract"])
        ),
        max_turns=3,
        keep_last=1,
        background=background,
        recall_tokens=300,
    )
    config = {**cfg(), "callbacks": [collector], "run_name": "turn"}
    for i in range(4):
        question = [HumanMessage(f"Which hotel did we stay at, tea {i}?")]
        if mode == "invoke":
            chat.invoke(question, config=config)
        elif mode == "stream":
            list(chat.stream(question, config=config))
        elif mode == "ainvoke":
            await chat.ainvoke(question, config=config)
        else:
            _ = [c async for c in chat.astream(question, config=config)]
    assert (await chat.adrain(timeout=30)).pending == 0
    assert [f.text for f in store.facts("ana")] == ["Drinks tea"]
    runs = list(collector.runs.values())
    for kind in ("summarize", "extract", RECALL):
        found = [r for r in runs if kind in (r.tags or []) or r.name == kind]
        assert found, f"no {kind} run"
        assert {_root(collector, r).name for r in found} == {"turn"}, kind
