"""A search hands back its hits' messages decoded when first read (issue 23): a recall renders
its excerpts from the stored text and speaker, decoding no message (decoding was most of a
search's cost), and a hit read later gives the message stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

import langchain_rolling_memory.core.serde as serde
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.engine.recaller import Recaller
from langchain_rolling_memory.stores import RollingStore

CLIENT = "decoding-c"


def _messages() -> list[BaseMessage]:
    # Five short lines about the cat, then 25 too long to fit a 150-token block.
    short: list[BaseMessage] = [
        HumanMessage(f"Oscar the cat sleeps on mat {i}", name="Ana") for i in range(5)
    ]
    long: list[BaseMessage] = [AIMessage(f"The cat {i} " + "walks far away " * 60) for i in range(25)]
    return short + long


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    decoded: list[int] = []
    real = serde.messages_from_dict

    def counting(data: Sequence[dict[str, Any]]) -> list[BaseMessage]:
        decoded.append(len(data))
        return real(data)

    monkeypatch.setattr(serde, "messages_from_dict", counting)
    return decoded


def test_a_recall_decodes_no_message(store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("s1", _messages(), client_id=CLIENT)
    try:
        assert len(store.search("cat", client_id=CLIENT, limit=50)) == 30
        decoded = _spy(monkeypatch)
        found = Recaller(store, 150, limit=30).recall("where is the cat", client_id=CLIENT, session_id="s2")
    finally:
        store.forget(CLIENT)
    assert len(found.hits) == 5
    assert '"Ana"' in found.text  # the speaker's name, read from the stored message
    assert sum(decoded) == 0  # of 30 hits: the block is rendered from the stored text


def test_a_hit_read_later_gives_the_message_stored(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = _messages()
    store.append("s1", stored, client_id=CLIENT)
    try:
        decoded = _spy(monkeypatch)
        hits = store.search("cat", client_id=CLIENT, limit=50)
    finally:
        store.forget(CLIENT)
    assert sum(decoded) == 0
    by_seq = {hit.seq: hit for hit in hits}
    assert sorted(by_seq) == list(range(1, 31))
    for seq, message in enumerate(stored, 1):
        hit = by_seq[seq]
        assert hit.text == message.text
        assert hit.message == message
        assert hit == SearchHit("message", "s1", seq, hit.created_at, hit.score, message, text=message.text)
    assert sum(decoded) == 30
