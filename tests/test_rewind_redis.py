"""Redis: an append's rewind withdraws the rows past a seq in the append's script (`REWIND`).

What the store contract's `RewindChecks` cannot see from outside: after any run of appends,
rewinds, summaries and erases, each session's inverted index (`s:{sid}:terms`: its postings,
`#docs`, `#len`, `#gen`) and each client's statistics (`c:{cid}:terms`: totals, each session's
share, the terms' lists) are exactly those of the rows kept, and every search ranks as
`Bm25Index(stem=True)` over them; a term's sealed runs are cut where the rewind falls; the
vectors past the cut go; a session that expires (`ttl=`) keeps one expiry on all its keys; and
the batch records a retry looks for are cut to the rows they kept, so a retried batch is
neither appended twice nor brings back rows a rewind withdrew.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from conftest import _probe, unique_prefix
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from store_kit import REDIS_URL
from test_redis_search_index import _TEXT, _expiring_store, _reference, _statistics, _wipe

from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.core.lexical_search import bm25_terms, message_index_text
from langchain_rolling_memory.core.serde import dumps_message
from langchain_rolling_memory.errors import OwnershipError
from langchain_rolling_memory.stores.contract import AppendBatch, VectorWrite
from langchain_rolling_memory.stores.redis import RedisRollingStore
from langchain_rolling_memory.stores.redis import scripts as lua
from langchain_rolling_memory.stores.redis.sync import SyncRedis

MODEL = "toy"


@pytest.fixture
def store() -> Iterator[RedisRollingStore]:
    _probe("redis")
    prefix = unique_prefix()
    opened = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    yield opened
    opened.close()
    _wipe(prefix)


def _counted(text: str) -> tuple[int, Counter[str]]:
    words = bm25_terms(message_index_text(HumanMessage(text)).split(), stem=True)
    return len(words), Counter(words)


def _expected_index(texts: list[str]) -> tuple[int, dict[str, str]]:
    """The summed length of `texts` (seqs 1...) and each term's postings "<seq>:<tf>:<len> "."""
    total, postings = 0, {}
    for seq, text in enumerate(texts, 1):
        length, counts = _counted(text)
        total += length
        for term, tf in counts.items():
            postings[term] = postings.get(term, "") + f"{seq}:{tf}:{length} "
    return total, postings


def _runs(raw: dict[str, str]) -> dict[str, str]:
    """A hash of terms (a session's index or a client's statistics) -> each term's whole value,
    its sealed runs ('<term> k', '#b <term>' of them) then its newest; a run with no term or
    past the count fails."""
    out = {}
    for field in raw:
        if field.startswith(("#", "@")) or " " in field:
            continue
        sealed = int(raw.get(f"#b {field}", 0))
        out[field] = "".join(raw[f"{field} {b}"] for b in range(1, sealed + 1)) + raw[field]
    for field in raw:
        if " " in field and not field.startswith("#"):
            term, _, k = field.rpartition(" ")
            assert term in out and int(k) <= int(raw[f"#b {term}"]), field
        elif field.startswith("#b "):
            assert field[3:] in out, field
    return out


def _generation(r: Any, store: RedisRollingStore, sid: str) -> str:
    return str(r.hget(store.keys.info(sid), "generation"))


def _check_session(r: Any, store: RedisRollingStore, sid: str, texts: list[str]) -> None:
    """The session's index is exactly that of `texts`, under its generation."""
    raw = r.hgetall(store.keys.terms(sid))
    if not texts:
        assert raw.get("#docs", "0") == "0" and not _runs(raw)
        return
    total, postings = _expected_index(texts)
    assert (raw["#docs"], raw["#len"], raw["#gen"]) == (
        str(len(texts)),
        str(total),
        _generation(r, store, sid),
    )
    assert _runs(raw) == postings


def _check_client(r: Any, store: RedisRollingStore, client: str, owned: dict[str, list[str]]) -> None:
    """The client's statistics, if kept (`#v`), count exactly the rows of the sessions it owns."""
    raw = _statistics(store, client)
    if "#v" not in raw:
        return
    lengths = {sid: _expected_index(texts)[0] for sid, texts in owned.items()}
    assert raw["#docs"] == str(sum(len(t) for t in owned.values()))
    assert raw["#len"] == str(sum(lengths.values()))
    assert raw["#members"] == str(len(owned))
    shares = {f[1:]: v for f, v in raw.items() if f.startswith("@")}
    for sid, texts in owned.items():
        expected = f"{_generation(r, store, sid)} {len(texts)} {lengths[sid]}"
        if texts or sid in shares:  # a session with no rows may have a share of none
            assert shares.pop(sid) == expected
    assert shares == {}
    holders: dict[str, list[str]] = {}
    for sid, texts in owned.items():
        for term in _expected_index(texts)[1]:
            holders.setdefault(term, []).append(sid)
    lists = {term: sorted(value.split()) for term, value in _runs(raw).items()}
    assert lists == {term: sorted(sids) for term, sids in holders.items()}


def _check_search(
    store: RedisRollingStore, query: str, expected: list[tuple[Any, float]], **where: Any
) -> None:
    hits = store.search(query, limit=20, **where)
    assert [h.key for h in hits] == [doc for doc, _ in expected]
    for hit, (_, score) in zip(hits, expected, strict=True):
        assert math.isclose(hit.score, score, rel_tol=1e-12)


# ------------------------------------------------------------------ statistics after rewinds

_SIDS = st.sampled_from(["s1", "s2", "s3"])
_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(["alice", "bob", None]),
            _SIDS,
            st.lists(_TEXT, max_size=3),
            st.one_of(st.none(), st.integers(0, 6)),
        ),
        st.tuples(st.just("summarize"), _SIDS, st.integers(1, 4)),
        st.tuples(st.just("clear"), _SIDS),
        st.tuples(st.just("search"), st.sampled_from(["alice", "bob"]), _TEXT),
        st.tuples(st.just("lose"), st.sampled_from(["alice", "bob"])),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
@example(
    ops=[
        ("append", "alice", "s1", ["cat paris", "train"], None),
        ("append", "alice", "s2", ["cat"], None),
        ("append", "alice", "s1", ["paris paris"], 1),
    ]
)
@example(ops=[("append", None, "s1", ["cat", "a"], None), ("append", "alice", "s1", [], 1)])
@example(
    ops=[
        ("append", "bob", "s1", ["cat", "the cat", "train"], None),
        ("summarize", "s1", 2),
        ("append", "bob", "s1", ["oscar"], 0),
        ("append", "bob", "s1", [], 0),
    ]
)
def test_after_rewinds_the_statistics_are_those_of_the_rows_kept(ops: list[tuple[Any, ...]]) -> None:
    """Appends with and without rewind (a withdrawal alone included), by their owner, by
    another client (refused: nothing withdrawn), to a session of nobody's (claimed), summaries
    (their rows are kept), erases and lost statistics: after each, every index and statistic is
    exactly that of the rows kept, and every search ranks as the reference over them."""
    _probe("redis")
    prefix = unique_prefix()
    store = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    owners: dict[str, str | None] = {}
    texts: dict[str, list[str]] = {}
    covered: dict[str, int] = {}
    try:
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            for op in ops:
                query = "cat train paris oscar"
                if op[0] == "append":
                    _, client, sid, new, rewind = op
                    if not new and rewind is None:
                        continue
                    messages = [HumanMessage(t) for t in new]
                    if sid in owners and owners[sid] not in (None, client):
                        generation = _generation(r, store, sid)
                        with pytest.raises(OwnershipError):
                            store.append(sid, messages, client_id=client, rewind=rewind)
                        assert _generation(r, store, sid) == generation
                        continue
                    before = texts.get(sid, [])
                    keep = (
                        len(before) if rewind is None else min(len(before), max(rewind, covered.get(sid, 0)))
                    )
                    seqs = store.append(sid, messages, client_id=client, rewind=rewind)
                    assert seqs == list(range(keep + 1, keep + 1 + len(new)))
                    owners[sid] = client if owners.get(sid) is None else owners[sid]
                    texts[sid] = before[:keep] + new
                elif op[0] == "summarize":
                    _, sid, upto = op
                    if not texts.get(sid):
                        continue
                    summary = store.summary(sid)
                    upto = min(upto, len(texts[sid]))
                    version = 0 if summary is None else summary.version
                    assert store.install_summary(sid, "so far", covered_seq=upto, expected_version=version)
                    covered[sid] = upto
                elif op[0] == "clear":
                    store.clear_session(op[1])
                    for model in (owners, texts, covered):
                        model.pop(op[1], None)
                elif op[0] == "search":
                    query = op[2]
                else:
                    r.delete(store.keys.client_terms(op[1]))
                assert {sid: [m.message.content for m in store.read(sid)] for sid in owners} == {
                    sid: texts.get(sid, []) for sid in owners
                }
                for sid in owners:
                    _check_session(r, store, sid, texts.get(sid, []))
                for client in ("alice", "bob"):
                    mine = {sid: texts.get(sid, []) for sid, owner in owners.items() if owner == client}
                    _check_client(r, store, client, mine)
                    _check_search(store, query, _reference(mine, [], query, 20), client_id=client)
                    _check_client(r, store, client, mine)  # as the search left them
                    for sid, kept in mine.items():
                        expected = _reference({sid: kept}, [], query, 20)
                        _check_search(store, query, expected, client_id=client, session_id=sid)
    finally:
        store.close()
        _wipe(prefix)


def test_a_rewind_cuts_a_terms_sealed_runs_where_it_falls(store: RedisRollingStore) -> None:
    """A term of every message has its postings in sealed runs: a rewind into an early run
    drops the runs after it and makes it the newest; the next appends seal again as before."""
    texts = [f"oscar ate meal {i}" for i in range(2000)]
    for at in range(0, len(texts), 200):
        store.append("s1", [HumanMessage(t) for t in texts[at : at + 200]], client_id="alice")
    store.append("s2", [HumanMessage("oscar sleeps")], client_id="alice")
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        sealed = int(r.hget(store.keys.terms("s1"), "#b oscar") or 0)
        assert sealed >= 2
        for keep, more in [(1500, 0), (700, 30), (731, 0), (3, 2), (0, 1)]:
            store.append(
                "s1", [HumanMessage(f"oscar naps {i}") for i in range(more)], client_id="alice", rewind=keep
            )
            texts = texts[:keep] + [f"oscar naps {i}" for i in range(more)]
            runs = int(r.hget(store.keys.terms("s1"), "#b oscar") or 0)
            assert runs < sealed if keep <= 700 else runs <= sealed
            _check_session(r, store, "s1", texts)
            owned = {"s1": texts, "s2": ["oscar sleeps"]}
            _check_client(r, store, "alice", owned)
            for query in ("oscar meal 699", "naps 0 oscar"):
                _check_search(store, query, _reference(owned, [], query, 20), client_id="alice")
        for _ in range(2):  # the newest run is sealed at the append after it grew past a few KB
            store.append("s1", [HumanMessage(t) for t in texts[:1] * 600], client_id="alice")
            texts += texts[:1] * 600
        _check_session(r, store, "s1", texts)
        assert int(r.hget(store.keys.terms("s1"), "#b oscar")) >= 1


# ------------------------------------------------------------------ vectors, reads, export


def test_the_vectors_past_the_cut_go_and_one_planned_before_never_lands(store: RedisRollingStore) -> None:
    store.append("s1", [HumanMessage(f"message {i}") for i in range(1, 6)], client_id="alice")
    listed = store.unembedded(MODEL, client_id="alice")
    assert [u.seq for u in listed] == [1, 2, 3, 4, 5]
    writes = [VectorWrite(u.session_id, u.seq, u.generation, pack([1.0, float(u.seq)])) for u in listed]
    assert store.put_vectors(MODEL, writes[:4]) == 4
    assert store.append("s1", [HumanMessage("a new third")], client_id="alice", rewind=2) == [3]
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        assert sorted(r.hkeys(store.keys.vectors("s1"))) == [f"1 {MODEL}", f"2 {MODEL}"]
    hits = store.vector_search([1.0, 3.0], model=MODEL, client_id="alice")
    assert [h.seq for h in hits] == [2, 1]
    # Listed before the rewind: the session's generation changed, so it is refused.
    assert store.put_vectors(MODEL, writes[4:]) == 0
    (left,) = store.unembedded(MODEL, client_id="alice")
    assert left.seq == 3 and "a new third" in left.payload
    assert store.append("s1", [], client_id="alice", rewind=0) == []
    with redis.Redis.from_url(REDIS_URL) as r:
        assert not r.exists(store.keys.vectors("s1"))
    assert store.vector_search([1.0, 3.0], model=MODEL, client_id="alice") == []


def test_nothing_withdrawn_is_read_again(store: RedisRollingStore) -> None:
    store.append(
        "s1", [HumanMessage("we met in Rome"), HumanMessage("the Colosseum at night")], client_id="alice"
    )
    store.append("s1", [HumanMessage("bring a coat")], client_id="alice")
    assert store.messages_after([("s1", 1)], client_id="alice")[0] is not None
    store.append("s1", [], client_id="alice", rewind=1)
    assert store.messages_after([("s1", 1), ("s1", 2), ("s1", 0)], client_id="alice")[:2] == [None, None]
    assert [m.seq for m in store.read("s1", after_seq=0)] == [1]
    assert store.last_seq("s1") == 1
    turn = store.read_turn("s1", limit=10)
    assert [m.seq for m in turn.messages] == [1]
    exported = str(store.export("alice"))
    assert "Colosseum" not in exported and "coat" not in exported
    assert store.search("colosseum coat", client_id="alice") == []


async def test_append_and_summary_rewinds_never_past_the_summary(store: RedisRollingStore) -> None:
    await store.aappend("s1", [HumanMessage(f"m{i}") for i in range(1, 5)], client_id="alice")
    assert store.install_summary("s1", "m1 and m2", covered_seq=2, expected_version=0)
    seqs, summary = await store.aappend_and_summary("s1", [HumanMessage("m9")], client_id="alice", rewind=0)
    assert seqs == [3] and summary is not None and summary.covered_seq == 2
    assert [m.message.content for m in await store.aread("s1")] == ["m1", "m2", "m9"]
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        _check_session(r, store, "s1", ["m1", "m2", "m9"])
        _check_client(r, store, "alice", {"s1": ["m1", "m2", "m9"]})
        assert store.append_and_summary("s1", [], client_id="alice", rewind=1) == ([], summary)
        _check_session(r, store, "s1", ["m1", "m2"])
        _check_client(r, store, "alice", {"s1": ["m1", "m2"]})
    await store.aclose()


# ------------------------------------------------------------------ ttl=


def test_a_session_that_expires_keeps_one_expiry_on_every_key_after_a_rewind() -> None:
    with _expiring_store() as store, redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        store.append(
            "s1",
            [HumanMessage("the cat"), HumanMessage("a train"), HumanMessage("cat again")],
            client_id="alice",
        )
        store.append("s2", [HumanMessage("the cat sleeps")], client_id="alice")
        listed = store.unembedded(MODEL, session_id="s1", client_id="alice")
        store.put_vectors(
            MODEL, [VectorWrite(u.session_id, u.seq, u.generation, pack([1.0])) for u in listed]
        )
        assert [h.key for h in store.search("cat", client_id="alice")]
        for keep, new in [(1, ["paris"]), (0, []), (0, ["cat and paris"])]:
            store.append("s1", [HumanMessage(t) for t in new], client_id="alice", rewind=keep)
            kept = (["the cat"] if keep else []) + new
            keys = [
                store.keys.info("s1"),
                store.keys.msgs("s1"),
                store.keys.idx("s1"),
                store.keys.terms("s1"),
            ]
            keys += [store.keys.part("s1", "batches"), store.keys.vectors("s1")]
            for key in keys:
                if r.exists(key):
                    assert 0 < r.pttl(key) <= 60_000, key
            assert r.exists(store.keys.msgs("s1")) == bool(kept)
            assert _statistics(store, "alice") == {"#ttl": "1"}
            _check_session(r, store, "s1", kept)
            owned = {"s1": kept, "s2": ["the cat sleeps"]}
            for query in ("cat", "train paris"):
                _check_search(store, query, _reference(owned, [], query, 20), client_id="alice")


# ------------------------------------------------------------------ the retry records


def _batch(
    store: RedisRollingStore, texts: list[str], rewind: int | None = None
) -> tuple[Callable[[list[Any]], list[int]], list[Any], list[Any]]:
    """The append script of a batch to s1, as alice's (a call of its ARGV -> the seqs), its
    first ARGV and its retry's (which looks for the batch's record first)."""
    messages = [HumanMessage(t) for t in texts]
    rows = [(dumps_message(m), None) for m in messages]
    batch = AppendBatch("s1", "alice", rows, 1000.0, None, messages, rewind)
    (name, keys, args), again = lua.append_call(store.prefix, store.keys, batch, 0)
    backend = store.backend
    assert isinstance(backend, SyncRedis)
    script = backend.clients.scripts[name]
    return (lambda argv: lua.seqs_of(script(keys=keys, args=argv), "s1", "alice")), args, again


def _contents(store: RedisRollingStore) -> list[Any]:
    return [m.message.content for m in store.read("s1")]


def test_a_retried_batch_is_never_appended_twice_nor_brings_back_withdrawn_rows(
    store: RedisRollingStore,
) -> None:
    """A retry (the connection dropped: did the first try run?) looks for its batch's record:
    found, it answers the seqs of the batch's rows still kept, writing nothing; a rewind cuts
    the records past it rather than deleting them, so a batch it withdrew is never appended
    again, whole or in part."""
    run, first, retry = _batch(store, ["m1", "m2"])
    assert run(first) == [1, 2]
    assert run(retry) == [1, 2]
    run3, first3, retry3 = _batch(store, ["m3", "m4"])
    assert run3(first3) == [3, 4]
    run5, first5, retry5 = _batch(store, ["m5"], rewind=3)
    assert run5(first5) == [4]
    assert run3(retry3) == [3]  # m4 withdrawn: the batch keeps m3 alone
    assert run5(retry5) == [4]  # the rewind's retry: found, nothing withdrawn again
    assert _contents(store) == ["m1", "m2", "m3", "m5"]
    store.append("s1", [], client_id="alice", rewind=1)
    assert (run(retry), run3(retry3), run5(retry5)) == ([1], [], [])
    assert _contents(store) == ["m1"]
    run6, first6, retry6 = _batch(store, ["m6"], rewind=0)
    assert run6(first6) == [1]
    store.append("s1", [HumanMessage("m7")], client_id="alice")
    assert run6(retry6) == [1]  # not applied again: m7 stays
    assert _contents(store) == ["m6", "m7"]
    run8, _, retry8 = _batch(store, ["m8"], rewind=1)
    assert run8(retry8) == [2]  # a first try that never ran: applied once
    assert run8(retry8) == [2]
    assert _contents(store) == ["m6", "m8"]
    with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
        records = r.lrange(store.keys.part("s1", "batches"), 0, -1)
        assert [" ".join(rec.split()[1:]) for rec in records] == [
            "2 1",
            "2 0",
            "1 1",
            "2 0",
            "4 0",
            "3 0",
            "1 0",
        ]
        _check_session(r, store, "s1", ["m6", "m8"])
        _check_client(r, store, "alice", {"s1": ["m6", "m8"]})
