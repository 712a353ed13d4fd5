"""A keyless, deterministic, extractive summarizer: a stand-in for demos and tests, not an LLM.

Owns the sentence scoring (names, numbers, decisions, requests), the "newest value wins"
rule (a newer value replaces an older one, and over the cap the newly folded sentences come
first) and the word cap of the extract. It never rewrites a sentence and calls no model.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, check_max_words, clean_summary
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.core.texts import CATALOGUES, check_language, memory_texts

# A previous summary's speaker labels, in any language ("User: ", "Utilisateur : ").
_LABELS = {
    label
    for texts in CATALOGUES.values()
    for label in (texts.speaker_user, texts.speaker_assistant, texts.speaker_tool)
}
_LABEL = re.compile(rf"^({'|'.join(sorted(map(re.escape, _LABELS), key=len, reverse=True))})\s?:\s*")
_USER_LABELS = {texts.speaker_user for texts in CATALOGUES.values()}
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)
_NUMBER = re.compile(r"\d")

# English and French cues; both lists apply whatever the output language, because users mix.
_DECISION = re.compile(
    r"\b(?:decid\w*|agreed?|let'?s|we'?ll|go(?:ing)? with|cho(?:o)?se\w*|chosen|confirm\w*|book\w*|"
    r"order\w*|cancel\w*|switch\w*|instead|final\w*|settled?|deal|"
    r"décid\w*|d'accord|on part sur|je prends|choisi\w*|confirm\w*|réserv\w*|command\w*|annul\w*|"
    r"plutôt|finalement|validé\w*|entendu)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"\b(?:please|can you|could you|would you|i want|i need|i'?d like|i would like|help me|"
    r"how do|how can|remind|"
    r"s'il vous pla[iî]t|s'il te pla[iî]t|svp|pouvez-vous|peux-tu|pourriez-vous|je voudrais|je veux|"
    r"j'ai besoin|il me faut|aide-moi|aidez-moi|rappelle)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefer\w*|like|love|hate|don'?t|never|always|allergic|only|must|can'?t|"
    r"préf[eè]r\w*|aime|adore|déteste|jamais|toujours|allergique|seulement|uniquement|dois|doit|"
    r"ne peux pas)\b",
    re.IGNORECASE,
)
_INTRODUCTION = re.compile(
    r"\b(?:my name is|i am|i'?m|call me|je m'appelle|je suis|moi c'est|mon nom est)\b", re.IGNORECASE
)
_PLEASANTRY = re.compile(
    r"^(?:hi|hello|hey|thanks?|thank you|ok(?:ay)?|great|perfect|sure|cool|bye|good(?:bye)?|"
    r"bonjour|bonsoir|salut|merci|parfait|super|génial|ok|au revoir|à bientôt)\b",
    re.IGNORECASE,
)
# "my budget is", "la livraison est", "our deadline will be": the thing whose value may change.
# "my budget for the new oven is" names the same thing as "my budget is": the complement is skipped.
_SLOT = re.compile(
    r"\b(?:my|our|the|your|mon|ma|mes|notre|nos|votre|le|la|les)\s+([^\W\d_]+(?:\s+[^\W\d_]+)?)"
    r"(?:\s+(?:for|of|pour|de|du|des)(?:\s+[^\W\d_]+){1,3})?\s+"
    r"(?:is|are|was|will be|becomes|changed to|is now|est|sont|sera|devient|passe à)\b",
    re.IGNORECASE,
)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "they",
        "them",
        "their",
        "his",
        "her",
        "as",
        "so",
        "if",
        "then",
        "than",
        "not",
        "no",
        "yes",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "will",
        "would",
        "can",
        "could",
        "should",
        "just",
        "also",
        "very",
        "there",
        "here",
        "what",
        "which",
        "who",
        "le",
        "la",
        "les",
        "un",
        "une",
        "des",
        "du",
        "de",
        "et",
        "ou",
        "mais",
        "à",
        "au",
        "aux",
        "en",
        "dans",
        "sur",
        "pour",
        "par",
        "avec",
        "sans",
        "est",
        "sont",
        "était",
        "je",
        "me",
        "mon",
        "ma",
        "mes",
        "nous",
        "notre",
        "nos",
        "vous",
        "votre",
        "vos",
        "il",
        "elle",
        "ils",
        "elles",
        "leur",
        "leurs",
        "ce",
        "cet",
        "cette",
        "ces",
        "que",
        "qui",
        "quoi",
        "ne",
        "pas",
        "oui",
        "non",
        "si",
        "alors",
        "plus",
        "très",
        "y",
        "a",
        "ai",
        "as",
        "ont",
    ]
)
# Share of the word cap that the newly folded sentences may take before the previous
# summary's sentences are considered: enough that every fold shows its news, not so much
# that one long fold pushes out the client's name.
_FRESH_SHARE = 2 / 3
# Score added to a folded sentence that replaces an older value ("my budget is now 9500").
_CORRECTION = 4

_IGNORED_CAPITALS = frozenset({"i", "i'm", "i'd", "i'll", "i've", "ok", "okay", "je", "j'ai"})


@dataclass
class _Sentence:
    order: int
    label: str | None
    text: str
    score: int
    slot: str | None
    values: frozenset[str]
    content: frozenset[str]
    fresh: bool
    """From the messages being folded now (False: from the previous summary)."""

    @property
    def words(self) -> int:
        return len(self.text.split()) + (1 if self.label else 0)


def _split(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _content(tokens: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    values = frozenset(t for t in tokens if _NUMBER.search(t))
    content = frozenset(t for t in tokens if t not in _STOPWORDS and t not in values and len(t) > 1)
    return values, content


def _score(text: str, *, from_user: bool) -> int:
    tokens = text.split()
    introduction = _INTRODUCTION.search(text)
    if len(tokens) <= 5 and _PLEASANTRY.match(text) and not (_NUMBER.search(text) or introduction):
        return 0  # "Hi!", "Thanks a lot" (but "Hi, I'm Ana from Lyon." is who the user is)
    score = 0
    if _NUMBER.search(text):
        score += 2
    names = [t for t in tokens[1:] if t[:1].isupper() and t.strip(".,;:!?").lower() not in _IGNORED_CAPITALS]
    if names or introduction:
        score += 2
    if names and introduction and from_user:
        score += 2  # the user saying who they are outlives every other detail
    if _DECISION.search(text):
        score += 2
    if _REQUEST.search(text):
        score += 2
    if from_user and text.rstrip().endswith("?"):
        score += 1
    if _PREFERENCE.search(text):
        score += 1
    if score and from_user:
        score += 1
    return score


def _same_thing(old: _Sentence, new: _Sentence) -> bool:
    """True if `new` gives a newer value of what `old` said (so `old` is dropped)."""
    if old.slot is not None and old.slot == new.slot:
        return True
    if not (old.values and new.values) or old.values == new.values:
        return False
    union = old.content | new.content
    return bool(union) and len(old.content & new.content) / len(union) >= 0.6


class ExtractiveSummarizer:
    """Keeps the sentences that carry names, numbers, decisions and requests, newest first.

    Deterministic and free: no model, no key, no network. It copies sentences, it does not
    understand them; use it for demos, tests and as an offline fallback, not as a substitute
    for an LLM summary.

    Args:
        max_words: word cap of the summary (speaker labels included).
        language: language of the speaker labels (``"en"``, ``"fr"``: ``Utilisateur : ...``);
            None (the default): the language of the memory it is given to, English alone
            (`with_language`). Given explicitly, it is kept.
    """

    def __init__(self, *, max_words: int = DEFAULT_MAX_WORDS, language: str | None = None) -> None:
        check_max_words(max_words)
        self.max_words = max_words
        self.explicit_language = language is not None
        self._speak(language if language is not None else "en")

    def _speak(self, language: str) -> None:
        texts = memory_texts(language)
        self.language = language
        self.user = texts.speaker_user
        self.assistant = texts.speaker_assistant
        self.tool = texts.speaker_tool
        self.separator = texts.separator

    def with_language(self, language: str) -> ExtractiveSummarizer:
        """This summarizer in a memory of `language`: itself if it was given a language (or
        already writes in `language`), else a copy with that language's labels."""
        check_language(language)
        if self.explicit_language or language == self.language:
            return self
        localized = copy.copy(self)
        localized._speak(language)
        return localized

    # ------------------------------------------------------------------ candidates

    def _sentence(
        self, order: int, label: str | None, text: str, *, from_user: bool, floor: int, fresh: bool
    ) -> _Sentence:
        tokens = [t.lower() for t in _WORD.findall(text)]
        values, content = _content(tokens)
        slot = _SLOT.search(text)
        return _Sentence(
            order=order,
            label=label,
            text=text,
            score=max(floor, _score(text, from_user=from_user)),
            slot=" ".join(slot.group(1).lower().split()) if slot else None,
            values=values,
            content=content,
            fresh=fresh,
        )

    def _candidates(self, previous: str, messages: Sequence[BaseMessage]) -> list[_Sentence]:
        found: list[_Sentence] = []
        # The previous summary already passed selection: its sentences keep a minimum score.
        for line in previous.splitlines():
            match = _LABEL.match(line.strip())
            label = match.group(1) if match else None
            body = line.strip()[match.end() :] if match else line.strip()
            for text in _split(body):
                user = label in _USER_LABELS
                found.append(self._sentence(len(found), label, text, from_user=user, floor=1, fresh=False))
        for message in messages:
            if isinstance(message, HumanMessage):
                label, user = self.user, True
            elif isinstance(message, AIMessage):
                label, user = self.assistant, False
            elif isinstance(message, ToolMessage):
                label, user = f"{self.tool} {message.name}" if message.name else self.tool, False
            else:
                continue  # system prompts are configuration, not conversation
            for text in _split(message.text):
                found.append(self._sentence(len(found), label, text, from_user=user, floor=0, fresh=True))
        return found

    # ------------------------------------------------------------------ selection

    @staticmethod
    def _newest_values(sentences: list[_Sentence]) -> list[_Sentence]:
        kept: list[_Sentence] = []
        for sentence in sentences:
            key = " ".join(sentence.text.lower().split())
            replaced = [old for old in kept if _same_thing(old, sentence)]
            kept = [old for old in kept if " ".join(old.text.lower().split()) != key and old not in replaced]
            if replaced and sentence.fresh:
                sentence.score += _CORRECTION  # a changed value is news: it must reach the summary
            kept.append(sentence)
        return kept

    def _select(self, sentences: list[_Sentence]) -> list[_Sentence]:
        """The sentences that fit the cap: the newly folded ones first (newest information
        wins), then the previous summary's best, then whatever still fits.

        The fresh sentences get up to `_FRESH_SHARE` of the cap when there is a previous
        summary, so its best facts (a name, a city) keep the rest; each part is taken by
        score, the newer first on a tie.
        """

        def ranked(part: list[_Sentence]) -> list[_Sentence]:
            return sorted(part, key=lambda s: (-s.score, -s.order))

        fresh = ranked([s for s in sentences if s.fresh])
        older = ranked([s for s in sentences if not s.fresh])
        chosen: list[_Sentence] = []
        used = 0

        def fill(part: list[_Sentence], limit: int) -> None:
            nonlocal used
            for sentence in part:
                if sentence not in chosen and used + sentence.words <= limit:
                    chosen.append(sentence)
                    used += sentence.words

        fill(fresh, int(self.max_words * _FRESH_SHARE) if older else self.max_words)
        fill(older, self.max_words)
        fill(fresh, self.max_words)
        if not chosen and sentences:
            chosen = [ranked(fresh or older)[0]]  # one over-long sentence: cut by the word cap below
        return sorted(chosen, key=lambda s: s.order)

    def _render(self, sentences: list[_Sentence]) -> str:
        lines: list[str] = []
        current: str | None = None
        for sentence in sentences:
            if lines and sentence.label == current:
                lines[-1] = f"{lines[-1]} {sentence.text}"
            else:
                lines.append(
                    f"{sentence.label}{self.separator}{sentence.text}" if sentence.label else sentence.text
                )
                current = sentence.label
        return clean_summary("\n".join(lines), max_words=self.max_words) if lines else ""

    # ------------------------------------------------------------------ interface

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        candidates = self._newest_values(self._candidates(previous, messages))
        notable = [s for s in candidates if s.score > 0]
        if not notable:
            # Nothing stands out: keep the newest user sentences rather than an empty summary.
            notable = [s for s in candidates if s.label == self.user][-3:] or candidates[-3:]
        # No model was called: the summary cost no tokens and no calls.
        return SummaryResult(self._render(self._select(notable)), 0, 0, calls=0)

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        # Pure string work on a bounded batch: fast enough not to need a worker thread.
        return self.summarize(previous, messages)

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_words={self.max_words}, language={self.language!r})"


def extractive_summarizer(
    *, max_words: int = DEFAULT_MAX_WORDS, language: str | None = None
) -> ExtractiveSummarizer:
    """A keyless, deterministic summarizer that extracts sentences (a stand-in, not an LLM).

    Keeps the sentences that carry names, numbers, decisions and requests, drops
    pleasantries, lets the newest value of a thing replace the older one ("my budget is
    800" replaces "my budget is 500"), and stays within `max_words`.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> s = extractive_summarizer(max_words=40)
        >>> s.summarize("", [HumanMessage("Hi! I'm Ana. My budget is 500 euros."),
        ...                  AIMessage("Thanks!"), HumanMessage("My budget is 800 euros.")]).text
        "User: I'm Ana. My budget is 800 euros."
    """
    return ExtractiveSummarizer(max_words=max_words, language=language)
