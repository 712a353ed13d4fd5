"""One message cannot wedge a session or a backend (issue 20, defect 8), on every backend.

What one backend stores, all store (a ~1.5 MB tool result is stored whole and its start is
searchable: the indexed text is bounded); token counts and dates are checked before any write
(nothing is written, the session stays readable); and a date already stored out of range
(written under the API) breaks no search, recall or search tool.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from store_kit import raw_contents

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
