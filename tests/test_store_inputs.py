"""One message cannot wedge a session or a backend (issue 20, defect 8), on every backend.

What one backend stores, all store (a ~1.5 MB tool result is stored whole and its start is
searchable: the indexed text is bounded); token counts and dates are checked before any write
(nothing is written, the session stays readable); and a date already stored out of range
(written under the API) breaks no search, recall or search tool.
"""

from __future__ import annotations

import math
from contextlib import closing
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from store_kit import POSTGRES_URL, REDIS_URL, backend_name, raw_contents

from langchain_rolling_memory import RollingSummaryChatMessageHistory, WindowedChatMessageHistory
from langchain_rolling_memory.adapters.memory_tools import search_memory_tool
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.recall_block import render_hit
from langchain_rolling_memory.engine.recaller import Recaller
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores import InMemoryRollingStore, RollingStore, SQLiteRollingStore
from langchain_rolling_memory.stores.search_api import dates_of


def _seed(store: RollingStore) -> list[str]:
    store.append("s1", [HumanMessage("we adopted a cat named oscar")], client_id="c", token_counts=[7])
    return raw_contents(store)


class TestHugeMessage:
    def test_a_megabyte_tool_result_is_stored_whole_and_its_start_is_searchable(
        self, store: RollingStore
    ) -> None:
        # ~1.5 MB of distinct words: PostgreSQL refused it ("string is too long for tsvector")
        # while SQLite stored it.
        words = " ".join(f"tok{i:07d}" for i in range(140_000))
        big = f"zanzibar ledger {words} tailword"
        assert len(big) > 1_500_000
        messages = [
            AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "call-1"}]),
            ToolMessage(big, tool_call_id="call-1"),
        ]
        assert store.append("s1", messages, client_id="c") == [1, 2]
        rows = store.read("s1", client_id="c")
        assert rows[1].message == messages[1]
        assert rows[1].message.content == big
        hits = store.search("zanzibar", client_id="c")
        assert [h.key for h in hits] == [("message", "s1", 2)]
        assert hits[0].message == messages[1]
        # The session goes on: the next turn is stored and found.
        store.append("s1", [HumanMessage("and then the zanzibar trip")], client_id="c")
        assert {h.seq for h in store.search("zanzibar", client_id="c", session_id="s1") if h.seq} == {2, 3}


BAD_COUNTS = [2.75, -1, True, False, "3", float("nan"), float("inf"), 2**31, object()]


class TestTokenCounts:
    # ids by type for the object: its repr holds an address, which differs between processes.
    @pytest.mark.parametrize("bad", BAD_COUNTS, ids=lambda v: repr(v) if type(v) is not object else "object")
    def test_a_bad_count_raises_and_writes_nothing(self, store: RollingStore, bad: object) -> None:
        before = _seed(store)
        with pytest.raises(ConfigurationError, match=r"token_counts\[1\]"):
            store.append("s1", [HumanMessage("a"), HumanMessage("b")], client_id="c", token_counts=[1, bad])  # type: ignore[list-item]
        assert raw_contents(store) == before
        assert [(r.seq, r.tokens) for r in store.read("s1", client_id="c")] == [(1, 7)]

    async def test_a_bad_count_raises_and_writes_nothing_async(self, store: RollingStore) -> None:
        before = _seed(store)
        with pytest.raises(ConfigurationError, match="token_counts"):
            await store.aappend("s1", [HumanMessage("a")], client_id="c", token_counts=[2.75])  # type: ignore[list-item]
        assert raw_contents(store) == before
        assert [r.tokens for r in await store.aread("s1", client_id="c")] == [7]

    def test_whole_floats_are_stored_as_ints(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("a"), HumanMessage("b")], client_id="c", token_counts=[3.0, None])  # type: ignore[list-item]
        tokens = [r.tokens for r in store.read("s1", client_id="c")]
        assert tokens == [3, None]
        assert type(tokens[0]) is int

    @pytest.mark.parametrize("history_class", [WindowedChatMessageHistory, RollingSummaryChatMessageHistory])
    def test_a_counter_returning_a_fraction_writes_nothing(
        self, store: RollingStore, history_class: type
    ) -> None:
        # A float count once stored made a Redis session unreadable for good.
        before = _seed(store)
        extra = (
            {"summarizer": lambda summary, messages: "s"}
            if history_class is RollingSummaryChatMessageHistory
            else {}
        )
        history = history_class(
            "s1", store=store, client_id="c", token_counter=lambda messages: 2.75, **extra
        )
        with pytest.raises(ConfigurationError, match=r"token_counter.*2\.75.*math\.ceil"):
            history.add_messages([HumanMessage("hello")])
        assert raw_contents(store) == before
        assert [r.seq for r in store.read("s1", client_id="c")] == [1]
        good = history_class("s1", store=store, client_id="c", token_counter=lambda messages: 4.0, **extra)
        good.add_messages([HumanMessage("hello")])
        assert [(r.tokens, type(r.tokens)) for r in store.read("s1", client_id="c")] == [(7, int), (4, int)]

    async def test_a_fraction_stored_before_reads_as_unknown_on_redis(
        self, redis_store: tuple[RollingStore, str]
    ) -> None:
        # An older release stored "2.75" in the row and every read of the session failed.
        store, _ = redis_store
        store.append("s1", [HumanMessage("a"), HumanMessage("b")], client_id="c", token_counts=[1, 2])
        import redis

        key = store.keys.msgs("s1")  # type: ignore[attr-defined]
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            r.lset(key, 0, "2.75 " + r.lindex(key, 0).partition(" ")[2])
        assert [(r.message.content, r.tokens) for r in store.read("s1", client_id="c")] == [
            ("a", None),
            ("b", 2),
        ]
        assert [r.tokens for r in await store.aread("s1", client_id="c")] == [None, 2]
        history = WindowedChatMessageHistory("s1", store=store, client_id="c")
        assert [m.content for m in history.messages] == ["a", "b"]


MAX_DATE = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
BAD_DATES = [
    pytest.param(1.7e12, "milliseconds", id="milliseconds"),
    pytest.param(datetime.max, "year 9999 or later", id="datetime.max"),
    pytest.param(datetime.max.replace(tzinfo=timezone.utc), "year 9999 or later", id="aware-datetime.max"),
    pytest.param(1e20, "year 9999 or later", id="1e20"),
    pytest.param(MAX_DATE, "year 9999 or later", id="year-9999"),
    pytest.param(-1.0, "before 1970", id="negative"),
    pytest.param(datetime(1969, 12, 31, tzinfo=timezone.utc), "before 1970", id="before-1970"),
    pytest.param(1.7e15, "microseconds", id="microseconds"),
    pytest.param(
        datetime.min.replace(tzinfo=timezone(timedelta(hours=14))), "before 1970", id="datetime.min+14h"
    ),
    pytest.param(
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))), "year 9999", id="datetime.max-14h"
    ),
    pytest.param(10**400, "year 9999", id="huge-int"),
    pytest.param([1.0, 1.7e12], "milliseconds", id="one-of-a-list"),
]


class TestDates:
    @pytest.mark.parametrize(("bad", "said"), BAD_DATES)
    def test_an_out_of_range_date_raises_and_writes_nothing(
        self, store: RollingStore, bad: object, said: str
    ) -> None:
        before = _seed(store)
        with pytest.raises(ConfigurationError, match=rf"created_at.*{said}"):
            store.append("s1", [HumanMessage("a"), HumanMessage("b")], client_id="c", created_at=bad)  # type: ignore[arg-type]
        assert raw_contents(store) == before
        assert [r.seq for r in store.read("s1", client_id="c")] == [1]

    def test_the_range_edges_are_accepted(self, store: RollingStore) -> None:
        store.append("s1", [HumanMessage("paris a"), HumanMessage("paris b")], created_at=[0, MAX_DATE - 1])
        assert sorted(h.created_at for h in store.search("paris", session_id="s1")) == [0.0, MAX_DATE - 1]  # type: ignore[type-var]

    @pytest.mark.parametrize("stored", [1.7e12, 1e20, -1e20, math.inf])
    async def test_a_stored_out_of_range_date_breaks_no_read(
        self, store: RollingStore, stored: float
    ) -> None:
        store.append(
            "s1", [HumanMessage("the oscar cat question"), AIMessage("oscar is fine")], client_id="c"
        )
        _set_message_dates(store, "s1", stored)
        hits = store.search("oscar", client_id="c")
        assert {h.created_at for h in hits} == {stored}
        answer = search_memory_tool(store, "c").invoke({"query": "oscar"})
        assert 'undated, "s1":\n- user: "the oscar cat question"\n- assistant: "oscar is fine"' in answer
        recaller = Recaller.build(store, 500)
        assert recaller is not None
        recalled = recaller.recall("oscar", client_id="c", session_id="s2")
        assert len(recalled.hits) == 2 and "undated" in recalled.text
        assert (await recaller.arecall("oscar", client_id="c", session_id="s2")).text == recalled.text


ZONES = st.sampled_from([None, timezone.utc, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))])


@given(st.one_of(st.floats(), st.integers(), st.datetimes(timezones=ZONES)))
def test_a_date_is_refused_or_stored_in_range_and_renders(value: float | datetime) -> None:
    try:
        [seconds] = dates_of(1, value, 0.0) or []
    except ConfigurationError:
        return
    assert 0 <= seconds < MAX_DATE
    line = render_hit(SearchHit("message", "s1", 1, seconds, 1.0, HumanMessage("x")))
    assert not line.startswith("- undated")


def _set_message_dates(store: RollingStore, session_id: str, at: float) -> None:
    """Date every message of the session `at`, under the API (as an older release could have)."""
    name = backend_name(store)
    if name == "memory":
        assert isinstance(store, InMemoryRollingStore)
        with store.backend._lock:
            rows = store.backend._sessions[session_id].rows
            rows[:] = [(seq, payload, tokens, at) for seq, payload, tokens, _ in rows]
    elif name == "sqlite":
        import sqlite3

        assert isinstance(store, SQLiteRollingStore)
        with closing(sqlite3.connect(store.path)) as conn, conn:
            conn.execute(
                f"UPDATE {store.prefix}messages SET created_at = ? WHERE session_id = ?", (at, session_id)
            )
    elif name == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            prefix = store.prefix  # type: ignore[attr-defined]
            conn.execute(
                f"UPDATE {prefix}messages SET created_at = %s WHERE session_id = %s", (at, session_id)
            )
    else:
        import redis

        key = store.keys.idx(session_id)  # type: ignore[attr-defined]
        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            entries = r.lrange(key, 0, -1)
            assert entries
            for i, entry in enumerate(entries):
                r.lset(key, i, f"{at!r} {entry.partition(' ')[2]}")
