"""Writes planned from a read before an erase never land after it (issue 20, defects 2 and 3).

Each test erases between the read a write is planned from and the write itself, on every
backend, and checks that nothing of the erased conversation comes back: not as a summary,
not as a fact, not in the view of a client that later reuses the session id.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.core.records import CompactionResult, SessionMark
from langchain_rolling_memory.engine.compaction import Compactor
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.errors import StaleWriteError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.summarizers import as_summarizer

SECRET = "passport X099"


class Recorder:
    """A summarizer that records what it was asked to fold."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append([m.text for m in messages])
        return "Summary: " + " / ".join(m.text for m in messages)


def _alice_turns(store: RollingStore, session_id: str = "s") -> None:
    store.append(
        session_id,
        [HumanMessage(f"My {SECRET}"), AIMessage("Noted."), HumanMessage("q2"), AIMessage("a2")],
        client_id="alice",
    )
    store.append(session_id, [HumanMessage("q3"), AIMessage("a3")], client_id="alice")


def _compactor(store: RollingStore, summarizer: Recorder) -> Compactor:
    return Compactor(store, as_summarizer(summarizer), FoldPolicy(max_turns=4, keep_last=2))


@pytest.mark.parametrize("erase", ["forget", "clear"])
def test_a_compaction_planned_before_an_erase_installs_nothing(store: RollingStore, erase: str) -> None:
    _alice_turns(store)
    compactor = _compactor(store, Recorder())
    state = compactor.load("s", client_id="alice")
    assert compactor.due(state) > 0
    if erase == "forget":
        store.forget("alice")
    else:
        store.clear_session("s", client_id="alice")
    store.append("s", [HumanMessage("hello, I am Bob")], client_id="bob")

    assert compactor.compact("s", state) is None
    assert store.summary("s") is None
    bob = compactor.load("s", client_id="bob")
    assert SECRET not in " ".join(m.text for m in compactor.view(bob))


async def test_an_async_compaction_planned_before_forget_installs_nothing(store: RollingStore) -> None:
    _alice_turns(store)
    compactor = _compactor(store, Recorder())
    state = await compactor.aload("s", client_id="alice")
    await store.aforget("alice")
    assert await compactor.acompact("s", state) is None
    assert await store.asummary("s") is None
    assert store.session_info("s") is None


def test_a_stale_install_is_refused_by_the_store_itself(store: RollingStore) -> None:
    _alice_turns(store)
    turn = store.read_turn("s", limit=10, client_id="alice")
    assert turn.generation is not None
    store.forget("alice")
    store.append("s", [HumanMessage("hello, I am Bob")], client_id="bob")
    assert store.claim("s", "worker", 30)
    refused = store.install_summary(
        "s",
        f"Alice's {SECRET}",
        covered_seq=2,
        expected_version=0,
        lease_owner="worker",
        generation=turn.generation,
    )
    assert refused is False
    assert store.summary("s") is None
    fresh = store.read_turn("s", limit=10, client_id="bob")
    assert fresh.generation not in (None, turn.generation)
    assert store.install_summary(
        "s", "Bob said hello", covered_seq=1, expected_version=0, generation=fresh.generation
    )


def test_no_summary_is_installed_on_a_session_that_has_no_row(store: RollingStore) -> None:
    assert store.install_summary("ghost", SECRET, covered_seq=1, expected_version=0) is False
    assert store.summary("ghost") is None
    store.append("ghost", [HumanMessage("hi")], client_id="bob")
    assert store.summary("ghost", client_id="bob") is None


def test_a_background_compaction_does_not_bring_back_a_forgotten_session(store: RollingStore) -> None:
    # The erase lands inside the start delay, before the worker takes its lease.
    summarizer = Recorder()
    h = RollingSummaryChatMessageHistory(
        "s",
        store=store,
        client_id="alice",
        summarizer=summarizer,
        max_turns=4,
        keep_last=2,
        background=True,
        start_delay=0.5,
    )
    h.add_messages([HumanMessage(f"My {SECRET}"), AIMessage("Noted.")])
    h.add_messages([HumanMessage("q2"), AIMessage("a2")])
    h.add_messages([HumanMessage("q3"), AIMessage("a3")])  # due: scheduled, waiting out its delay
    store.forget("alice")
    assert h.flush(timeout=20)
    assert store.summary("s") is None
    bob = RollingSummaryChatMessageHistory("s", store=store, client_id="bob", summarizer=summarizer)
    bob.add_messages([HumanMessage("hello, I am Bob")])
    assert SECRET not in " ".join(m.text for m in bob.messages)
    assert store.summary("s") is None


class _GatedModel(GenericFakeChatModel):
    """A chat model whose reply waits for `release`, so an erase can land during the call."""

    entered: Any = None
    release: Any = None

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        assert self.release.wait(20)
        return super()._generate(*args, **kwargs)


def _gated(reply: str) -> _GatedModel:
    return _GatedModel(
        messages=iter([AIMessage(reply)]), entered=threading.Event(), release=threading.Event()
    )


def test_forget_during_fact_extraction_keeps_the_facts_erased(store: RollingStore) -> None:
    _alice_turns(store)
    mark = SessionMark("s", store.read_turn("s", limit=1, client_id="alice").generation or "")
    model = _gated('{"add": [{"text": "Holds passport X099", "key": "passport"}]}')
    extractor = FactExtractor(model)
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(
            extractor.extract(store, "alice", [HumanMessage(f"My {SECRET}")], planned_from=mark)
        )
    )
    worker.start()
    assert model.entered.wait(20)
    store.forget("alice")
    model.release.set()
    worker.join(20)
    assert store.facts("alice") == []
    assert result and result[0].error and "erased" in result[0].error


async def test_a_stale_fact_write_raises_and_writes_nothing(store: RollingStore) -> None:
    _alice_turns(store)
    generation = (await store.aread_turn("s", limit=1, client_id="alice")).generation
    assert generation is not None
    mark = SessionMark("s", generation)
    assert (await store.aadd_fact("alice", "Lives in Lyon", planned_from=mark)) is not None
    await store.aclear_session("s", client_id="alice")
    with pytest.raises(StaleWriteError):
        await store.aadd_fact("alice", "Holds passport X099", planned_from=mark)
    with pytest.raises(StaleWriteError):
        store.add_fact("alice", "Holds passport X099", planned_from=mark)
    assert [f.text for f in store.facts("alice")] == ["Lives in Lyon"]
    # A session now owned by another client is no mark of alice's either.
    store.append("s", [HumanMessage("Bob here")], client_id="bob")
    bob_mark = SessionMark("s", store.read_turn("s", limit=1, client_id="bob").generation or "")
    with pytest.raises(StaleWriteError):
        store.add_fact("alice", "Holds passport X099", planned_from=bob_mark)


class _Spy(GenericFakeChatModel):
    """A chat model that records every request it is sent."""

    seen: Any = None

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append("\n".join(str(m.content) for m in messages))
        return super()._generate(messages, *args, **kwargs)


def test_a_late_extraction_never_reads_or_deletes_the_next_owners_facts(store: RollingStore) -> None:
    # Alice's session is erased and re-created by Bob before the listener of her compaction runs.
    store.append("s", [HumanMessage("I am Alice, I love tea")], client_id="alice")
    generation = store.read_turn("s", limit=1, client_id="alice").generation
    result = CompactionResult(
        "s", 1, 1, 1, "sum", (HumanMessage("Forget that I like trains."),), generation=generation
    )
    store.forget("alice")
    store.append("s", [HumanMessage("Bob here")], client_id="bob")
    bob_fact = store.add_fact("bob", "PIN hint 4711", key="pin")
    assert bob_fact is not None
    reply = '{"add": [{"text": "likes tea"}], "delete": ["f1"]}'
    model = _Spy(messages=iter([AIMessage(reply)]), seen=[])
    FactExtractor(model).bind(store).on_compaction(result)
    assert not any("4711" in request for request in model.seen)
    assert [f.text for f in store.facts("bob")] == ["PIN hint 4711"]


def test_a_compaction_never_summarizes_the_session_that_reused_an_erased_id(store: RollingStore) -> None:
    _alice_turns(store)
    summarizer = Recorder()
    compactor = _compactor(store, summarizer)
    state = compactor.load("s", client_id="alice")
    store.forget("alice")
    store.append("s", [HumanMessage(f"BOB SECRET {i}") for i in range(8)], client_id="bob")
    assert compactor.compact("s", state) is None
    assert not any("BOB SECRET" in text for call in summarizer.calls for text in call)


def test_the_compactor_of_these_tests_does_summarize_when_nothing_is_erased(store: RollingStore) -> None:
    # So that "nothing installed" above is the erase's doing, not a broken summarizer.
    _alice_turns(store)
    summarizer = Recorder()
    compactor = _compactor(store, summarizer)
    done = compactor.compact("s", compactor.load("s", client_id="alice"))
    assert done is not None and summarizer.calls and store.summary("s") is not None
