"""What every check of the kit stands on: the abstract `store` fixture, the optional hooks a
backend may provide, and the shared messages and helpers of the checks.

Owns no check itself (those are in `_transcripts`, `_clients` and `_invariants`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_rolling_memory.stores import RollingStore


class StoreHarness:
    """The backend under test, as the kit's checks see it.

    A subclass defines `store`, a pytest fixture yielding an EMPTY store that no other test
    shares (its own file, table prefix or key prefix) and closing it afterwards. The hooks are
    optional; a check that needs one it lacks runs its API assertions, then skips, naming it.
    """

    @pytest.fixture
    def store(self) -> Iterator[RollingStore]:
        """An empty store, closed (and its data dropped) after the test: a subclass defines it."""
        msg = (
            f"{type(self).__name__} defines no `store` fixture; define one that yields an empty store "
            "of your backend (its own file, table prefix or key prefix) and closes it afterwards"
        )
        raise NotImplementedError(msg)

    def raw_contents(self, store: RollingStore) -> list[str] | None:
        """Everything the backend holds, read under its API (rows, keys, objects), one line
        each, its schema record left out; None: not provided. With it the kit checks that a
        refused call writes nothing and that an erase leaves nothing of the erased ids."""
        return None

    def reopen(self, store: RollingStore) -> RollingStore | None:
        """A new store object on the same data (as another process opens it); None: the data
        lives in one object only. The kit closes what it returns."""
        return None

    def set_schema_version(self, store: RollingStore, version: int) -> bool:
        """Record `version` as the store's schema version, as a newer release would write it;
        False: the backend records no schema."""
        return False

    # ------------------------------------------------------------------ helpers of the checks

    def raw(self, store: RollingStore) -> list[str] | None:
        """`raw_contents`, or None when the backend gives no raw view."""
        return self.raw_contents(store)

    def assert_wrote_nothing(self, store: RollingStore, before: list[str] | None) -> None:
        """The raw contents are what `raw(store)` returned before; skips without the hook."""
        if before is None:
            _no_hook(self, "raw_contents", "that a refused call writes nothing")
        assert self.raw_contents(store) == before

    def leftovers(self, store: RollingStore, *ids: str) -> list[str]:
        """Raw lines that mention any of `ids` (ids no other data contains); skips without the hook."""
        contents = self.raw_contents(store)
        if contents is None:
            _no_hook(self, "raw_contents", "what an erase leaves in storage")
        return [line for line in contents if any(i in line for i in ids)]

    def reopened(self, store: RollingStore) -> RollingStore:
        """`reopen(store)`; skips without the hook."""
        again = self.reopen(store)
        if again is None:
            _no_hook(self, "reopen", "that another store object reads the same data")
        return again


def _no_hook(harness: StoreHarness, hook: str, what: str) -> NoReturn:
    pytest.skip(f"{type(harness).__name__} does not define {hook}(), which the kit needs to check {what}")


def at(store: RollingStore, monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    """Set the store's clock (`_now`: leases, purge and dates read it) to `t`."""
    monkeypatch.setattr(store, "_now", lambda: t)


def texts(n: int, start: int = 1) -> list[BaseMessage]:
    """`n` short messages ``m<start>``..., the user's and the AI's in turn."""
    return [HumanMessage(f"m{i}") if i % 2 else AIMessage(f"m{i}") for i in range(start, start + n)]


def contents(rows: Any) -> list[Any]:
    return [r.message.content for r in rows]


FIDELITY: list[BaseMessage] = [
    SystemMessage("You are terse.", id="sys-1"),
    HumanMessage(
        content=[
            {"type": "text", "text": 'héllo wörld 🌍 — 你好 \x00 tab\t quote" back\\slash'},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
        id="h-1",
        name="alice",
        additional_kwargs={"lang": "fr"},
    ),
    AIMessage(
        content="",
        id="run-abc",
        name="bot",
        tool_calls=[
            {
                "name": "weather",
                "args": {"city": "Zürich", "days": [1, 2]},
                "id": "call-1",
                "type": "tool_call",
            },
            {"name": "time", "args": {}, "id": "call-2", "type": "tool_call"},
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        response_metadata={"model_name": "fake-1", "finish_reason": "tool_calls"},
    ),
    ToolMessage("18°C", tool_call_id="call-1", name="weather", status="success", id="t-1"),
    ToolMessage("boom", tool_call_id="call-2", status="error", artifact={"trace": [1, 2]}),
    AIMessage(
        content=[{"type": "text", "text": "It is 18°C."}, {"type": "reasoning", "reasoning": "easy"}],
        id="run-def",
    ),
    ChatMessage(content="custom role", role="critic"),
]
"""Messages of every kind with the fields a store must keep exactly (ids, names, tool calls,
usage, content blocks, odd characters)."""
