"""The storage contract, run unchanged on every backend (the `store` fixture is empty)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from store_kit import leftovers, raw_contents, reopen, set_schema_version

from langchain_rolling_memory.errors import FactError, InvalidIdError, OwnershipError, SchemaVersionError
from langchain_rolling_memory.stores import RollingStore


def _texts(n: int, start: int = 1) -> list[BaseMessage]:
    return [HumanMessage(f"m{i}") if i % 2 else AIMessage(f"m{i}") for i in range(start, start + n)]


def _contents(rows: Any) -> list[Any]:
    return [r.message.content for r in rows]


def _at(store: RollingStore, monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    """Set the store's clock (leases, purge and timestamps read it)."""
    monkeypatch.setattr(store, "_now", lambda: t)


FIDELITY: list[BaseMessage] = [
    SystemMessage("You are terse.", id="sys-1"),
    HumanMessage(
        content=[
            {"type": "text", "text": 'héllo wörld 🌍 — 你好 \x00 tab\t quote" back\\slash'},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
        id="h-1",
        name="alice",
        additional_kwargs={"lang": "fr"},
    ),
    AIMessage(
        content="",
        id="run-abc",
        name="bot",
        tool_calls=[
            {
                "name": "weather",
                "args": {"city": "Zürich", "days": [1, 2]},
                "id": "call-1",
                "type": "tool_call",
            },
            {"name": "time", "args": {}, "id": "call-2", "type": "tool_call"},
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "fake-1", "finish_reason": "tool_calls"},
    ),
    ToolMessage("18°C", tool_call_id="call-1", name="weather", status="success", id="t-1"),
    ToolMessage("boom", tool_call_id="call-2", status="error", artifact={"trace": [1, 2]}),
    AIMessage(
        content=[{"type": "text", "text": "It is 18°C."}, {"type": "reasoning", "reasoning": "easy"}],
        id="run-def",
    ),
    ChatMessage("custom role", role="critic"),
]


class TestTranscript:
    def test_append_returns_gap_free_seqs_and_reads_back_in_order(self, store: RollingStore) -> None:
        assert store.append("s1", _texts(3)) == [1, 2, 3]
        assert store.append("s1", _texts(2, start=4)) == [4, 5]
        rows = store.read("s1")
        assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
        assert _contents(rows) == ["m1", "m2", "m3", "m4", "m5"]
        assert store.last_seq("s1") == 5
        assert store.transcript("s1") == _texts(5)

    def test_read_limits_take_the_newest_or_the_oldest_after_a_seq(self, store: RollingStore) -> None:
        store.append("s1", _texts(10))
        assert [r.seq for r in store.read("s1", limit=3)] == [8, 9, 10]
        assert [r.seq for r in store.read("s1", limit=3, newest=False)] == [1, 2, 3]
        assert [r.seq for r in store.read("s1", after_seq=5, limit=2, newest=False)] == [6, 7]
        assert [r.seq for r in store.read("s1", after_seq=5, limit=2)] == [9, 10]
        assert [r.seq for r in store.read("s1", after_seq=5)] == [6, 7, 8, 9, 10]
        assert [r.seq for r in store.read("s1", after_seq=8, limit=5)] == [9, 10]
        assert store.read("s1", limit=0) == []
        assert store.read("s1", after_seq=10) == []
        assert store.read("unknown") == []
        assert store.last_seq("unknown") == 0

    def test_messages_read_back_equal_to_what_was_written(self, store: RollingStore) -> None:
        counts = [3, 11, 25, 2, 1, 9, None]
        store.append("s1", FIDELITY, token_counts=counts)
        rows = store.read("s1")
        assert [r.message for r in rows] == FIDELITY
        assert [type(r.message) for r in rows] == [type(m) for m in FIDELITY]
        assert [r.tokens for r in rows] == counts
        ai = rows[2].message
        assert isinstance(ai, AIMessage)
        assert ai.tool_calls[0]["args"] == {"city": "Zürich", "days": [1, 2]}
        assert ai.usage_metadata == {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}

    def test_bad_batches_raise_and_write_nothing(self, store: RollingStore) -> None:
        store.append("s1", _texts(1))
        before = raw_contents(store)
        with pytest.raises(TypeError):
            store.append("s1", [HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="token_counts"):
            store.append("s1", _texts(2), token_counts=[1])
        assert store.append("s1", []) == []
        assert raw_contents(store) == before

    def test_sessions_are_isolated(self, store: RollingStore) -> None:
        store.append("s1", _texts(3))
        store.append("s2", [HumanMessage("other")])
        store.install_summary("s1", "sum one", covered_seq=2, expected_version=0)
        store.set_state("s1", {"k": 1})
        assert [r.seq for r in store.read("s2")] == [1]
        assert store.summary("s2") is None
        assert store.get_state("s2") == {}
        store.clear_session("s1")
        assert store.read("s1") == []
        assert store.summary("s1") is None
        assert store.get_state("s1") == {}
        assert _contents(store.read("s2")) == ["other"]
        assert store.append("s1", _texts(1)) == [1]


class TestSummary:
    def test_summary_is_installed_by_compare_and_swap(self, store: RollingStore) -> None:
        store.append("s1", _texts(6))
        assert store.summary("s1") is None
        assert store.install_summary("s1", "first", covered_seq=2, expected_version=0, meta={"calls": 1})
        assert not store.install_summary("s1", "rival", covered_seq=3, expected_version=0)
        record = store.summary("s1")
        assert record is not None
        assert (record.text, record.covered_seq, record.version, record.meta) == ("first", 2, 1, {"calls": 1})
        assert store.install_summary("s1", "second", covered_seq=4, expected_version=1)
        assert not store.install_summary("s1", "stale", covered_seq=5, expected_version=1)
        record = store.summary("s1")
        assert record is not None
        assert (record.text, record.covered_seq, record.version) == ("second", 4, 2)

    def test_summary_and_tail_reads_the_record_and_the_unsummarized_messages(
        self, store: RollingStore
    ) -> None:
        store.append("s1", _texts(8), token_counts=list(range(1, 9)))
        record, tail = store.summary_and_tail("s1", limit=3)
        assert record is None
        assert [r.seq for r in tail] == [6, 7, 8]
        store.install_summary("s1", "folded", covered_seq=6, expected_version=0)
        record, tail = store.summary_and_tail("s1", limit=5)
        assert record is not None
        assert record.text == "folded"
        assert [(r.seq, r.tokens) for r in tail] == [(7, 7), (8, 8)]
        assert store.summary_and_tail("unknown", limit=5) == (None, [])


class TestLeases:
    def test_lease_is_exclusive_until_released(self, store: RollingStore) -> None:
        assert store.claim("s1", "a", 60)
        assert not store.claim("s1", "b", 60)
        assert store.claim("s1", "a", 60), "the holder may renew its lease"
        store.release("s1", "b")
        assert not store.claim("s1", "b", 60), "only the holder releases"
        store.release("s1", "a")
        assert store.claim("s1", "b", 60)

    def test_expired_lease_can_be_taken_over(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 1_000_000.0)
        assert store.claim("s1", "a", 10)
        _at(store, monkeypatch, 1_000_009.0)
        assert not store.claim("s1", "b", 10)
        _at(store, monkeypatch, 1_000_011.0)
        assert store.claim("s1", "b", 10)
        assert not store.claim("s1", "a", 10)


class TestLeasedInstall:
    """`install_summary(lease_owner=...)`: the lease is the erase generation of a session."""

    def test_an_install_under_a_lease_succeeds_only_while_its_owner_holds_it(
        self, store: RollingStore
    ) -> None:
        store.append("s1", _texts(6), client_id="ana")
        assert store.claim("s1", "a", 60)
        assert not store.install_summary("s1", "by b", covered_seq=2, expected_version=0, lease_owner="b")
        assert store.summary("s1") is None
        assert store.install_summary("s1", "by a", covered_seq=2, expected_version=0, lease_owner="a")
        assert store.install_summary("s1", "by a again", covered_seq=4, expected_version=1, lease_owner="a")
        store.release("s1", "a")
        assert not store.install_summary("s1", "released", covered_seq=5, expected_version=2, lease_owner="a")
        assert store.claim("s1", "b", 60)
        assert not store.install_summary(
            "s1", "taken over", covered_seq=5, expected_version=2, lease_owner="a"
        )
        record = store.summary("s1")
        assert record is not None
        assert (record.text, record.covered_seq, record.version) == ("by a again", 4, 2)

    @pytest.mark.parametrize("erase", ["clear_session", "forget", "purge"])
    def test_a_compaction_that_claimed_before_an_erase_never_installs_after_it(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, erase: str
    ) -> None:
        old = [HumanMessage("my PIN is 1234"), AIMessage("ok"), HumanMessage("card 4111"), AIMessage("ok")]
        _at(store, monkeypatch, 1_000_000.0)
        store.append("s1", old, client_id="ana")
        assert store.claim("s1", "compactor", 600)
        _at(store, monkeypatch, 1_000_100.0)
        if erase == "clear_session":
            store.clear_session("s1")
        elif erase == "forget":
            store.forget("ana")
        else:
            assert store.purge(older_than=50) == 1
        # The new conversation has the same messages at the same seqs: only the lease tells.
        store.append("s1", old, client_id="ana")
        secret = "erased summary: PIN 1234"
        assert not store.install_summary(
            "s1", secret, covered_seq=4, expected_version=0, lease_owner="compactor"
        )
        assert store.summary("s1") is None
        assert not [line for line in raw_contents(store) if "erased summary" in line]
        assert store.claim("s1", "compactor", 600), "the erase took the old lease with it"

    async def test_the_async_install_checks_the_lease_too(self, store: RollingStore) -> None:
        await store.aappend("s1", _texts(4))
        assert await store.aclaim("s1", "a", 60)
        await store.aclear_session("s1")
        await store.aappend("s1", _texts(4))
        assert not await store.ainstall_summary(
            "s1", "old", covered_seq=2, expected_version=0, lease_owner="a"
        )
        assert await store.aclaim("s1", "a", 60)
        assert await store.ainstall_summary("s1", "new", covered_seq=2, expected_version=0, lease_owner="a")
        assert (await store.asummary("s1")) is not None

    def test_a_bad_lease_owner_is_refused_and_nothing_written(self, store: RollingStore) -> None:
        store.append("s1", _texts(2))
        with pytest.raises(ValueError, match="lease_owner"):
            store.install_summary("s1", "x", covered_seq=1, expected_version=0, lease_owner="")
        assert store.summary("s1") is None


class TestSessionsAndState:
    def test_sessions_belong_to_the_first_client_that_names_them(self, store: RollingStore) -> None:
        store.append("s2", _texts(1), client_id="c1")
        store.append("s1", _texts(1), client_id="c1")
        store.append("s3", _texts(1), client_id="c2")
        store.append("anon", _texts(1))
        assert store.sessions("c1") == ["s1", "s2"]
        assert store.sessions("c2") == ["s3"]
        assert store.sessions("nobody") == []
        info = store.session_info("s1")
        assert info is not None
        assert info.client_id == "c1"
        assert info.created_at <= info.updated_at
        assert store.session_info("missing") is None
        store.append("anon", _texts(1), client_id="c2")
        assert store.sessions("c2") == ["anon", "s3"]

    def test_another_clients_session_is_refused_and_nothing_written(self, store: RollingStore) -> None:
        store.append("s1", _texts(2), client_id="c1")
        store.set_state("s1", {"cart": ["apple"]}, client_id="c1")
        before = raw_contents(store)
        with pytest.raises(OwnershipError, match="s1"):
            store.append("s1", [HumanMessage("intruder")], client_id="c2")
        with pytest.raises(OwnershipError):
            store.set_state("s1", {"cart": []}, client_id="c2")
        assert raw_contents(store) == before
        assert store.sessions("c2") == []
        assert store.append("s1", [HumanMessage("its client")], client_id="c1") == [3]

    def test_state_is_replaced_whole_and_kept_apart_from_the_transcript(self, store: RollingStore) -> None:
        assert store.get_state("s1") == {}
        state = {"cart": [{"sku": "A-1", "qty": 2}], "total": "12.50", "note": "livraison samedi ✓"}
        store.set_state("s1", state, client_id="c1")
        assert store.get_state("s1") == state
        store.set_state("s1", {"total": "0"}, client_id="c1")
        assert store.get_state("s1") == {"total": "0"}
        assert store.read("s1") == []
        assert store.sessions("c1") == ["s1"]
        with pytest.raises(ValueError, match="JSON"):
            store.set_state("s1", {"bad": object()}, client_id="c1")
        assert store.get_state("s1") == {"total": "0"}

    def test_purge_deletes_sessions_not_written_since_the_cutoff(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 1_000_000.0)
        store.append("old", _texts(2), client_id="c1")
        store.install_summary("old", "s", covered_seq=1, expected_version=0)
        _at(store, monkeypatch, 1_000_500.0)
        store.append("new", _texts(2), client_id="c1")
        assert store.purge(older_than=100) == 1
        assert store.read("old") == []
        assert store.summary("old") is None
        assert store.sessions("c1") == ["new"]
        assert leftovers(store, "old") == []
        assert store.purge(older_than=100) == 0


class TestFacts:
    def test_facts_are_added_deduplicated_and_kept_per_client(self, store: RollingStore) -> None:
        fact = store.add_fact("c1", "  Delivers on   Saturdays ")
        assert fact is not None
        assert fact.text == "Delivers on Saturdays"
        assert fact.client_id == "c1"
        again = store.add_fact("c1", "delivers on saturdays")
        assert again is not None
        assert again.id == fact.id
        store.add_fact("c1", "Allergic to peanuts", source="tool")
        assert [f.text for f in store.facts("c1")] == ["Delivers on Saturdays", "Allergic to peanuts"]
        assert store.facts("c2") == []

    def test_a_keyed_fact_replaces_the_one_with_the_same_key(self, store: RollingStore) -> None:
        first = store.add_fact("c1", "Team: red", key="team")
        second = store.add_fact("c1", "Team: blue", key="team")
        assert first is not None
        assert second is not None
        assert second.id == first.id
        assert second.created_at == first.created_at
        assert [(f.key, f.text) for f in store.facts("c1")] == [("team", "Team: blue")]

    def test_facts_are_updated_and_deleted_by_id_within_their_client(self, store: RollingStore) -> None:
        fact = store.add_fact("c1", "Lives in Lyon")
        assert fact is not None
        assert store.update_fact("c2", fact.id, "stolen") is None
        updated = store.update_fact("c1", fact.id, "Lives in Paris")
        assert updated is not None
        assert updated.id == fact.id
        assert [f.text for f in store.facts("c1")] == ["Lives in Paris"]
        assert not store.delete_fact("c2", fact.id)
        assert store.delete_fact("c1", fact.id)
        assert not store.delete_fact("c1", fact.id)
        assert store.facts("c1") == []

    def test_an_update_over_the_length_limit_is_refused_and_changes_nothing(
        self, store: RollingStore
    ) -> None:
        fact = store.add_fact("c1", "Lives in Lyon")
        assert fact is not None
        store.max_fact_chars = 20
        with pytest.raises(FactError, match="at most 20 characters"):
            store.update_fact("c1", fact.id, "Lives somewhere with a very long name")
        assert [f.text for f in store.facts("c1")] == ["Lives in Lyon"]

    def test_fact_limits_refuse_and_store_nothing(self, store: RollingStore) -> None:
        store.max_facts = 2
        store.max_fact_chars = 20
        store.add_fact("c1", "one")
        store.add_fact("c1", "two")
        with pytest.raises(FactError, match="max_facts"):
            store.add_fact("c1", "three")
        store.max_facts = 10
        with pytest.raises(FactError, match="at most 20"):
            store.add_fact("c1", "x" * 21)
        with pytest.raises(FactError):
            store.add_fact("c1", "   ")
        assert [f.text for f in store.facts("c1")] == ["one", "two"]


class TestErasureAndExport:
    def _fill(self, store: RollingStore, client: str, sessions: list[str]) -> None:
        for sid in sessions:
            store.append(sid, _texts(3), client_id=client, token_counts=[1, 2, 3])
            store.install_summary(sid, f"summary of {sid}", covered_seq=2, expected_version=0)
            store.claim(sid, f"owner-{sid}", 60)
            store.set_state(sid, {"sid": sid}, client_id=client)
        store.add_fact(client, f"fact about {client}", key="k")

    def test_forget_leaves_no_row_or_key_of_the_client(self, store: RollingStore) -> None:
        gone = ["sess-forgotten-1", "sess-forgotten-2"]
        self._fill(store, "client-forgotten", gone)
        self._fill(store, "client-kept", ["sess-kept-1"])
        assert leftovers(store, "client-forgotten", *gone)
        store.forget("client-forgotten")
        assert leftovers(store, "client-forgotten", *gone) == []
        assert store.sessions("client-forgotten") == []
        assert store.facts("client-forgotten") == []
        assert [r.seq for r in store.read("sess-kept-1")] == [1, 2, 3]
        assert store.sessions("client-kept") == ["sess-kept-1"]
        assert [f.text for f in store.facts("client-kept")] == ["fact about client-kept"]

    def test_export_returns_everything_about_the_client_as_json(self, store: RollingStore) -> None:
        self._fill(store, "c1", ["s1"])
        store.append("s1", [FIDELITY[2]], client_id="c1")
        self._fill(store, "c2", ["s2"])
        data = json.loads(json.dumps(store.export("c1")))
        assert data["client_id"] == "c1"
        assert [f["text"] for f in data["facts"]] == ["fact about c1"]
        (session,) = data["sessions"]
        assert session["session_id"] == "s1"
        assert session["summary"]["text"] == "summary of s1"
        assert session["state"] == {"sid": "s1"}
        assert [m["seq"] for m in session["transcript"]] == [1, 2, 3, 4]
        assert session["transcript"][3]["message"]["data"]["tool_calls"][0]["id"] == "call-1"
        assert store.export("nobody")["sessions"] == []


BAD_IDS = [
    "../../etc/passwd",
    "a/b",
    "x'; DROP TABLE lrm_messages; --",
    'x" OR 1=1',
    "s1\r\nFLUSHALL",
    "s1 DEL *",
    "*",
    "t?x",
    "key{tag}",
    "a\\b",
    "",
    "..",
    "x" * 129,
    "naïve",
]


class TestIdValidation:
    @pytest.mark.parametrize("bad", BAD_IDS, ids=range(len(BAD_IDS)))
    def test_unsafe_ids_are_refused_and_nothing_is_written(self, store: RollingStore, bad: str) -> None:
        store.append("s1", _texts(1), client_id="c1")
        before = raw_contents(store)
        calls = [
            lambda: store.append(bad, _texts(1)),
            lambda: store.append("s1", _texts(1), client_id=bad),
            lambda: store.read(bad),
            lambda: store.summary_and_tail(bad, limit=3),
            lambda: store.install_summary(bad, "x", covered_seq=1, expected_version=0),
            lambda: store.claim(bad, "o", 10),
            lambda: store.set_state(bad, {}),
            lambda: store.clear_session(bad),
            lambda: store.add_fact(bad, "x"),
            lambda: store.add_fact("c1", "x", key=bad),
            lambda: store.forget(bad),
            lambda: store.export(bad),
            lambda: store.sessions(bad),
        ]
        for call in calls:
            with pytest.raises(InvalidIdError):
                call()
        assert raw_contents(store) == before

    def test_every_allowed_character_works_as_an_id(self, store: RollingStore) -> None:
        odd = "User.42:tenant@example.com-x_y"
        store.append(odd, _texts(2), client_id=odd)
        store.add_fact(odd, "ok")
        assert store.sessions(odd) == [odd]
        assert [r.seq for r in store.read(odd)] == [1, 2]
        # An id that looks like another session's key suffix must not reach that session.
        store.append("a:msgs", _texts(1))
        store.append("a", _texts(3))
        assert [r.seq for r in store.read("a:msgs")] == [1]


class TestReopening:
    def test_a_new_store_object_sees_the_same_data(self, store: RollingStore) -> None:
        store.append("s1", FIDELITY, client_id="c1", token_counts=[1] * len(FIDELITY))
        store.install_summary("s1", "sum", covered_seq=3, expected_version=0)
        store.add_fact("c1", "fact")
        store.set_state("s1", {"a": 1}, client_id="c1")
        again = reopen(store)
        try:
            assert [r.message for r in again.read("s1")] == FIDELITY
            record = again.summary("s1")
            assert record is not None
            assert record.version == 1
            assert [f.text for f in again.facts("c1")] == ["fact"]
            assert again.get_state("s1") == {"a": 1}
            assert again.append("s1", _texts(1), client_id="c1") == [len(FIDELITY) + 1]
            assert again.sessions("c1") == ["s1"]
        finally:
            again.close()

    def test_a_store_written_by_a_newer_schema_is_refused(self, store: RollingStore) -> None:
        store.append("s1", _texts(1))
        set_schema_version(store, 999)
        with pytest.raises(SchemaVersionError, match="newer version"):
            reopen(store)


class TestAsyncTwins:
    async def test_async_methods_match_the_sync_ones(self, store: RollingStore) -> None:
        assert await store.aappend("s1", FIDELITY, client_id="c1", token_counts=[2] * 7) == list(range(1, 8))
        assert [r.message for r in await store.aread("s1")] == FIDELITY
        assert [r.seq for r in await store.aread("s1", after_seq=2, limit=2, newest=False)] == [3, 4]
        assert await store.alast_seq("s1") == 7
        assert await store.atranscript("s1") == FIDELITY
        assert await store.ainstall_summary("s1", "sum", covered_seq=5, expected_version=0)
        assert not await store.ainstall_summary("s1", "stale", covered_seq=6, expected_version=0)
        record, tail = await store.asummary_and_tail("s1", limit=10)
        assert record is not None
        assert record.text == "sum"
        assert [r.seq for r in tail] == [6, 7]
        assert (await store.asummary("s1")) == record
        assert await store.aclaim("s1", "a", 60)
        assert not await store.aclaim("s1", "b", 60)
        await store.arelease("s1", "a")
        assert await store.aclaim("s1", "b", 60)
        await store.aset_state("s1", {"x": [1]}, client_id="c1")
        assert await store.aget_state("s1") == {"x": [1]}
        assert await store.asessions("c1") == ["s1"]
        info = await store.asession_info("s1")
        assert info is not None
        assert info.client_id == "c1"
        with pytest.raises(OwnershipError):
            await store.aappend("s1", _texts(1), client_id="c2")
        fact = await store.aadd_fact("c1", "likes tea", key="drink")
        assert fact is not None
        assert (await store.aupdate_fact("c1", fact.id, "likes coffee")) is not None
        assert [f.text for f in await store.afacts("c1")] == ["likes coffee"]
        exported = await store.aexport("c1")
        assert exported == {**store.export("c1"), "exported_at": exported["exported_at"]}
        assert await store.adelete_fact("c1", fact.id)
        with pytest.raises(InvalidIdError):
            await store.aappend("../x", _texts(1))
        await store.aforget("c1")
        assert leftovers(store, "c1", "s1") == []
        assert await store.aread("s1") == []

    async def test_async_clear_and_purge(self, store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
        _at(store, monkeypatch, 1_000_000.0)
        await store.aappend("old", _texts(2))
        await store.aappend("gone", _texts(2))
        await store.aclear_session("gone")
        assert await store.aread("gone") == []
        _at(store, monkeypatch, 1_000_500.0)
        await store.aappend("new", _texts(1))
        assert await store.apurge(older_than=100) == 1
        assert await store.aread("old") == []
        assert [r.seq for r in await store.aread("new")] == [1]
