"""Recorded conversations (JSONL, JSON, LoCoMo) read into messages for the replay; no memory logic here.

Owns `ConversationMessage` (a message with its session, client and place in the source) and the
JSONL and JSON formats. A LoCoMo conversation is read by `locomo` (the one LoCoMo reader, shared
with the eval) and only turned into `ConversationMessage`s here.

Formats:

* JSONL: one object per line, ``{"role": "user", "content": "...", "session": "s1", "client": "c1"}``
  (``session`` and ``client`` optional; roles ``user``/``human``, ``assistant``/``ai``,
  ``system``). Blank lines are skipped.
* JSON: a list of such objects, or ``{"messages": [...]}``.
* LoCoMo (Maharana et al., 2024): a conversation object with ``speaker_a``, ``speaker_b`` and
  ``session_N`` lists, as a ``.json`` file or the release's ``locomo10.zip``. ``speaker_a``
  plays the user (the client, named after them), ``speaker_b`` the assistant; each
  ``session_N`` is a session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.errors import ConversationFormatError
from langchain_rolling_memory_lab.locomo import (
    locomo_object,
    locomo_turns,
    read_json,
    zip_member,
)

_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "system",
}
DEFAULT_SESSION = "session-1"
DEFAULT_CLIENT = "client-1"


@dataclass(frozen=True)
class ConversationMessage:
    """One message of a recorded conversation, with where it came from."""

    role: str
    content: str
    session: str = DEFAULT_SESSION
    client: str = DEFAULT_CLIENT
    where: str = ""
    """Position in the source (``line 12``, ``item 3``), for error messages."""

    def to_message(self) -> BaseMessage:
        if self.role == "user":
            return HumanMessage(self.content)
        if self.role == "assistant":
            return AIMessage(self.content)
        return SystemMessage(self.content)


def _record(data: object, where: str, source: str) -> ConversationMessage:
    if not isinstance(data, dict):
        msg = f'{source}, {where}: expected an object like {{"role": "user", "content": "..."}}, got {type(data).__name__}'
        raise ConversationFormatError(msg)
    role = data.get("role")
    content = data.get("content")
    if not isinstance(role, str) or role.lower() not in _ROLES:
        msg = f"{source}, {where}: role must be one of {sorted(_ROLES)}, got {role!r}"
        raise ConversationFormatError(msg)
    if not isinstance(content, str):
        msg = f"{source}, {where}: content must be a string, got {type(content).__name__}: {content!r:.60}"
        raise ConversationFormatError(msg)
    ids: dict[str, str] = {}
    for field, default in (("session", DEFAULT_SESSION), ("client", DEFAULT_CLIENT)):
        value = data.get(field, default)
        try:
            ids[field] = validate_id(str(value) if isinstance(value, int) else value, kind=field)
        except ValueError as exc:
            msg = f"{source}, {where}: {exc}"
            raise ConversationFormatError(msg) from None
    return ConversationMessage(_ROLES[role.lower()], content, ids["session"], ids["client"], where)


def parse_jsonl(lines: Iterable[str], *, source: str = "<jsonl>") -> list[ConversationMessage]:
    """Parse JSONL text lines; a bad line raises `ConversationFormatError` naming its number."""
    out: list[ConversationMessage] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"{source}, line {number}: not valid JSON ({exc.msg} at column {exc.colno}): {line.strip()[:60]!r}"
            raise ConversationFormatError(msg) from None
        out.append(_record(data, f"line {number}", source))
    return out


def parse_records(data: object, *, source: str = "<json>") -> list[ConversationMessage]:
    """Parse decoded JSON: a list of message objects, ``{"messages": [...]}`` or a LoCoMo object."""
    conversation = locomo_object(data)
    if conversation is not None:
        return _from_locomo(conversation, source)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list):
        msg = f'{source}: expected a JSON list of messages, {{"messages": [...]}} or a LoCoMo conversation, got {type(data).__name__}'
        raise ConversationFormatError(msg)
    return [_record(item, f"item {i}", source) for i, item in enumerate(data, start=1)]


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._:@-]+", "-", name).strip("-")
    return slug[:64] or DEFAULT_CLIENT


def _from_locomo(conversation: dict[str, Any], source: str) -> list[ConversationMessage]:
    turns = locomo_turns(conversation, source)  # checks that speaker_a is a name
    client = _slug(conversation["speaker_a"])
    return [
        ConversationMessage(
            "user" if isinstance(t.message, HumanMessage) else "assistant",
            t.message.text,
            t.session_id,
            client,
            f"session_{t.session} turn {t.seq}",
        )
        for t in turns
    ]


def load_locomo(path: str | Path, conversation: str | int = 0) -> list[ConversationMessage]:
    """Read one conversation of the LoCoMo release (``locomo10.zip``) or of a LoCoMo ``.json``.

    Args:
        path: the zip file, or one conversation's JSON file.
        conversation: in a zip, the position (0-9) or the file's stem (``"26"``).
    """
    path = Path(path)
    if path.suffix != ".zip":
        return parse_records(read_json(path), source=str(path))
    member, data = zip_member(path, conversation)
    return parse_records(data, source=f"{path}:{member}")


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as handle:
        yield from handle


def load_conversation(path: str | Path, *, conversation: str | int = 0) -> list[ConversationMessage]:
    """Read a conversation file: ``.jsonl``, ``.json`` (list, ``{"messages"}`` or LoCoMo) or LoCoMo ``.zip``.

    Example:
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = f.write_text('{"role": "user", "content": "hi"}\\n')
        >>> [m.role for m in load_conversation(f)]
        ['user']
    """
    path = Path(path)
    if not path.is_file():
        msg = f"no conversation file at {str(path)!r}"
        raise ConversationFormatError(msg)
    if path.suffix == ".zip":
        return load_locomo(path, conversation)
    if path.suffix == ".jsonl":
        return parse_jsonl(_lines(path), source=str(path))
    head = path.read_text(encoding="utf-8").lstrip()[:1]
    if path.suffix == ".json" or head in ("[", ""):
        return parse_records(read_json(path), source=str(path))
    return parse_jsonl(_lines(path), source=str(path))
