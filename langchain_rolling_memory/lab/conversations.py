"""Reading recorded conversations (JSONL, JSON, LoCoMo) into messages; no memory logic here.

Formats:

* JSONL: one object per line, ``{"role": "user", "content": "...", "session": "s1", "client": "c1"}``
  (``session`` and ``client`` optional; roles ``user``/``human``, ``assistant``/``ai``,
  ``system``). Blank lines are skipped.
* JSON: a list of such objects, or ``{"messages": [...]}``.
* LoCoMo (Maharana et al., 2024): a conversation object with ``speaker_a``, ``speaker_b`` and
  ``session_N`` lists, as a ``.json`` file or the release's ``locomo10.zip``. ``speaker_a``
  plays the user, ``speaker_b`` the assistant.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_rolling_memory.errors import ConversationFormatError
from langchain_rolling_memory.ids import validate_id

__all__ = [
    "ConversationMessage",
    "find_locomo",
    "load_conversation",
    "load_locomo",
    "parse_jsonl",
    "parse_records",
]

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
    if isinstance(data, dict) and "speaker_a" in data:
        return _from_locomo(data, source)
    if isinstance(data, dict) and isinstance(data.get("conversation"), dict):
        return _from_locomo(data["conversation"], source)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if not isinstance(data, list):
        msg = f'{source}: expected a JSON list of messages, {{"messages": [...]}} or a LoCoMo conversation, got {type(data).__name__}'
        raise ConversationFormatError(msg)
    return [_record(item, f"item {i}", source) for i, item in enumerate(data, start=1)]


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._:@-]+", "-", name).strip("-")
    return slug[:64] or DEFAULT_CLIENT


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    return sorted(
        int(m.group(1))
        for key, value in conversation.items()
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(value, list)
    )


def _from_locomo(conversation: dict[str, Any], source: str) -> list[ConversationMessage]:
    speaker_a = conversation.get("speaker_a")
    if not isinstance(speaker_a, str):
        msg = f"{source}: a LoCoMo conversation needs a 'speaker_a' name"
        raise ConversationFormatError(msg)
    client = _slug(speaker_a)
    out: list[ConversationMessage] = []
    for number in _session_numbers(conversation):
        for i, turn in enumerate(conversation[f"session_{number}"], start=1):
            where = f"session_{number} turn {i}"
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                msg = f"{source}, {where}: expected {{'speaker': ..., 'text': ...}}, got {turn!r:.60}"
                raise ConversationFormatError(msg)
            text = turn["text"]
            if isinstance(turn.get("blip_caption"), str):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            role = "user" if turn.get("speaker") == speaker_a else "assistant"
            out.append(ConversationMessage(role, text, f"session-{number}", client, where))
    if not out:
        msg = f"{source}: the LoCoMo conversation has no session_N turns"
        raise ConversationFormatError(msg)
    return out


def load_locomo(path: str | Path, conversation: str | int = 0) -> list[ConversationMessage]:
    """Read one conversation of the LoCoMo release (``locomo10.zip``) or of a LoCoMo ``.json``.

    Args:
        path: the zip file, or one conversation's JSON file.
        conversation: in a zip, the position (0-9) or the file's stem (``"26"``).
    """
    path = Path(path)
    if path.suffix != ".zip":
        return parse_records(_read_json(path), source=str(path))
    with zipfile.ZipFile(path) as archive:
        members = sorted(n for n in archive.namelist() if n.endswith(".json"))
        if not members:
            msg = f"{path}: no .json conversation inside the zip"
            raise ConversationFormatError(msg)
        stems = [Path(n).stem for n in members]
        if isinstance(conversation, int) or (str(conversation).isdigit() and str(conversation) not in stems):
            index = int(conversation)
            if not 0 <= index < len(members):
                msg = f"{path}: conversation index must be in 0..{len(members) - 1}, got {index}"
                raise ConversationFormatError(msg)
            member = members[index]
        elif str(conversation) in stems:
            member = members[stems.index(str(conversation))]
        else:
            msg = f"{path}: no conversation {conversation!r}; choose one of {stems} or an index"
            raise ConversationFormatError(msg)
        data = json.loads(archive.read(member))
    return parse_records(data, source=f"{path}:{member}")


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"{path}, line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
        raise ConversationFormatError(msg) from None


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
        return parse_records(_read_json(path), source=str(path))
    return parse_jsonl(_lines(path), source=str(path))


def find_locomo(start: str | Path | None = None) -> Path | None:
    """The LoCoMo release, if this machine has it: ``$ROLLING_MEMORY_LOCOMO``, else
    ``shared/data/locomo/locomo10.zip`` in the current folder or one of its parents."""
    env = os.environ.get("ROLLING_MEMORY_LOCOMO")
    if env:
        return Path(env) if Path(env).exists() else None
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "shared" / "data" / "locomo" / "locomo10.zip"
        if candidate.is_file():
            return candidate
    return None
