"""Client isolation at the store boundary: bad ids write nothing, look-alike ids never mix."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from memory_fakes import raw_dump

from langchain_rolling_memory import OwnershipError, RollingSummaryChatMessageHistory
from langchain_rolling_memory.errors import InvalidIdError
from langchain_rolling_memory.stores import RollingStore

HOSTILE_IDS = {
    "path-traversal": "../../etc/passwd",
    "absolute-path": "/tmp/x",
    "windows-path": "..\\..\\boot.ini",
    "sql-quote": "a' OR '1'='1",
    "sql-comment": "a; DROP TABLE facts; --",
    "redis-glob": "client:*",
    "redis-brackets": "client[ab]",
    "redis-crlf": "a\r\nDEL x",
    "nul-byte": "a\x00b",
    "unicode-lookalike": "clіent",  # Cyrillic i
    "too-long": "c" * 129,
    "empty": "",
    "dot-dot": "..",
}


@pytest.mark.parametrize("bad", HOSTILE_IDS.values(), ids=HOSTILE_IDS.keys())
def test_a_hostile_client_id_raises_value_error_and_writes_nothing(store: RollingStore, bad: str) -> None:
    before = raw_dump(store)
    assert before is not None, f"raw_dump does not know {type(store).__name__}"
    with pytest.raises(InvalidIdError):
        store.add_fact(bad, "Likes tea")
    with pytest.raises(ValueError, match="client_id"):
        store.facts(bad)
    with pytest.raises(ValueError, match="client_id"):
        store.forget(bad)
    with pytest.raises(ValueError, match="client_id"):
        store.export(bad)
    with pytest.raises(ValueError, match="session_id"):
        store.set_state(bad, {"x": 1})
    assert raw_dump(store) == before


LOOKALIKES = [
    ("a", "a:b"),
    ("a", "a:"),
    ("a:b", "a:b:c"),
    ("client.1", "client_1"),
    ("A", "a"),
    ("x@y", "x@y.z"),
]


@pytest.mark.parametrize(("one", "other"), LOOKALIKES, ids=[f"{a}|{b}" for a, b in LOOKALIKES])
def test_look_alike_client_ids_never_share_facts_or_sessions(
    store: RollingStore, one: str, other: str
) -> None:
    store.add_fact(one, f"fact of {one}")
    store.add_fact(other, f"fact of {other}")
    store.append(f"s-{one}", [HumanMessage("hello")], client_id=one)
    store.append(f"s-{other}", [HumanMessage("hello")], client_id=other)
    assert [f.text for f in store.facts(one)] == [f"fact of {one}"]
    assert [f.text for f in store.facts(other)] == [f"fact of {other}"]
    assert store.sessions(one) == [f"s-{one}"]

    store.forget(one)
    assert store.facts(one) == []
    assert [f.text for f in store.facts(other)] == [f"fact of {other}"]
    assert store.sessions(other) == [f"s-{other}"]
    assert len(store.transcript(f"s-{other}")) == 1


def test_fact_text_that_looks_like_a_query_or_a_key_is_stored_verbatim(store: RollingStore) -> None:
    texts = ["'); DELETE FROM facts; --", "KEYS * | FLUSHALL", '{"$ne": null}', "../../etc/passwd"]
    for text in texts:
        store.add_fact("client-a", text)
    assert [f.text for f in store.facts("client-a")] == texts
    assert store.facts("client-b") == []


def test_a_client_cannot_delete_or_update_another_clients_fact(store: RollingStore) -> None:
    fact = store.add_fact("client-a", "Likes tea")
    assert fact is not None
    assert store.delete_fact("client-b", fact.id) is False
    assert store.update_fact("client-b", fact.id, "Hacked") is None
    assert [f.text for f in store.facts("client-a")] == ["Likes tea"]


def test_a_history_refuses_to_read_a_session_of_another_client(store: RollingStore) -> None:
    store.append("s-a", [HumanMessage("my IBAN is FR76")], client_id="client-a")
    intruder = RollingSummaryChatMessageHistory(
        "s-a", client_id="client-b", store=store, summarizer=lambda p, m: "s"
    )
    with pytest.raises(OwnershipError):
        intruder.messages  # noqa: B018 - reading is what is refused
    with pytest.raises(OwnershipError):
        _ = intruder.transcript
    with pytest.raises(OwnershipError):
        intruder.clear()
    assert len(store.transcript("s-a")) == 1
    owner = RollingSummaryChatMessageHistory(
        "s-a", client_id="client-a", store=store, summarizer=lambda p, m: "s"
    )
    assert [m.text for m in owner.messages] == ["my IBAN is FR76"]


async def test_a_history_refuses_to_read_a_session_of_another_client_async(store: RollingStore) -> None:
    await store.aappend("s-a", [HumanMessage("secret")], client_id="client-a")
    intruder = RollingSummaryChatMessageHistory(
        "s-a", client_id="client-b", store=store, summarizer=lambda p, m: "s"
    )
    with pytest.raises(OwnershipError):
        await intruder.aget_messages()
    with pytest.raises(OwnershipError):
        await intruder.aclear()
    assert len(await store.atranscript("s-a")) == 1


def test_a_summary_written_while_the_client_is_forgotten_does_not_outlive_the_erasure(
    store: RollingStore,
) -> None:
    def summarize(previous: str, messages: Any) -> str:
        store.forget("ana")  # the erasure lands while the summary is being written
        return "Ana said her IBAN is FR76"

    history = RollingSummaryChatMessageHistory(
        "s1", client_id="ana", store=store, summarizer=summarize, max_turns=4, keep_last=2
    )
    history.add_messages([HumanMessage(f"m{i}") for i in range(5)])
    assert store.summary("s1") is None
    assert store.session_info("s1") is None
    raw = raw_dump(store)
    assert raw is not None
    assert "FR76" not in raw


async def test_an_async_summary_written_while_the_client_is_forgotten_is_dropped(store: RollingStore) -> None:
    async def summarize(previous: str, messages: Any) -> str:
        await store.aforget("ana")
        return "Ana said her IBAN is FR76"

    history = RollingSummaryChatMessageHistory(
        "s1", client_id="ana", store=store, summarizer=summarize, max_turns=4, keep_last=2
    )
    await history.aadd_messages([HumanMessage(f"m{i}") for i in range(5)])
    assert await store.asummary("s1") is None
    assert "FR76" not in (raw_dump(store) or "FR76 missing dump")
