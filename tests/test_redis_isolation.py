"""Redis alone: expiry (`ttl=`) never hands a session to its old owner, key prefixes that nest
never share a key, and a store written with the key layout before schema 4 is migrated, or
refused when its keys cannot be told from a nesting store's (issue 20, defects 1, 4 and 6)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from conftest import _probe, unique_prefix
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import REDIS_URL, raw_contents

from langchain_rolling_memory.core.lexical_search import index_text, message_index_text
from langchain_rolling_memory.core.records import Fact
from langchain_rolling_memory.core.serde import dumps_message
from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION
from langchain_rolling_memory.stores.redis import RedisRollingStore
from langchain_rolling_memory.stores.redis.layout import Keys, check_prefix, legacy_target
from langchain_rolling_memory.stores.redis.scripts import encode_row
from langchain_rolling_memory.stores.redis.sync import SyncRedis


@pytest.fixture
def prefix() -> Iterator[str]:
    """A unique key prefix, and every key under it (nested prefixes included) wiped after."""
    _probe("redis")
    name = unique_prefix()
    yield name
    with redis.Redis.from_url(REDIS_URL) as r:
        keys = list(r.scan_iter(match=name + "*", count=1000))
        if keys:
            r.delete(*keys)


@pytest.fixture
def opened() -> Iterator[list[RedisRollingStore]]:
    stores: list[RedisRollingStore] = []
    yield stores
    for store in stores:
        store.close()


def _open(opened: list[RedisRollingStore], prefix: str, **options: Any) -> RedisRollingStore:
    store = RedisRollingStore(REDIS_URL, key_prefix=prefix, **options)
    opened.append(store)
    return store


def _wait_expired(store: RedisRollingStore, *session_ids: str) -> None:
    """Poll (bounded) until the sessions' info keys have expired."""
    deadline = time.monotonic() + 15
    with redis.Redis.from_url(REDIS_URL) as r:
        while any(r.exists(store.keys.info(sid)) for sid in session_ids):
            if time.monotonic() > deadline:  # pragma: no cover - a server that never expires keys
                pytest.fail(f"sessions {session_ids} did not expire within 15 s")
            time.sleep(0.05)


def _mentions(store: RedisRollingStore, *words: str) -> list[str]:
    return [line for line in raw_contents(store) if any(w in line for w in words)]


class TestExpiry:
    def test_an_expired_session_re_created_by_another_client_is_not_the_old_owners(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        alice = _open(opened, prefix, ttl=0.5)
        bob = _open(opened, prefix)  # no ttl: bob's session stays while alice's side runs
        alice.append("s1", [HumanMessage("alice pin 1111")], client_id="alice")
        alice.append("gone-s2", [HumanMessage("alice again")], client_id="alice")
        assert alice.claim("gone-s2", "worker", 600)
        _wait_expired(alice, "s1", "gone-s2")
        bob.append("s1", [HumanMessage("bob pin 2222"), AIMessage("noted")], client_id="bob")
        assert alice.sessions("alice") == []
        assert [h.text for h in alice.search("pin", client_id="alice")] == []
        assert alice.export("alice")["sessions"] == []
        alice.forget("alice")
        assert [r.message.content for r in bob.read("s1")] == ["bob pin 2222", "noted"]
        assert bob.sessions("bob") == ["s1"]
        assert _mentions(bob, "gone-s2", "alice") == []  # no id in `updated`, no lease left
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            assert r.zrange(bob.keys.updated, 0, -1) == ["s1"]

    async def test_the_async_side_checks_the_owner_now_too(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        alice = _open(opened, prefix, ttl=0.5)
        bob = _open(opened, prefix)
        await alice.aappend("s1", [HumanMessage("alice pin 1111")], client_id="alice")
        _wait_expired(alice, "s1")
        await bob.aappend("s1", [HumanMessage("bob pin 2222")], client_id="bob")
        assert await alice.asessions("alice") == []
        assert await alice.asearch("pin", client_id="alice") == []
        assert (await alice.aexport("alice"))["sessions"] == []
        await alice.aforget("alice")
        assert [r.message.content for r in await bob.aread("s1")] == ["bob pin 2222"]
        await alice.aclose()
        await bob.aclose()

    def test_expiry_leaves_no_session_id_in_any_set(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        store = _open(opened, prefix, ttl=0.5)
        store.append("gone-1", [HumanMessage("hi")], client_id="gone-client")
        store.append("gone-2", [HumanMessage("hi")])
        store.install_summary("gone-1", "sum", covered_seq=1, expected_version=0)
        _wait_expired(store, "gone-1", "gone-2")
        store.append("later", [HumanMessage("a write after the expiry")], client_id="other")
        assert _mentions(store, "gone-") == []

    def test_a_summary_a_store_without_ttl_installs_expires_with_the_session(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        app = _open(opened, prefix, ttl=0.5)  # sessions expire
        worker = _open(opened, prefix)  # the same prefix, no ttl
        app.append("s1", [HumanMessage("my passport is X099"), AIMessage("noted")], client_id="alice")
        generation = worker.read_turn("s1", limit=10).generation
        assert worker.install_summary(
            "s1", "Alice's passport is X099", covered_seq=2, expected_version=0, generation=generation
        )
        with redis.Redis.from_url(REDIS_URL) as r:
            assert r.pttl(app.keys.client_sessions("alice")) > 0  # not made to last for good
        _wait_expired(app, "s1")
        assert _mentions(app, "X099", "alice") == []
        app.append("s1", [HumanMessage("hello, I am Bob")], client_id="bob")
        assert app.read_turn("s1", limit=10, client_id="bob").record is None

    async def test_keys_of_a_session_without_its_info_hash_are_never_read(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        store = _open(opened, prefix)
        keys = store.keys
        with redis.Redis.from_url(REDIS_URL) as r:  # what an older release could leave behind
            r.hset(
                keys.summary("s1"),
                mapping={
                    "text": "old secret",
                    "covered_seq": 1,
                    "version": 1,
                    "meta": "{}",
                    "updated_at": 1.0,
                },
            )
            r.rpush(keys.msgs("s1"), encode_row(dumps_message(HumanMessage("old msg")), 2))
            r.rpush(keys.idx("s1"), "- old msg")
        assert store.read_turn("s1", limit=10).record is None
        assert store.read_turn("s1", limit=10).messages == []
        assert store.summary("s1") is None and await store.asummary("s1") is None
        assert store.transcript("s1") == [] and await store.atranscript("s1") == []
        assert store.last_seq("s1") == 0 and await store.alast_seq("s1") == 0
        assert (await store.aread_turn("s1", limit=10)).record is None
        assert store.append("s1", [HumanMessage("new")], client_id="bob") == [1]
        assert store.read_turn("s1", limit=10).record is None
        assert [m.content for m in store.transcript("s1")] == ["new"]
        assert _mentions(store, "old") == []
        await store.aclose()

    @pytest.mark.parametrize("reach", ["sessions", "search", "forget"])
    def test_a_client_reaching_its_expired_sessions_leaves_no_id_of_them(
        self, prefix: str, opened: list[RedisRollingStore], reach: str
    ) -> None:
        expiring = _open(opened, prefix, ttl=0.5)
        lasting = _open(opened, prefix)
        expiring.append("gone-1", [HumanMessage("pottery class")], client_id="alice")
        lasting.append("live", [HumanMessage("pottery again")], client_id="alice")  # keeps alice's set
        _wait_expired(expiring, "gone-1")
        if reach == "sessions":
            assert expiring.sessions("alice") == ["live"]
        elif reach == "search":
            assert [h.session_id for h in expiring.search("pottery", client_id="alice")] == ["live"]
        else:
            expiring.forget("alice")
        assert _mentions(expiring, "gone-1") == []

    def test_a_lease_alone_is_no_session_row(self, prefix: str, opened: list[RedisRollingStore]) -> None:
        store = _open(opened, prefix)
        assert store.claim("s1", "w", 60)
        assert not store.install_summary("s1", "orphan", covered_seq=1, expected_version=0, lease_owner="w")
        assert store.read_turn("s1", limit=1).generation is None
        assert _mentions(store, "orphan") == []


class TestSearchRace:
    def test_a_search_never_returns_a_session_that_changed_owner_since_it_was_ranked(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        # Deterministic: the session is re-created by bob between the script that ranks and the
        # script that fetches the hits' messages (a pause injected between the two calls).
        store = _open(opened, prefix)
        other = _open(opened, prefix)
        store.append("s1", [HumanMessage("alpha secret")], client_id="alice")
        backend = store.backend
        assert isinstance(backend, SyncRedis)
        real = backend._run

        def between(op: str, name: str, keys: list[str], args: list[Any]) -> Any:
            if name == "search_fetch":
                other.clear_session("s1")
                other.append("s1", [HumanMessage("bravo secret")], client_id="bob")
            return real(op, name, keys, args)

        backend._run = between  # type: ignore[method-assign]
        assert store.search("secret", client_id="alice") == []
        backend._run = real  # type: ignore[method-assign]
        assert [h.text for h in store.search("secret", client_id="bob")] == ["bravo secret"]


# Small alphabets, so that prefixes and ids that nest or look like key parts come up often.
_PREFIXES = st.text(alphabet="sc:a_", max_size=8).map(check_prefix)
_IDS = st.text(alphabet="sc:a.", min_size=1, max_size=8).filter(lambda i: set(i) != {"."})
_PARTS = st.sampled_from(["info", "msgs", "sum", "lease", "batches", "idx", "sessions", "facts"])
_KEYS = st.tuples(_PREFIXES, st.sampled_from(["schema", "updated", "s", "c"]), _IDS, _PARTS)


def _key(prefix: str, kind: str, ident: str, part: str) -> tuple[str, tuple[str, ...]]:
    """A key of the layout and what it names (the same thing, the same tuple)."""
    keys = Keys(prefix)
    if kind in ("schema", "updated"):
        return getattr(keys, kind), (prefix, kind)
    if kind == "s":
        return keys.part(ident, part), (prefix, kind, ident, part)
    return (keys.facts(ident) if part == "facts" else keys.client_sessions(ident)), (
        prefix,
        kind,
        ident,
        "facts" if part == "facts" else "sessions",
    )


@st.composite
def _nesting(draw: st.DrawFn) -> tuple[tuple[str, str, str, str], tuple[str, str, str, str]]:
    """A key of an outer store whose id starts like a kind, and one of a store nested in it by
    that kind (``app:`` + session ``s:x``, ``app:s:`` + session ``x``: one key before schema 4)."""
    prefix, ident, part = draw(_PREFIXES), draw(_IDS), draw(_PARTS)
    kind, inner = draw(st.sampled_from("sc")), draw(st.sampled_from("sc"))
    return (prefix, kind, f"{inner}:{ident}", part), (check_prefix(f"{prefix}{kind}:"), inner, ident, part)


@given(st.tuples(_KEYS, _KEYS) | _nesting())
def test_two_keys_are_the_same_key_only_if_they_name_the_same_thing(
    pair: tuple[tuple[str, str, str, str], tuple[str, str, str, str]],
) -> None:
    a, b = pair
    key_a, named_a = _key(*a)
    key_b, named_b = _key(*b)
    assert (key_a == key_b) == (named_a == named_b), (key_a, named_a, named_b)


@given(_PREFIXES, _IDS, _PARTS)
def test_a_key_of_the_old_layout_moves_to_its_own_new_name(prefix: str, ident: str, part: str) -> None:
    kind = "c" if part in ("sessions", "facts") else "s"
    assert legacy_target(prefix, f"{prefix}{kind}:{ident}:{part}") == _key(prefix, kind, ident, part)[0]
    assert legacy_target(prefix, _key(prefix, kind, ident, part)[0]) is None  # already moved


class TestNestedPrefixes:
    def test_stores_whose_prefixes_nest_never_read_or_clear_each_others_data(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        outer = _open(opened, prefix + "app:")
        inner = _open(opened, prefix + "app:s:")
        clients = _open(opened, prefix + "app:c:")
        outer.append("s:x", [HumanMessage("outer secret")], client_id="c:y")
        outer.add_fact("c:y", "outer fact")
        assert inner.read("x") == []
        assert inner.session_info("x") is None
        inner.append("x", [HumanMessage("inner text")], client_id="y")
        inner.clear_session("x")
        assert clients.facts("y") == []
        assert clients.sessions("y") == []
        clients.forget("y")
        assert [r.message.content for r in outer.read("s:x")] == ["outer secret"]
        assert outer.sessions("c:y") == ["s:x"]
        assert [f.text for f in outer.facts("c:y")] == ["outer fact"]

    def test_a_prefix_cannot_hold_the_characters_that_delimit_an_id(self, prefix: str) -> None:
        from langchain_rolling_memory.errors import ConfigurationError

        for bad in (prefix + "{x}", prefix + "a}", prefix + "a{"):
            with pytest.raises(ConfigurationError, match="key_prefix"):
                RedisRollingStore(REDIS_URL, key_prefix=bad)


# ---------------------------------------------------------------------- migration


def _write_schema3(r: Any, p: str) -> None:
    """Keys as schema 3 wrote them: ``p s:<sid>:<part>``, ``p c:<cid>:<part>``."""
    messages = [HumanMessage("We booked the Paris trip"), AIMessage("Paris in May!")]
    r.set(f"{p}schema", "3")
    r.hset(f"{p}s:s1:info", mapping={"client_id": "alice", "created_at": "100.0", "updated_at": "101.0"})
    r.hset(f"{p}s:s1:info", "state", json.dumps({"cart": 1}))
    r.rpush(f"{p}s:s1:msgs", *[f"3 {dumps_message(m)}" for m in messages])
    r.rpush(f"{p}s:s1:idx", *[f"100.0 {message_index_text(m)}" for m in messages])
    r.rpush(f"{p}s:s1:batches", "b1 1 2")
    r.hset(f"{p}s:s1:sum", mapping={"text": "old sum", "covered_seq": 1, "version": 1, "meta": "{}"})
    r.hset(f"{p}s:s1:sum", "updated_at", "101.0")
    r.sadd(f"{p}c:alice:sessions", "s1")
    fact = Fact("f1", "alice", "Alice loves Paris", None, "code", 100.0, 100.0)
    r.hset(f"{p}c:alice:facts", "f1", json.dumps(fact.to_dict()))
    r.zadd(f"{p}updated", {"s1": 101.0})
    assert index_text(fact.text)


class TestLayoutMigration:
    def test_a_store_with_the_schema_3_layout_is_moved_to_the_delimited_keys(
        self, prefix: str, opened: list[RedisRollingStore]
    ) -> None:
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            _write_schema3(r, prefix)
            store = _open(opened, prefix)
            assert r.get(f"{prefix}schema") == str(SCHEMA_VERSION)
            keys = sorted(r.scan_iter(match=prefix + "*"))
        assert [k for k in keys if k not in (f"{prefix}schema", f"{prefix}updated") and "{" not in k] == []
        assert [m.content for m in store.transcript("s1", client_id="alice")] == [
            "We booked the Paris trip",
            "Paris in May!",
        ]
        turn = store.read_turn("s1", limit=5, client_id="alice")
        assert turn.record is not None and turn.record.text == "old sum"
        assert turn.generation == ""  # a row written before generations: '' until it is erased
        assert store.get_state("s1") == {"cart": 1}
        assert store.sessions("alice") == ["s1"]
        assert {h.kind for h in store.search("paris", client_id="alice")} == {"message", "fact"}
        assert store.append("s1", [HumanMessage("again")], client_id="alice") == [3]
        store.clear_session("s1")
        store.append("s1", [HumanMessage("new")], client_id="alice")
        assert store.read_turn("s1", limit=1).generation not in (None, "")

    @pytest.mark.parametrize("which", ["outer", "inner"])
    def test_schema_3_stores_whose_prefixes_nest_are_refused_and_left_as_they_are(
        self, prefix: str, which: str
    ) -> None:
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            _write_schema3(r, prefix + "app:")
            _write_schema3(r, prefix + "app:s:")
            before = sorted(r.scan_iter(match=prefix + "*"))
            target = prefix + ("app:" if which == "outer" else "app:s:")
            other = prefix + ("app:s:" if which == "outer" else "app:")
            with pytest.raises(StoreError, match="nest") as raised:
                RedisRollingStore(REDIS_URL, key_prefix=target)
            assert other in str(raised.value)
            assert "\n" not in str(raised.value)
            assert sorted(r.scan_iter(match=prefix + "*")) == before
            assert r.get(f"{target}schema") == "3"
