"""The two histories on their own: views, compaction in batches, failures, async, restarts."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, WindowedChatMessageHistory, open_store
from langchain_rolling_memory.core.framing import SUMMARY_MESSAGE_ID
from langchain_rolling_memory.errors import InvalidIdError, StoreError
from langchain_rolling_memory.stores import RollingStore


class RecordingSummarizer:
    """Records exactly what it is asked to fold; answers with a numbered summary."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append((previous, [m.text for m in messages]))
        return f"summary {len(self.calls)}"


def turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{i}"), AIMessage(f"a{i}")]


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


# ---------------------------------------------------------------- rolling summary


def test_seeds_example_folds_the_three_oldest_in_one_call() -> None:
    summarizer = RecordingSummarizer()
    history = RollingSummaryChatMessageHistory("s", summarizer=summarizer, max_turns=4, keep_last=2)
    for text in ["m1", "m2", "m3", "m4"]:
        history.add_messages([HumanMessage(text)])
    assert summarizer.calls == []
    history.add_messages([HumanMessage("m5")])
    assert summarizer.calls == [("", ["m1", "m2", "m3"])]
    view = history.messages
    assert view[0].id == SUMMARY_MESSAGE_ID
    assert "summary 1" in view[0].text
    assert texts(view[1:]) == ["m4", "m5"]
    assert history.summary == "summary 1"
    assert texts(history.transcript) == ["m1", "m2", "m3", "m4", "m5"]


def test_summarizer_runs_in_batches_and_gets_the_previous_summary(store: RollingStore) -> None:
    summarizer = RecordingSummarizer()
    history = RollingSummaryChatMessageHistory(
        "batches", summarizer=summarizer, store=store, max_turns=12, keep_last=6
    )
    for i in range(30):
        history.add_messages(turn(i))
    # Two messages per turn: the 14th message crosses 12 and folds 8 (6 kept); 8 more cross again.
    assert [len(batch) for _, batch in summarizer.calls] == [8] * 6
    assert summarizer.calls[1][0] == "summary 1"
    folded = [text for _, batch in summarizer.calls for text in batch]
    assert folded == texts(history.transcript)[: len(folded)]  # each message folded exactly once
    assert len(history.messages) <= 1 + 12
    assert len(history.transcript) == 60


def test_view_is_summary_then_unsummarized_messages(store: RollingStore) -> None:
    history = RollingSummaryChatMessageHistory(
        "view", summarizer=RecordingSummarizer(), store=store, max_turns=4, keep_last=2
    )
    for i in range(3):
        history.add_messages(turn(i))
    record = store.summary("view")
    assert record is not None
    unsummarized = texts(history.transcript)[record.covered_seq :]
    assert texts(history.messages[1:]) == unsummarized


def test_token_policy_triggers_on_tokens(store: RollingStore) -> None:
    summarizer = RecordingSummarizer()
    history = RollingSummaryChatMessageHistory(
        "tokens",
        summarizer=summarizer,
        store=store,
        max_turns=None,
        max_tokens=100,
        keep_tokens=40,
        token_counter=lambda messages: 10 * len(messages),
    )
    for i in range(5):
        history.add_messages(turn(i))  # 10 tokens per message: 100 tokens is not over 100
    assert summarizer.calls == []
    history.add_messages(turn(5))
    assert len(summarizer.calls) == 1
    assert len(summarizer.calls[0][1]) == 8  # 120 tokens > 100: keep the last 40 tokens (4 messages)
    stored = store.read("tokens")
    assert [m.tokens for m in stored] == [10] * 12


def test_tool_pairs_are_never_split_by_a_compaction() -> None:
    summarizer = RecordingSummarizer()
    history = RollingSummaryChatMessageHistory("tools", summarizer=summarizer, max_turns=4, keep_last=2)
    history.add_messages(
        [
            HumanMessage("weather?"),
            AIMessage("", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}]),
            ToolMessage("sunny", tool_call_id="c1"),
            AIMessage("It is sunny."),
            HumanMessage("thanks"),
        ]
    )
    # keep_last=2 would start at "It is sunny."; that is safe, and the tool pair is folded whole.
    assert summarizer.calls[0][1] == ["weather?", "", "sunny"]
    assert not isinstance(history.messages[1], ToolMessage)


# ---------------------------------------------------------------- failures


class FlakySummarizer:
    def __init__(self, failures: int, error: Exception | None = None, reply: str = "summary ok") -> None:
        self.failures = failures
        self.error = error or RuntimeError("provider down")
        self.reply = reply
        self.calls = 0

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.reply


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_failing_summarizer_loses_nothing_and_is_retried_after_backoff(store: RollingStore) -> None:
    summarizer = FlakySummarizer(failures=2)
    errors: list[tuple[str, BaseException]] = []
    clock = Clock()
    history = RollingSummaryChatMessageHistory(
        "flaky",
        summarizer=summarizer,
        store=store,
        max_turns=4,
        keep_last=2,
        on_error=lambda sid, exc: errors.append((sid, exc)),
        clock=clock,
        backoff=10.0,
    )
    for i in range(3):
        history.add_messages(turn(i))
    assert summarizer.calls == 1  # failed once, then waiting out the back-off
    assert [sid for sid, _ in errors] == ["flaky"]
    assert history.summary == ""
    assert len(history.transcript) == 6
    assert texts(history.messages) == texts(history.transcript)

    clock.now = 11.0  # first back-off over: second failure, back-off doubles to 20s
    history.add_messages(turn(3))
    assert summarizer.calls == 2
    clock.now = 25.0
    history.add_messages(turn(4))
    assert summarizer.calls == 2  # 11 + 20 = 31 not reached yet
    clock.now = 31.0
    history.add_messages(turn(5))
    assert summarizer.calls == 3
    assert history.summary == "summary ok"
    assert len(history.transcript) == 12


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("", id="empty"),
        pytest.param("**Summary:**", id="title-only"),
        pytest.param("  ", id="blank"),
    ],
)
def test_an_unusable_reply_changes_nothing(reply: str, caplog: pytest.LogCaptureFixture) -> None:
    errors: list[BaseException] = []
    history = RollingSummaryChatMessageHistory(
        "empty",
        summarizer=lambda previous, messages: reply,
        max_turns=4,
        keep_last=2,
        on_error=lambda sid, exc: errors.append(exc),
    )
    with caplog.at_level(logging.ERROR, logger="langchain_rolling_memory"):
        for i in range(3):
            history.add_messages(turn(i))
    assert history.summary == ""
    assert len(history.transcript) == 6
    assert "nothing usable" in str(errors[0])
    assert "compaction of session 'empty' failed" in caplog.text


def test_a_title_only_chat_model_reply_gets_a_strict_retry_then_fails_cleanly() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("## Summary"), AIMessage("**Résumé :**")]))
    errors: list[BaseException] = []
    history = RollingSummaryChatMessageHistory(
        "title", summarizer=model, max_turns=4, keep_last=2, on_error=lambda s, e: errors.append(e)
    )
    for i in range(3):
        history.add_messages(turn(i))
    assert history.summary == ""
    assert len(errors) == 1
    assert len(history.transcript) == 6


def test_a_chat_model_summarizer_is_cleaned_before_it_is_stored() -> None:
    # A reply over the default 20-word minimum (a shorter one would be asked again).
    text = (
        "The user is Ana, a client from Lyon, who asked three questions about her order and "
        "its delivery date; the assistant answered each one."
    )
    model = GenericFakeChatModel(messages=iter([AIMessage(f"**New summary:**\n{text}")]))
    history = RollingSummaryChatMessageHistory("clean", summarizer=model, max_turns=4, keep_last=2)
    for i in range(3):
        history.add_messages(turn(i))
    assert history.summary == text


def test_a_summarizer_that_hangs_times_out_and_the_turn_returns() -> None:
    release = threading.Event()
    errors: list[BaseException] = []

    def hanging(previous: str, messages: Sequence[BaseMessage]) -> str:
        release.wait()
        return "late summary"

    history = RollingSummaryChatMessageHistory(
        "hang",
        summarizer=hanging,
        max_turns=4,
        keep_last=2,
        timeout=0.2,
        on_error=lambda s, e: errors.append(e),
    )
    try:
        for i in range(3):
            history.add_messages(turn(i))
        assert isinstance(errors[0], TimeoutError)
        assert not release.is_set()  # the turn returned while the summarizer was still blocked
        assert history.summary == ""
        assert len(history.transcript) == 6
    finally:
        release.set()


def test_when_compaction_keeps_failing_the_view_falls_back_to_a_window(
    store: RollingStore, caplog: pytest.LogCaptureFixture
) -> None:
    history = RollingSummaryChatMessageHistory(
        "capped",
        summarizer=FlakySummarizer(failures=10**6),
        store=store,
        max_turns=4,
        keep_last=2,
        hard_cap=8,
        backoff=0.0,
    )
    with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
        for i in range(10):
            history.add_messages(turn(i))
    assert len(history.transcript) == 20
    assert texts(history.messages) == texts(history.transcript)[-4:]
    assert "falls back to a plain window" in caplog.text


def test_a_backlog_is_folded_oldest_first_once_the_summarizer_recovers(store: RollingStore) -> None:
    summarizer = FlakySummarizer(failures=6)
    history = RollingSummaryChatMessageHistory(
        "backlog", summarizer=summarizer, store=store, max_turns=4, keep_last=2, hard_cap=8, backoff=0.0
    )
    for i in range(10):
        history.add_messages(turn(i))
    record = store.summary("backlog")
    assert record is not None
    assert record.covered_seq > 0
    # Whatever is folded is a prefix of the transcript: no gap, nothing skipped.
    remaining = texts(history.transcript)[record.covered_seq :]
    assert texts(history.messages[1:])[-len(remaining) :] == remaining[-len(history.messages[1:]) :]


# ---------------------------------------------------------------- input checks


def test_bad_input_raises_and_writes_nothing(store: RollingStore) -> None:
    history = RollingSummaryChatMessageHistory("bad", summarizer=RecordingSummarizer(), store=store)
    with pytest.raises(TypeError, match="BaseMessage"):
        history.add_messages([HumanMessage("ok"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="sequence of BaseMessage"):
        history.add_messages(HumanMessage("not in a list"))  # type: ignore[arg-type]
    assert store.transcript("bad") == []


@pytest.mark.parametrize("bad_id", ["", "../etc/passwd", "a b", "x" * 129, "s;DROP TABLE x", "k*"])
def test_bad_session_ids_are_refused(bad_id: str) -> None:
    with pytest.raises(InvalidIdError):
        WindowedChatMessageHistory(bad_id)


def test_session_id_defaults_to_a_new_uuid() -> None:
    first, second = WindowedChatMessageHistory(), WindowedChatMessageHistory()
    assert first.session_id != second.session_id
    assert len(first.session_id) == 32


def test_histories_can_be_subclassed_with_extra_keywords() -> None:
    class Tagged(RollingSummaryChatMessageHistory):
        def __init__(self, session_id: str, *, tag: str, **kwargs: object) -> None:
            super().__init__(session_id, **kwargs)  # type: ignore[arg-type]
            self.tag = tag

    history = Tagged("sub", tag="x", summarizer=RecordingSummarizer(), max_turns=4, keep_last=2)
    history.add_messages(turn(0))
    assert history.tag == "x"
    assert len(history.messages) == 2


# ---------------------------------------------------------------- windowed


def test_window_keeps_the_last_messages_and_the_whole_transcript(store: RollingStore) -> None:
    history = WindowedChatMessageHistory("w", store=store, max_messages=4)
    for i in range(5):
        history.add_messages(turn(i))
    assert texts(history.messages) == ["q3", "a3", "q4", "a4"]
    assert len(history.transcript) == 10


def test_window_by_tokens_reads_enough_of_the_transcript(store: RollingStore) -> None:
    history = WindowedChatMessageHistory(
        "wt", store=store, max_messages=None, max_tokens=35, token_counter=lambda m: 10 * len(m)
    )
    history._PAGE = 2  # force several pages
    for i in range(5):
        history.add_messages(turn(i))
    # 35 tokens hold a3, q4, a4; the window starts on the user message (issue 15).
    assert texts(history.messages) == ["q4", "a4"]


@pytest.mark.parametrize("fresh", [False, True], ids=["same-object", "new-object"])
def test_a_window_reads_back_to_the_latest_user_message_past_its_limit(
    store: RollingStore, fresh: bool
) -> None:
    def call(i: int) -> list[BaseMessage]:
        return [
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"i": i}, "id": f"c{i}"}]),
            ToolMessage(f"result {i}", tool_call_id=f"c{i}"),
        ]

    history = WindowedChatMessageHistory("loop", store=store, max_messages=2)
    history.add_messages([HumanMessage("old"), AIMessage("old answer"), HumanMessage("find it")])
    for i in range(3):
        history.add_messages(call(i))
    view = (
        WindowedChatMessageHistory("loop", store=store, max_messages=2).messages
        if fresh
        else history.messages
    )
    assert view[0].content == "find it"  # the question is sent, whatever the limit
    assert len(view) == 7 and isinstance(view[-1], ToolMessage)  # every tool call with its result
    loose = WindowedChatMessageHistory("loop", store=store, max_messages=2, start_on=None)
    assert [type(m).__name__ for m in loose.messages] == ["AIMessage", "ToolMessage"]


WINDOW_CASES = [
    # (stored messages, window settings, expected view): issue 20, defect 10.
    pytest.param(["S:sys", "H:q", "A:a"], {}, ["sys", "q", "a"], id="leading-system-fits"),
    pytest.param(["A:hello", "H:q", "A:a"], {"max_messages": 3}, ["hello", "q", "a"], id="greeting-fits"),
    pytest.param(
        ["S:sys", "A:hello", "H:q", "A:a"],
        {"max_messages": None, "max_tokens": 40},
        ["sys", "hello", "q", "a"],
        id="fits-the-token-budget",
    ),
    pytest.param(["S:sys", "A:hello", "H:q", "A:a"], {"max_messages": 3}, ["q", "a"], id="cut-by-count"),
    pytest.param(
        ["S:sys", "A:hello", "H:q", "A:a"],
        {"max_messages": None, "max_tokens": 39},
        ["q", "a"],
        id="cut-by-tokens",
    ),
    pytest.param(["S:sys", "H:q", "A:a", "A:b"], {"max_messages": 2}, ["q", "a", "b"], id="question-kept"),
]


def _messages(specs: list[str]) -> list[BaseMessage]:
    kinds = {"S": SystemMessage, "H": HumanMessage, "A": AIMessage}
    return [kinds[spec[0]](spec[2:]) for spec in specs]


@pytest.mark.parametrize(("stored", "settings", "expected"), WINDOW_CASES)
@pytest.mark.parametrize("fresh", [False, True], ids=["same-object", "new-object"])
def test_a_window_sends_everything_that_fits(
    store: RollingStore, stored: list[str], settings: dict[str, Any], expected: list[str], fresh: bool
) -> None:
    def make() -> WindowedChatMessageHistory:
        return WindowedChatMessageHistory("fit", store=store, token_counter=lambda m: 10 * len(m), **settings)

    history = make()
    for message in _messages(stored):  # one write each: the same object extends its rows
        history.add_messages([message])
    assert texts(make().messages if fresh else history.messages) == expected


async def test_an_async_window_sends_everything_that_fits(store: RollingStore) -> None:
    history = WindowedChatMessageHistory("afit", store=store)
    await history.aadd_messages(_messages(["S:sys", "H:human 1", "A:ai"]))
    view = await WindowedChatMessageHistory("afit", store=store).aget_messages()
    assert texts(view) == texts(await history.aget_messages()) == ["sys", "human 1", "ai"]


def test_clear_deletes_the_session(store: RollingStore) -> None:
    history = RollingSummaryChatMessageHistory(
        "gone", summarizer=RecordingSummarizer(), store=store, max_turns=4, keep_last=2
    )
    for i in range(3):
        history.add_messages(turn(i))
    history.clear()
    assert history.messages == []
    assert history.transcript == []
    assert history.summary == ""


# ---------------------------------------------------------------- view stability


def test_the_view_changes_only_with_this_objects_own_add_messages(store: RollingStore) -> None:
    make = lambda: RollingSummaryChatMessageHistory(  # noqa: E731
        "stable", summarizer=RecordingSummarizer(), store=store, max_turns=4, keep_last=2
    )
    reader, writer = make(), make()
    writer.add_messages(turn(0))
    before = reader.messages
    for i in range(1, 4):
        writer.add_messages(turn(i))  # compacts behind the reader's back
    assert store.summary("stable") is not None
    assert reader.messages == before
    reader.add_messages(turn(4))
    assert reader.messages != before
    assert reader.messages[0].id == SUMMARY_MESSAGE_ID


# ---------------------------------------------------------------- async


async def test_async_summarizer_is_awaited_without_blocking_the_loop(store: RollingStore) -> None:
    unblock = asyncio.Event()
    calls: list[list[str]] = []

    async def summarizer(previous: str, messages: Sequence[BaseMessage]) -> str:
        calls.append(texts(messages))
        await unblock.wait()  # only a loop that keeps running can set this
        return "async summary"

    async def release_soon() -> None:
        await asyncio.sleep(0)
        unblock.set()

    history = RollingSummaryChatMessageHistory(
        "async", summarizer=summarizer, store=store, max_turns=4, keep_last=2
    )
    await history.aadd_messages(turn(0) + turn(1))
    await asyncio.gather(history.aadd_messages(turn(2)), release_soon())
    assert calls == [["q0", "a0", "q1", "a1"]]
    assert await history.asummary() == "async summary"
    assert texts(await history.aget_messages())[1:] == ["q2", "a2"]
    assert len(await history.atranscript()) == 6


async def test_a_sync_summarizer_runs_off_the_event_loop() -> None:
    loop_ran = threading.Event()

    def summarizer(previous: str, messages: Sequence[BaseMessage]) -> str:
        # Blocks until a coroutine on the loop runs: would deadlock if run on the loop.
        assert loop_ran.wait(timeout=10), "the event loop was blocked by the summarizer"
        return "thread summary"

    async def tick() -> None:
        await asyncio.sleep(0.01)
        loop_ran.set()

    history = RollingSummaryChatMessageHistory(
        "sync-in-async", summarizer=summarizer, max_turns=4, keep_last=2
    )
    await history.aadd_messages(turn(0) + turn(1))
    await asyncio.gather(history.aadd_messages(turn(2)), tick())
    assert await history.asummary() == "thread summary"


def test_an_async_summarizer_also_works_from_sync_code() -> None:
    async def summarizer(previous: str, messages: Sequence[BaseMessage]) -> str:
        await asyncio.sleep(0)
        return f"{len(messages)} folded"

    history = RollingSummaryChatMessageHistory("a-in-s", summarizer=summarizer, max_turns=4, keep_last=2)
    for i in range(3):
        history.add_messages(turn(i))
    assert history.summary == "4 folded"


async def test_async_clear_and_window(store: RollingStore) -> None:
    history = WindowedChatMessageHistory("aw", store=store, max_messages=2)
    await history.aadd_messages(turn(0) + turn(1))
    assert texts(await history.aget_messages()) == ["q1", "a1"]
    await history.aclear()
    assert await history.aget_messages() == []
    assert store.transcript("aw") == []


# ---------------------------------------------------------------- restart


def test_a_sqlite_session_reopened_in_a_new_process_is_the_same(tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    script = textwrap.dedent(
        f"""
        import json, sys
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store
        history = RollingSummaryChatMessageHistory(
            "restart", store=open_store("sqlite:///{db}"), max_turns=4, keep_last=2,
            summarizer=lambda previous, messages: previous + "|" + ",".join(m.text for m in messages))
        if sys.argv[1] == "write":
            for i in range(4):
                history.add_messages([HumanMessage(f"q{{i}}"), AIMessage(f"a{{i}}")])
        print(json.dumps({{"summary": history.summary, "view": [m.text for m in history.messages],
                           "transcript": [m.text for m in history.transcript]}}))
        """
    )
    first = subprocess.run(
        [sys.executable, "-c", script, "write"], capture_output=True, text=True, check=True
    )
    second = subprocess.run(
        [sys.executable, "-c", script, "read"], capture_output=True, text=True, check=True
    )
    assert first.stdout == second.stdout
    assert '"q0", "a0", "q1", "a1", "q2", "a2", "q3", "a3"' in second.stdout
    assert "|q0,a0,q1,a1" in second.stdout


def test_open_store_refuses_unknown_urls() -> None:
    from langchain_rolling_memory.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="unknown store URL scheme"):
        open_store("mongodb://x")
    with pytest.raises(ConfigurationError, match="looks like"):
        open_store("memory.db")


# ---------------------------------------------------------------- erasure during a compaction


@pytest.mark.parametrize("refill", [2, 6], ids=["refilled-shorter", "refilled-longer"])
def test_a_session_cleared_and_refilled_during_its_compaction_keeps_the_new_messages(
    store: RollingStore, refill: int
) -> None:
    def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
        # While the summary is written, the session is cleared and gets new messages.
        store.clear_session("race")
        store.append("race", [HumanMessage(f"new-{i}") for i in range(refill)])
        return "summary of erased messages"

    history = RollingSummaryChatMessageHistory(
        "race", summarizer=summarize, store=store, max_turns=4, keep_last=2
    )
    history.add_messages([HumanMessage(f"old-{i}") for i in range(5)])
    assert texts(store.transcript("race")) == [f"new-{i}" for i in range(refill)]
    fresh = RollingSummaryChatMessageHistory(
        "race", summarizer=summarize, store=store, max_turns=40, keep_last=2
    )
    assert fresh.summary == ""
    assert texts(fresh.messages) == [f"new-{i}" for i in range(refill)]


async def test_an_async_compaction_retracts_a_summary_of_erased_messages(store: RollingStore) -> None:
    async def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
        await store.aclear_session("arace")
        await store.aappend("arace", [HumanMessage(f"new-{i}") for i in range(6)])
        return "summary of erased messages"

    history = RollingSummaryChatMessageHistory(
        "arace", summarizer=summarize, store=store, max_turns=4, keep_last=2
    )
    await history.aadd_messages([HumanMessage(f"old-{i}") for i in range(5)])
    assert await history.asummary() == ""
    assert len(await store.atranscript("arace")) == 6


def test_a_store_outage_while_taking_the_lease_does_not_escape_add_messages(store: RollingStore) -> None:
    errors: list[BaseException] = []
    history = RollingSummaryChatMessageHistory(
        "outage",
        summarizer=RecordingSummarizer(),
        store=store,
        max_turns=4,
        keep_last=2,
        on_error=lambda sid, exc: errors.append(exc),
    )

    def down(*args: object) -> bool:
        raise StoreError("lease table unreachable")

    backend = store.backend
    original = backend.claim
    backend.claim = down  # type: ignore[method-assign]
    try:
        history.add_messages([HumanMessage(f"m{i}") for i in range(5)])
    finally:
        backend.claim = original  # type: ignore[method-assign]
    assert len(store.transcript("outage")) == 5
    assert isinstance(errors[0], StoreError)
    assert history.summary == ""


def test_a_token_window_reads_each_row_it_needs_once(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Paged(WindowedChatMessageHistory):
        _PAGE = 5

    def make() -> Paged:
        return Paged(
            "paged", store=store, max_messages=None, max_tokens=195, token_counter=lambda m: 10 * len(m)
        )

    make().add_messages([HumanMessage(f"m{i}") for i in range(100)])
    rows_read: list[int] = []
    original = store.backend.read

    def counting(*args: Any) -> Any:
        rows = original(*args)
        rows_read.append(len(rows))
        return rows

    monkeypatch.setattr(store.backend, "read", counting)
    history = make()
    assert texts(history.messages) == [f"m{i}" for i in range(81, 100)]  # 19 x 10 tokens fit in 195
    assert sum(rows_read) <= 20 + 5  # the 20 rows that cover the budget, at most one page more
    rows_read.clear()
    history.add_messages([HumanMessage("m100")])
    assert rows_read == []  # the same object extends what it read: no read at all
    assert texts(history.messages)[-1] == "m100"
    assert texts(history.messages) == texts(make().messages)
