"""The structured summary: its schema, its lenient JSON parsing and its compact rendering.

Pure: no model call. `ChatModelSummarizer(structured=True)` asks for this schema (through
`with_structured_output` where the model has it, JSON in the prompt otherwise) and stores
the rendered text, so the view and the stores only ever see text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from langchain_rolling_memory.core.texts import memory_texts

FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "topic": ("topic", "main_topic", "subject", "sujet", "sujet_principal", "theme", "theme_principal"),
    "user_preferences": ("user_preferences", "preferences", "preferences_utilisateur", "preferences_client"),
    "decisions": ("decisions", "decisions_prises", "key_decisions"),
    "open_questions": ("open_questions", "questions_ouvertes", "pending_questions", "questions_en_suspens"),
    "key_facts": ("key_facts", "facts", "faits", "faits_cles", "faits_importants"),
}
"""The names a model may give each field, written folded (see `_field_key`): ours first, then
the lessons' French names and common English variants. Our own name wins over an alias."""


def _field_key(name: str) -> str:
    """`name` folded for matching: no accents, no case, words joined by ``_``
    (``"Préférences"`` and ``"sujet-principal"`` give ``preferences`` and ``sujet_principal``)."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c))
    return re.sub(r"[\W_]+", "_", bare.casefold()).strip("_")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


_FIELD_OF = {alias: field for field, aliases in FIELD_ALIASES.items() for alias in aliases}


class StructuredSummary(BaseModel):
    """What a structured summary holds; every field is optional so a partial answer still counts.

    A model's field names are matched loosely (`FIELD_ALIASES`): the lessons' French names
    (``sujet_principal``, ``préférences``, ``décisions``, ``questions_ouvertes``, ``faits``)
    and English variants (``main_topic``, ``facts``) fill the same fields, whatever their
    case or accents; other names are ignored.
    """

    topic: str = Field(default="", description="What the conversation is about, in a few words.")
    user_preferences: list[str] = Field(
        default_factory=list, description="What the user likes, needs or refuses (newest value only)."
    )
    decisions: list[str] = Field(default_factory=list, description="What was decided or agreed.")
    open_questions: list[str] = Field(
        default_factory=list, description="Requests and questions not yet answered."
    )
    key_facts: list[str] = Field(
        default_factory=list, description="Names, dates, amounts, identifiers and other facts."
    )

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        found: dict[str, list[Any]] = {}
        for name, value in sorted(data.items(), key=lambda item: item[0] not in FIELD_ALIASES):
            field = _FIELD_OF.get(_field_key(name)) if isinstance(name, str) else None
            if field is not None:
                found.setdefault(field, []).append(value)
        # Our own name first, then the aliases in the reply's order; an empty value gives way.
        return {
            field: next((v for v in values if not _blank(v)), values[0]) for field, values in found.items()
        }

    @field_validator("user_preferences", "decisions", "open_questions", "key_facts", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        # Models sometimes answer one string, or null, where a list is expected, or an object
        # of named facts ({"client": "Ana"}).
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value.strip() else []
        if isinstance(value, dict):
            return [f"{key}: {item}" for key, item in value.items() if str(item).strip()]
        return value

    @field_validator("topic", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        return "" if value is None else value

    def is_empty(self) -> bool:
        return not (
            self.topic.strip()
            or self.user_preferences
            or self.decisions
            or self.open_questions
            or self.key_facts
        )


def _sentence(text: str) -> str:
    text = " ".join(str(text).split()).rstrip(" ;")
    return text if not text or text.endswith((".", "!", "?", "…")) else text + "."


def render_structured_summary(summary: StructuredSummary, *, language: str = "en") -> str:
    """One line per non-empty field, items separated by spaces as sentences; the labels are
    `language`'s (`texts.MemoryTexts.structured_labels`; French: ``Sujet : ...``).

    Example:
        >>> s = StructuredSummary(topic="Delivery to Lyon", decisions=["Ship on Saturday"])
        >>> print(render_structured_summary(s))
        Topic: Delivery to Lyon.
        Decisions: Ship on Saturday.
    """
    texts = memory_texts(language)
    topic, preferences, decisions, questions, facts = texts.structured_labels
    lines: list[str] = []
    if summary.topic.strip():
        lines.append(f"{topic}{texts.separator}{_sentence(summary.topic)}")
    for label, items in (
        (preferences, summary.user_preferences),
        (decisions, summary.decisions),
        (questions, summary.open_questions),
        (facts, summary.key_facts),
    ):
        kept = [_sentence(item) for item in items if str(item).strip()]
        if kept:
            lines.append(f"{label}{texts.separator}{' '.join(kept)}")
    return "\n".join(lines)


def parse_structured_summary(value: object) -> StructuredSummary | None:
    """A `StructuredSummary` from a model's answer (object, dict or JSON text), else None.

    Reads JSON text with LangChain's `parse_json_markdown` (a bare object, or one in a code
    fence with prose around it); returns None when nothing in `value` validates, so the
    caller can fall back to the plain text.
    """
    if isinstance(value, StructuredSummary):
        return None if value.is_empty() else value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, str):
        try:
            # Strict JSON: a reply cut short is not a summary (no partial parsing).
            value = parse_json_markdown(value, parser=json.loads)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict):
        return None
    try:
        parsed = StructuredSummary.model_validate(value)
    except ValidationError:
        return None
    return None if parsed.is_empty() else parsed
