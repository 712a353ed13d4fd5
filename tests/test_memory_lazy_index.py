"""The in-memory store indexes at the first search after writes, not at each append: a search
still finds exactly what indexing at every write found, after appends, fact changes, clears,
forgets and purges."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.memory import InMemoryRollingStore
from langchain_rolling_memory.stores.memory.store import MemoryBackend

_WORDS = ["cat", "Oscar", "Lisbon", "June", "painting", "sister", "train", "peanuts"]
_CLIENTS = ["c1", "c2"]
_SESSIONS = {"c1": ["c1-a", "c1-b"], "c2": ["c2-a"]}


class _EagerBackend(MemoryBackend):
    """The reference: the same backend, its index caught up after every write."""

    def append(self, batch):  # type: ignore[no-untyped-def]
        seqs = super().append(batch)
        self._catch_up()
        return seqs

    def _put_fact(self, fact):  # type: ignore[no-untyped-def]
        super()._put_fact(fact)
        self._catch_up()


_text = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6).map(" ".join)
_op = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(_CLIENTS), st.integers(0, 1), _text, st.booleans()),
    st.tuples(st.just("fact"), st.sampled_from(_CLIENTS), st.sampled_from([None, "team", "home"]), _text),
    st.tuples(st.just("delete_fact"), st.sampled_from(_CLIENTS), st.integers(0, 3)),
    st.tuples(st.just("update_fact"), st.sampled_from(_CLIENTS), st.integers(0, 3), _text),
    st.tuples(st.just("clear"), st.sampled_from(_CLIENTS), st.integers(0, 1)),
    st.tuples(st.just("forget"), st.sampled_from(_CLIENTS)),
    st.tuples(
        st.just("purge"),
    ),
    st.tuples(st.just("search"), st.sampled_from(_CLIENTS), _text, st.booleans()),
)


def _body(hit: SearchHit) -> str:
    return hit.fact.text if hit.fact is not None else str(hit.message.text if hit.message else "")


def _apply(store: RollingStore, op: tuple[object, ...]) -> object:
    kind = op[0]
    if kind == "append":
        _, client, i, text, ai = op
        sessions = _SESSIONS[str(client)]
        message = AIMessage(str(text)) if ai else HumanMessage(str(text))
        return store.append(sessions[int(str(i)) % len(sessions)], [message], client_id=str(client))
    if kind == "fact":
        _, client, key, text = op
        fact = store.add_fact(str(client), str(text), key=key if key is None else str(key))
        return fact.text if fact else None  # ids are random: compared by text
    if kind == "delete_fact":
        _, client, i = op
        facts = sorted(store.facts(str(client)), key=lambda f: f.text)
        return store.delete_fact(str(client), facts[int(str(i)) % len(facts)].id) if facts else None
    if kind == "update_fact":
        _, client, i, text = op
        facts = sorted(store.facts(str(client)), key=lambda f: f.text)
        if not facts:
            return None
        fact = store.update_fact(str(client), facts[int(str(i)) % len(facts)].id, str(text))
        return fact.text if fact else None
    if kind == "clear":
        _, client, i = op
        sessions = _SESSIONS[str(client)]
        return store.clear_session(sessions[int(str(i)) % len(sessions)])
    if kind == "forget":
        return store.forget(str(op[1]))
    if kind == "purge":
        return store.purge(older_than=0.0)  # nothing is that old: the index must not change
    _, client, query, whole = op
    scope = {"client_id": str(client)} if whole else {"session_id": _SESSIONS[str(client)][0]}
    hits = store.search(str(query), limit=50, **scope)  # type: ignore[arg-type]
    return [(h.kind, h.session_id, h.seq, _body(h), round(h.score, 9)) for h in hits]


@settings(max_examples=120, deadline=None)
@given(st.lists(_op, max_size=40))
def test_a_lazy_index_finds_what_indexing_at_each_write_found(ops: list[tuple[object, ...]]) -> None:
    lazy, eager = InMemoryRollingStore(), RollingStore(_EagerBackend())
    for op in [*ops, ("search", "c1", " ".join(_WORDS), True), ("search", "c2", " ".join(_WORDS), True)]:
        assert _apply(lazy, op) == _apply(eager, op), op


def _memory(store: RollingStore) -> MemoryBackend:
    backend = store.backend
    assert isinstance(backend, MemoryBackend)
    return backend


def _indexed(store: RollingStore) -> int:
    """Entries in the store's per-owner indexes."""
    return sum(len(index) for index in _memory(store)._indexes.values())


def test_an_append_indexes_nothing_until_a_search() -> None:
    store = InMemoryRollingStore()
    store.append("s1", [HumanMessage("We adopted a cat named Oscar")], client_id="c1")
    assert _indexed(store) == 0
    assert [h.seq for h in store.search("cat", client_id="c1")] == [1]
    assert _indexed(store) == 1


def test_nothing_is_found_after_a_clear_or_a_forget_even_before_any_search() -> None:
    store = InMemoryRollingStore()
    store.append("s1", [HumanMessage("Oscar the cat")], client_id="c1")
    store.append("s2", [HumanMessage("Oscar the cat again")], client_id="c1")
    store.add_fact("c1", "Oscar is a cat")
    store.clear_session("s1")
    assert {(h.session_id, h.kind) for h in store.search("oscar", client_id="c1")} == {
        ("s2", "message"),
        (None, "fact"),
    }
    store.append("s3", [HumanMessage("Oscar once more")], client_id="c1")
    store.forget("c1")
    assert store.search("oscar", client_id="c1") == []
    assert _indexed(store) == 0 and not _memory(store)._pending


def test_a_fact_rewritten_after_a_search_then_deleted_is_not_found() -> None:
    store = InMemoryRollingStore()
    fact = store.add_fact("c1", "Oscar is a cat")
    assert fact is not None and store.search("oscar", client_id="c1")  # indexed
    store.update_fact("c1", fact.id, "Oscar is a dog")  # pending, the old text still indexed
    store.delete_fact("c1", fact.id)
    assert store.search("oscar", client_id="c1") == []
