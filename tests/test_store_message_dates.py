"""Each message's date (`created_at`, stored with it at append) comes back with every read and
with the export, on every backend (issue 24, item 5: the summary-memory lesson keeps a
timestamp per message)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.stores import RollingStore


def _at(store: RollingStore, monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    monkeypatch.setattr(store, "_now", lambda: t)


def _fill(store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """s1: two messages at 1000.0, one at 2000.5, one imported with its own date."""
    _at(store, monkeypatch, 1000.0)
    store.append("s1", [HumanMessage("hello"), AIMessage("hi")], client_id="ana")
    _at(store, monkeypatch, 2000.5)
    store.append("s1", [HumanMessage("later")], client_id="ana")
    imported = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    store.append("s1", [AIMessage("from an import")], client_id="ana", created_at=imported)


IMPORTED = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc).timestamp()
DATES = [1000.0, 1000.0, 2000.5, IMPORTED]


def test_read_returns_each_messages_date(store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(store, monkeypatch)
    assert [m.created_at for m in store.read("s1")] == DATES
    assert [m.created_at for m in store.read("s1", client_id="ana")] == DATES
    assert [(m.seq, m.created_at) for m in store.read("s1", limit=2)] == [(3, 2000.5), (4, IMPORTED)]
    oldest = store.read("s1", after_seq=1, limit=2, newest=False)
    assert [(m.seq, m.created_at) for m in oldest] == [(2, 1000.0), (3, 2000.5)]


def test_a_turns_read_returns_the_dates_of_its_tail(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, monkeypatch)
    assert store.install_summary("s1", "greetings", covered_seq=2, expected_version=0)
    turn = store.read_turn("s1", limit=5, client_id="ana")
    assert [(m.seq, m.created_at) for m in turn.messages] == [(3, 2000.5), (4, IMPORTED)]
    assert [m.created_at for m in store.read_turn("s1", limit=1).messages] == [IMPORTED]


async def test_the_async_reads_return_the_dates_too(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, monkeypatch)
    assert [m.created_at for m in await store.aread("s1", client_id="ana")] == DATES
    turn = await store.aread_turn("s1", limit=2, client_id="ana")
    assert [m.created_at for m in turn.messages] == DATES[2:]


async def test_the_export_carries_each_messages_date(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store, monkeypatch)
    for data in (store.export("ana"), await store.aexport("ana")):
        (session,) = json.loads(json.dumps(data))["sessions"]
        assert [(m["seq"], m["created_at"]) for m in session["transcript"]] == list(
            zip([1, 2, 3, 4], DATES, strict=True)
        )
