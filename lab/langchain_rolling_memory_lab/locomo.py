"""The LoCoMo release (Maharana et al., 2024), read in one place for the replay and the eval.

Owns the format: finding the release on this machine (`find_locomo`), opening it (the
release's ``locomo10.zip``, one ``.json`` per conversation, or a ``.json`` of one conversation
or of a list of them), the walk of one conversation object (``speaker_a``, ``speaker_b``,
``session_N`` lists, ``session_N_date_time``) into turns, and the questions with a gold
answer (``qa``, categories 1-4), and the fixed dev / held-out split of the release
(`split_of`: conversations 47-50 held out, never tuned on). ``speaker_a`` plays the user, ``speaker_b`` the assistant; a
turn's text carries its photo caption. Gives the eval its view, `read_locomo` (every
conversation, with dates and questions); the replay's view (`ConversationMessage`s, one
conversation) is built from the same walk in `conversations`. It scores nothing and knows no
memory strategy.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory.errors import ConversationFormatError

CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""LoCoMo's question categories that have a gold answer, by number."""

_MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.IGNORECASE)


@dataclass(frozen=True)
class EvalTurn:
    """One message of a conversation, with its session number and date."""

    session: int
    seq: int
    message: BaseMessage
    created_at: float | None

    @property
    def session_id(self) -> str:
        return f"session-{self.session}"


@dataclass(frozen=True)
class EvalQuestion:
    question: str
    answer: str
    category: int


@dataclass(frozen=True)
class EvalConversation:
    name: str
    turns: list[EvalTurn]
    questions: list[EvalQuestion]


def parse_date(text: object) -> float | None:
    """``"1:56 pm on 8 May, 2023"`` as UTC seconds (None when it is not such a date).

    Example:
        >>> parse_date("1:56 pm on 8 May, 2023")
        1683554160.0
        >>> parse_date("sometime in May") is None
        True
    """
    match = _DATE.search(text) if isinstance(text, str) else None
    if not match or match.group(5).lower() not in _MONTHS:
        return None
    hour, minute, half, day, month, year = match.groups()
    hour24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    moment = datetime(int(year), _MONTHS[month.lower()], int(day), hour24, int(minute), tzinfo=timezone.utc)
    return moment.timestamp()


HELD_OUT: tuple[str, ...] = ("47", "48", "49", "50")
"""The LoCoMo conversations held out (by number, the release's file stems): never tuned on."""

SPLITS: tuple[str, ...] = ("dev", "held-out")

_NUMBER = re.compile(r"(\d+)$")


def split_of(name: str) -> str:
    """``"held-out"`` for a conversation whose name ends with a number of `HELD_OUT`
    (``locomo10.zip:47``, ``conv-47``), ``"dev"`` for any other.

    Example:
        >>> split_of("locomo10.zip:47"), split_of("conv-26"), split_of("tiny.json:0")
        ('held-out', 'dev', 'dev')
    """
    found = _NUMBER.search(name)
    return "held-out" if found is not None and found.group(1) in HELD_OUT else "dev"


# ------------------------------------------------------------------------------ one conversation


def locomo_object(data: object) -> dict[str, Any] | None:
    """The LoCoMo conversation object in decoded JSON: `data` itself when it names a
    ``speaker_a``, else its ``conversation`` object (the release's layout), else None."""
    if not isinstance(data, dict):
        return None
    if "speaker_a" in data:
        return data
    inner = data.get("conversation")
    return inner if isinstance(inner, dict) else None


def _session_numbers(conversation: dict[str, Any]) -> list[int]:
    return sorted(
        int(m.group(1))
        for key, value in conversation.items()
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(value, list)
    )


def locomo_turns(conversation: dict[str, Any], source: str) -> list[EvalTurn]:
    """Every turn of one conversation object, session by session in number order.

    A turn spoken by ``speaker_a`` is a `HumanMessage`, any other an `AIMessage`; the
    message is named after its speaker, its text ends with the photo caption when there is
    one, and it is dated with its session's ``session_N_date_time``.

    Example:
        >>> turns = locomo_turns({"speaker_a": "Ana", "session_1": [
        ...     {"speaker": "Ana", "text": "Look!", "blip_caption": "a cat"},
        ...     {"speaker": "Ben", "text": "Cute."}]}, "demo")
        >>> [(t.session_id, t.seq, type(t.message).__name__, t.message.name, t.message.text) for t in turns]
        [('session-1', 1, 'HumanMessage', 'Ana', 'Look! [shares a photo: a cat]'), ('session-1', 2, 'AIMessage', 'Ben', 'Cute.')]
    """
    speaker_a = conversation.get("speaker_a")
    if not isinstance(speaker_a, str):
        msg = f"{source}: a LoCoMo conversation needs a 'speaker_a' name"
        raise ConversationFormatError(msg)
    out: list[EvalTurn] = []
    for number in _session_numbers(conversation):
        date = parse_date(conversation.get(f"session_{number}_date_time"))
        for i, turn in enumerate(conversation[f"session_{number}"], start=1):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                msg = f"{source}, session_{number} turn {i}: expected {{'speaker': ..., 'text': ...}}, got {turn!r:.60}"
                raise ConversationFormatError(msg)
            text = turn["text"]
            if isinstance(turn.get("blip_caption"), str):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            speaker = turn.get("speaker")
            kind = HumanMessage if speaker == speaker_a else AIMessage
            message = kind(text, name=speaker) if isinstance(speaker, str) else kind(text)
            out.append(EvalTurn(number, i, message, date))
    if not out:
        msg = f"{source}: the LoCoMo conversation has no session_N turns"
        raise ConversationFormatError(msg)
    return out


def _questions(data: dict[str, Any]) -> list[EvalQuestion]:
    return [
        EvalQuestion(str(q.get("question", "")), str(q["answer"]), int(q["category"]))
        for q in data.get("qa", [])
        if isinstance(q, dict) and q.get("category") in CATEGORIES and "answer" in q
    ]


# ------------------------------------------------------------------------------ files


def _decoded(text: str | bytes, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{where}, line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
        raise ConversationFormatError(msg) from None


def read_json(path: Path) -> object:
    """A JSON file, decoded; invalid JSON is a `ConversationFormatError` naming line and column."""
    return _decoded(path.read_text(encoding="utf-8"), str(path))


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        msg = f"{path}: not a readable zip file ({exc}); pass locomo10.zip or a conversation .json"
        raise ConversationFormatError(msg) from None


def _member(archive: zipfile.ZipFile, path: Path, member: str) -> object:
    """One member of the release's zip, decoded; invalid JSON names the member, line and column."""
    return _decoded(archive.read(member), f"{path}:{member}")


def _zip_members(archive: zipfile.ZipFile) -> list[str]:
    return sorted(n for n in archive.namelist() if n.endswith(".json"))


def zip_member(path: Path, conversation: str | int = 0) -> tuple[str, object]:
    """One conversation of the release's zip, decoded, with its member's name.

    Args:
        path: the zip file.
        conversation: the position (0-9) or the file's stem (``"26"``); a number that is
            not a stem is a position.
    """
    with _open_zip(path) as archive:
        members = _zip_members(archive)
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
        return member, _member(archive, path, member)


def read_locomo(path: str | Path) -> list[EvalConversation]:
    """Every conversation of a LoCoMo file: the release's zip, a list JSON or one conversation's JSON."""
    path = Path(path)
    if not path.is_file():
        msg = f"no LoCoMo file at {str(path)!r}; pass locomo10.zip or a conversation .json"
        raise ConversationFormatError(msg)
    items: list[tuple[str, Any]] = []
    if path.suffix == ".zip":
        with _open_zip(path) as archive:
            items = [(Path(m).stem, _member(archive, path, m)) for m in _zip_members(archive)]
    else:
        data = read_json(path)
        entries = data if isinstance(data, list) else [data]
        items = [
            (str(e.get("sample_id", i)) if isinstance(e, dict) else str(i), e) for i, e in enumerate(entries)
        ]
    out = []
    for name, data in items:
        if not isinstance(data, dict):
            msg = f"{path}: conversation {name} is not a JSON object"
            raise ConversationFormatError(msg)
        body = data["conversation"] if isinstance(data.get("conversation"), dict) else data
        source = f"{path.name}:{name}"
        out.append(EvalConversation(source, locomo_turns(body, source), _questions(data)))
    if not out:
        msg = f"{path}: no LoCoMo conversation found"
        raise ConversationFormatError(msg)
    return out


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
