"""Keyless stand-ins for demos, replays, notebooks and tests: no network, no key, not LLMs.

Owns two rule-based chat models: `KeylessFactModel`, which answers the fact extractor's
request with the facts a user stated about themselves (so the real `FactExtractor` runs
offline), and `OfflineChatModel`, which answers only from what is in its prompt (a tiny
handbook plus the facts and summary it finds there). Real memory logic lives elsewhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.framing import MEMORY_MESSAGE_ID, SUMMARY_MESSAGE_ID
from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.summarizers.base import Summarizer
from langchain_rolling_memory.summarizers.extractive import extractive_summarizer

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|my|me|mine)\b")

# (key, pattern): a first-person sentence matching the pattern becomes a fact with that key,
# so a newer sentence about the same thing replaces the older one (a team change).
_FACT_RULES: tuple[tuple[str | None, re.Pattern[str]], ...] = (
    ("allergy", re.compile(r"\ballerg(?:y|ic|ies)\b", re.IGNORECASE)),
    ("diet", re.compile(r"\b(?:vegetarian|vegan|gluten[- ]free|halal|kosher)\b", re.IGNORECASE)),
    ("team", re.compile(r"\b(?:in|to|join\w*) the [A-Z][\w-]* team\b")),
    ("name", re.compile(r"\b(?:my name is|call me)\b", re.IGNORECASE)),
    ("location", re.compile(r"\b(?:I live in|I'm based in|I am based in|I moved to)\b", re.IGNORECASE)),
    (None, re.compile(r"\bI (?:prefer|love|hate|always|never|can't eat|don't eat)\b", re.IGNORECASE)),
)
_FACT_LINE = re.compile(r'^- (?:\[[^\]]*\] )?(".*")$', re.MULTILINE)
_ABOUT_ME = re.compile(r"\b(?:am I|about me|should [\w ]{1,20} know|remember)\b", re.IGNORECASE)
_LEAD_IN = re.compile(r"^[A-Z][\w ]{0,20}:\s+")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def keyless_facts(messages: Sequence[BaseMessage], *, max_chars: int = 200) -> list[tuple[str | None, str]]:
    """Facts the user stated about themselves, as ``(key, sentence)``; rule-based, keyless.

    Only `HumanMessage` sentences in the first person are read. Keyed facts (``team``,
    ``allergy``...) are meant to replace the previous value with the same key.

    Example:
        >>> keyless_facts([HumanMessage("Hi! I have a severe peanut allergy. What's for lunch?")])
        [('allergy', 'I have a severe peanut allergy.')]
    """
    found: dict[str | None, list[str]] = {}
    for message in messages:
        if not isinstance(message, HumanMessage):
            continue
        for sentence in _sentences(message.text):
            if not _FIRST_PERSON.search(sentence) or sentence.endswith("?"):
                continue
            for key, pattern in _FACT_RULES:
                if pattern.search(sentence):
                    text = _LEAD_IN.sub("", sentence)[:max_chars]
                    text = text[:1].upper() + text[1:]
                    if key is None:
                        found.setdefault(None, []).append(text)
                    else:
                        found[key] = [text]  # newest sentence about a key wins
                    break
    return [(key, text) for key, texts in found.items() for text in texts]


def keyless_summarizer(max_words: int = DEFAULT_MAX_WORDS) -> Summarizer:
    """The package's keyless extractive summarizer (deterministic, calls no model)."""
    return extractive_summarizer(max_words=max_words)


class OfflineChatModel(BaseChatModel):
    """A chat model that answers from its prompt only: a handbook entry plus the facts it sees.

    It looks up the latest user message in `handbook` (keyword -> answer) and, when its
    prompt carries a facts block, quotes those facts back. It never knows anything that is
    not in the prompt, so its answers show what memory actually reached the model.
    """

    handbook: dict[str, str] = Field(default_factory=dict)
    """Keyword (lower case) -> answer used when the keyword is in the latest user message."""

    @property
    def _llm_type(self) -> str:
        return "offline-demo"

    @staticmethod
    def facts_in(messages: Sequence[BaseMessage]) -> list[str]:
        """The facts of the memory message in a prompt (as `with_rolling_memory` puts them)."""
        for message in messages:
            if message.id == MEMORY_MESSAGE_ID:
                return [json.loads(m.group(1)) for m in _FACT_LINE.finditer(message.text)]
        return []

    def _answer(self, messages: Sequence[BaseMessage]) -> str:
        question = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        lowered = question.lower()
        hits = sorted((lowered.rfind(k), k) for k in self.handbook if k in lowered)
        parts = (
            [self.handbook[hits[-1][1]]]
            if hits
            else ["I have no handbook entry for that; please ask People Ops."]
        )
        facts = self.facts_in(messages)
        if facts and _ABOUT_ME.search(question):
            parts.append("From what I know about you: " + "; ".join(f'"{f}"' for f in facts) + ".")
        has_summary = any(getattr(m, "id", None) == SUMMARY_MESSAGE_ID for m in messages)
        if has_summary:
            parts.append("(I also see a summary of our earlier conversation.)")
        return " ".join(parts)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self._answer(messages)
        reply = AIMessage(
            text,
            usage_metadata={
                "input_tokens": count_tokens(messages),
                "output_tokens": count_tokens([AIMessage(text)]),
                "total_tokens": count_tokens(messages) + count_tokens([AIMessage(text)]),
            },
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _identifying_params(self) -> Mapping[str, Any]:
        return {"handbook": sorted(self.handbook)}


class KeylessFactModel(BaseChatModel):
    """Answers `FactExtractor`'s request offline: the `keyless_facts` of its user lines, as JSON.

    A keyed fact is sent as an ``add`` with its key, which the store turns into a
    replacement of the fact with that key (a team change updates the team fact).
    """

    @property
    def _llm_type(self) -> str:
        return "keyless-facts"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        body = messages[-1].text if messages else ""
        if "<messages>" in body:
            body = body.split("<messages>", 1)[1].rsplit("</messages>", 1)[0]
        users = [HumanMessage(line[6:]) for line in body.splitlines() if line.startswith("User: ")]
        found = keyless_facts(users)
        reply = json.dumps({"add": [{"text": t, "key": k} for k, t in found], "update": [], "delete": []})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def keyless_extractor() -> FactExtractor:
    """The package's `FactExtractor` on `KeylessFactModel`: real validation, no model, no key."""
    return FactExtractor(KeylessFactModel())
