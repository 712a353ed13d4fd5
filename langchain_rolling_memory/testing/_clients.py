"""The kit's checks of a client's data and of the store as a whole: facts, forget and export,
the ids refused, reopening, and the async twins of the API.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from langchain_rolling_memory.errors import FactError, InvalidIdError, OwnershipError, SchemaVersionError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.testing._harness import FIDELITY, StoreHarness, at, texts


class FactChecks(StoreHarness):
    """A client's facts: normalized, deduplicated, keyed, edited within their client, limited."""

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


class ErasureAndExportChecks(StoreHarness):
    """`forget` leaves nothing of a client; `export` returns all of it, as JSON."""

    def _fill(self, store: RollingStore, client: str, sessions: list[str]) -> None:
        for sid in sessions:
            store.append(sid, texts(3), client_id=client, token_counts=[1, 2, 3])
            store.install_summary(sid, f"summary of {sid}", covered_seq=2, expected_version=0)
            store.claim(sid, f"owner-{sid}", 60)
            store.set_state(sid, {"sid": sid}, client_id=client)
        store.add_fact(client, f"fact about {client}", key="k")

    def test_forget_leaves_no_row_or_key_of_the_client(self, store: RollingStore) -> None:
        gone = ["sess-forgotten-1", "sess-forgotten-2"]
        self._fill(store, "client-forgotten", gone)
        self._fill(store, "client-kept", ["sess-kept-1"])
        before = self.raw(store)
        assert before is None or [line for line in before if "client-forgotten" in line]
        store.forget("client-forgotten")
        assert store.sessions("client-forgotten") == []
        assert store.facts("client-forgotten") == []
        assert [r.seq for r in store.read("sess-kept-1")] == [1, 2, 3]
        assert store.sessions("client-kept") == ["sess-kept-1"]
        assert [f.text for f in store.facts("client-kept")] == ["fact about client-kept"]
        assert self.leftovers(store, "client-forgotten", *gone) == []

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


class IdChecks(StoreHarness):
    """Ids that could escape a key or a statement are refused before anything is written."""

    @pytest.mark.parametrize("bad", BAD_IDS, ids=range(len(BAD_IDS)))
    def test_unsafe_ids_are_refused_and_nothing_is_written(self, store: RollingStore, bad: str) -> None:
        store.append("s1", texts(1), client_id="c1")
        before = self.raw(store)
        calls: list[Callable[[], object]] = [
            lambda: store.append(bad, texts(1)),
            lambda: store.append("s1", texts(1), client_id=bad),
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
        self.assert_wrote_nothing(store, before)

    def test_every_allowed_character_works_as_an_id(self, store: RollingStore) -> None:
        odd = "User.42:tenant@example.com-x_y"
        store.append(odd, texts(2), client_id=odd)
        store.add_fact(odd, "ok")
        assert store.sessions(odd) == [odd]
        assert [r.seq for r in store.read(odd)] == [1, 2]
        # An id that looks like another session's key suffix must not reach that session.
        store.append("a:msgs", texts(1))
        store.append("a", texts(3))
        assert [r.seq for r in store.read("a:msgs")] == [1]


class ReopeningChecks(StoreHarness):
    """Another store object on the same data (needs the `reopen` hook)."""

    def test_a_new_store_object_sees_the_same_data(self, store: RollingStore) -> None:
        store.append("s1", FIDELITY, client_id="c1", token_counts=[1] * len(FIDELITY))
        store.install_summary("s1", "sum", covered_seq=3, expected_version=0)
        store.add_fact("c1", "fact")
        store.set_state("s1", {"a": 1}, client_id="c1")
        again = self.reopened(store)
        try:
            assert [r.message for r in again.read("s1")] == FIDELITY
            record = again.summary("s1")
            assert record is not None
            assert record.version == 1
            assert [f.text for f in again.facts("c1")] == ["fact"]
            assert again.get_state("s1") == {"a": 1}
            assert again.append("s1", texts(1), client_id="c1") == [len(FIDELITY) + 1]
            assert again.sessions("c1") == ["s1"]
        finally:
            again.close()

    def test_a_store_written_by_a_newer_schema_is_refused(self, store: RollingStore) -> None:
        store.append("s1", texts(1))
        if not self.set_schema_version(store, 999):
            pytest.skip(f"{type(self).__name__}.set_schema_version() records no schema version")
        with pytest.raises(SchemaVersionError, match="newer version"):
            self.reopened(store).close()


class AsyncTwinChecks(StoreHarness):
    """Every async method does what its sync twin does."""

    @pytest.mark.asyncio
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
            await store.aappend("s1", texts(1), client_id="c2")
        fact = await store.aadd_fact("c1", "likes tea", key="drink")
        assert fact is not None
        assert (await store.aupdate_fact("c1", fact.id, "likes coffee")) is not None
        assert [f.text for f in await store.afacts("c1")] == ["likes coffee"]
        exported = await store.aexport("c1")
        assert exported == {**store.export("c1"), "exported_at": exported["exported_at"]}
        assert await store.adelete_fact("c1", fact.id)
        with pytest.raises(InvalidIdError):
            await store.aappend("../x", texts(1))
        await store.aforget("c1")
        assert await store.aread("s1") == []
        assert self.leftovers(store, "c1", "s1") == []

    @pytest.mark.asyncio
    async def test_async_clear_and_purge(self, store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
        at(store, monkeypatch, 1_000_000.0)
        await store.aappend("old", texts(2))
        await store.aappend("gone", texts(2))
        await store.aclear_session("gone")
        assert await store.aread("gone") == []
        at(store, monkeypatch, 1_000_500.0)
        await store.aappend("new", texts(1))
        assert await store.apurge(older_than=100) == 1
        assert await store.aread("old") == []
        assert [r.seq for r in await store.aread("new")] == [1]
