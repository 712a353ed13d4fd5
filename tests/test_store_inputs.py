"""One message cannot wedge a session or a backend (issue 20, defect 8), on every backend.

What one backend stores, all store (a ~1.5 MB tool result is stored whole and its start is
searchable: the indexed text is bounded); token counts and dates are checked before any write
(nothing is written, the session stays readable); and a date already stored out of range
(written under the API) breaks no search, recall or search tool.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from store_kit import REDIS_URL, raw_contents

from langchain_rolling_memory import RollingSummaryChatMessageHistory, WindowedChatMessageHistory
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores import RollingStore


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
        assert {h.seq for h in store.search("zanzibar", session_id="s1")} == {2, 3}


BAD_COUNTS = [2.75, -1, True, False, "3", float("nan"), float("inf"), 2**31, object()]


class TestTokenCounts:
    @pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
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
