"""SQLite's rewind (`AppendBatch.rewind`) against its lazy index: a rewind below or above a
session's `indexed_seq` leaves the index, its statistics and the vectors exactly as if the rows
kept (and those appended after) had been written alone, and an append without rewind runs the
statements it ran before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import index_vectors
from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.engine.dense import model_name
from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore
from langchain_rolling_memory.stores.contract import VectorWrite

FAKE = DeterministicFakeEmbedding(size=16)
MODEL = model_name(FAKE)

KEPT: list[BaseMessage] = [HumanMessage("oscar the cat sleeps"), AIMessage("a cat named oscar, lovely")]
GONE: list[BaseMessage] = [HumanMessage("paris paris colosseum cat cat"), AIMessage("bring a coat to paris")]
NEW: list[BaseMessage] = [HumanMessage("no, it was a dog named rex")]
QUERIES = ("oscar cat", "paris", "dog rex cat", "colosseum coat")


@pytest.fixture
def store() -> Iterator[SQLiteRollingStore]:
    s = SQLiteRollingStore(":memory:")
    yield s
    s.close()


def _raw(store: SQLiteRollingStore, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return store.backend._query(sql.format(p=store.prefix), params)


def _index(store: SQLiteRollingStore, session_id: str) -> tuple[list[tuple[Any, ...]], ...]:
    """The session's row counters and its index entries, as the search reads them."""
    head = _raw(
        store, "SELECT last_seq, indexed_seq, indexed_terms FROM {p}sessions WHERE session_id = ?", session_id
    )
    entries = _raw(
        store,
        "SELECT seq, text, terms, repeats FROM {p}search_docs WHERE session_id = ? AND fact_id IS NULL ORDER BY seq",
        session_id,
    )
    return head, entries


def _scores(
    store: SQLiteRollingStore, query: str, client_id: str
) -> list[tuple[str | None, int | None, float]]:
    return [(h.session_id, h.seq, h.score) for h in store.search(query, client_id=client_id, limit=50)]


def _reference(messages: list[BaseMessage]) -> SQLiteRollingStore:
    """A store that was only ever given `messages`, indexed by a search."""
    ref = SQLiteRollingStore(":memory:")
    ref.append("s1", messages, client_id="alice")
    ref.search("cat", client_id="alice")
    return ref


def _fts_consistent(store: SQLiteRollingStore) -> None:
    # FTS5's own check: the index holds exactly the entries of `search_docs` (its content table).
    _raw(store, "INSERT INTO {p}search ({p}search, rank) VALUES ('integrity-check', 1)")


@pytest.mark.parametrize("indexed", ["all", "kept only", "none"])
def test_a_rewind_leaves_the_index_of_the_rows_kept(store: SQLiteRollingStore, indexed: str) -> None:
    # indexed_seq past the rewind (4), at it (2) or below it (0): each leaves the same index.
    store.append("s1", KEPT, client_id="alice")
    if indexed == "kept only":
        assert store.search("cat", client_id="alice")
    store.append("s1", GONE, client_id="alice")
    if indexed == "all":
        assert [h.seq for h in store.search("paris", client_id="alice")] == [3, 4]
    before = _index(store, "s1")[0][0]
    assert before[0] == 4 and before[1] == {"all": 4, "kept only": 2, "none": 0}[indexed]
    assert store.append("s1", NEW, client_id="alice", rewind=2) == [3]
    head, _ = _index(store, "s1")
    assert head == [(3, {"all": 2, "kept only": 2, "none": 0}[indexed], head[0][2])]
    ref = _reference([*KEPT, *NEW])
    store.search("cat", client_id="alice")  # indexes what is pending, as the reference did
    assert _index(store, "s1") == _index(ref, "s1")
    for query in QUERIES:
        assert _scores(store, query, "alice") == _scores(ref, query, "alice")  # the same floats
    assert store.search("colosseum coat", client_id="alice") == []
    _fts_consistent(store)
    ref.close()


def test_a_rewind_between_the_indexed_and_the_last_seq_keeps_the_indexed_rows(
    store: SQLiteRollingStore,
) -> None:
    store.append("s1", [*KEPT, GONE[0]], client_id="alice")
    assert store.search("cat", client_id="alice")  # indexed_seq = 3
    store.append("s1", [GONE[1]], client_id="alice")  # seq 4, not indexed yet
    assert store.append("s1", NEW, client_id="alice", rewind=3) == [4]
    assert _index(store, "s1")[0] == [(4, 3, _index(store, "s1")[0][0][2])]
    ref = _reference([*KEPT, GONE[0], *NEW])
    store.search("cat", client_id="alice")
    assert _index(store, "s1") == _index(ref, "s1")
    for query in QUERIES:
        assert _scores(store, query, "alice") == _scores(ref, query, "alice")  # the same floats
    assert store.search("coat", client_id="alice") == []
    _fts_consistent(store)
    ref.close()


def test_a_rewind_leaves_other_sessions_and_facts_as_they_were(store: SQLiteRollingStore) -> None:
    store.append("s1", [*KEPT, *GONE], client_id="alice")
    store.append("s2", GONE, client_id="alice")
    store.append("t1", GONE, client_id="bob")
    store.search("cat", client_id="alice")
    others = (_index(store, "s2"), _index(store, "t1"))
    store.append("s1", [], client_id="alice", rewind=1)
    assert (_index(store, "s2"), _index(store, "t1")) == others
    assert [(h.session_id, h.seq) for h in store.search("coat", client_id="alice")] == [("s2", 2)]
    assert [(h.session_id, h.seq) for h in store.search("coat", client_id="bob")] == [("t1", 2)]
    # alice's statistics are those of s1's first row and s2's two.
    ref = SQLiteRollingStore(":memory:")
    ref.append("s1", KEPT[:1], client_id="alice")
    ref.append("s2", GONE, client_id="alice")
    for query in QUERIES:
        assert _scores(store, query, "alice") == _scores(ref, query, "alice")  # the same floats
    ref.close()


def test_a_rewind_withdraws_the_vectors_and_the_seqs_reused_are_unembedded(store: SQLiteRollingStore) -> None:
    store.append("s1", [*KEPT, *GONE], client_id="alice")
    assert index_vectors(store, FAKE, client_id="alice") == 4
    listed_gen = store.read_turn("s1", limit=0).generation
    store.append("s1", NEW, client_id="alice", rewind=2)
    assert _raw(store, "SELECT seq FROM {p}vectors WHERE session_id = 's1' ORDER BY seq") == [(1,), (2,)]
    gone = FAKE.embed_query("bring a coat to paris")
    assert [h.seq for h in store.vector_search(gone, model=MODEL, client_id="alice")] == [1, 2]
    pending = store.unembedded(MODEL, client_id="alice")
    assert [(u.seq, u.generation != listed_gen) for u in pending] == [(3, True)]
    # A vector computed for a withdrawn row (listed under the old generation) never lands on
    # the row that reused its seq.
    assert store.put_vectors(MODEL, [VectorWrite("s1", 3, str(listed_gen), pack(gone))]) == 0
    assert index_vectors(store, FAKE, client_id="alice") == 1
    hits = store.vector_search(FAKE.embed_query(str(NEW[0].content)), model=MODEL, client_id="alice")
    assert (hits[0].seq, hits[0].text) == (3, NEW[0].content)


def test_a_withdrawal_alone_creates_or_claims_the_session_as_an_append(store: SQLiteRollingStore) -> None:
    assert store.append("s1", [], client_id="alice", rewind=0) == []
    info = store.session_info("s1")
    assert info is not None and info.client_id == "alice"
    store.append("s2", GONE)  # anonymous
    store.search("paris", session_id="s2")
    assert store.append("s2", [], client_id="bob", rewind=1) == []
    assert store.sessions("bob") == ["s2"]
    assert [h.seq for h in store.search("paris", client_id="bob")] == [1]
    assert _index(store, "s2")[0][0][:2] == (1, 1)


def _statements(store: SQLiteRollingStore, call: Any) -> list[str]:
    """What `call` runs on the store's connection, each statement's first words (an upsert is
    traced twice in a row: counted once)."""
    seen: list[str] = []
    conn = store.backend._db()
    conn.set_trace_callback(seen.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    words = [" ".join(s.split()[:4]) for s in seen]
    return [w for i, w in enumerate(words) if i == 0 or words[i - 1] != w]


def test_an_append_without_rewind_runs_no_more_statements(store: SQLiteRollingStore) -> None:
    store.append("s1", KEPT, client_id="alice")
    plain = _statements(store, lambda: store.append("s1", NEW, client_id="alice"))
    p = store.prefix
    assert plain == [  # what an append ran before rewinds existed
        "BEGIN IMMEDIATE",
        "SELECT client_id, last_seq FROM",
        f"INSERT INTO {p}sessions (session_id,",
        f"INSERT INTO {p}messages (session_id,",
        "COMMIT",
    ]
    rewound = _statements(store, lambda: store.append("s1", NEW, client_id="alice", rewind=1))
    assert f"DELETE FROM {p}messages WHERE" in rewound


_SESSIONS = {"c1": ["c1-a", "c1-b"], "c2": ["c2-a"]}
_text = st.lists(
    st.sampled_from(["cat", "Oscar", "Lisbon", "June", "train", "peanuts"]), min_size=1, max_size=5
)
_op = st.one_of(
    st.tuples(
        st.just("append"),
        st.sampled_from(sorted(_SESSIONS)),
        st.integers(0, 1),
        st.lists(_text.map(" ".join), max_size=3),
        st.none() | st.integers(0, 6),
    ),
    st.tuples(st.just("summary"), st.sampled_from(sorted(_SESSIONS)), st.integers(0, 1), st.integers(1, 4)),
    st.tuples(st.just("search"), st.sampled_from(sorted(_SESSIONS)), _text.map(" ".join)),
)


def _apply(store: RollingStore, op: tuple[Any, ...]) -> object:
    if op[0] == "append":
        _, client, i, texts, rewind = op
        sid = _SESSIONS[client][i % len(_SESSIONS[client])]
        if not texts and rewind is None:
            return None
        return store.append(sid, [HumanMessage(t) for t in texts], client_id=client, rewind=rewind)
    if op[0] == "summary":
        _, client, i, covered = op
        sid = _SESSIONS[client][i % len(_SESSIONS[client])]
        summary = store.summary(sid)
        if covered > store.last_seq(sid) or (summary is not None and covered <= summary.covered_seq):
            return None
        version = summary.version if summary is not None else 0
        return store.install_summary(sid, "so far", covered_seq=covered, expected_version=version)
    _, client, query = op
    hits = store.search(query, client_id=client, limit=50)
    return sorted((h.session_id, h.seq, round(h.score, 9)) for h in hits)


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, max_size=25))
def test_sqlite_rewinds_as_the_in_memory_reference(ops: list[tuple[Any, ...]]) -> None:
    # Whatever was indexed when a rewind comes, SQLite finds what the reference backend finds,
    # with the same scores, and holds the same rows.
    mine, ref = SQLiteRollingStore(":memory:"), InMemoryRollingStore()
    try:
        everything = " ".join(["cat", "Oscar", "Lisbon", "June", "train", "peanuts"])
        for op in [*ops, ("search", "c1", everything), ("search", "c2", everything)]:
            assert _apply(mine, op) == _apply(ref, op), op
        for sessions in _SESSIONS.values():
            for sid in sessions:
                assert [(r.seq, r.message.content) for r in mine.read(sid)] == [
                    (r.seq, r.message.content) for r in ref.read(sid)
                ]
    finally:
        mine.close()
        ref.close()
