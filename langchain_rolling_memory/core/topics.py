"""Topic shifts and topic sections of a summary: pure rules, no I/O, no model call.

A topic-shift detector says whether a user message starts a new topic. With one, the engine
folds the finished topic as soon as the user moves on, and keeps each finished topic's
summary as its own section; only the current topic's section is rewritten by later
compactions. This module decides where the topic ends and how the sections are laid out; the
engine does the folding.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date as Date
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_rolling_memory.core.prompts import clean_summary
from langchain_rolling_memory.core.texts import memory_texts
from langchain_rolling_memory.core.tool_pairs import tool_safe_cut
from langchain_rolling_memory.errors import ConfigurationError

TopicDetector = Callable[[BaseMessage], bool]
"""``(message) -> True`` if this user message starts a new topic."""

DEFAULT_TOPIC_PHRASES: tuple[str, ...] = (
    # English
    "new topic",
    "another topic",
    "different topic",
    "change of subject",
    "changing the subject",
    "change the subject",
    "another question",
    "different question",
    "unrelated question",
    "something else",
    "something different",
    "moving on",
    "on another note",
    "on a different note",
    "by the way",
    "btw",
    "i'd also like",
    "i would also like",
    "i also want to ask",
    "one more thing",
    "switching topics",
    "new question",
    # French
    "autre chose",
    "autre sujet",
    "nouveau sujet",
    "autre question",
    "nouvelle question",
    "question différente",
    "par ailleurs",
    "d'autre part",
    "j'aimerais aussi",
    "je voudrais aussi",
    "j'ai aussi une question",
    "changement de sujet",
    "changeons de sujet",
    "changer de sujet",
    "rien à voir",
    "sans rapport",
    "passons à",
)
"""Phrases that the built-in detector reads as a topic shift (English and French); matched as
whole phrases, ignoring case, accents and the apostrophe's shape."""

META_SECTIONS = "topic_sections"
META_OPEN = "open_section"
META_DATES = "topic_dates"


def _fold(text: str) -> str:
    """Case-, accent- and apostrophe-insensitive form used for matching."""
    text = text.replace("’", "'").casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def keyword_topic_shift(phrases: Iterable[str] | None = None, *, extra: Iterable[str] = ()) -> TopicDetector:
    """A detector that fires on a user message containing one of `phrases` (whole words).

    Matching ignores case and accents. Only `HumanMessage`s can start a topic.

    Args:
        phrases: the phrases to look for (default `DEFAULT_TOPIC_PHRASES`).
        extra: phrases added to the default (or given) ones.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> shift = keyword_topic_shift()
        >>> shift(HumanMessage("Autre chose : ma facture ?")), shift(HumanMessage("And the price?"))
        (True, False)
    """
    chosen = [*(DEFAULT_TOPIC_PHRASES if phrases is None else phrases), *extra]
    folded = sorted({_fold(p) for p in chosen if p and p.strip()}, key=len, reverse=True)
    if not folded:
        msg = f"keyword_topic_shift needs at least one phrase, got {chosen!r}"
        raise ConfigurationError(msg)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in folded) + r")(?!\w)")

    def detect(message: BaseMessage) -> bool:
        return isinstance(message, HumanMessage) and pattern.search(_fold(message.text)) is not None

    detect.__name__ = "keyword_topic_shift"
    return detect


def topic_cut(messages: Sequence[BaseMessage], detector: TopicDetector, *, min_messages: int = 2) -> int:
    """How many leading messages form a finished topic (0: none).

    The finished topic ends just before the first user message (after the first
    `min_messages`) that the detector reads as a shift; the cut is tool-safe.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> msgs = [HumanMessage("Invoice 12?"), AIMessage("Paid."), HumanMessage("New topic: delivery")]
        >>> topic_cut(msgs, keyword_topic_shift())
        2
    """
    for index in range(max(1, min_messages), len(messages)):
        if isinstance(messages[index], HumanMessage) and detector(messages[index]):
            return tool_safe_cut(messages, index, keep_more=True)
    return 0


@dataclass(frozen=True)
class TopicLabels:
    """How sections are labelled in the summary text: ``finished`` takes ``{n}``."""

    finished: str = "Topic {n}"
    current: str = "Current topic"


def topic_labels(language: str = "en") -> TopicLabels:
    """The section labels of `language`'s catalogue (`texts`); an unknown language raises
    `ConfigurationError`."""
    texts = memory_texts(language)
    return TopicLabels(texts.topic_finished, texts.topic_current)


def _sections(meta: Mapping[str, Any]) -> list[str]:
    value = meta.get(META_SECTIONS)
    return [str(s) for s in value] if isinstance(value, list) else []


def _dates(meta: Mapping[str, Any], count: int) -> list[str | None]:
    """One date (or None) per finished section; sections older than dating have none."""
    value = meta.get(META_DATES)
    dates = [None if d is None else str(d) for d in value] if isinstance(value, list) else []
    return ([None] * (count - len(dates)) + dates)[-count:] if count else []


def _label(labels: TopicLabels, n: int, when: str | None) -> str:
    name = labels.finished.format(n=n)
    return f"{name} ({when})" if when else name


def open_section(summary: str, meta: Mapping[str, Any]) -> str:
    """The part of the summary a compaction rewrites: the current topic's section, or all of it
    for a summary without sections."""
    if META_SECTIONS in meta:
        value = meta.get(META_OPEN)
        return value if isinstance(value, str) else ""
    return summary


def compose_sections(
    meta: Mapping[str, Any],
    new_text: str,
    *,
    closing: bool,
    labels: TopicLabels,
    max_sections: int,
    max_words: int,
    date: str | Date | None = None,
) -> tuple[str, dict[str, Any]]:
    """The summary text and meta after a compaction in topic mode.

    `new_text` is the summarizer's new version of the open section; with `closing` it
    becomes a finished section and the open section starts empty. Beyond `max_sections`
    finished sections, the two oldest are joined into one within `max_words`.

    With `date` (the caller's "today": this module reads no clock), the section finished by
    this compaction is dated, ``Topic 1 (2026-11-30): ...``; a joined section keeps the newer
    date. Without dates, the text and meta are exactly those of an undated history.

    Example:
        >>> text, meta = compose_sections({}, "Invoice 12 paid.", closing=True, labels=TopicLabels(),
        ...                               max_sections=5, max_words=50, date="2026-11-30")
        >>> text
        'Topic 1 (2026-11-30): Invoice 12 paid.'
    """
    if max_sections < 1:
        msg = f"max_topic_sections must be at least 1, got {max_sections!r}"
        raise ConfigurationError(msg)
    when = date.isoformat() if isinstance(date, Date) else date
    sections = _sections(meta)
    dates = _dates(meta, len(sections))
    current = new_text
    if closing:
        sections.append(new_text)
        dates.append(when or None)
        current = ""
    while len(sections) > max_sections:
        merged = clean_summary(f"{sections[0]} {sections[1]}", max_words=max_words)
        sections[:2] = [merged]
        dates[:2] = [dates[1] or dates[0]]
    parts = [f"{_label(labels, i, dates[i - 1])}: {text}" for i, text in enumerate(sections, start=1)]
    if current:
        parts.append(f"{labels.current}: {current}" if sections else current)
    updated = {**meta, META_SECTIONS: sections, META_OPEN: current}
    if any(dates):
        updated[META_DATES] = dates
    return "\n\n".join(parts), updated
