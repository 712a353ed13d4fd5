"""The erase generation and the owner inside the statement (issue 20, defects 2-5), on every
backend: a turn read returns the session's generation; a summary install or a fact write
planned from it is refused once an erase changed it; a search returns a session's rows only to
its owner, checked in the statement itself (called here without the API's look-up before it);
a client's scores depend on its own text only."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import StaleWriteError
from langchain_rolling_memory.stores import RollingStore


def _erase(store: RollingStore, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if how == "clear_session":
        store.clear_session("s1")
    elif how == "forget":
        store.forget("ana")
    else:
        now = store._now()
        monkeypatch.setattr(store, "_now", lambda: now + 3600)
        assert store.purge(older_than=60) == 1


class TestGeneration:
    def test_a_turn_read_returns_a_generation_that_every_erase_changes(self, store: RollingStore) -> None:
        assert store.read_turn("s1", limit=5).generation is None  # no row, no generation
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        first = store.read_turn("s1", limit=5, client_id="ana").generation
        assert isinstance(first, str)
        store.append("s1", [AIMessage("hi")], client_id="ana")
        store.set_state("s1", {"n": 1}, client_id="ana")
        assert store.read_turn("s1", limit=5, client_id="ana").generation == first
        seen = {first}
        for _ in range(3):
            store.clear_session("s1")
            assert store.read_turn("s1", limit=5).generation is None
            store.set_state("s1", {"n": 2}, client_id="ana")  # a state write creates the row too
            again = store.read_turn("s1", limit=5, client_id="ana").generation
            assert again is not None and again not in seen
            seen.add(again)

    def test_the_turn_read_sees_the_record_the_rows_and_the_generation_at_once(
        self, store: RollingStore
    ) -> None:
        store.append("s1", [HumanMessage(f"m{i}") for i in range(1, 6)], client_id="ana")
        generation = store.read_turn("s1", limit=1, client_id="ana").generation
        assert store.install_summary("s1", "sum", covered_seq=3, expected_version=0, generation=generation)
        turn = store.read_turn("s1", limit=5, client_id="ana")
        assert turn.record is not None and turn.record.text == "sum"
        assert [m.seq for m in turn.messages] == [4, 5]
        assert turn.generation == generation

    @pytest.mark.parametrize("erase", ["clear_session", "forget", "purge"])
    def test_an_install_planned_before_an_erase_is_refused_after_it(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, erase: str
    ) -> None:
        old = [HumanMessage("my PIN is 1234"), AIMessage("ok")]
        store.append("s1", old, client_id="ana")
        planned = store.read_turn("s1", limit=10, client_id="ana").generation
        _erase(store, erase, monkeypatch)
        store.append("s1", old, client_id="ana")  # same seqs, same text: only the generation tells
        assert not store.install_summary(
            "s1", "erased PIN 1234", covered_seq=2, expected_version=0, generation=planned
        )
        assert store.summary("s1") is None
        fresh = store.read_turn("s1", limit=10, client_id="ana").generation
        assert fresh != planned
        assert store.install_summary("s1", "new", covered_seq=2, expected_version=0, generation=fresh)

    def test_a_summary_is_never_installed_on_a_session_with_no_row(self, store: RollingStore) -> None:
        assert not store.install_summary("ghost", "x", covered_seq=0, expected_version=0)
        assert store.summary("ghost") is None
        assert store.session_info("ghost") is None
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        store.clear_session("s1")
        assert not store.install_summary("s1", "after the erase", covered_seq=1, expected_version=0)
        assert store.summary("s1") is None

    async def test_the_async_install_checks_the_generation_too(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("hello")], client_id="ana")
        planned = (await store.aread_turn("s1", limit=3, client_id="ana")).generation
        await store.aclear_session("s1")
        await store.aappend("s1", [HumanMessage("hello")], client_id="ana")
        assert not await store.ainstall_summary(
            "s1", "stale", covered_seq=1, expected_version=0, generation=planned
        )
        assert await store.asummary("s1") is None


class TestPlannedFacts:
    @pytest.mark.parametrize("erase", ["clear_session", "forget", "purge"])
    def test_a_fact_planned_before_an_erase_is_refused_and_nothing_written(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, erase: str
    ) -> None:
        store.append("s1", [HumanMessage("I live in Lyon")], client_id="ana")
        kept = store.add_fact("ana", "likes tea")
        assert kept is not None
        mark = SessionMark("s1", store.read_turn("s1", limit=5, client_id="ana").generation or "")
        _erase(store, erase, monkeypatch)
        store.append("s1", [HumanMessage("new conversation")], client_id="ana")
        with pytest.raises(StaleWriteError, match="s1"):
            store.add_fact("ana", "lives in Lyon", source="extractor", planned_from=mark)
        with pytest.raises(StaleWriteError):
            store.update_fact("ana", kept.id, "likes coffee", planned_from=mark)
        left = [] if erase == "forget" else ["likes tea"]
        assert [f.text for f in store.facts("ana")] == left

    def test_a_fact_planned_from_a_session_of_another_client_is_refused(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        mark = SessionMark("s1", store.read_turn("s1", limit=5, client_id="ana").generation or "")
        with pytest.raises(StaleWriteError):
            store.add_fact("bob", "bob's fact", planned_from=mark)
        with pytest.raises(StaleWriteError):
            store.add_fact("ana", "no such session", planned_from=SessionMark("nowhere", mark.generation))
        assert store.facts("bob") == [] and store.facts("ana") == []
        added = store.add_fact("ana", "lives in Lyon", planned_from=mark)
        assert added is not None and [f.text for f in store.facts("ana")] == ["lives in Lyon"]
        updated = store.update_fact("ana", added.id, "lives in Paris", planned_from=mark)
        assert updated is not None and updated.text == "lives in Paris"

    async def test_the_async_fact_write_checks_the_mark_too(self, store: RollingStore) -> None:
        await store.aappend("s1", [HumanMessage("hello")], client_id="ana")
        turn = await store.aread_turn("s1", limit=5, client_id="ana")
        mark = SessionMark("s1", turn.generation or "")
        assert await store.aadd_fact("ana", "fresh", planned_from=mark) is not None
        await store.aclear_session("s1")
        with pytest.raises(StaleWriteError):
            await store.aadd_fact("ana", "stale", planned_from=mark)
        assert [f.text for f in await store.afacts("ana")] == ["fresh"]


class TestOwnerInTheStatement:
    """`_search` is called directly: the API's look-up before it is the race window."""

    def _recreated_by_bob(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("ana's secret is oscar")], client_id="ana")
        store.add_fact("ana", "ana's cat is oscar")
        store.search("oscar", client_id="ana")  # indexed while it was ana's
        store.clear_session("s1")
        store.append("s1", [HumanMessage("bob's secret is oscar")], client_id="bob")

    def test_a_session_searched_with_its_old_owner_gives_nothing_of_the_new_one(
        self, store: RollingStore
    ) -> None:
        self._recreated_by_bob(store)
        for rows in (store._search(["oscar"], "ana", "s1", 10), store._search(["oscar"], "ana", None, 10)):
            assert [row[5].text for row in rows if row[5] is not None] == ["ana's cat is oscar"]
            assert [row for row in rows if row[5] is None] == []
        assert [row[1] for row in store._search(["oscar"], "bob", "s1", 10)] == ["s1"]

    async def test_the_async_search_filters_the_owner_in_the_statement_too(self, store: RollingStore) -> None:
        self._recreated_by_bob(store)
        rows = await store._asearch(["oscar", "secret"], "ana", "s1", 10)
        assert [row for row in rows if row[5] is None] == []

    def test_a_search_naming_no_client_reaches_only_a_session_that_is_nobodys(
        self, store: RollingStore
    ) -> None:
        store.append("s1", [HumanMessage("oscar sleeps")], client_id="ana")
        store.append("anon", [HumanMessage("oscar runs")])
        assert store._search(["oscar"], None, "s1", 10) == []
        assert [row[1] for row in store._search(["oscar"], None, "anon", 10)] == ["anon"]
        store.append("anon", [HumanMessage("oscar again")], client_id="bob")  # bob claims it
        assert store._search(["oscar"], None, "anon", 10) == []
        assert sorted(row[2] for row in store._search(["oscar"], "bob", "anon", 10)) == [1, 2]

    def test_forget_and_sessions_reach_only_what_the_client_owns_now(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("ana")], client_id="ana")
        store.clear_session("s1")
        store.append("s1", [HumanMessage("bob")], client_id="bob")
        assert store.sessions("ana") == []
        store.forget("ana")
        assert [m.message.content for m in store.read("s1", client_id="bob")] == ["bob"]
        assert store.export("ana")["sessions"] == []


class TestScoresPerClient:
    def _ana(self, store: RollingStore) -> None:
        store.append(
            "s1",
            [HumanMessage("Write to me at ana@example.org"), AIMessage("Noted, ana at example")],
            client_id="ana",
        )
        store.append("s2", [HumanMessage("My example is the cat Oscar")], client_id="ana")
        store.add_fact("ana", "Ana's e-mail is ana@example.org")

    @pytest.mark.parametrize("scope", ["client", "session"])
    def test_a_clients_scores_do_not_move_when_another_client_writes(
        self, store: RollingStore, scope: str
    ) -> None:
        self._ana(store)
        where = {"client_id": "ana"} | ({"session_id": "s1"} if scope == "session" else {})

        def ranked() -> list[tuple[object, float]]:
            return [(h.key[:2], round(h.score, 9)) for h in store.search("example org oscar", **where)]  # type: ignore[arg-type]

        before = ranked()
        assert before
        for i in range(5):
            store.append(f"b{i}", [HumanMessage(f"bob@example.org writes example {i}")], client_id="bob")
        store.add_fact("bob", "bob's address is bob@example.org, example, org")
        store.append("anon", [HumanMessage("example example org")])
        assert ranked() == before

    def test_an_anonymous_sessions_scores_depend_on_that_session_only(self, store: RollingStore) -> None:
        store.append("anon", [HumanMessage("oscar the cat"), AIMessage("a cat named oscar, lovely")])
        before = [(h.seq, h.score) for h in store.search("oscar lovely", session_id="anon")]
        store.append("other", [HumanMessage("oscar oscar oscar lovely lovely")])
        store.append("s1", [HumanMessage("oscar lovely")], client_id="ana")
        assert [(h.seq, h.score) for h in store.search("oscar lovely", session_id="anon")] == before
