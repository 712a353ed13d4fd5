"""Reading conversation files: JSONL, JSON, LoCoMo; bad input names its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_rolling_memory.errors import ConversationFormatError
from langchain_rolling_memory_lab.conversations import load_conversation, load_locomo, parse_jsonl
from langchain_rolling_memory_lab.locomo import find_locomo


def test_jsonl_reads_roles_sessions_and_clients(tmp_path: Path) -> None:
    path = tmp_path / "talk.jsonl"
    path.write_text(
        '{"role": "user", "content": "hi", "session": "a", "client": "ana"}\n'
        "\n"
        '{"role": "ai", "content": "hello", "session": "a", "client": "ana"}\n'
        '{"role": "human", "content": "again"}\n',
        encoding="utf-8",
    )
    talk = load_conversation(path)
    assert [(m.role, m.session, m.client) for m in talk] == [
        ("user", "a", "ana"),
        ("assistant", "a", "ana"),
        ("user", "session-1", "client-1"),
    ]
    assert isinstance(talk[0].to_message(), HumanMessage)
    assert isinstance(talk[1].to_message(), AIMessage)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param("{not json", "line 2: not valid JSON", id="broken-json"),
        pytest.param('{"role": "robot", "content": "x"}', "line 2: role must be one of", id="unknown-role"),
        pytest.param(
            '{"role": "user", "content": 3}', "line 2: content must be a string", id="content-not-text"
        ),
        pytest.param(
            '{"role": "user", "content": "x", "session": "../etc"}', "line 2: session may only", id="bad-id"
        ),
        pytest.param('["user", "x"]', "line 2: expected an object", id="not-an-object"),
    ],
)
def test_a_bad_jsonl_line_is_named_by_its_number(line: str, expected: str) -> None:
    with pytest.raises(ConversationFormatError, match=expected):
        parse_jsonl(['{"role": "user", "content": "fine"}', line], source="talk.jsonl")


def test_json_list_and_messages_object_are_read(tmp_path: Path) -> None:
    items = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    (tmp_path / "list.json").write_text(json.dumps(items), encoding="utf-8")
    (tmp_path / "obj.json").write_text(json.dumps({"messages": items}), encoding="utf-8")
    assert [m.content for m in load_conversation(tmp_path / "list.json")] == ["a", "b"]
    assert [m.content for m in load_conversation(tmp_path / "obj.json")] == ["a", "b"]


def test_a_bad_json_item_is_named_by_its_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"role": "user", "content": "a"}, {"role": "user"}]), encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="item 2: content must be a string"):
        load_conversation(path)


def test_locomo_object_maps_speakers_and_sessions(tmp_path: Path) -> None:
    conversation = {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "Back again"}],
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look", "blip_caption": "a dog"},
        ],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    }
    path = tmp_path / "26.json"
    path.write_text(json.dumps(conversation), encoding="utf-8")
    talk = load_locomo(path)
    assert [(m.role, m.session, m.content) for m in talk] == [
        ("user", "session-1", "Hey Mel!"),
        ("assistant", "session-1", "Look [shares a photo: a dog]"),
        ("user", "session-2", "Back again"),
    ]
    assert {m.client for m in talk} == {"Caroline"}


def test_the_real_locomo_release_is_read_when_present() -> None:
    path = find_locomo(Path(__file__).parent)
    if path is None:
        pytest.skip("LoCoMo (shared/data/locomo/locomo10.zip) is not on this machine")
    talk = load_conversation(path, conversation="26")
    assert len(talk) > 300
    assert {m.role for m in talk} == {"user", "assistant"}
    assert len({m.session for m in talk}) > 10


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConversationFormatError, match="no conversation file"):
        load_conversation(tmp_path / "nope.jsonl")
