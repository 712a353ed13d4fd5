"""Erase generations and ownership inside the statement (issue 20), run unchanged on every backend.

What `backend.py` promises each backend enforces in the atomic step that reads or writes the
rows: a session row's generation changes with every erase; a summary install or a fact write
planned from an earlier read is refused once an erase overtook it; a search returns a session's
messages only to its owner now; scores use the statistics of the search's scope only. The
races that these guard against are in `test_store_erase_races.py`.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import leftovers

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import StaleWriteError
from langchain_rolling_memory.stores import RollingStore


def _gen(store: RollingStore, session_id: str) -> str | None:
    return store.read_turn(session_id, limit=0).generation


class TestGeneration:
    def test_a_session_has_no_generation_until_its_row_exists_then_keeps_it_while_written(
        self, store: RollingStore
    ) -> None:
        assert store.read_turn("s1", limit=5) == (None, [], None)
        store.append("s1", [HumanMessage("hello")], client_id="alice")
        first = store.read_turn("s1", limit=5, client_id="alice")
        assert isinstance(first.generation, str)
        store.append("s1", [AIMessage("hi")], client_id="alice")
        store.set_state("s1", {"step": 1}, client_id="alice")
        assert store.install_summary("s1", "greeted", covered_seq=1, expected_version=0)
        turn = store.read_turn("s1", limit=5, client_id="alice")
        assert turn.generation == first.generation
        assert turn.record is not None and turn.record.covered_seq == 1
        assert [m.message.content for m in turn.messages] == ["hi"]

    def test_every_erase_changes_the_generation_and_none_is_reused(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        seen: list[str | None] = []

        def recreate() -> None:
            store.append("s1", [HumanMessage("again")], client_id="alice")
            seen.append(_gen(store, "s1"))

        recreate()
        for _ in range(5):
            store.clear_session("s1")
            assert _gen(store, "s1") is None
            recreate()
        store.forget("alice")
        assert _gen(store, "s1") is None
        recreate()
        now = store._now()
        monkeypatch.setattr(store, "_now", lambda: now + 1000)
        assert store.purge(older_than=10) == 1
        assert _gen(store, "s1") is None
        recreate()
        assert all(isinstance(g, str) for g in seen)
        assert len(set(seen)) == len(seen) == 8

    async def test_the_async_turn_read_returns_the_same_generation(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("hello")], client_id="alice")
        turn = await store.aread_turn("s1", limit=5, client_id="alice")
        assert turn.generation is not None and turn.generation == _gen(store, "s1")
        assert [m.seq for m in turn.messages] == [1]
        assert (await store.aread_turn("nobody", limit=5)).generation is None


class TestInstall:
    def test_a_summary_is_never_installed_on_a_session_with_no_row(self, store: RollingStore) -> None:
        assert not store.install_summary("ghost-7f3", "ghost text", covered_seq=0, expected_version=0)
        assert store.summary("ghost-7f3") is None
        assert leftovers(store, "ghost-7f3") == []

    def test_an_install_planned_before_an_erase_is_refused(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("passport X099")], client_id="alice")
        planned = store.read_turn("s1", limit=5, client_id="alice")
        store.clear_session("s1")
        store.append("s1", [HumanMessage("new conversation")], client_id="bob")
        assert not store.install_summary(
            "s1", "passport X099", covered_seq=1, expected_version=0, generation=planned.generation
        )
        assert store.summary("s1") is None
        now = store.read_turn("s1", limit=5)
        assert now.generation not in (None, planned.generation)
        assert store.install_summary(
            "s1", "bob says hi", covered_seq=1, expected_version=0, generation=now.generation
        )
        assert not store.install_summary(
            "s1", "passport X099", covered_seq=1, expected_version=1, generation=planned.generation
        )
        record = store.summary("s1")
        assert record is not None and record.text == "bob says hi"

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
        assert leftovers(store, "ghost-7f3") == []


class TestFactsPlannedFrom:
    def test_a_fact_planned_from_a_live_session_of_the_client_is_written(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("I am allergic to peanuts")], client_id="alice")
        mark = SessionMark("s1", store.read_turn("s1", limit=1, client_id="alice").generation or "")
        fact = store.add_fact("alice", "allergic to peanuts", planned_from=mark)
        assert fact is not None
        updated = store.update_fact("alice", fact.id, "allergic to all nuts", planned_from=mark)
        assert updated is not None and [f.text for f in store.facts("alice")] == ["allergic to all nuts"]

    @pytest.mark.parametrize("erase", ["clear", "forget", "recreated-by-another", "another-clients-session"])
    def test_a_fact_planned_from_an_erased_or_foreign_session_is_refused(
        self, store: RollingStore, erase: str
    ) -> None:
        owner = "bob" if erase == "another-clients-session" else "alice"
        store.append("s1", [HumanMessage("I am allergic to peanuts")], client_id=owner)
        kept = store.add_fact("alice", "likes tea")
        assert kept is not None
        mark = SessionMark("s1", store.read_turn("s1", limit=1).generation or "")
        if erase == "clear":
            store.clear_session("s1")
        elif erase == "forget":
            store.forget("alice")
            kept = store.add_fact("alice", "likes tea")  # written after the erase: stays
            assert kept is not None
        elif erase == "recreated-by-another":
            store.clear_session("s1")
            store.append("s1", [HumanMessage("hi")], client_id="bob")
        before = store.facts("alice")
        with pytest.raises(StaleWriteError, match="s1"):
            store.add_fact("alice", "allergic to peanuts", planned_from=mark)
        with pytest.raises(StaleWriteError, match="s1"):
            store.update_fact("alice", kept.id, "allergic to peanuts", planned_from=mark)
        assert store.facts("alice") == before

    async def test_the_async_fact_writes_check_the_mark_too(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("I am allergic to peanuts")], client_id="alice")
        turn = await store.aread_turn("s1", limit=1, client_id="alice")
        mark = SessionMark("s1", turn.generation or "")
        fact = await store.aadd_fact("alice", "allergic to peanuts", planned_from=mark)
        assert fact is not None
        await store.aclear_session("s1")
        await store.aappend("s1", [HumanMessage("hi")], client_id="alice")
        with pytest.raises(StaleWriteError):
            await store.aadd_fact("alice", "allergic to shellfish", planned_from=mark)
        with pytest.raises(StaleWriteError):
            await store.aupdate_fact("alice", fact.id, "allergic to shellfish", planned_from=mark)
        assert [f.text for f in await store.afacts("alice")] == ["allergic to peanuts"]


class TestSearchScope:
    """The `_search` primitive itself: the caller's owner check is a look-up before it, so the
    primitive must filter on its own (a session re-created by another client in between)."""

    def test_a_session_comes_back_only_to_its_owner_now(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("zebra crossing")], client_id="bob")
        store.append("anon", [HumanMessage("zebra stripes")])
        store.add_fact("alice", "alice saw a zebra")

        def kinds(client_id: str | None, session_id: str) -> list[tuple[str | None, str | None]]:
            rows = store._search(["zebra"], client_id, session_id, 10)
            return sorted((row[1], None if row[5] is None else row[5].text) for row in rows)

        assert kinds("alice", "s1") == [(None, "alice saw a zebra")]
        assert kinds(None, "s1") == []
        assert kinds("alice", "anon") == [(None, "alice saw a zebra")]
        assert kinds(None, "anon") == [("anon", None)]
        assert kinds("bob", "s1") == [("s1", None)]

    def test_a_clients_scores_do_not_depend_on_another_clients_text(self, store: RollingStore) -> None:
        store.append(
            "a1", [HumanMessage("my cat oscar sleeps"), AIMessage("oscar is a good cat")], client_id="alice"
        )
        store.append("a2", [HumanMessage("the train was late")], client_id="alice")
        store.add_fact("alice", "alice has a cat named oscar")
        store.append("anon", [HumanMessage("oscar the anonymous cat"), AIMessage("a dog")])

        def scores() -> list[list[tuple[object, float]]]:
            out = []
            for where in (
                {"client_id": "alice"},
                {"client_id": "alice", "session_id": "a1"},
                {"session_id": "anon"},
            ):
                hits = store.search("oscar cat train", limit=20, **where)  # type: ignore[arg-type]
                out.append(sorted((h.key, round(h.score, 9)) for h in hits))
            return out

        before = scores()
        assert all(before)
        for i in range(30):
            store.append(f"b{i}", [HumanMessage(f"oscar oscar cat {i} bob@example.com")], client_id="bob")
            store.append("bob-anon", [HumanMessage(f"train cat {i}")])
        store.add_fact("bob", "bob likes the cat oscar")
        assert scores() == before


class TestClientReach:
    def test_a_clients_listing_export_and_forget_reach_only_the_sessions_it_owns_now(
        self, store: RollingStore
    ) -> None:
        store.append("s1", [HumanMessage("alice was here")], client_id="alice")
        store.append("s2", [HumanMessage("alice stays")], client_id="alice")
        store.clear_session("s1")
        store.append("s1", [HumanMessage("bob pin 4321")], client_id="bob")
        assert store.sessions("alice") == ["s2"]
        exported = store.export("alice")
        assert "4321" not in str(exported)
        assert "alice stays" in str(exported)
        store.forget("alice")
        assert store.sessions("bob") == ["s1"]
        assert [m.content for m in store.transcript("s1", client_id="bob")] == ["bob pin 4321"]
        assert store.read_turn("s2", limit=5).generation is None
