"""The invariants of the store contract (`stores/backend.py`, issue 20), on every backend.

Erase generation (a session row's, changed by every erase), ownership checked inside the
read, search, listing and erase themselves, and search statistics per scope; then races on
the real servers: another thread erases and re-creates a session under another client while
a client searches, reads, installs and forgets; nothing of the other client may come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import raw_contents

from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore


def _texts(n: int, start: int = 1) -> list[BaseMessage]:
    return [HumanMessage(f"m{i}") if i % 2 else AIMessage(f"m{i}") for i in range(start, start + n)]


def _at(store: RollingStore, monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    monkeypatch.setattr(store, "_now", lambda: t)


def _generation(store: RollingStore, session_id: str = "s1") -> str | None:
    return store.read_turn(session_id, limit=0).generation


class TestGeneration:
    def test_a_session_keeps_its_generation_from_its_first_write_until_an_erase(
        self, store: RollingStore
    ) -> None:
        assert _generation(store) is None
        store.append("s1", _texts(2), client_id="alice")
        first = _generation(store)
        assert isinstance(first, str)
        store.append("s1", _texts(2, start=3), client_id="alice")
        store.set_state("s1", {"a": 1}, client_id="alice")
        assert store.install_summary("s1", "sum", covered_seq=2, expected_version=0, generation=first)
        turn = store.read_turn("s1", limit=5, client_id="alice")
        assert turn.generation == first
        assert turn.record is not None and turn.record.text == "sum"
        assert [m.seq for m in turn.messages] == [3, 4]

    def test_a_state_write_creates_the_row_and_its_generation(self, store: RollingStore) -> None:
        store.set_state("s1", {"cart": []}, client_id="alice")
        assert isinstance(_generation(store), str)

    @pytest.mark.parametrize("erase", ["clear_session", "forget", "purge"])
    def test_every_erase_gives_the_next_row_of_the_id_a_new_generation(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch, erase: str
    ) -> None:
        _at(store, monkeypatch, 1_000_000.0)
        store.append("s1", _texts(4), client_id="alice")
        old = _generation(store)
        _at(store, monkeypatch, 1_000_100.0)
        if erase == "clear_session":
            store.clear_session("s1")
        elif erase == "forget":
            store.forget("alice")
        else:
            assert store.purge(older_than=50) == 1
        assert _generation(store) is None
        store.append("s1", _texts(4), client_id="alice")  # the same messages at the same seqs
        new = _generation(store)
        assert new is not None and new != old
        assert not store.install_summary("s1", "stale", covered_seq=2, expected_version=0, generation=old)
        with pytest.raises(StaleWriteError, match="s1"):
            store.add_fact("alice", "stale fact", planned_from=SessionMark("s1", str(old)))
        assert store.summary("s1") is None
        assert store.facts("alice") == []

    async def test_the_async_turn_read_returns_the_generation_with_the_owner_check(
        self, store: RollingStore
    ) -> None:
        await store.aappend("s1", _texts(3), client_id="alice")
        turn = await store.aread_turn("s1", limit=2, client_id="alice")
        assert turn.generation == _generation(store)
        assert [m.seq for m in turn.messages] == [2, 3]
        with pytest.raises(OwnershipError):
            await store.aread_turn("s1", limit=2, client_id="bob")
        with pytest.raises(OwnershipError):
            await store.aread_turn("s1", limit=2, client_id=None)
        assert (await store.aread_turn("nothing", limit=2, client_id="bob")).generation is None


class TestInstall:
    def test_a_summary_is_never_installed_on_a_session_with_no_row(self, store: RollingStore) -> None:
        store.append("s1", _texts(2), client_id="alice")
        store.clear_session("s1")
        assert not store.install_summary("s1", "orphan summary", covered_seq=1, expected_version=0)
        assert not store.install_summary("s2", "orphan summary", covered_seq=1, expected_version=0)
        assert store.summary("s1") is None
        assert not [line for line in raw_contents(store) if "orphan summary" in line]

    async def test_an_install_needs_the_generation_it_was_planned_from(self, store: RollingStore) -> None:
        store.append("s1", _texts(4), client_id="alice")
        generation = _generation(store)
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


class TestFactMark:
    async def test_a_fact_write_planned_from_a_session_needs_its_owner_and_generation(
        self, store: RollingStore
    ) -> None:
        store.append("s1", _texts(2), client_id="alice")
        store.append("anon", _texts(2))
        mark = SessionMark("s1", str(_generation(store)))
        before = raw_contents(store)
        refused = [
            lambda: store.add_fact("bob", "not bob's session", planned_from=mark),
            lambda: store.add_fact("alice", "wrong generation", planned_from=SessionMark("s1", "x")),
            lambda: store.add_fact("alice", "no such session", planned_from=SessionMark("none", "x")),
            lambda: store.add_fact(
                "alice", "nobody's session", planned_from=SessionMark("anon", str(_generation(store, "anon")))
            ),
        ]
        for call in refused:
            with pytest.raises(StaleWriteError):
                call()
        with pytest.raises(StaleWriteError):
            await store.aadd_fact("bob", "not bob's session", planned_from=mark)
        assert raw_contents(store) == before
        fact = store.add_fact("alice", "Lives in Lyon", planned_from=mark)
        assert fact is not None
        assert await store.aupdate_fact("alice", fact.id, "Lives in Paris", planned_from=mark) is not None
        store.clear_session("s1")
        with pytest.raises(StaleWriteError):
            store.update_fact("alice", fact.id, "Lives in Rome", planned_from=mark)
        assert [f.text for f in store.facts("alice")] == ["Lives in Paris"]


class TestOwnerNow:
    def test_a_session_re_created_by_another_client_is_not_the_first_ones(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("alice pin 1111")], client_id="alice")
        store.clear_session("s1")
        store.append("s1", [HumanMessage("bob pin 2222"), AIMessage("noted")], client_id="bob")
        assert store.sessions("alice") == []
        assert store.search("pin", client_id="alice") == []
        assert store.export("alice")["sessions"] == []
        store.forget("alice")
        assert [r.message.content for r in store.read("s1")] == ["bob pin 2222", "noted"]
        assert store.sessions("bob") == ["s1"]


class TestScoresPerScope:
    def test_a_clients_scores_do_not_depend_on_another_clients_text(self, store: RollingStore) -> None:
        store.append(
            "a1", [HumanMessage("Oscar the cat sleeps"), AIMessage("We went to Paris")], client_id="alice"
        )
        store.add_fact("alice", "Alice's cat is Oscar")
        store.append("n1", [HumanMessage("an anonymous Oscar"), AIMessage("and Paris")])

        def scores() -> list[Any]:
            alice = store.search("oscar paris", client_id="alice")
            anon = store.search("oscar paris", session_id="n1")
            return [(h.key, h.score) for h in alice + anon]

        before = scores()
        assert len(before) == 5
        store.append(
            "b1",
            [HumanMessage(f"Oscar Paris bob@example.com words {i}") for i in range(20)],
            client_id="bob",
        )
        store.add_fact("bob", "Oscar Paris bob@example.com")
        store.append("n2", [HumanMessage("Oscar Paris elsewhere " * 3)])
        after = scores()
        assert [key for key, _ in after] == [key for key, _ in before]
        assert [score for _, score in after] == pytest.approx([score for _, score in before], rel=1e-9)


# ---------------------------------------------------------------------- races

ALICE, BOB = "secret alpha from alice", "secret bravo from bob"


class _Eraser(threading.Thread):
    """Erases session "s" and re-creates it, alice's then bob's, until stopped; after each of
    bob's appends, bob's session must hold his message alone and no summary (only alice's
    side installs one, and alice's forget must never erase his)."""

    def __init__(self, store: RollingStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.stop = threading.Event()
        self.rounds = 0
        self.problems: list[Any] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        store = self.store
        try:
            while not self.stop.is_set():
                store.clear_session("s")
                store.append("s", [HumanMessage(ALICE), AIMessage("ok")], client_id="alice")
                store.clear_session("s")
                store.append("s", [HumanMessage(BOB)], client_id="bob")
                rows = [r.message.content for r in store.read("s")]
                if rows != [BOB]:
                    self.problems.append(("bob's session changed", rows))
                record = store.summary("s")
                if record is not None:
                    self.problems.append(("a summary on bob's session", record.text))
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc


def _leaks(texts: list[str]) -> int:
    return sum("bravo" in text for text in texts)


def _turn_texts(store: RollingStore) -> tuple[list[str], Any]:
    try:
        turn = store.read_turn("s", limit=5, client_id="alice")
    except OwnershipError:
        return [], None
    return [str(m.message.text) for m in turn.messages], turn


def _searched(store: RollingStore) -> list[str]:
    texts = [h.text for h in store.search("secret bravo alpha", client_id="alice")]
    with contextlib.suppress(OwnershipError):
        texts += [h.text for h in store.search("secret bravo alpha", client_id="alice", session_id="s")]
    return texts


def _finish(eraser: _Eraser, leaks: int) -> None:
    eraser.stop.set()
    eraser.join(timeout=30)
    assert eraser.error is None, eraser.error
    assert eraser.rounds > 0
    assert eraser.problems == []
    assert leaks == 0


class TestRaces:
    def test_erasing_and_re_creating_under_another_client_leaks_nothing(self, store: RollingStore) -> None:
        eraser = _Eraser(store)
        eraser.start()
        leaks = 0
        try:
            for i in range(300):
                leaks += _leaks(_searched(store))
                texts, turn = _turn_texts(store)
                leaks += _leaks(texts)
                if turn is not None and turn.generation is not None and turn.messages:
                    store.install_summary(
                        "s",
                        f"alice summary {i}",
                        covered_seq=turn.messages[-1].seq,
                        expected_version=turn.record.version if turn.record else 0,
                        generation=turn.generation,
                    )
                exported = store.export("alice")["sessions"]
                leaks += _leaks([str(m) for s in exported for m in s["transcript"]])
                if i % 10 == 0:
                    store.forget("alice")
        finally:
            _finish(eraser, leaks)

    async def test_the_async_reads_and_searches_leak_nothing_either(self, store: RollingStore) -> None:
        eraser = _Eraser(store)
        eraser.start()
        leaks = 0
        try:
            for i in range(200):
                texts = [h.text for h in await store.asearch("secret bravo", client_id="alice")]
                with contextlib.suppress(OwnershipError):
                    found = await store.asearch("secret bravo", client_id="alice", session_id="s")
                    texts += [h.text for h in found]
                try:
                    turn = await store.aread_turn("s", limit=5, client_id="alice")
                    texts += [str(m.message.text) for m in turn.messages]
                except OwnershipError:
                    pass
                leaks += _leaks(texts)
                if i % 10 == 0:
                    await store.aforget("alice")
                await asyncio.sleep(0)
        finally:
            _finish(eraser, leaks)
