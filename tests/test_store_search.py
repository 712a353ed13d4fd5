"""Search in the store, dated appends and pinned facts, run unchanged on every backend."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import backend_name, raw_contents, reopen, set_schema_version

from langchain_rolling_memory.errors import ConfigurationError, OwnershipError
from langchain_rolling_memory.stores import RollingStore

HOSTILE = [
    '"paris',
    "paris*",
    "-paris",
    "paris NEAR trip",
    "paris OR trip",
    "(paris",
    "text: paris",
    "paris'; DROP TABLE lrm_messages; --",
    "paris\\",
    "' | ! & <-> :*",
    "^paris {trip}",
    "paris " * 5000,
]


def _fill(store: RollingStore) -> None:
    store.append(
        "s1",
        [HumanMessage("We booked the Paris trip for May"), AIMessage("Great, Paris in spring!")],
        client_id="alice",
    )
    store.append("s2", [HumanMessage("My cat Oscar hates the train")], client_id="alice")
    store.append("s3", [HumanMessage("Bob also booked a Paris trip")], client_id="bob")


def _keys(hits: list) -> list:
    return [h.key for h in hits]


class TestSearch:
    def test_a_message_with_more_query_words_ranks_first(self, store: RollingStore) -> None:
        _fill(store)
        hits = store.search("When is the Paris trip?", client_id="alice")
        assert hits[0].key == ("message", "s1", 1)
        assert {h.key for h in hits} == {("message", "s1", 1), ("message", "s1", 2)}
        assert hits[0].score >= hits[1].score
        assert hits[0].message == HumanMessage("We booked the Paris trip for May")

    @pytest.mark.parametrize("scope", ["client", "session"])
    def test_a_rare_word_outranks_a_word_in_every_message(self, store: RollingStore, scope: str) -> None:
        # BM25's IDF: the speaker's name is in every message (and said three times in one),
        # the rare word in one; a ranking without IDF (PostgreSQL's ts_rank_cd) put the name first.
        chatter = [HumanMessage(f"Melanie said hello number {i}", name="Melanie") for i in range(10)]
        store.append(
            "s1",
            [
                *chatter,
                HumanMessage("Melanie told Melanie's friend about Melanie's day", name="Melanie"),
                AIMessage("The pottery class starts on Monday"),
            ],
            client_id="alice",
        )
        where = {"client_id": "alice"} if scope == "client" else {"client_id": "alice", "session_id": "s1"}
        hits = store.search("Did Melanie like the pottery?", limit=3, **where)  # type: ignore[arg-type]
        assert hits[0].key == ("message", "s1", 12)
        assert hits[0].score > hits[1].score

    def test_a_search_never_crosses_clients(self, store: RollingStore) -> None:
        _fill(store)
        store.add_fact("bob", "Bob loves Paris")
        assert {h.session_id for h in store.search("paris trip booked", client_id="alice")} == {"s1"}
        bob = store.search("paris trip booked", client_id="bob")
        assert [h.kind for h in bob] == ["message", "fact"] or [h.kind for h in bob] == ["fact", "message"]
        assert {h.session_id for h in bob if h.kind == "message"} == {"s3"}
        assert store.search("oscar", client_id="bob") == []

    def test_one_session_is_searched_with_its_client_an_owned_one_never_without(
        self, store: RollingStore
    ) -> None:
        _fill(store)
        store.append("anon", [HumanMessage("Oscar the anonymous cat")])
        store.add_fact("alice", "Alice's cat is Oscar")
        assert store.search("oscar", session_id="s2") == []  # alice's: a search naming no client
        assert _keys(store.search("oscar", session_id="anon")) == [("message", "anon", 1)]
        assert [h.kind for h in store.search("oscar", client_id="alice", session_id="s1")] == ["fact"]
        both = store.search("oscar", client_id="alice", session_id="s2")
        assert sorted(h.kind for h in both) == ["fact", "message"]

    def test_a_session_of_another_client_is_refused(self, store: RollingStore) -> None:
        _fill(store)
        with pytest.raises(OwnershipError):
            store.search("paris", client_id="alice", session_id="s3")
        store.append("anon", [HumanMessage("paris")])
        with pytest.raises(OwnershipError, match="no client"):
            store.search("paris", client_id="alice", session_id="anon")
        assert store.search("paris", client_id="alice", session_id="never-written") == []

    def test_a_scope_is_required(self, store: RollingStore) -> None:
        with pytest.raises(ConfigurationError, match="client_id=None and session_id=None"):
            store.search("paris")
        with pytest.raises(ConfigurationError, match="limit"):
            store.search("paris", client_id="alice", limit=0)
        with pytest.raises(TypeError):
            store.search(None, client_id="alice")  # type: ignore[arg-type]

    @pytest.mark.parametrize("query", ["", "   ", "the and of", "le la les", "?!"])
    def test_an_empty_or_stop_word_query_finds_nothing(self, store: RollingStore, query: str) -> None:
        _fill(store)
        assert store.search(query, client_id="alice") == []

    @pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
    def test_search_syntax_in_a_query_is_plain_text(self, store: RollingStore, query: str) -> None:
        _fill(store)
        hits = store.search(query, client_id="alice")
        assert {h.session_id for h in hits} <= {"s1"}
        assert store.read("s1")  # nothing was dropped

    def test_limit_keeps_the_best(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage(f"note {i} about gardening") for i in range(12)], client_id="c")
        store.append("s1", [HumanMessage("gardening gardening tomatoes")], client_id="c")
        hits = store.search("gardening tomatoes", client_id="c", limit=3)
        assert len(hits) == 3
        assert hits[0].seq == 13

    def test_french_accents_and_speaker_names_are_found(self, store: RollingStore) -> None:
        store.append(
            "s1",
            [HumanMessage("Nous irons à Montréal après l'été", name="Élodie"), AIMessage("Très bien")],
            client_id="c",
        )
        assert _keys(store.search("montreal ete", client_id="c")) == [("message", "s1", 1)]
        assert _keys(store.search("ÉTÉ à MONTRÉAL", client_id="c")) == [("message", "s1", 1)]
        assert _keys(store.search("elodie", client_id="c")) == [("message", "s1", 1)]

    def test_facts_are_found_and_follow_their_updates(self, store: RollingStore) -> None:
        fact = store.add_fact("c", "Allergic to peanuts")
        assert fact is not None
        [hit] = store.search("peanuts allergy", client_id="c")
        assert hit.kind == "fact" and hit.fact == fact and hit.session_id is None
        store.update_fact("c", fact.id, "Allergic to shellfish")
        assert store.search("peanuts", client_id="c") == []
        assert [h.fact.text for h in store.search("shellfish", client_id="c") if h.fact] == [
            "Allergic to shellfish"
        ]
        store.delete_fact("c", fact.id)
        assert store.search("shellfish", client_id="c") == []

    async def test_async_search_matches_the_sync_one(self, store: RollingStore) -> None:
        _fill(store)
        await store.aadd_fact("alice", "Alice goes to Paris often", pinned=True)
        sync = store.search("paris trip", client_id="alice")
        assert _keys(await store.asearch("paris trip", client_id="alice")) == _keys(sync)
        with pytest.raises(OwnershipError):
            await store.asearch("paris", client_id="alice", session_id="s3")
        assert await store.asearch("the", client_id="alice") == []

    def test_a_store_search_of_many_terms_ranks_as_one_of_the_terms_found(self, store: RollingStore) -> None:
        # The store's own search gives at most 32 terms; a caller of the backend may give more.
        # Terms no entry holds change no score, wherever they come in the list (PostgreSQL
        # keeps a candidate's terms as a bit set: past 64 terms it must not wrap around).
        _fill(store)
        store.add_fact("alice", "Alice goes to Paris by train")
        found = ["paris", "train", "trip"]
        many = [f"absent{i}" for i in range(70)] + found
        now = store._now()  # type: ignore[attr-defined]
        for client, session in (("alice", None), ("alice", "s1"), ("bob", None)):
            few = store.backend.search(found, client, session, 10, now)  # type: ignore[attr-defined]
            assert few
            got = store.backend.search(many, client, session, 10, now)  # type: ignore[attr-defined]
            assert [row[1:] for row in got] == [row[1:] for row in few]
            assert [row[0] for row in got] == pytest.approx([row[0] for row in few])


class TestErasure:
    def test_nothing_is_found_after_forget(self, store: RollingStore) -> None:
        _fill(store)
        store.add_fact("alice", "Alice loves Paris")
        store.forget("alice")
        assert store.search("paris trip oscar", client_id="alice") == []
        assert store.search("paris", session_id="s1") == []
        assert _keys(store.search("paris", client_id="bob")) == [("message", "s3", 1)]
        assert not [line for line in raw_contents(store) if "alice" in line.lower()]

    async def test_nothing_is_found_after_clear_session(self, store: RollingStore) -> None:
        _fill(store)
        store.clear_session("s1")
        assert {h.session_id for h in store.search("paris oscar", client_id="alice")} == {"s2"}
        await store.aclear_session("s2")
        assert await store.asearch("paris oscar", client_id="alice") == []

    def test_nothing_is_found_after_purge(self, store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(store, "_now", lambda: 1000.0)
        _fill(store)
        monkeypatch.setattr(store, "_now", lambda: 5000.0)
        assert store.purge(older_than=10) == 3
        assert store.search("paris", client_id="alice") == []
        assert store.search("paris", session_id="s3") == []

    def test_a_reused_session_id_finds_only_its_new_messages(self, store: RollingStore) -> None:
        _fill(store)
        store.clear_session("s1")
        store.append("s1", [HumanMessage("Rome this time")], client_id="alice")
        assert _keys(store.search("paris rome", client_id="alice", session_id="s1")) == [("message", "s1", 1)]


class TestDates:
    def test_created_at_is_stored_per_message_and_returned(self, store: RollingStore) -> None:
        may = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
        store.append(
            "s1", [HumanMessage("paris one"), HumanMessage("paris two")], client_id="c", created_at=may
        )
        store.append("s1", [HumanMessage("paris three")], client_id="c", created_at=1_600_000_000.5)
        store.append(
            "s1",
            [HumanMessage("paris four"), HumanMessage("paris five")],
            client_id="c",
            created_at=[10.0, 20.0],
        )
        naive = datetime(2023, 5, 8, 13, 56)
        store.append("s1", [HumanMessage("paris six")], client_id="c", created_at=naive)
        dates = {h.seq: h.created_at for h in store.search("paris", client_id="c")}
        assert dates == {
            1: may.timestamp(),
            2: may.timestamp(),
            3: 1_600_000_000.5,
            4: 10.0,
            5: 20.0,
            6: may.timestamp(),
        }

    def test_an_undated_append_is_dated_now(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(store, "_now", lambda: 1234.5)
        store.append("s1", [HumanMessage("paris")], client_id="c")
        assert [h.created_at for h in store.search("paris", client_id="c")] == [1234.5]

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), "2023-05-08", True, [1.0], object()])
    def test_a_bad_date_raises_and_writes_nothing(self, store: RollingStore, bad: object) -> None:
        with pytest.raises(ConfigurationError, match="created_at"):
            store.append("s1", [HumanMessage("a"), HumanMessage("b")], client_id="c", created_at=bad)  # type: ignore[arg-type]
        assert store.read("s1") == []
        assert store.search("a b", session_id="s1") == []


class TestPinnedFacts:
    def test_pinned_is_stored_read_back_and_exported(self, store: RollingStore) -> None:
        pinned = store.add_fact("c", "Allergic to peanuts", pinned=True)
        plain = store.add_fact("c", "Likes jazz")
        assert pinned is not None and pinned.pinned
        assert plain is not None and not plain.pinned
        assert [(f.text, f.pinned) for f in store.facts("c")] == [
            ("Allergic to peanuts", True),
            ("Likes jazz", False),
        ]
        assert [f["pinned"] for f in store.export("c")["facts"]] == [True, False]

    def test_a_fact_stays_pinned_through_updates_and_can_be_pinned_later(self, store: RollingStore) -> None:
        fact = store.add_fact("c", "Team: blue", key="team", pinned=True)
        assert fact is not None
        store.add_fact("c", "Team: red", key="team")
        assert [(f.text, f.pinned) for f in store.facts("c")] == [("Team: red", True)]
        store.update_fact("c", fact.id, "Team: green")
        assert [f.pinned for f in store.facts("c")] == [True]
        store.add_fact("c", "Likes jazz")
        again = store.add_fact("c", "Likes jazz", pinned=True)
        assert again is not None and again.pinned
        assert [f.pinned for f in store.facts("c")] == [True, True]

    def test_pinned_must_be_a_bool(self, store: RollingStore) -> None:
        with pytest.raises(ConfigurationError, match="pinned"):
            store.add_fact("c", "x", pinned="yes")  # type: ignore[arg-type]
        assert store.facts("c") == []

    def test_pinned_survives_reopening(self, store: RollingStore) -> None:
        store.add_fact("c", "Allergic to peanuts", pinned=True)
        again = reopen(store)
        try:
            assert [f.pinned for f in again.facts("c")] == [True]
        finally:
            again.close()


def _downgrade(store: RollingStore) -> None:
    """Turn the store's data back into the schema-1 layout: no index, no pinned, no dates."""
    name = backend_name(store)
    prefix = store.prefix  # type: ignore[attr-defined]
    if name == "sqlite":
        import sqlite3
        from contextlib import closing

        with closing(sqlite3.connect(store.path)) as conn, conn:  # type: ignore[attr-defined]
            triggers = ("search_docs_added", "search_docs_gone", "messages_unindexed", "facts_unindexed")
            for trigger in (*triggers, "sessions_claimed"):
                conn.execute(f"DROP TRIGGER {prefix}{trigger}")
            conn.execute(f"DROP TABLE {prefix}search")
            conn.execute(f"DROP TABLE {prefix}search_docs")
            conn.execute(f"ALTER TABLE {prefix}facts DROP COLUMN pinned")
            conn.execute(f"DROP INDEX {prefix}facts_expiry")
            conn.execute(f"ALTER TABLE {prefix}facts DROP COLUMN expires_at")
            conn.execute(f"DROP INDEX {prefix}sessions_unindexed")
            for column in ("indexed_seq", "indexed_terms", "generation"):
                conn.execute(f"ALTER TABLE {prefix}sessions DROP COLUMN {column}")
    elif name == "postgres":
        import psycopg
        from store_kit import POSTGRES_URL

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {prefix}messages DROP COLUMN tsv")
            conn.execute(
                f"ALTER TABLE {prefix}facts DROP COLUMN tsv, DROP COLUMN pinned, DROP COLUMN expires_at"
            )
    else:
        import redis
        from store_kit import REDIS_URL

        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            keys = list(r.scan_iter(match=f"{prefix}s:*:idx"))
            assert keys
            r.delete(*keys)
            for key in r.scan_iter(match=f"{prefix}[sc]:*"):  # the key layout before schema 4
                r.rename(key, key.replace("{", "", 1).replace("}", "", 1))
    set_schema_version(store, 1)


class TestMigration:
    def test_a_store_written_before_search_is_migrated_and_searchable(self, store: RollingStore) -> None:
        if backend_name(store) == "memory":
            pytest.skip("the in-memory store has no stored schema to migrate")
        _fill(store)
        store.add_fact("alice", "Alice loves Paris")
        store.close()
        _downgrade(store)
        again = reopen(store)
        try:
            hits = again.search("paris trip", client_id="alice")
            assert {h.key for h in hits if h.kind == "message"} == {
                ("message", "s1", 1),
                ("message", "s1", 2),
            }
            assert [h.fact.text for h in hits if h.fact] == ["Alice loves Paris"]
            assert [f.pinned for f in again.facts("alice")] == [False]
            assert again.search("paris", client_id="bob")[0].key == ("message", "s3", 1)
            again.append("s2", [HumanMessage("Paris again")], client_id="alice")
            assert ("message", "s2", 2) in _keys(again.search("paris", client_id="alice"))
            again.forget("alice")
            assert again.search("paris oscar", client_id="alice") == []
        finally:
            again.close()
