"""The kit's checks of a session's own data: its transcript, summary, lease, owner and state.

Each class checks one part of the public store API (`stores/api.py`) through the store the
harness yields; `_clients` has the per-client data, erasure and the async twins, `_invariants`
the invariants of the contract (`stores/contract.py`).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.errors import OwnershipError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.testing._harness import FIDELITY, StoreHarness, at, contents, texts


class TranscriptChecks(StoreHarness):
    """Appends, reads and their limits, exact messages, bad batches, sessions kept apart."""

    def test_append_returns_gap_free_seqs_and_reads_back_in_order(self, store: RollingStore) -> None:
        assert store.append("s1", texts(3)) == [1, 2, 3]
        assert store.append("s1", texts(2, start=4)) == [4, 5]
        rows = store.read("s1")
        assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
        assert contents(rows) == ["m1", "m2", "m3", "m4", "m5"]
        assert store.last_seq("s1") == 5
        assert store.transcript("s1") == texts(5)

    def test_read_limits_take_the_newest_or_the_oldest_after_a_seq(self, store: RollingStore) -> None:
        store.append("s1", texts(10))
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
        store.append("s1", texts(1))
        before = self.raw(store)
        with pytest.raises(TypeError):
            store.append("s1", [HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="token_counts"):
            store.append("s1", texts(2), token_counts=[1])
        assert store.append("s1", []) == []
        self.assert_wrote_nothing(store, before)

    def test_sessions_are_isolated(self, store: RollingStore) -> None:
        store.append("s1", texts(3))
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
        assert contents(store.read("s2")) == ["other"]
        assert store.append("s1", texts(1)) == [1]


class SummaryChecks(StoreHarness):
    """The summary record: installed by compare-and-swap, read with the tail it does not cover."""

    def test_summary_is_installed_by_compare_and_swap(self, store: RollingStore) -> None:
        store.append("s1", texts(6))
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
        store.append("s1", texts(8), token_counts=list(range(1, 9)))
        record, tail = store.summary_and_tail("s1", limit=3)
        assert record is None
        assert [r.seq for r in tail] == [6, 7, 8]
        store.install_summary("s1", "folded", covered_seq=6, expected_version=0)
        record, tail = store.summary_and_tail("s1", limit=5)
        assert record is not None
        assert record.text == "folded"
        assert [(r.seq, r.tokens) for r in tail] == [(7, 7), (8, 8)]
        assert store.summary_and_tail("unknown", limit=5) == (None, [])


class LeaseChecks(StoreHarness):
    """The compaction lease: one holder at a time, taken over once expired."""

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
        at(store, monkeypatch, 1_000_000.0)
        assert store.claim("s1", "a", 10)
        at(store, monkeypatch, 1_000_009.0)
        assert not store.claim("s1", "b", 10)
        at(store, monkeypatch, 1_000_011.0)
        assert store.claim("s1", "b", 10)
        assert not store.claim("s1", "a", 10)


class LeasedInstallChecks(StoreHarness):
    """`install_summary(lease_owner=...)`: the lease is the erase generation of a session."""

    def test_an_install_under_a_lease_succeeds_only_while_its_owner_holds_it(
        self, store: RollingStore
    ) -> None:
        store.append("s1", texts(6), client_id="ana")
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
        at(store, monkeypatch, 1_000_000.0)
        store.append("s1", old, client_id="ana")
        assert store.claim("s1", "compactor", 600)
        at(store, monkeypatch, 1_000_100.0)
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
        assert store.claim("s1", "compactor", 600), "the erase took the old lease with it"
        assert self.leftovers(store, "erased summary") == []

    @pytest.mark.asyncio
    async def test_the_async_install_checks_the_lease_too(self, store: RollingStore) -> None:
        await store.aappend("s1", texts(4))
        assert await store.aclaim("s1", "a", 60)
        await store.aclear_session("s1")
        await store.aappend("s1", texts(4))
        assert not await store.ainstall_summary(
            "s1", "old", covered_seq=2, expected_version=0, lease_owner="a"
        )
        assert await store.aclaim("s1", "a", 60)
        assert await store.ainstall_summary("s1", "new", covered_seq=2, expected_version=0, lease_owner="a")
        assert (await store.asummary("s1")) is not None

    def test_a_bad_lease_owner_is_refused_and_nothing_written(self, store: RollingStore) -> None:
        store.append("s1", texts(2))
        with pytest.raises(ValueError, match="lease_owner"):
            store.install_summary("s1", "x", covered_seq=1, expected_version=0, lease_owner="")
        assert store.summary("s1") is None


class SessionChecks(StoreHarness):
    """A session's owner (its first client), its state, and purge by age."""

    def test_sessions_belong_to_the_first_client_that_names_them(self, store: RollingStore) -> None:
        store.append("s2", texts(1), client_id="c1")
        store.append("s1", texts(1), client_id="c1")
        store.append("s3", texts(1), client_id="c2")
        store.append("anon", texts(1))
        assert store.sessions("c1") == ["s1", "s2"]
        assert store.sessions("c2") == ["s3"]
        assert store.sessions("nobody") == []
        info = store.session_info("s1")
        assert info is not None
        assert info.client_id == "c1"
        assert info.created_at <= info.updated_at
        assert store.session_info("missing") is None
        store.append("anon", texts(1), client_id="c2")
        assert store.sessions("c2") == ["anon", "s3"]

    def test_another_clients_session_is_refused_and_nothing_written(self, store: RollingStore) -> None:
        store.append("s1", texts(2), client_id="c1")
        store.set_state("s1", {"cart": ["apple"]}, client_id="c1")
        before = self.raw(store)
        with pytest.raises(OwnershipError, match="s1"):
            store.append("s1", [HumanMessage("intruder")], client_id="c2")
        with pytest.raises(OwnershipError):
            store.set_state("s1", {"cart": []}, client_id="c2")
        assert store.sessions("c2") == []
        self.assert_wrote_nothing(store, before)
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
        at(store, monkeypatch, 1_000_000.0)
        store.append("old", texts(2), client_id="c1")
        store.install_summary("old", "s", covered_seq=1, expected_version=0)
        at(store, monkeypatch, 1_000_500.0)
        store.append("new", texts(2), client_id="c1")
        assert store.purge(older_than=100) == 1
        assert store.read("old") == []
        assert store.summary("old") is None
        assert store.sessions("c1") == ["new"]
        assert store.purge(older_than=100) == 0
        assert self.leftovers(store, "old") == []
