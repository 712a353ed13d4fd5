"""SQLite ranks as the in-memory reference does (issue 20, defect 5): BM25 with the statistics
of the search's owner only, so the same writes give the same hits, scores and order on both,
whatever other clients write; a file written before schema 4 is migrated to the same ranking."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from test_memory_lazy_index import _SESSIONS, _WORDS, _apply, _body, _op
from test_sqlite_lazy_index import to_schema_3

from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore

_anonymous = st.tuples(st.just("anonymous"), st.sampled_from(["anon-a", "anon-b"]), st.sampled_from(_WORDS))
_claim = st.tuples(st.just("claim"), st.sampled_from(["c1", "c2"]), st.sampled_from(["anon-a", "anon-b"]))


def _run(store: RollingStore, op: tuple[object, ...]) -> object:
    """`_apply`, with a session searched with its client (a session alone: only an anonymous
    one), and anonymous sessions written to, searched and claimed."""
    if op[0] == "search":
        _, client, query, whole = op
        where = {"client_id": str(client)}
        if not whole:
            where["session_id"] = _SESSIONS[str(client)][0]
        return _hits(store, str(query), where)
    if op[0] == "anonymous":
        _, session, word = op
        info = store.session_info(str(session))
        if info is not None and info.client_id is not None:
            return None  # claimed: an anonymous append would be refused
        store.append(str(session), [HumanMessage(f"{word} {word} said nobody")])
        return _hits(store, " ".join(_WORDS), {"session_id": str(session)})
    if op[0] == "claim":
        _, client, session = op
        info = store.session_info(str(session))
        if info is not None and info.client_id is not None:
            return None  # already claimed: the append would be refused
        return store.append(str(session), [AIMessage("cat claimed")], client_id=str(client))
    return _apply(store, op)  # type: ignore[arg-type]


def _hits(store: RollingStore, query: str, where: dict[str, str]) -> list[tuple[object, ...]]:
    hits = store.search(query, limit=50, **where)  # type: ignore[arg-type]
    return [(h.kind, h.session_id, h.seq, _body(h), h.score) for h in hits]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(_op, _anonymous, _claim), max_size=40))
def test_sqlite_finds_and_scores_what_the_in_memory_reference_does(ops: list[tuple[object, ...]]) -> None:
    reference, sqlite = InMemoryRollingStore(), SQLiteRollingStore(":memory:")
    final = [("search", c, " ".join(_WORDS), whole) for c in ("c1", "c2") for whole in (True, False)]
    try:
        for op in [*ops, *final]:
            assert _run(sqlite, op) == _run(reference, op), op
    finally:
        sqlite.close()
        reference.close()


def _write(store: RollingStore) -> None:
    store.append(
        "s1", [HumanMessage("We adopted a cat named Oscar"), AIMessage("Oscar, the cat!")], client_id="ana"
    )
    store.append("s2", [HumanMessage("The train to Lisbon, cat in a basket")], client_id="ana")
    store.append("s3", [HumanMessage("Oscar Wilde, cat, cat, cat")], client_id="bob")
    store.append("anon", [HumanMessage("A cat with no owner yet")])
    store.add_fact("ana", "Ana's cat is Oscar")


def test_a_schema_3_file_is_migrated_to_rank_as_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = SQLiteRollingStore(path)
    _write(store)
    store.search("cat", client_id="ana")  # indexed at schema 3's last search
    store.close()
    with closing(sqlite3.connect(path)) as conn, conn:
        to_schema_3(conn, "lrm_")
    again, reference = SQLiteRollingStore(path), InMemoryRollingStore()
    _write(reference)
    try:
        for where in ({"client_id": "ana"}, {"client_id": "bob"}, {"session_id": "anon"}):
            assert _hits(again, "oscar cat lisbon", where) == _hits(reference, "oscar cat lisbon", where)
        generations = again.backend._query("SELECT generation FROM lrm_sessions ORDER BY session_id")
        assert generations == [("",)] * 4  # rows written before: '' until erased
        again.append("anon", [HumanMessage("claimed")], client_id="bob")  # the trigger moves its entries
        reference.append("anon", [HumanMessage("claimed")], client_id="bob")
        assert _hits(again, "cat owner", {"client_id": "bob"}) == _hits(
            reference, "cat owner", {"client_id": "bob"}
        )
        assert again.search("cat", session_id="anon") == []
    finally:
        again.close()
        reference.close()


def test_a_word_nobody_wrote_changes_no_score() -> None:
    """The statement leaves out the terms no entry holds (each adds 0.0): same hits, same floats."""
    reference, sqlite = InMemoryRollingStore(), SQLiteRollingStore(":memory:")
    for store in (reference, sqlite):
        store.append("s1", [HumanMessage("cat cat garden"), AIMessage("the cat sleeps")], client_id="c1")
        store.append("s2", [HumanMessage("garden party")], client_id="c2")
    for query in ("cat zebra", "zebra cat", "zebra garden unicorn cat", "zebra"):
        assert _hits(sqlite, query, {"client_id": "c1"}) == _hits(reference, query, {"client_id": "c1"})
    assert _hits(sqlite, "zebra cat", {"client_id": "c1"}) == _hits(sqlite, "cat", {"client_id": "c1"})
