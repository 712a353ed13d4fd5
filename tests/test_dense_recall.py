"""Dense recall (issue 23): vectors kept in the store itself on every backend, searched within one
client, erased with everything else, computed off the turn path, fused with the lexical search."""

from __future__ import annotations

import math
import multiprocessing
import os
import struct
from typing import ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory import index_vectors, open_store, with_rolling_memory
from langchain_rolling_memory.core.dense import LEXICAL_FLOOR, fuse, fuse_confident, pack
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.engine.dense import DenseRecall, model_name
from langchain_rolling_memory.engine.recaller import Recaller
from langchain_rolling_memory.errors import ConfigurationError, InvalidArgumentError, OwnershipError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import VectorWrite
from langchain_rolling_memory.stores.vector_api import UNIT_TOLERANCE, vector_problem
from tests.store_kit import leftovers

FAKE = DeterministicFakeEmbedding(size=16)
MODEL = model_name(FAKE)


def _fill(store: RollingStore) -> None:
    store.append("zz-ana-1", [HumanMessage("We adopted a cat"), AIMessage("Lovely")], client_id="zz-ana")
    store.append("zz-bob-1", [HumanMessage("We adopted a cat")], client_id="zz-bob")


def test_vectors_are_stored_searched_and_never_cross_clients(store: RollingStore) -> None:
    _fill(store)
    assert index_vectors(store, FAKE, client_id="zz-ana") == 2
    assert [(u.session_id, u.seq) for u in store.unembedded(MODEL)] == [("zz-bob-1", 1)]
    query = FAKE.embed_query("We adopted a cat")
    hits = store.vector_search(query, model=MODEL, client_id="zz-ana")
    assert (hits[0].session_id, hits[0].seq, hits[0].text) == ("zz-ana-1", 1, "We adopted a cat")
    assert hits[0].score == pytest.approx(1.0, abs=1e-5) and hits[0].created_at is not None
    # Bob's identical message has no vector yet, and Ana's are never Bob's.
    assert store.vector_search(query, model=MODEL, client_id="zz-bob") == []
    index_vectors(store, FAKE)
    assert [h.session_id for h in store.vector_search(query, model=MODEL, client_id="zz-bob")] == ["zz-bob-1"]
    with pytest.raises(OwnershipError):
        store.vector_search(query, model=MODEL, client_id="zz-bob", session_id="zz-ana-1")
    # A session searched without a client is found only if it is nobody's.
    assert store.vector_search(query, model=MODEL, session_id="zz-ana-1") == []
    # Another model's vectors are not this one's.
    assert store.vector_search(query, model="other", client_id="zz-ana") == []


async def test_the_async_twins_store_and_search(store: RollingStore) -> None:
    await store.aappend("zz-s", [HumanMessage("Lisbon hotel")], client_id="zz-c")
    pending = await store.aunembedded(MODEL, session_id="zz-s")
    writes = [
        VectorWrite(p.session_id, p.seq, p.generation, pack(FAKE.embed_query("Lisbon hotel")))
        for p in pending
    ]
    assert await store.aput_vectors(MODEL, writes) == 1
    hits = await store.avector_search(FAKE.embed_query("Lisbon hotel"), model=MODEL, client_id="zz-c")
    assert [h.seq for h in hits] == [1]


@pytest.mark.parametrize("erase", ["forget", "clear_session", "purge"])
def test_an_erase_takes_the_vectors_with_it(store: RollingStore, erase: str) -> None:
    _fill(store)
    index_vectors(store, FAKE)
    if erase == "forget":
        store.forget("zz-ana")
    elif erase == "clear_session":
        store.clear_session("zz-ana-1")
    else:
        store.purge(older_than=0)  # every session written before now
    assert store.vector_search(FAKE.embed_query("We adopted a cat"), model=MODEL, client_id="zz-ana") == []
    assert leftovers(store, "zz-ana-1") == []  # the raw tables or keys: no vector row left


def test_a_vector_listed_before_an_erase_is_not_written_after_it(store: RollingStore) -> None:
    store.append("zz-s", [HumanMessage("first owner's words")], client_id="zz-a")
    listed = store.unembedded(MODEL, session_id="zz-s")
    store.forget("zz-a")
    store.append("zz-s", [HumanMessage("second owner's words")], client_id="zz-b")
    writes = [VectorWrite(u.session_id, u.seq, u.generation, pack([1.0, 0.0])) for u in listed]
    assert store.put_vectors(MODEL, writes) == 0
    assert "second owner" in next(u.payload for u in store.unembedded(MODEL, session_id="zz-s"))


_NOT_PACKED = {
    "NaN": struct.pack("<2f", float("nan"), 0.0),
    "infinity": struct.pack("<2f", float("-inf"), 0.0),
    "length": struct.pack("<2f", 3.0, 4.0),
}


@pytest.mark.parametrize("kind", sorted(_NOT_PACKED))
async def test_a_vector_not_packed_or_a_message_twice_is_refused_and_nothing_written(
    store: RollingStore, kind: str
) -> None:
    _fill(store)
    listed = store.unembedded(MODEL, client_id="zz-ana")
    first, second = (VectorWrite(u.session_id, u.seq, u.generation, pack([0.6, 0.8])) for u in listed)
    wrong = second._replace(vector=_NOT_PACKED[kind])
    with pytest.raises(InvalidArgumentError, match=r"not core\.dense\.pack's bytes"):
        store.put_vectors(MODEL, [first, wrong])
    with pytest.raises(InvalidArgumentError, match=r"not core\.dense\.pack's bytes"):
        await store.aput_vectors(MODEL, [first, wrong])
    with pytest.raises(InvalidArgumentError, match="twice in one call"):
        store.put_vectors(MODEL, [first, second, first._replace(vector=pack([0.0, 1.0]))])
    assert store.unembedded(MODEL, client_id="zz-ana") == listed  # nothing was written
    assert store.put_vectors(MODEL, [first, second]) == 2
    hits = store.vector_search([0.6, 0.8], model=MODEL, client_id="zz-ana")
    assert [h.score for h in hits] == pytest.approx([1.0, 1.0], abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=12))
def test_only_finite_unit_vectors_are_stored(values: list[float]) -> None:
    raw = struct.pack(f"<{len(values)}f", *values)
    finite = all(math.isfinite(v) for v in values)
    unit = finite and abs(math.sqrt(math.fsum(v * v for v in values)) - 1.0) <= UNIT_TOLERANCE
    assert (vector_problem(raw) is None) == unit
    if finite and any(values):
        assert vector_problem(pack(values)) is None  # what pack makes of any direction is stored


def test_bad_vectors_and_names_are_refused() -> None:
    store = open_store("memory://")
    with pytest.raises(InvalidArgumentError):
        pack([float("nan")])
    with pytest.raises(InvalidArgumentError):
        store.put_vectors("", [])
    with pytest.raises(InvalidArgumentError):
        store.put_vectors(MODEL, [VectorWrite("s", 1, "g", b"abc")])
    with pytest.raises(ConfigurationError):
        store.vector_search([1.0], model=MODEL)  # no scope: a search never spans clients
    assert store.vector_search([0.0, 0.0], model=MODEL, client_id="c") == []


class _Concepts(Embeddings):
    """A tiny deterministic model that knows synonyms: each word votes for its concept."""

    CONCEPTS: ClassVar[dict[str, int]] = {
        "car": 0,
        "automobile": 0,
        "vehicle": 0,
        "dog": 1,
        "puppy": 1,
        "hotel": 2,
        "room": 2,
    }

    def _one(self, text: str) -> list[float]:
        vector = [0.0, 0.0, 0.0, 0.01]
        for word in text.lower().replace("?", " ").split():
            if word in self.CONCEPTS:
                vector[self.CONCEPTS[word]] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def test_fusion_finds_what_the_words_alone_miss() -> None:
    store = open_store("memory://")
    store.append("old", [HumanMessage("I bought a new automobile last week")], client_id="ana")
    for i in range(12):
        store.append(
            f"noise-{i}",
            [HumanMessage(f"Did I get the curtains for the living room, take {i}?")],
            client_id="ana",
        )
    question = "which vehicle did I get?"
    lexical = Recaller(store, 100, limit=3)
    dense = Recaller(store, 100, limit=3, dense=DenseRecall(store, _Concepts()))
    dense.dense.index(client_id="ana")  # type: ignore[union-attr]
    assert "automobile" not in lexical.recall(question, client_id="ana", session_id="now").text
    assert "automobile" in dense.recall(question, client_id="ana", session_id="now").text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 12), st.floats(0, 20)), max_size=15),
    st.lists(st.integers(1, 12), max_size=15, unique=True),
)
def test_the_recall_fuses_the_strong_lexical_hits_with_the_dense_ones(
    lexical: list[tuple[int, float]], near: list[int]
) -> None:
    def hit(seq: int, score: float = 0.5) -> SearchHit:
        return SearchHit("message", "s", seq, None, score, text=str(seq))

    ranked = sorted(dict(lexical).items(), key=lambda item: -item[1])
    found = fuse_confident([hit(s, sc) for s, sc in ranked], [hit(s) for s in near])
    best = ranked[0][1] if ranked else 0.0
    strong = [s for s, sc in ranked if best <= 0 or sc >= LEXICAL_FLOOR * best]
    assert [h.seq for h in found] == [
        h.seq for h in fuse([hit(s, 1.0) for s in strong], [hit(s) for s in near])
    ]
    weak = {s for s, _ in ranked} - set(strong) - set(near)
    assert not weak & {h.seq for h in found}  # a weak lexical hit is replaced, not ranked last


def test_fuse_ranks_what_both_lists_hold_first() -> None:
    def hit(seq: int) -> SearchHit:
        return SearchHit("message", "s", seq, None, 0.0, text=str(seq))

    fused = fuse([hit(1), hit(2), hit(3)], [hit(3), hit(4)])
    assert [h.seq for h in fused] == [3, 1, 2, 4]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)


def _chat(store: RollingStore, embeddings: Embeddings, *replies: str) -> object:
    model = GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))
    return with_rolling_memory(
        model, store=store, summarizer=lambda p, m: "s", recall_tokens=500, embeddings=embeddings
    )


def test_with_rolling_memory_embeds_after_the_turn_and_recalls_by_meaning(store: RollingStore) -> None:
    from langchain_core.runnables import RunnableLambda

    sent: list[str] = []

    def model(messages: list[object]) -> AIMessage:
        sent.append("\n".join(str(getattr(m, "text", m)) for m in messages))
        return AIMessage("ok")

    chat = with_rolling_memory(
        RunnableLambda(model),
        store=store,
        summarizer=lambda p, m: "s",
        recall_tokens=500,
        embeddings=_Concepts(),
    )
    chat.invoke(
        [HumanMessage("I bought a new automobile last week")],
        config={"configurable": {"client_id": "zz-ana", "session_id": "zz-one"}},
    )
    assert chat.drain(timeout=30).pending == 0  # embedded by a background job after the append
    assert store.unembedded(model_name(_Concepts()), client_id="zz-ana") == []
    chat.invoke(
        [HumanMessage("which vehicle was it?")],
        config={"configurable": {"client_id": "zz-ana", "session_id": "zz-two"}},
    )
    assert "automobile" in sent[-1]  # found by meaning: no word of the question is in it


class _Recording(DeterministicFakeEmbedding):
    seen: ClassVar[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().embed_documents(texts)


def test_a_message_is_embedded_with_its_speaker_as_the_lexical_index_holds_it() -> None:
    # "What activities does Melanie do?" is about what Melanie said: the speaker is part of what
    # a message means, as the lexical index already has it (`message_index_text`).
    store = open_store("memory://")
    store.append(
        "old",
        [HumanMessage("I took up pottery", name="Melanie"), AIMessage("Nice!"), AIMessage("", name="Bot")],
        client_id="ana",
    )
    model = _Recording(size=8)
    index_vectors(store, model, client_id="ana")
    assert model.seen == ["Melanie: I took up pottery", "Nice!"]  # a name alone is nothing to embed


def test_the_recall_block_holds_the_dense_hit_end_to_end() -> None:
    store = open_store("memory://")
    store.append("old", [HumanMessage("I bought a new automobile last week")], client_id="ana")
    recaller = Recaller.build(store, 500, embeddings=_Concepts())
    assert recaller is not None and recaller.dense is not None
    recaller.dense.index(client_id="ana")
    assert "automobile" in recaller.recall("which vehicle was it?", client_id="ana", session_id="new").text


async def test_async_recall_uses_the_async_embedding_call() -> None:
    store = open_store("memory://")
    store.append("old", [HumanMessage("I bought a new automobile last week")], client_id="ana")
    recaller = Recaller.build(store, 500, embeddings=_Concepts())
    assert recaller is not None and recaller.dense is not None
    await recaller.dense.aindex(client_id="ana")
    found = await recaller.arecall("which vehicle was it?", client_id="ana", session_id="new")
    assert "automobile" in found.text


def test_embeddings_and_a_retriever_are_refused_together() -> None:
    from langchain_core.retrievers import BaseRetriever

    class Nothing(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: object) -> list:  # type: ignore[override]
            return []

    with pytest.raises(ConfigurationError):
        Recaller.build(open_store("memory://"), 500, Nothing(), embeddings=FAKE)
    with pytest.raises(ConfigurationError):
        with_rolling_memory(
            GenericFakeChatModel(messages=iter([])),
            store=open_store("memory://"),
            summarizer=lambda p, m: "s",
            embeddings="text-embedding-3-small",
        )  # type: ignore[arg-type]


def test_a_failing_model_never_fails_the_turn(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(_Concepts):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("quota")

    store = open_store("memory://")
    chat = _chat(store, Broken(), "Noted.")
    ids = {"configurable": {"client_id": "ana", "session_id": "s"}}
    assert chat.invoke([HumanMessage("hello there")], config=ids).content == "Noted."  # type: ignore[attr-defined]
    chat.drain(timeout=30)  # type: ignore[attr-defined]
    assert "quota" in caplog.text
    assert len(store.unembedded(model_name(Broken()), client_id="ana")) == 2  # index_vectors() catches up


FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def _forked_indexer(store: RollingStore, session_id: str) -> None:
    # The store was opened (and used) by the parent before the fork, as gunicorn --preload does.
    stored = index_vectors(store, FAKE, session_id=session_id)
    os._exit(0 if stored == 3 else 1)


@pytest.mark.skipif(FORK is None, reason="this platform has no fork()")
def test_a_forked_child_embeds_through_a_store_opened_before_the_fork(shared_store: RollingStore) -> None:
    assert FORK is not None
    words = ["Casa Azul in Alfama", "a tram to Belem", "pasteis de nata"]
    shared_store.append("zz-forked", [HumanMessage(w) for w in words], client_id="zz-ana")
    assert shared_store.vector_search(FAKE.embed_query("x"), model=MODEL, client_id="zz-ana") == []  # in use
    child = FORK.Process(target=_forked_indexer, args=(shared_store, "zz-forked"))
    child.start()
    child.join(60)
    if child.exitcode is None:  # pragma: no cover - a hung child fails the test, not the run
        child.kill()
        child.join()
    assert child.exitcode == 0
    hits = shared_store.vector_search(FAKE.embed_query("a tram to Belem"), model=MODEL, client_id="zz-ana")
    assert hits[0].text == "a tram to Belem" and len(hits) == 3
    shared_store.forget("zz-ana")


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_the_agent_middleware_embeds_after_its_appends_and_recalls_by_meaning(
    asynchronous: bool,
) -> None:
    from agent_models import ScriptedChatModel
    from langchain.agents import create_agent

    from langchain_rolling_memory import RollingMemoryMiddleware

    store = open_store("memory://")
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(
        store=store, summarizer=lambda p, m: "s", memory_tools=(), recall_tokens=500, embeddings=_Concepts()
    )
    agent = create_agent(model, [], middleware=[memory])

    async def turn(text: str, session: str) -> None:
        value = {"messages": [HumanMessage(text)]}
        config = {"configurable": {"client_id": "ana", "session_id": session}}
        if asynchronous:
            await agent.ainvoke(value, config)  # type: ignore[arg-type]
        else:
            agent.invoke(value, config)  # type: ignore[arg-type]

    await turn("I bought a new automobile last week", "one")
    assert (await memory.adrain(timeout=30)).pending == 0
    assert store.unembedded(model_name(_Concepts()), client_id="ana") == []
    await turn("which vehicle was it?", "two")
    assert "automobile" in "\n".join(str(m.text) for m in model.requests[-1])


def test_a_store_closed_under_a_background_job_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    import threading

    started, release = threading.Event(), threading.Event()

    class Slow(_Concepts):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            started.set()
            release.wait(10)
            return super().embed_documents(texts)

    store = open_store("memory://")
    store.append("s", [HumanMessage("hello there")], client_id="ana")
    dense = DenseRecall(store, Slow())
    assert dense.schedule("s")
    assert started.wait(10)
    store.close()
    release.set()
    from langchain_rolling_memory.runtime.background import jobs_of

    jobs_of(store).flush("vectors s", timeout=10)
    assert "embedding session" not in caplog.text
