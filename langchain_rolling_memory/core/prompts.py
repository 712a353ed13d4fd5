"""Summary prompts and the cleaning of what a model answers; pure text, no I/O.

Owns the shape of a summary request (its wording, per language, is the catalogue's: `texts`), the
rendering of the folded messages as a transcript, and the rules
applied to its reply (no title, no preamble, no fences or wrapping quotes, word and token caps).
It does not call any model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_rolling_memory.core.cuts import TokenCounter
from langchain_rolling_memory.core.quoting import one_line, quote_json
from langchain_rolling_memory.core.texts import CATALOGUES, ENGLISH, MemoryTexts, memory_texts
from langchain_rolling_memory.core.texts import (
    LANGUAGES as LANGUAGES,  # the old prompts.LANGUAGES, for one release
)
from langchain_rolling_memory.errors import ConfigurationError

SUMMARY_FRAMES: dict[str, str] = {name: texts.summary_frame for name, texts in CATALOGUES.items()}
"""The line put before a summary sent to the model, per language: it frames the summary as a
record of the conversation, never as instructions (`texts.MemoryTexts.summary_frame`)."""


def summary_frame(language: str = "en") -> str:
    """The frame line for `language`; an unknown language raises `ConfigurationError`."""
    return memory_texts(language).summary_frame


@dataclass(frozen=True)
class SummaryPrompt:
    """The texts of a summary request; placeholders: ``{max_words}``, ``{summary}``, ``{messages}``.

    The built-in ones come from a language's catalogue (`texts.MemoryTexts`, `default_prompt`).

    Attributes:
        system: instructions (rules of the summary).
        first: the request when there is no summary yet.
        update: the request that folds new messages into an existing summary.
        strict: appended to the system text on the retry after an unusable reply.
        structured: appended to the system text when a structured summary is asked for.
        speaker_user / speaker_assistant / speaker_tool / speaker_system: labels in the
            rendered transcript.
        separator: between a label and its text (``": "``, French ``" : "``).
        frame: the line the summary is sent under (see `SUMMARY_FRAMES`).
        focus: a rule added to the system text for one kind of conversation (the support
            prompt's products, references and quantities; the compaction prompt's five
            lines); empty for the general prompt.
        token_cap: the rule added when the summary has a token cap (``{max_tokens}``).
    """

    system: str
    first: str
    update: str
    strict: str
    structured: str = ENGLISH.summary_structured
    speaker_user: str = ENGLISH.speaker_user
    speaker_assistant: str = ENGLISH.speaker_assistant
    speaker_tool: str = ENGLISH.speaker_tool
    frame: str = ENGLISH.summary_frame
    speaker_system: str = ENGLISH.speaker_system
    separator: str = ENGLISH.separator
    focus: str = ""
    token_cap: str = ENGLISH.summary_token_cap

    @classmethod
    def of(cls, texts: MemoryTexts, kind: str = "general") -> SummaryPrompt:
        """The summary prompt of a language's catalogue, of one of `PROMPT_KINDS`."""
        return cls(
            system=texts.summary_system,
            first=texts.summary_first,
            update=texts.summary_update,
            strict=texts.summary_strict,
            structured=texts.summary_structured,
            speaker_user=texts.speaker_user,
            speaker_assistant=texts.speaker_assistant,
            speaker_tool=texts.speaker_tool,
            frame=texts.summary_frame,
            speaker_system=texts.speaker_system,
            separator=texts.separator,
            focus={"general": "", "support": texts.summary_support, "compact": texts.summary_compact}[kind],
            token_cap=texts.summary_token_cap,
        )

    def transcript(self, messages: Sequence[BaseMessage]) -> str:
        """`messages` rendered with this prompt's labels (`render_transcript`)."""
        return render_transcript(
            messages,
            user=self.speaker_user,
            assistant=self.speaker_assistant,
            tool=self.speaker_tool,
            system=self.speaker_system,
            separator=self.separator,
        )

    def messages(
        self,
        previous: str,
        folded: Sequence[BaseMessage],
        *,
        max_words: int,
        strict: bool = False,
        structured: bool = False,
        max_tokens: int | None = None,
    ) -> list[BaseMessage]:
        """The chat messages of one summary request (a system message, then the request).

        The rules are the system text, then the prompt's `focus` and, with `max_tokens`, the
        token cap (both rules of the list); a structured or strict request adds its paragraph.
        """
        transcript = self.transcript(folded)
        rules = [self.system, self.focus]
        if max_tokens is not None:
            rules.append(self.token_cap.format(max_tokens=max_tokens))
        system = "\n".join(rule for rule in rules if rule).format(max_words=max_words)
        if structured:
            system = f"{system}\n\n{self.structured.format(max_words=max_words)}"
        if strict:
            system = f"{system}\n\n{self.strict.format(max_words=max_words)}"
        template = self.update if previous.strip() else self.first
        request = template.format(summary=previous.strip(), messages=transcript, max_words=max_words)
        return [SystemMessage(system), HumanMessage(request)]


PROMPT_KINDS = ("general", "support", "compact")
"""The built-in summary prompts: ``general`` (any conversation; the first summary gives the main
topic, decisions, preferences and open questions), ``support`` (also every product, reference and
quantity, as a support desk needs) and ``compact`` (about five lines, the short-memory lesson's
compaction)."""

_PROMPTS = {
    (name, kind): SummaryPrompt.of(texts, kind) for name, texts in CATALOGUES.items() for kind in PROMPT_KINDS
}


def check_prompt_kind(kind: str) -> str:
    """`kind` itself once known to be one of `PROMPT_KINDS` (else `ConfigurationError`)."""
    if kind not in PROMPT_KINDS:
        known = ", ".join(repr(name) for name in PROMPT_KINDS)
        msg = f"prompt must be a SummaryPrompt or one of {known} (the built-in prompts), got {kind!r}"
        raise ConfigurationError(msg)
    return kind


def default_prompt(language: str = "en", kind: str = "general") -> SummaryPrompt:
    """The built-in prompt of `kind` (one of `PROMPT_KINDS`) for `language` (one of
    `texts.LANGUAGES`); anything else is a `ConfigurationError`.

    Example:
        >>> "quantité" in default_prompt("fr", "support").focus
        True
    """
    return _PROMPTS[memory_texts(language).language, check_prompt_kind(kind)]


def _text_of(message: BaseMessage) -> str:
    return one_line(message.text)


def render_transcript(
    messages: Sequence[BaseMessage],
    *,
    user: str = ENGLISH.speaker_user,
    assistant: str = ENGLISH.speaker_assistant,
    tool: str = ENGLISH.speaker_tool,
    system: str = ENGLISH.speaker_system,
    separator: str = ENGLISH.separator,
) -> str:
    """One line per message, with tool calls and results spelled out, for a summary request.

    A line is ``label`` + `separator` + text (``User: hi``; French ``Utilisateur : salut``).

    Every text and name is shown as its visible words on one line (`quoting.one_line`): no
    message can start a line of its own or hide words from whoever reads the request.
    """
    lines: list[str] = []
    for message in messages:
        text = _text_of(message)
        if isinstance(message, HumanMessage):
            lines.append(f"{user}{separator}{text}")
        elif isinstance(message, AIMessage):
            if text:
                lines.append(f"{assistant}{separator}{text}")
            for call in message.tool_calls:
                name = one_line(str(call.get("name", "?")))
                lines.append(f"{assistant} -> {tool} {name}({quote_json(call.get('args', {}))})")
        elif isinstance(message, ToolMessage):
            lines.append(f"{tool} {one_line(message.name or '')} -> {text}".replace("  ", " "))
        elif isinstance(message, SystemMessage):
            lines.append(f"{system}{separator}{text}")
        else:
            lines.append(f"{message.type}{separator}{text}")
    return "\n".join(lines)


_TITLE_WORDS = (
    r"(?:updated |new |current |final |conversation |running |rolling )?"
    r"(?:summary|résumé|resume|synthèse|recap)"
    r"(?: (?:mis à jour|actualisé|de la conversation|of the conversation|so far))?"
)
_TITLE_LINE = re.compile(
    rf"^(?:#+\s*)?[*_]*\s*(?:nouveau |new )?{_TITLE_WORDS}\s*[*_]*\s*:?\s*[*_]*\s*$", re.IGNORECASE
)
_HEADING = re.compile(r"^#{1,6}\s+\S")
# What chat models say before the text: "Sure!", "Bien sûr !", then "Here is the updated
# summary:" / "Voici un résumé concis :". A preamble names the summary and ends with a colon,
# so "Voici les trois options retenues : A, B et C." is content and stays.
_INTERJECTION = (
    r"(?:sure|certainly|of course|absolutely|okay|ok|alright|great|"
    r"bien sûr|bien sur|certainement|d'accord|très bien|entendu|avec plaisir|parfait)"
)
_INTERJECTION_LINE = re.compile(rf"^[*_]*{_INTERJECTION}\s*[!.,]?[*_]*$", re.IGNORECASE)
_PREAMBLE = re.compile(
    rf"^[*_]*(?:{_INTERJECTION}\s*[!.,]?\s*)?"
    r"(?:here is|here's|here’s|below is|this is|voici|voilà|voila|ci-dessous)\s+"
    r"(?:[^\s:]+\s+){0,5}?(?:summary|résumé|resume|synthèse|recap)\b[^\n:]{0,60}?\s*:[*_]*\s*",
    re.IGNORECASE,
)
_LABEL = re.compile(rf"^[*_]*(?:nouveau |new )?{_TITLE_WORDS}\s*[*_]*\s*:\s*[*_]*\s*", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_QUOTES = {'"': '"', "'": "'", "“": "”", "«": "»", "‘": "’"}


def _cap_words(text: str, max_words: int) -> str:
    words = text.split()
    if len(words) <= max_words:
        return text
    clipped = " ".join(words[:max_words])
    end = max(clipped.rfind(". "), clipped.rfind("! "), clipped.rfind("? "))
    if clipped.endswith((".", "!", "?")):
        return clipped
    if end >= len(clipped) // 2:
        return clipped[: end + 1]
    return clipped.rstrip(",;:") + "…"


def _summary_tokens(text: str, counter: TokenCounter | None) -> int:
    # Counted as the one message it is sent as, with the counter the history uses.
    return (counter or count_tokens_approximately)([AIMessage(text)])


def _cap_tokens(text: str, max_tokens: int, counter: TokenCounter | None) -> str:
    """The longest word cut of `text` within `max_tokens` (at least one word is kept)."""
    if _summary_tokens(text, counter) <= max_tokens:
        return text
    low, high = 1, len(text.split())
    while low < high:
        middle = (low + high + 1) // 2
        if _summary_tokens(_cap_words(text, middle), counter) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return _cap_words(text, low)


def _strip_head(lines: list[str]) -> list[str]:
    """Drop leading blank lines, titles, headings, interjections and preambles."""
    while lines:
        head = lines[0].strip()
        if not head or _TITLE_LINE.match(head) or _HEADING.match(head) or _INTERJECTION_LINE.match(head):
            lines.pop(0)
            continue
        rest = _PREAMBLE.sub("", head, count=1)
        if rest == head:
            break
        if rest.strip():
            lines[0] = rest
            break
        lines.pop(0)
    if lines:
        lines[0] = _LABEL.sub("", lines[0].strip(), count=1)
    return lines


_UNSTORABLE = re.compile("[\x00]")


DEFAULT_MAX_WORDS = 120
"""The word cap of a summary unless one is given (`MemorySettings.max_words`)."""


def check_max_words(max_words: int) -> None:
    if max_words < 1:
        msg = f"max_words must be positive, got max_words={max_words!r}"
        raise ConfigurationError(msg)


def clean_summary(
    text: str,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    max_summary_tokens: int | None = None,
    token_counter: TokenCounter | None = None,
) -> str:
    """Strip titles, preambles, code fences and wrapping quotes, then enforce the caps.

    Returns an empty string when nothing usable is left (for example a title-only reply).

    Args:
        text: the model's reply.
        max_words: word cap.
        max_summary_tokens: token cap, checked after the word cap (None: words only); the
            summary is counted as one message with `token_counter`.
        token_counter: counts a list of messages (default `count_tokens_approximately`).

    Example:
        >>> clean_summary("**Nouveau résumé :**\\nLe client livre le samedi.")
        'Le client livre le samedi.'
        >>> clean_summary("Bien sûr ! Voici un résumé concis : Le client livre le samedi.")
        'Le client livre le samedi.'
    """
    check_max_words(max_words)
    if max_summary_tokens is not None and max_summary_tokens < 1:
        msg = (
            f"max_summary_tokens must be positive (or None for no token cap), "
            f"got max_summary_tokens={max_summary_tokens!r}"
        )
        raise ConfigurationError(msg)
    # A model's reply is text for every backend: no NUL (PostgreSQL refuses it) and no lone
    # surrogate (not UTF-8), or the store would refuse the summary at every compaction.
    text = _UNSTORABLE.sub("", text.encode("utf-8", "replace").decode("utf-8")).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    lines = _strip_head([line.rstrip() for line in text.splitlines()])
    text = "\n".join(lines).strip()
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] == _QUOTES[text[0]]:
        text = text[1:-1].strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    if not text:
        return ""
    text = _cap_words(text, max_words)
    if max_summary_tokens is not None:
        text = _cap_tokens(text, max_summary_tokens, token_counter)
    return text
