"""Redis search reads only the query terms' postings, written with the messages (issue 23).

A search's work is bounded by its terms, not by the client's text: the scripts it runs read
back the same few bytes whatever else the client stored (a huge message of other words
included). The ranking is the one `Bm25Index(stem=True)` gives over the scope's messages and
facts (checked on random corpora); a session indexed before the terms existed (or appended to
by an older release) is indexed at its first search; erasing and expiry take the terms along.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from conftest import _probe, unique_prefix
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import REDIS_URL

from langchain_rolling_memory.core.lexical_search import (
    Bm25Index,
    bm25_scores,
    bm25_terms,
    index_text,
    message_index_text,
    query_terms,
)
from langchain_rolling_memory.core.records import Fact
from langchain_rolling_memory.core.serde import dumps_message
from langchain_rolling_memory.stores.redis import RedisRollingStore
from langchain_rolling_memory.stores.redis.scripts import encode_row, idx_entry
from langchain_rolling_memory.stores.redis.search import Found, Ranked, bm25_weight, rank
from langchain_rolling_memory.stores.redis.sync import SyncRedis


@pytest.fixture
def store() -> Iterator[RedisRollingStore]:
    _probe("redis")
    prefix = unique_prefix()
    opened = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    yield opened
    opened.close()
    _wipe(prefix)


def _wipe(prefix: str) -> None:
    with redis.Redis.from_url(REDIS_URL) as r:
        keys = list(r.scan_iter(match=prefix + "*", count=1000))
        if keys:
            r.delete(*keys)


@contextmanager
def _expiring_store() -> Iterator[RedisRollingStore]:
    """A Redis store whose sessions expire after 60 s, under a prefix of its own, wiped after."""
    _probe("redis")
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    store = RedisRollingStore(REDIS_URL, key_prefix=prefix, ttl=60)
    try:
        yield store
    finally:
        store.close()
        _wipe(prefix)


def _replies(store: RedisRollingStore) -> list[Any]:
    """Every reply of the scripts the store's searches run, recorded as they come."""
    backend = store.backend
    assert isinstance(backend, SyncRedis)
    seen: list[Any] = []
    real = backend._run

    def recording(op: str, name: str, keys: list[str], args: list[Any]) -> Any:
        reply = real(op, name, keys, args)
        if op == "search":
            seen.append(reply)
        return reply

    backend._run = recording  # type: ignore[method-assign]
    return seen


def _size(reply: Any) -> int:
    if isinstance(reply, list | tuple):
        return sum(_size(item) for item in reply)
    return len(str(reply))


class TestBoundedWork:
    def test_a_search_reads_the_same_bytes_whatever_else_the_client_stored(
        self, store: RedisRollingStore
    ) -> None:
        store.append("s1", [HumanMessage("My cat Oscar sleeps all day")], client_id="alice")
        replies = _replies(store)
        assert [h.seq for h in store.search("cat", client_id="alice")] == [1]
        small = sum(_size(r) for r in replies)
        # ~30,000 distinct words (the whole indexed head of the message), none of them "cat";
        # and a thousand short messages of other words.
        huge = " ".join(f"w{i}x" for i in range(60_000))
        store.append("s1", [AIMessage(huge)], client_id="alice")
        store.append(
            "s2", [HumanMessage(f"the train number {i} was late") for i in range(1000)], client_id="alice"
        )
        replies.clear()
        assert [h.seq for h in store.search("cat", client_id="alice")] == [1]
        assert sum(_size(r) for r in replies) <= small + 100

    def test_a_session_scoped_search_reads_no_other_session(self, store: RedisRollingStore) -> None:
        store.append("s1", [HumanMessage("the cat")], client_id="alice")
        replies = _replies(store)
        store.search("cat", client_id="alice", session_id="s1")
        small = sum(_size(r) for r in replies)
        store.append("s2", [HumanMessage(f"cat number {i}") for i in range(500)], client_id="alice")
        replies.clear()
        assert [h.key for h in store.search("cat", client_id="alice", session_id="s1")] == [
            ("message", "s1", 1)
        ]
        assert sum(_size(r) for r in replies) == small

    def test_an_append_copies_a_few_kb_of_a_term_in_every_message_however_many_there_are(
        self, store: RedisRollingStore
    ) -> None:
        """A term in every message (a speaker's name) grows its postings at each append: its
        newest run is sealed past a few KB, so an append never copies the whole list, and a
        search still reads every run, in order (the ranking of reference)."""
        texts = [f"oscar ate meal {i}" for i in range(1600)]
        for at in range(0, len(texts), 2):
            store.append("s1", [HumanMessage(text) for text in texts[at : at + 2]], client_id="alice")
        with redis.Redis.from_url(REDIS_URL) as r:
            terms = r.hgetall(f"{store.prefix}s:{{s1}}:terms")
        sealed = int(terms[b"#b oscar"])
        assert sealed >= 2
        assert len(terms[b"oscar"]) < 4096 + 100
        assert all(len(terms[f"oscar {k}".encode()]) < 4096 + 100 for k in range(1, sealed + 1))
        found = store.search("oscar meal 7", client_id="alice", limit=50)
        expected = _reference({"s1": texts}, [], "oscar meal 7", 50)
        assert [(h.key, round(h.score, 9)) for h in found] == [
            (key, round(score, 9)) for key, score in expected
        ]


# ------------------------------------------------------------------ the ranking of reference

_WORDS = ["cat", "cats", "train", "paris", "painting", "paint", "oscar", "the", "a", "2", "élève", "eleve"]
_TEXT = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=8).map(" ".join)
_SESSIONS = st.lists(
    st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.lists(_TEXT, min_size=1, max_size=4)),
    min_size=1,
    max_size=5,
)


def _reference(
    sessions: dict[str, list[str]], facts: list[tuple[str, str]], query: str, limit: int
) -> list[tuple[tuple[Any, ...], float]]:
    """What the search returned before the terms were indexed: `Bm25Index(stem=True)` over the
    scope's messages (sessions by id, then seq) and facts (oldest first), added in that order."""
    index = Bm25Index(stem=True)
    for sid in sorted(sessions):
        for seq, text in enumerate(sessions[sid], 1):
            index.add(("message", sid, seq), message_index_text(HumanMessage(text)))
    for fact_id, text in facts:
        index.add(("fact", None, fact_id), index_text(text))
    return [(doc, score) for doc, score in index.search(query_terms(query), limit=limit)]  # type: ignore[misc]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=_SESSIONS,
    facts=st.lists(_TEXT.filter(str.strip), max_size=3),
    query=_TEXT,
    limit=st.integers(1, 12),
    scope=st.sampled_from(["client", "s1"]),
    erased=st.sampled_from([None, "s2"]),
)
def test_the_ranking_is_bm25_over_the_scope_as_before(
    batches: list[tuple[str, list[str]]],
    facts: list[str],
    query: str,
    limit: int,
    scope: str,
    erased: str | None,
) -> None:
    _probe("redis")
    prefix = unique_prefix()
    store = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    try:
        sessions: dict[str, list[str]] = {}
        for sid, texts in batches:
            store.append(sid, [HumanMessage(t) for t in texts], client_id="alice")
            sessions.setdefault(sid, []).extend(texts)
        store.append("other", [HumanMessage("cat cat paris train")], client_id="bob")
        kept = [(store.add_fact("alice", text).id, text) for text in dict.fromkeys(facts)]
        if erased in sessions:
            store.clear_session(erased)
            del sessions[erased]
        if scope != "client":
            sessions = {sid: texts for sid, texts in sessions.items() if sid == scope}
        where = {"client_id": "alice"} if scope == "client" else {"client_id": "alice", "session_id": scope}
        hits = store.search(query, limit=limit, **where)  # type: ignore[arg-type]
        expected = _reference(sessions, kept, query, limit)
        assert [h.key for h in hits] == [doc for doc, _ in expected]
        for hit, (_, score) in zip(hits, expected, strict=True):
            assert math.isclose(hit.score, score, rel_tol=1e-12)
    finally:
        store.close()
        _wipe(prefix)


# ------------------------------------------------------------------ data written before


def _older_release_append(store: RedisRollingStore, sid: str, texts: list[str]) -> None:
    """Messages appended the way schema 5 did: message and search entry, no terms."""
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        messages = [HumanMessage(t) for t in texts]
        r.rpush(store.keys.msgs(sid), *[encode_row(dumps_message(m), 3) for m in messages])
        r.rpush(store.keys.idx(sid), *[idx_entry(100.0, message_index_text(m)) for m in messages])


class TestWrittenBefore:
    def test_a_session_without_terms_is_indexed_at_its_first_search(self, store: RedisRollingStore) -> None:
        store.append(
            "s1", [HumanMessage("We booked the Paris trip"), AIMessage("Paris in May!")], client_id="alice"
        )
        store.append("s2", [HumanMessage("the cat")], client_id="alice")
        expected = store.search("paris cat", client_id="alice")
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            r.delete(store.keys.terms("s1"), store.keys.terms("s2"))
            assert store.search("paris cat", client_id="alice") == expected
            assert r.exists(store.keys.terms("s1"), store.keys.terms("s2")) == 2

    def test_messages_an_older_release_appended_are_found(self, store: RedisRollingStore) -> None:
        store.append("s1", [HumanMessage("the cat")], client_id="alice")
        _older_release_append(store, "s1", ["my cat Oscar", "a train"])
        assert {h.seq for h in store.search("cat", client_id="alice")} == {1, 2}
        store.append("s1", [HumanMessage("Oscar the cat again")], client_id="alice")
        assert {h.seq for h in store.search("oscar", client_id="alice")} == {2, 4}

    def test_terms_of_an_erased_session_left_by_an_older_release_are_never_counted(
        self, store: RedisRollingStore
    ) -> None:
        store.append("s1", [HumanMessage("secret cat words")], client_id="alice")
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            stale = r.hgetall(store.keys.terms("s1"))
            store.clear_session("s1")
            store.append("s1", [HumanMessage("a train")], client_id="bob")
            # What an older release's erase and re-creation would leave: the old terms hash.
            r.delete(store.keys.terms("s1"))
            r.hset(store.keys.terms("s1"), mapping=stale)
        assert store.search("secret cat", client_id="bob") == []
        assert [h.seq for h in store.search("train", client_id="bob")] == [1]


class TestErasure:
    @pytest.mark.parametrize("how", ["clear", "forget", "purge"])
    def test_an_erase_takes_the_terms_along(self, store: RedisRollingStore, how: str) -> None:
        store.append("s1", [HumanMessage("the cat")], client_id="alice")
        with redis.Redis.from_url(REDIS_URL) as r:
            assert r.exists(store.keys.terms("s1"))
            if how == "clear":
                store.clear_session("s1")
            elif how == "forget":
                store.forget("alice")
            else:
                store.purge(older_than=0)
            assert not r.exists(store.keys.terms("s1"))

    def test_the_terms_expire_with_their_session(self) -> None:
        with _expiring_store() as store:
            store.append("s1", [HumanMessage("the cat")], client_id="alice")
            with redis.Redis.from_url(REDIS_URL) as r:
                assert 0 < r.pttl(store.keys.terms("s1")) <= r.pttl(store.keys.info("s1")) + 5
                r.delete(store.keys.terms("s1"))
                store.search("cat", client_id="alice")  # indexed again: with the session's expiry
                assert 0 < r.pttl(store.keys.terms("s1")) <= 60_000


async def test_the_async_search_indexes_and_ranks_as_the_sync_one(store: RedisRollingStore) -> None:
    store.append(
        "s1", [HumanMessage("We booked the Paris trip"), AIMessage("Paris in May!")], client_id="alice"
    )
    store.add_fact("alice", "Alice loves Paris")
    expected = store.search("paris trip", client_id="alice")
    with redis.Redis.from_url(REDIS_URL) as r:
        r.delete(store.keys.terms("s1"))
    assert await store.asearch("paris trip", client_id="alice") == expected
    await store.aclose()


# ------------------------------------------------------------------ the client's statistics


def _statistics(store: RedisRollingStore, client: str) -> dict[str, str]:
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        return r.hgetall(store.keys.client_terms(client))


class TestClientStatistics:
    """A client's search reads its statistics and the sessions its terms' lists name: the
    work does not grow with its other sessions, the ranking is the one over all of them."""

    def test_a_search_reads_no_session_without_its_terms(self, store: RedisRollingStore) -> None:
        store.append("s1", [HumanMessage("My cat Oscar sleeps all day")], client_id="alice")
        replies = _replies(store)
        store.search("cat", client_id="alice")
        small = sum(_size(r) for r in replies)
        for i in range(200):
            store.append(f"t{i}", [HumanMessage(f"the train number {i} was late")], client_id="alice")
        replies.clear()
        found = store.search("cat", client_id="alice")
        assert [h.key for h in found] == [("message", "s1", 1)]
        assert sum(_size(r) for r in replies) <= small + 10  # the totals' digits
        sessions = {"s1": ["My cat Oscar sleeps all day"]}
        sessions.update({f"t{i}": [f"the train number {i} was late"] for i in range(200)})
        (_, score), *_ = _reference(sessions, [], "cat", 10)
        assert math.isclose(found[0].score, score, rel_tol=1e-12)

    def test_an_append_copies_a_few_kb_of_a_term_in_every_session_however_many_there_are(
        self, store: RedisRollingStore
    ) -> None:
        sids = [f"a-long-session-name-{i:04d}" for i in range(400)]
        for sid in sids:
            store.append(sid, [HumanMessage(f"oscar ate meal {sid[-4:]}")], client_id="alice")
        built = _statistics(store, "alice")
        sealed = int(built["#b oscar"])
        assert sealed >= 2
        assert all(len(built[f"oscar {k}"]) < 4096 + 100 for k in range(1, sealed + 1))
        assert len(built["oscar"]) < 4096 + 100
        store.clear_session(sids[0])
        found = store.search("oscar meal 0007", client_id="alice", limit=50)
        sessions = {sid: [f"oscar ate meal {sid[-4:]}"] for sid in sids[1:]}
        expected = _reference(sessions, [], "oscar meal 0007", 50)
        assert [(h.key, round(h.score, 9)) for h in found] == [
            (key, round(score, 9)) for key, score in expected
        ]
        # The erase took the session out of the list, and left the others in it.
        rewritten = _statistics(store, "alice")
        runs = [rewritten[f"oscar {k}"] for k in range(1, int(rewritten["#b oscar"]) + 1)]
        assert sorted("".join([*runs, rewritten["oscar"]]).split()) == sorted(sids[1:])

    def test_statistics_written_before_are_built_at_the_first_search(self, store: RedisRollingStore) -> None:
        store.append("s1", [HumanMessage("We booked the Paris trip")], client_id="alice")
        store.append("s2", [HumanMessage("the cat"), AIMessage("a cat in Paris")], client_id="alice")
        expected = store.search("paris cat", client_id="alice")
        built = _statistics(store, "alice")
        assert built["#v"] == "1" and built["#docs"] == "3" and built["#members"] == "2"
        with redis.Redis.from_url(REDIS_URL) as r:
            r.delete(store.keys.client_terms("alice"))  # what the previous release left
        assert store.search("paris cat", client_id="alice") == expected
        # A term's session list is a set written in the order the rebuild visits the sessions.
        assert _as_sets(_statistics(store, "alice")) == _as_sets(built)
        assert store.search("paris cat", client_id="alice") == expected

    def test_an_expiring_client_keeps_none(self) -> None:
        with _expiring_store() as store:
            store.append("s1", [HumanMessage("the cat")], client_id="alice")
            store.append("s2", [HumanMessage("a train")], client_id="alice")
            assert [h.seq for h in store.search("cat", client_id="alice")] == [1]
            assert _statistics(store, "alice") == {"#ttl": "1"}
            with redis.Redis.from_url(REDIS_URL) as r:
                assert 0 < r.pttl(store.keys.client_terms("alice")) <= 60_000


def _as_sets(stats: dict[str, str]) -> dict[str, Any]:
    """A client's statistics with each term's session list read as a set."""
    return {k: v if k.startswith(("#", "@")) else frozenset(v.split()) for k, v in stats.items()}


_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(["alice", "bob", None]),
            st.sampled_from(["s1", "s2", "s3"]),
            _TEXT,
        ),
        st.tuples(st.just("clear"), st.sampled_from(["s1", "s2", "s3"])),
        st.tuples(st.just("forget"), st.sampled_from(["alice", "bob"])),
        st.tuples(st.just("search"), st.sampled_from(["alice", "bob"]), _TEXT),
        st.tuples(st.just("lose"), st.sampled_from(["alice", "bob"])),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=100, deadline=None)
@given(ops=_OPS)
@example(ops=[("append", "alice", "s1", "cat"), ("append", "alice", "s2", "paris train"), ("clear", "s2")])
@example(
    ops=[("append", None, "s1", "cat"), ("append", "alice", "s2", "cat"), ("append", "alice", "s1", "a")]
)
def test_the_statistics_count_only_what_the_client_owns_now(ops: list[tuple[str, ...]]) -> None:
    """Appends, erases, sessions re-claimed by the other client after an erase, sessions of
    nobody's taken by a client, `forget`, and statistics lost (as the previous release leaves
    them): every search ranks as `Bm25Index(stem=True)` over what the client owns at that
    instant, and nothing else."""
    _probe("redis")
    prefix = unique_prefix()
    store = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    owners: dict[str, str | None] = {}
    texts: dict[str, list[str]] = {}
    try:
        for op in ops:
            if op[0] == "append":
                _, client, sid, text = op
                if owners.get(sid) not in (None, client):
                    continue  # another's: refused (a session of nobody's is anyone's to take)
                store.append(sid, [HumanMessage(text)], client_id=client)
                owners[sid] = client
                texts.setdefault(sid, []).append(text)
            elif op[0] == "clear" and op[1] in texts:
                store.clear_session(op[1])
                owners.pop(op[1], None)
                texts.pop(op[1], None)
            elif op[0] == "forget":
                store.forget(op[1])
                for sid in [s for s, c in owners.items() if c == op[1]]:
                    del owners[sid], texts[sid]
            elif op[0] == "lose":
                with redis.Redis.from_url(REDIS_URL) as r:
                    r.delete(store.keys.client_terms(op[1]))
            for client in ("alice", "bob"):
                # Exact or absent: each term's list names only sessions the client owns, and
                # none is empty (no word of an erased session is left behind).
                statistics = _statistics(store, client)
                for field, value in statistics.items():
                    if not field.startswith(("#", "@")):
                        assert value.split(), field
                        assert all(owners.get(sid) == client for sid in value.split()), field
                query = op[2] if op[0] == "search" else "cat train paris"
                hits = store.search(query, client_id=client, limit=20)
                mine = {sid: t for sid, t in texts.items() if owners.get(sid) == client}
                expected = _reference(mine, [], query, 20)
                assert [h.key for h in hits] == [doc for doc, _ in expected]
                for hit, (_, score) in zip(hits, expected, strict=True):
                    assert math.isclose(hit.score, score, rel_tol=1e-12)
    finally:
        store.close()
        _wipe(prefix)


# ------------------------------------------------------------------ ranking in Python


def _bm25_scores_rank(terms: list[str], found: Found, limit: int) -> list[Ranked]:
    """`rank` as it was written before its weights were computed once per (tf, length): the
    postings as `bm25_scores`' mappings, every candidate ordered by score then the ties' keys."""
    postings: list[dict[Any, int]] = [{} for _ in terms]
    lengths: dict[Any, int] = {}
    n = total = 0
    for sid, _, docs, length, lists in found.sessions:
        n, total = n + docs, total + length
        for term_docs, raw in zip(postings, lists, strict=True):
            numbers = iter(raw.replace(":", " ").split())
            for seq, tf, doc_length in zip(numbers, numbers, numbers, strict=True):
                term_docs[(sid, int(seq))] = int(tf)
                lengths[(sid, int(seq))] = int(doc_length)
    if found.totals is not None:
        n, total = found.totals
    by_id = {}
    for position, fact in enumerate(found.facts):
        words = bm25_terms(index_text(fact.text).split(), stem=True)
        n, total = n + 1, total + len(words)
        lengths[fact.id] = len(words)
        by_id[fact.id] = (position, fact)
        for term, term_docs in zip(terms, postings, strict=True):
            if term in words:
                term_docs[fact.id] = words.count(term)
    scores = bm25_scores(postings, lengths.__getitem__, n, total)

    def order(item: tuple[Any, float]) -> tuple[float, int, str, int]:
        doc = item[0]
        if isinstance(doc, tuple):
            return (-item[1], 0, doc[0], doc[1])
        return (-item[1], 1, "", by_id[doc][0])

    return [
        (score, doc[0], doc[1], None) if isinstance(doc, tuple) else (score, None, None, by_id[doc][1])
        for doc, score in sorted(scores.items(), key=order)[:limit]
    ]


_WORDS = st.sampled_from(["cat", "cats", "paris", "train", "oscar", "garden", "lyon"])


@settings(max_examples=300, deadline=None)
@given(
    sessions=st.dictionaries(
        st.sampled_from(["a", "b", "s1", "s10", "s2"]),
        st.lists(st.lists(_WORDS, min_size=1, max_size=6), min_size=1, max_size=8),
        max_size=4,
    ),
    facts=st.lists(st.lists(_WORDS, min_size=1, max_size=4), max_size=3),
    terms=st.lists(
        st.sampled_from(["cat", "paris", "train", "oscar", "garden", "nowhere"]),
        min_size=1,
        max_size=4,
        unique=True,
    ),
    extra=st.one_of(st.none(), st.tuples(st.integers(0, 50), st.integers(0, 400))),
    limit=st.integers(1, 12),
)
def test_rank_gives_bm25_scores_floats_and_ties(
    sessions: dict[str, list[list[str]]],
    facts: list[list[str]],
    terms: list[str],
    extra: tuple[int, int] | None,
    limit: int,
) -> None:
    """The ranking of a scope's postings is `bm25_scores`' to the last bit, ties and all,
    with or without the client's totals, with facts (many equal scores: a tiny vocabulary)."""
    rows = []
    docs_total = len_total = 0
    for sid, messages in sorted(sessions.items()):
        counted = [(seq, bm25_terms(words, stem=True)) for seq, words in enumerate(messages, 1)]
        lists = [
            "".join(f"{seq}:{words.count(term)}:{len(words)} " for seq, words in counted if term in words)
            for term in terms
        ]
        length = sum(len(words) for _, words in counted)
        rows.append((sid, "g", len(messages), length, lists))
        docs_total, len_total = docs_total + len(messages), len_total + length
    totals = None if extra is None else (docs_total + extra[0], len_total + extra[1])
    kept = [
        Fact(f"f{i}", "alice", " ".join(words), None, "user", float(i), float(i))
        for i, words in enumerate(facts)
    ]
    found = Found(rows, [], kept, totals)
    assert rank(terms, found, limit) == _bm25_scores_rank(terms, found, limit)


def test_a_weight_is_the_one_bm25_scores_adds() -> None:
    for tf, length, n, total in [(1, 3, 2, 8), (2, 7, 1000, 5321), (3, 1, 10, 10)]:
        mean = total / n
        idf = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))
        assert (
            bm25_weight(idf, tf, length, mean)
            == bm25_scores([{"d": tf}], {"d": length}.__getitem__, n, total)["d"]
        )


def test_hits_keep_their_text_whatever_characters_it_holds(store: RedisRollingStore) -> None:
    """The fetch answers its hits as one string, an entry per hit: line breaks, tabs, NUL and
    other separators inside a message never shift one hit's text onto another."""
    texts = ["cat\nline\ttab", "cat \x00 nul \x1e rs", "cat\u2028sep \r\n end", "cat é ü 猫"]
    for i, text in enumerate(texts):
        store.append(f"s{i % 2}", [HumanMessage(text)], client_id="alice", created_at=1000.0 + i)
    hits = store.search("cat", client_id="alice", limit=10)
    assert sorted(h.text for h in hits) == sorted(texts)
    for hit in hits:
        assert hit.created_at == 1000.0 + texts.index(hit.text)
