"""The kit's checks of the invariants of the store contract (`stores/contract.py`).

One class per invariant, each enforced in the atomic step that reads or writes the rows: a
session row's erase generation (set by its first write, changed by every erase, never reused);
a summary install planned from a read is refused once an erase overtook it, and never lands on
a session with no row; a fact write planned from a session (its `SessionMark`) needs the
session live, with that generation and owned by the writer; a read, search, listing, export
and forget reach a session only for its owner now (the `search` primitive, `store.backend`, is called directly:
the API's look-up before it is the race window); a search's scores depend on its scope's
entries only. (The project's own tests also race erases against these reads and writes on its
four backends: `tests/test_store_races.py`.)
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import (
    InvalidArgumentError,
    InvalidIdError,
    OwnershipError,
    StaleWriteError,
)
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.testing._harness import StoreHarness, texts


def _gen(store: RollingStore, session_id: str = "s1") -> str | None:
    return store.read_turn(session_id, limit=0).generation


def _mark(store: RollingStore, session_id: str = "s1") -> SessionMark:
    return SessionMark(session_id, _gen(store, session_id) or "")


def _erase(store: RollingStore, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Erase session s1 of alice's by `how`: clear_session, forget or purge (an hour later)."""
    if how == "clear_session":
        store.clear_session("s1")
    elif how == "forget":
        store.forget("alice")
    else:
        now = store._now()
        monkeypatch.setattr(store, "_now", lambda: now + 3600)
        assert store.purge(older_than=60) == 1


class GenerationChecks(StoreHarness):
    """A session row's erase generation: set by its first write, changed by every erase, never reused."""

    def test_a_session_keeps_its_generation_from_its_first_write_until_an_erase(
        self, store: RollingStore
    ) -> None:
        assert store.read_turn("s1", limit=5) == (None, [], None)  # no row, no generation
        store.append("s1", texts(2), client_id="alice")
        first = _gen(store)
        assert isinstance(first, str)
        store.append("s1", texts(2, start=3), client_id="alice")
        store.set_state("s1", {"a": 1}, client_id="alice")
        assert store.install_summary("s1", "sum", covered_seq=2, expected_version=0, generation=first)
        turn = store.read_turn("s1", limit=5, client_id="alice")  # record, rows and generation at once
        assert turn.generation == first
        assert turn.record is not None and turn.record.text == "sum"
        assert [m.seq for m in turn.messages] == [3, 4]

    def test_every_erase_changes_the_generation_and_none_is_reused(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        seen: list[str | None] = []

        def recreate() -> None:  # by an append, or by a state write alone: both create the row
            if len(seen) % 2:
                store.set_state("s1", {"n": len(seen)}, client_id="alice")
            else:
                store.append("s1", [HumanMessage("again")], client_id="alice")
            seen.append(_gen(store))

        recreate()
        for erase in ["clear_session"] * 5 + ["forget", "purge"]:
            _erase(store, erase, monkeypatch)
            assert _gen(store) is None
            recreate()
        assert all(isinstance(g, str) for g in seen)
        assert len(set(seen)) == len(seen) == 8

    @pytest.mark.asyncio
    async def test_the_async_turn_read_returns_the_generation_with_the_owner_check(
        self, store: RollingStore
    ) -> None:
        await store.aappend("s1", texts(3), client_id="alice")
        turn = await store.aread_turn("s1", limit=2, client_id="alice")
        assert turn.generation is not None and turn.generation == _gen(store)
        assert [m.seq for m in turn.messages] == [2, 3]
        with pytest.raises(OwnershipError):
            await store.aread_turn("s1", limit=2, client_id="bob")
        with pytest.raises(OwnershipError):
            await store.aread_turn("s1", limit=2, client_id=None)
        assert (await store.aread_turn("nothing", limit=2, client_id="bob")).generation is None


class StateUpdateChecks(StoreHarness):
    """`set_state`'s compare (`expected=`): a state update planned from a read made before an
    erase never writes the erased keys back."""

    def test_a_state_write_expecting_what_was_read_before_an_erase_writes_nothing(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        backend = store.backend
        for how in ("clear_session", "forget", "purge"):
            store.set_state("s1", {"card": "4111"}, client_id="alice")
            raw = backend.get_state("s1")
            assert raw is not None
            _erase(store, how, monkeypatch)
            now = store._now()
            assert backend.set_state("s1", "alice", '{"card": "4111", "n": 1}', now, expected=raw) is False
            assert store.get_state("s1") == {}
            assert backend.set_state("s1", "alice", '{"n": 1}', now, expected=None) is True
            assert backend.set_state("s1", "alice", '{"n": 2}', now, expected=None) is False
            assert store.update_state("s1", {"n": 2}, client_id="alice") == {"n": 2}
            with pytest.raises(OwnershipError):  # the owner's refusal wins over a mismatch
                backend.set_state("s1", "bob", "{}", now, expected=raw)
            assert store.get_state("s1") == {"n": 2}
            store.clear_session("s1")


class InstallChecks(StoreHarness):
    """A summary install planned from a read is refused once an erase overtook it, and never lands on a session with no row."""

    def test_a_summary_is_never_installed_on_a_session_with_no_row(self, store: RollingStore) -> None:
        assert not store.install_summary("ghost-7f3", "orphan summary", covered_seq=0, expected_version=0)
        assert store.summary("ghost-7f3") is None
        assert store.session_info("ghost-7f3") is None
        store.append("s1", texts(2), client_id="alice")
        store.clear_session("s1")
        assert not store.install_summary("s1", "orphan summary", covered_seq=1, expected_version=0)
        assert store.summary("s1") is None
        assert self.leftovers(store, "ghost-7f3", "orphan summary") == []

    @pytest.mark.asyncio
    async def test_an_install_needs_the_generation_it_was_planned_from(self, store: RollingStore) -> None:
        store.append("s1", texts(4), client_id="alice")
        generation = _gen(store)
        assert generation is not None
        assert not store.install_summary("s1", "x", covered_seq=2, expected_version=0, generation="other")
        assert not await store.ainstall_summary(
            "s1", "x", covered_seq=2, expected_version=0, generation=generation + "0"
        )
        assert store.summary("s1") is None
        assert await store.ainstall_summary(
            "s1", "ok", covered_seq=2, expected_version=0, generation=generation
        )
        assert store.install_summary("s1", "ok2", covered_seq=3, expected_version=1, generation=generation)

    @pytest.mark.parametrize(
        ("erase", "next_owner"),
        [("clear_session", "alice"), ("forget", "alice"), ("purge", "alice"), ("clear_session", "bob")],
        ids=["clear_session", "forget", "purge", "re-created-by-another"],
    )
    def test_an_install_planned_before_an_erase_is_refused_after_it(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, erase: str, next_owner: str
    ) -> None:
        old = [HumanMessage("my PIN is 1234"), AIMessage("ok")]
        store.append("s1", old, client_id="alice")
        planned = store.read_turn("s1", limit=10, client_id="alice").generation
        _erase(store, erase, monkeypatch)
        store.append("s1", old, client_id=next_owner)  # same seqs, same text: only the generation tells
        assert not store.install_summary(
            "s1", "erased PIN 1234", covered_seq=2, expected_version=0, generation=planned
        )
        assert store.summary("s1") is None
        fresh = _gen(store)
        assert fresh not in (None, planned)
        assert store.install_summary("s1", "new", covered_seq=2, expected_version=0, generation=fresh)
        # The version now matches the stale plan's guess; the generation still refuses it.
        assert not store.install_summary(
            "s1", "erased PIN 1234", covered_seq=2, expected_version=1, generation=planned
        )
        record = store.summary("s1")
        assert record is not None and record.text == "new"

    @pytest.mark.asyncio
    async def test_the_async_install_checks_the_generation_too(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("passport X099")], client_id="alice")
        planned = await store.aread_turn("s1", limit=5, client_id="alice")
        await store.aclear_session("s1")
        assert not await store.ainstall_summary(
            "s1", "passport X099", covered_seq=1, expected_version=0, generation=planned.generation
        )
        await store.aappend("s1", [HumanMessage("again")], client_id="alice")
        assert not await store.ainstall_summary(
            "s1", "passport X099", covered_seq=1, expected_version=0, generation=planned.generation
        )
        assert await store.asummary("s1") is None
        assert not await store.ainstall_summary("ghost-7f3", "ghost", covered_seq=0, expected_version=0)
        assert self.leftovers(store, "ghost-7f3") == []


_FACT_REFUSALS = [
    "clear_session",  # erased, then re-created by the same client (a new generation)
    "forget",  # the same; the fact to update was erased with the session
    "purge",
    "cleared-not-re-created",  # no row at all
    "forgotten-not-re-created",
    "re-created-by-another",
    "another-clients-session",
    "nobodys-session",
    "no-such-session",
    "wrong-generation",
]


class PlannedFactChecks(StoreHarness):
    """A fact write planned from a session (its `SessionMark`) needs the session live, with that generation, owned by the writer."""

    def test_a_fact_planned_from_a_live_session_of_the_client_is_written(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("I am allergic to peanuts")], client_id="alice")
        mark = _mark(store)
        fact = store.add_fact("alice", "allergic to peanuts", planned_from=mark)
        assert fact is not None
        updated = store.update_fact("alice", fact.id, "allergic to all nuts", planned_from=mark)
        assert updated is not None and updated.text == "allergic to all nuts"
        assert [f.text for f in store.facts("alice")] == ["allergic to all nuts"]

    @pytest.mark.parametrize("how", _FACT_REFUSALS)
    def test_a_fact_planned_from_an_erased_or_foreign_session_is_refused_and_nothing_written(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, how: str
    ) -> None:
        owner = {"another-clients-session": "bob", "nobodys-session": None}.get(how, "alice")
        store.append("s1", [HumanMessage("I live in Lyon")], client_id=owner)
        kept = store.add_fact("alice", "likes tea")
        assert kept is not None
        mark = _mark(store)
        if how in ("clear_session", "forget", "purge"):
            _erase(store, how, monkeypatch)
            store.append("s1", [HumanMessage("new conversation")], client_id="alice")
        elif how == "cleared-not-re-created":
            store.clear_session("s1")
        elif how == "forgotten-not-re-created":
            store.forget("alice")
            kept = store.add_fact("alice", "likes tea")  # written after the erase: stays
            assert kept is not None
        elif how == "re-created-by-another":
            store.clear_session("s1")
            store.append("s1", [HumanMessage("hi")], client_id="bob")
        elif how == "no-such-session":
            mark = SessionMark("nowhere", mark.generation)
        elif how == "wrong-generation":
            mark = SessionMark("s1", "x")
        before = self.raw(store)
        with pytest.raises(StaleWriteError, match=mark.session_id):
            store.add_fact("alice", "lives in Lyon", source="extractor", planned_from=mark)
        with pytest.raises(StaleWriteError, match=mark.session_id):
            store.update_fact("alice", kept.id, "likes coffee", planned_from=mark)
        self.assert_wrote_nothing(store, before)

    @pytest.mark.asyncio
    async def test_the_async_fact_writes_check_the_mark_too(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("I am allergic to peanuts")], client_id="alice")
        turn = await store.aread_turn("s1", limit=1, client_id="alice")
        mark = SessionMark("s1", turn.generation or "")
        fact = await store.aadd_fact("alice", "Lives in Lyon", planned_from=mark)
        assert fact is not None
        assert await store.aupdate_fact("alice", fact.id, "Lives in Paris", planned_from=mark) is not None
        with pytest.raises(StaleWriteError):
            await store.aadd_fact("bob", "not bob's session", planned_from=mark)
        await store.aclear_session("s1")
        with pytest.raises(StaleWriteError):  # no row
            await store.aadd_fact("alice", "stale", planned_from=mark)
        await store.aappend("s1", [HumanMessage("hi")], client_id="alice")
        with pytest.raises(StaleWriteError):  # a new generation
            await store.aadd_fact("alice", "allergic to shellfish", planned_from=mark)
        with pytest.raises(StaleWriteError):
            await store.aupdate_fact("alice", fact.id, "allergic to shellfish", planned_from=mark)
        assert [f.text for f in await store.afacts("alice")] == ["Lives in Paris"]
        assert await store.afacts("bob") == []


def _recreated_by_bob(store: RollingStore) -> None:
    store.append("s1", [HumanMessage("alice's secret is oscar")], client_id="alice")
    store.add_fact("alice", "alice's cat is oscar")
    store.search("oscar", client_id="alice")  # indexed while it was alice's
    store.clear_session("s1")
    store.append("s1", [HumanMessage("bob's secret is oscar")], client_id="bob")


class OwnershipChecks(StoreHarness):
    """A read, search, listing, export and forget reach a session only for its owner now."""

    def test_a_session_comes_back_only_to_its_owner_now(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("zebra crossing")], client_id="bob")
        store.append("anon", [HumanMessage("zebra stripes")])
        store.add_fact("alice", "alice saw a zebra")

        def found(client_id: str | None, session_id: str) -> list[tuple[Any, ...]]:
            rows = store.backend.search(["zebra"], client_id, session_id, 10, store._now())
            return sorted((row[1] or "", row[2] or 0, "" if row[5] is None else row[5].text) for row in rows)

        assert found("alice", "s1") == [("", 0, "alice saw a zebra")]
        assert found(None, "s1") == []
        assert found("alice", "anon") == [("", 0, "alice saw a zebra")]
        assert found(None, "anon") == [("anon", 1, "")]
        assert found("bob", "s1") == [("s1", 1, "")]
        store.append("anon", [HumanMessage("zebra again")], client_id="bob")  # bob claims it
        assert found(None, "anon") == []
        assert found("bob", "anon") == [("anon", 1, ""), ("anon", 2, "")]

    def test_a_session_searched_with_its_old_owner_gives_nothing_of_the_new_one(
        self, store: RollingStore
    ) -> None:
        _recreated_by_bob(store)
        for rows in (
            store.backend.search(["oscar"], "alice", "s1", 10, store._now()),
            store.backend.search(["oscar"], "alice", None, 10, store._now()),
        ):
            assert [row[5].text for row in rows if row[5] is not None] == ["alice's cat is oscar"]
            assert [row for row in rows if row[5] is None] == []
        assert [row[1] for row in store.backend.search(["oscar"], "bob", "s1", 10, store._now())] == ["s1"]

    @pytest.mark.asyncio
    async def test_the_async_search_filters_the_owner_in_the_statement_too(self, store: RollingStore) -> None:
        _recreated_by_bob(store)
        rows = await store.async_backend.search(["oscar", "secret"], "alice", "s1", 10, store._now())
        assert [row for row in rows if row[5] is None] == []

    def test_a_clients_listing_search_export_and_forget_reach_only_the_sessions_it_owns_now(
        self, store: RollingStore
    ) -> None:
        store.append("s1", [HumanMessage("alice pin 1111")], client_id="alice")
        store.append("s2", [HumanMessage("alice stays")], client_id="alice")
        store.clear_session("s1")
        store.append("s1", [HumanMessage("bob pin 2222"), AIMessage("noted")], client_id="bob")
        assert store.sessions("alice") == ["s2"]
        assert store.search("pin", client_id="alice") == []
        exported = str(store.export("alice"))
        assert "2222" not in exported and "alice stays" in exported
        store.forget("alice")
        assert [r.message.content for r in store.read("s1", client_id="bob")] == ["bob pin 2222", "noted"]
        assert store.sessions("bob") == ["s1"]
        assert _gen(store, "s2") is None
        assert store.export("alice")["sessions"] == []


class TurnReadChecks(StoreHarness):
    """A turn's one read (`read_memory`: summary, tail, generation, state and facts) and one
    write (`append_and_summary`), with the owner check of the reads they stand for."""

    @staticmethod
    def _turn(store: RollingStore) -> None:
        store.append("s1", texts(5), client_id="alice")
        assert store.install_summary("s1", "the first two", covered_seq=2, expected_version=0)
        store.set_state("s1", {"order": "A-12"}, client_id="alice")
        store.add_fact("alice", "Allergic to peanuts", pinned=True)
        store.add_fact("alice", "Lives in Lyon")
        store.add_fact("alice", "Gone soon", ttl=60)
        store.add_fact("bob", "Bob's fact")

    def test_read_memory_is_the_turns_reads_at_one_instant(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self._turn(store)
        now = store._now()
        monkeypatch.setattr(store, "_now", lambda: now + 120)  # "Gone soon" expired
        read = store.read_memory("s1", limit=2, client_id="alice")
        assert read.turn == store.read_turn("s1", limit=2, client_id="alice")
        assert [m.message.content for m in read.turn.messages] == ["m4", "m5"]
        assert read.state == {"order": "A-12"}
        assert read.facts == store.facts("alice")
        assert [f.text for f in read.facts] == ["Allergic to peanuts", "Lives in Lyon"]

    @pytest.mark.asyncio
    async def test_aread_memory_reads_what_read_memory_reads(self, store: RollingStore) -> None:
        self._turn(store)
        assert await store.aread_memory("s1", limit=3, client_id="alice") == store.read_memory(
            "s1", limit=3, client_id="alice"
        )

    def test_read_memory_refuses_another_clients_session_and_shows_only_its_clients_facts(
        self, store: RollingStore
    ) -> None:
        self._turn(store)
        for reader in ("bob", None):
            with pytest.raises(OwnershipError):
                store.read_memory("s1", limit=5, client_id=reader)
        store.append("anon", texts(1))
        read = store.read_memory("anon", limit=5, client_id="bob")
        assert [f.text for f in read.facts] == ["Bob's fact"] and read.turn.generation is not None
        assert store.read_memory("anon", limit=5, client_id=None).facts == []

    def test_an_erased_session_reads_as_empty(self, store: RollingStore) -> None:
        self._turn(store)
        store.clear_session("s1")
        read = store.read_memory("s1", limit=5, client_id="alice")
        assert read.turn == (None, [], None) and read.state == {}
        assert len(read.facts) == 3  # the client's facts are not the session's
        store.forget("alice")
        assert store.read_memory("s1", limit=5, client_id="alice").facts == []

    def test_append_and_summary_appends_then_reads_the_summary(self, store: RollingStore) -> None:
        assert store.append_and_summary("s1", texts(2), client_id="alice") == ([1, 2], None)
        assert store.install_summary("s1", "m1", covered_seq=1, expected_version=0)
        seqs, record = store.append_and_summary("s1", texts(1, 3), client_id="alice")
        assert seqs == [3] and record is not None and record.text == "m1"
        with pytest.raises(OwnershipError):
            store.append_and_summary("s1", texts(1), client_id="bob")
        with pytest.raises(OwnershipError):
            store.append_and_summary("s1", texts(1))
        assert store.last_seq("s1") == 3

    @pytest.mark.asyncio
    async def test_aappend_and_summary_is_the_same_write(self, store: RollingStore) -> None:
        assert await store.aappend_and_summary("s1", texts(2), client_id="alice") == ([1, 2], None)
        assert store.install_summary("s1", "m1", covered_seq=1, expected_version=0)
        seqs, record = await store.aappend_and_summary("s1", texts(1, 3), client_id="alice")
        assert seqs == [3] and record is not None and record.text == "m1"
        with pytest.raises(OwnershipError):
            await store.aappend_and_summary("s1", texts(1), client_id="bob")
        assert store.last_seq("s1") == 3

    @staticmethod
    def _after(store: RollingStore, points: Any, client_id: Any) -> list[Any]:
        return [m and m.message.content for m in store.messages_after(points, client_id=client_id)]

    def test_messages_after_reads_the_message_after_each_point_at_once(self, store: RollingStore) -> None:
        store.append("s1", texts(5), client_id="alice")
        store.append("anon", texts(2, 7))
        points = [("s1", 1), ("s1", 5), ("anon", 0), ("nosuch", 3), ("s1", 3)]
        assert self._after(store, points, None) == [None, None, "m7", None, None]
        assert self._after(store, points, "alice") == ["m2", None, None, None, "m4"]
        for (sid, seq), got in zip(points, store.messages_after(points), strict=True):
            assert got == next(iter(store.read(sid, after_seq=seq, limit=1, newest=False)), None)
        assert store.messages_after([], client_id="alice") == []

    def test_messages_after_never_reads_a_session_its_owner_refuses_the_reader(
        self, store: RollingStore
    ) -> None:
        store.append("s1", texts(3), client_id="alice")
        store.append("anon", texts(2))
        points = [("s1", 1), ("anon", 1)]
        # A search's scope: a client's own sessions only, a run naming no client nobody's only.
        assert self._after(store, points, "bob") == [None, None]
        assert self._after(store, points, None) == [None, "m2"]
        assert self._after(store, points, "alice") == ["m2", None]
        assert [m and m.seq for m in store.messages_after(points)] == [2, 2]  # the operator's

    def test_messages_after_reads_nothing_of_an_erased_session(self, store: RollingStore) -> None:
        store.append("s1", texts(3), client_id="alice")
        store.clear_session("s1")
        assert self._after(store, [("s1", 0)], "alice") == [None]
        store.append("s1", [HumanMessage("bob pin 2222"), AIMessage("noted")], client_id="bob")
        assert self._after(store, [("s1", 0), ("s1", 1)], "alice") == [None, None]
        assert self._after(store, [("s1", 1)], "bob") == ["noted"]

    @pytest.mark.parametrize("bad", ["s1", [("s1",)], [("s1", -1)], [("s1", True)], [("", 1)], [["s1", 1]]])
    def test_messages_after_refuses_a_bad_point(self, store: RollingStore, bad: Any) -> None:
        store.append("s1", texts(2), client_id="alice")
        with pytest.raises((InvalidArgumentError, InvalidIdError)):  # an empty id: its own error
            store.messages_after(bad, client_id="alice")

    @pytest.mark.asyncio
    async def test_amessages_after_reads_what_messages_after_reads(self, store: RollingStore) -> None:
        store.append("s1", texts(4), client_id="alice")
        store.append("s2", texts(2), client_id="bob")
        store.append("anon", texts(2))
        points = [("s1", 2), ("s2", 0), ("s1", 4), ("anon", 0)]
        for reader in ("alice", "bob", None):
            got = await store.amessages_after(points, client_id=reader)
            assert got == store.messages_after(points, client_id=reader)
        assert [m and m.seq for m in await store.amessages_after(points, client_id="alice")] == [
            3,
            None,
            None,
            None,
        ]


_SCOPES: dict[str, dict[str, str | None]] = {
    "client": {"client": "alice", "session": None},
    "session": {"client": "alice", "session": "a1"},
    "anonymous": {"client": None, "session": "anon"},
}


class ScopeScoreChecks(StoreHarness):
    """A search's scores depend on the entries of its scope only, never on another client's text."""

    @pytest.mark.parametrize("scope", list(_SCOPES))
    def test_a_clients_scores_do_not_depend_on_another_clients_text(
        self, store: RollingStore, scope: str
    ) -> None:
        store.append(
            "a1", [HumanMessage("Oscar the cat sleeps"), AIMessage("We went to Paris")], client_id="alice"
        )
        store.append("a2", [HumanMessage("Write to me at alice@example.org")], client_id="alice")
        store.add_fact("alice", "Alice's cat is Oscar")
        store.append("anon", [HumanMessage("an anonymous Oscar"), AIMessage("and Paris, a lovely cat")])

        where = _SCOPES[scope]

        def ranked() -> list[tuple[Any, float]]:
            hits = store.search(
                "oscar paris cat example", limit=20, client_id=where["client"], session_id=where["session"]
            )
            return [(h.key, h.score) for h in hits]

        before = ranked()
        assert len(before) >= 2
        for i in range(20):
            store.append(
                f"b{i}", [HumanMessage(f"Oscar Paris cat bob@example.com words {i}")], client_id="bob"
            )
        store.add_fact("bob", "Oscar Paris cat bob@example.com")
        store.append("n2", [HumanMessage("Oscar Paris cat elsewhere " * 3)])  # another anonymous session
        store.append("a3", [HumanMessage("example example cat")], client_id="carol")
        after = ranked()
        assert [key for key, _ in after] == [key for key, _ in before]
        assert [score for _, score in after] == pytest.approx([score for _, score in before], rel=1e-9)


def _words(store: RollingStore, query: str, **scope: Any) -> list[tuple[str | None, int | None, float]]:
    return [(h.session_id, h.seq, h.score) for h in store.search(query, limit=50, **scope)]


class RewindChecks(StoreHarness):
    """An append's rewind (`AppendBatch.rewind`): the rows past it are withdrawn with their index
    entries and statistics in the same atomic write, never found again; rows a summary covers
    are kept; the session's generation changes when a row goes; another client's rewind is
    refused and withdraws nothing."""

    def test_a_rewind_withdraws_the_rows_past_it_and_appends_after_the_last_kept(
        self, store: RollingStore
    ) -> None:
        store.append("s1", [HumanMessage("we met in Rome"), AIMessage("Rome is lovely")], client_id="alice")
        store.append(
            "s1", [HumanMessage("the Colosseum at night"), AIMessage("bring a coat")], client_id="alice"
        )
        before = _gen(store)
        assert store.search("colosseum", client_id="alice")  # indexed before the rewind
        seqs = store.append("s1", [HumanMessage("no, it was Paris")], client_id="alice", rewind=2)
        assert seqs == [3]
        assert [r.message.content for r in store.read("s1")] == [
            "we met in Rome",
            "Rome is lovely",
            "no, it was Paris",
        ]
        assert store.last_seq("s1") == 3
        assert _gen(store) not in (None, before)
        assert store.search("colosseum coat", client_id="alice") == []
        assert store.search("colosseum coat", session_id="s1", client_id="alice") == []
        assert [(h.seq) for h in store.search("paris", client_id="alice")] == [3]
        exported = str(store.export("alice"))
        assert "Colosseum" not in exported and "coat" not in exported

    def test_a_rewinds_statistics_equal_those_of_the_rows_it_kept(self, store: RollingStore) -> None:
        kept = [HumanMessage("oscar the cat"), AIMessage("a cat named oscar sleeps")]
        store.append("s1", kept, client_id="alice")
        store.append("s1", [HumanMessage("cat cat cat paris paris " * 5)], client_id="alice")
        store.append("s1", [AIMessage("only paris")], client_id="alice", rewind=2)
        store.append("t1", [*kept, AIMessage("only paris")], client_id="bob")
        for query in ("oscar cat", "paris", "cat paris sleeps"):
            mine = _words(store, query, client_id="alice")
            theirs = _words(store, query, client_id="bob")
            assert [seq for _, seq, _ in mine] == [seq for _, seq, _ in theirs]
            assert [s for _, _, s in mine] == pytest.approx([s for _, _, s in theirs], rel=1e-9)
            assert _words(store, query, session_id="s1", client_id="alice") == mine

    def test_a_withdrawal_alone_writes_no_row_and_nothing_past_the_last_is_withdrawn(
        self, store: RollingStore
    ) -> None:
        store.append("s1", texts(4), client_id="alice")
        first = _gen(store)
        assert store.append("s1", [], client_id="alice", rewind=4) == []
        assert store.append("s1", [], client_id="alice", rewind=9) == []
        assert _gen(store) == first  # nothing went: the generation stays
        assert store.append("s1", [], client_id="alice", rewind=1) == []
        assert [r.seq for r in store.read("s1")] == [1]
        assert store.search("m2 m3 m4", client_id="alice") == []
        assert store.append("s1", texts(1, start=7), client_id="alice") == [2]

    def test_the_rows_a_summary_covers_are_never_withdrawn(self, store: RollingStore) -> None:
        store.append("s1", texts(5), client_id="alice")
        assert store.install_summary("s1", "they said m1 to m3", covered_seq=3, expected_version=0)
        store.append("s1", texts(1, start=9), client_id="alice", rewind=1)
        assert [r.message.content for r in store.read("s1")] == ["m1", "m2", "m3", "m9"]
        summary = store.summary("s1")
        assert summary is not None and summary.covered_seq == 3

    def test_another_clients_rewind_is_refused_and_withdraws_nothing(self, store: RollingStore) -> None:
        store.append("s1", texts(4), client_id="alice")
        first = _gen(store)
        for who in ("bob", None):
            with pytest.raises(OwnershipError):
                store.append("s1", texts(1, start=9), client_id=who, rewind=1)
            with pytest.raises(OwnershipError):
                store.append("s1", [], client_id=who, rewind=0)
        assert [r.seq for r in store.read("s1")] == [1, 2, 3, 4]
        assert _gen(store) == first
        assert [h.seq for h in store.search("m3", client_id="alice")] == [3]

    @pytest.mark.parametrize("rewind", [-1, True, 2.0, "2"])
    def test_a_bad_rewind_is_refused_before_anything_is_written(
        self, store: RollingStore, rewind: Any
    ) -> None:
        store.append("s1", texts(3), client_id="alice")
        with pytest.raises(InvalidArgumentError):
            store.append("s1", texts(1, start=9), client_id="alice", rewind=rewind)
        assert [r.seq for r in store.read("s1")] == [1, 2, 3]

    @pytest.mark.asyncio
    async def test_the_async_twins_rewind_as_the_sync_ones(self, store: RollingStore) -> None:
        await store.aappend("s1", texts(4), client_id="alice")
        assert await store.aappend("s1", texts(1, start=9), client_id="alice", rewind=2) == [3]
        seqs, summary = await store.aappend_and_summary("s1", texts(1, start=11), client_id="alice", rewind=1)
        assert (seqs, summary) == ([2], None)
        assert [r.message.content for r in await store.aread("s1")] == ["m1", "m11"]
        assert await store.asearch("m9 m2 m3", client_id="alice") == []
        seqs, _ = store.append_and_summary("s1", [], client_id="alice", rewind=0)
        assert seqs == [] and store.read("s1") == []
