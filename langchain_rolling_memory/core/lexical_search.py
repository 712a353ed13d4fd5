"""Lexical search, pure: query terms, a BM25 index over in-memory texts, safe FTS5/tsquery strings.

Owns the one text analysis every backend shares (fold accents and case, split on what is not a
letter or a digit, drop English and French stop words), the `SearchHit` record a search
returns, and the query strings handed to SQLite FTS5 and PostgreSQL. It does no I/O, never
reads the clock and knows no store: backends call it and own their indexes.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory.core.records import Fact
from langchain_rolling_memory.core.serde import loads_message, message_of
from langchain_rolling_memory.errors import ConfigurationError

MAX_QUERY_CHARS = 2000
"""A query is cut to this many characters before it is analysed: a pasted document is not a question."""

MAX_INDEX_CHARS = 32_768
"""What is indexed of one message or fact: the words of its first 32,768 folded characters.

The message itself is stored whole; only its index is bounded, the same on every backend, so
that what one backend stores all store. PostgreSQL refuses a tsvector over 1 MB (a ~1 MB tool
result of distinct words failed every turn there while SQLite stored it); a tsvector lexeme
costs at most 4 bytes a character plus 9 bytes (entry, alignment, one position), so even one
distinct lexeme per character keeps 32,768 characters under 430 KB, and ordinary text under
~100 KB. 32,768 characters are ~5,000 English words, the first ~10 pages: where a message's
subject is.
"""

_WORD = re.compile(r"[^\W_]+")
_MARKS = re.compile(r"[\u0300-\u036f]")

# Folded (no accents, lower case), as `fold` returns them. Both languages apply to every
# text, because users mix them; a word that is common in one and meaningful in the other
# ("son" is "his" in French) stays out of the list.
_ENGLISH_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves s t d ll m re ve didn doesn isn wasn weren won wouldn couldn shouldn aren hasn
    haven hadn
"""
_CHAT_FILLERS_TEXT = "also yes oh ok okay yeah hey hi hello really just like get got go going"
_FRENCH_TEXT = """
    le la les un une des du de d l au aux et ou mais donc or ni car que qui quoi dont ce cet
    cette ces mon ma mes ton ta tes sa ses notre nos votre vos leur leurs je tu il elle on nous
    vous ils elles me te se lui y en ne pas plus est sont etait ete etre avoir ai as avons avez
    ont suis es sommes etes dans par pour sur avec sans sous chez c j n qu
"""
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(_ENGLISH_TEXT.split())
"""A plain English stop-word list (articles, pronouns, auxiliaries, prepositions, contractions'
pieces), lower case: the stricter answer-in-context rule of the evaluation uses it alone."""
STOP_WORDS: frozenset[str] = ENGLISH_STOP_WORDS | frozenset((_CHAT_FILLERS_TEXT + _FRENCH_TEXT).split())
"""What search drops: `ENGLISH_STOP_WORDS`, chat fillers ("yeah", "okay") and French stop words."""


def fold(text: str) -> str:
    """Lower case without accents or ligatures: ``"Élève Æsir"`` -> ``"eleve aesir"``."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", _MARKS.sub("", decomposed)).replace("æ", "ae").replace("œ", "oe")


def tokens(text: str) -> list[str]:
    """Every word of `text`, folded, in order (stop words kept): the unit of indexing."""
    return _WORD.findall(fold(text))


def index_text(text: str) -> str:
    """What a backend indexes for `text`: its words, folded, space-separated (stop words kept).

    Every engine then sees the same words as `query_terms` (accents and case already
    folded here), whatever its own tokenizer does with accents or ligatures. Only the words
    of the first `MAX_INDEX_CHARS` folded characters are indexed (a word cut there is left
    out): the result is at most that long, and its words are the first words of `tokens`.
    """
    folded = fold(text)
    if len(folded) <= MAX_INDEX_CHARS:
        return " ".join(_WORD.findall(folded))
    head = folded[: MAX_INDEX_CHARS + 1]
    words = list(_WORD.finditer(head))
    if words and words[-1].end() == len(head):
        words.pop()  # it may go on past the cut
    return " ".join(m.group() for m in words)


def message_index_text(message: BaseMessage) -> str:
    """The indexed text of a transcript message: the speaker's name, when it has one, then
    its text content (tool calls and images are not indexed)."""
    name = getattr(message, "name", None)
    text = message.text
    return index_text(f"{name} {text}" if isinstance(name, str) and name else text)


def payload_index_text(payload: str) -> str:
    """`message_index_text` of a stored message (its `serde.dumps_message` JSON), the same
    words; a plain-text message is read from the JSON without building the message."""
    data = json.loads(payload).get("data")
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, str):
        return message_index_text(loads_message(payload))
    name = data.get("name")
    return index_text(f"{name} {content}" if isinstance(name, str) and name else content)


def _is_content(word: str) -> bool:
    # A lone letter carries nothing; a lone digit does ("3 kids").
    return word not in STOP_WORDS and (len(word) > 1 or word.isdigit())


def content_words(text: str) -> list[str]:
    """The folded words of `text` that carry meaning: stop words and lone letters dropped,
    numbers kept, in order, with repeats. The rule behind "answer in context"."""
    return [w for w in tokens(text) if _is_content(w)]


def indexed_words(indexed: str) -> list[str]:
    """`content_words` of a text `index_text` already folded, without folding it again: the
    words `Bm25Index` counts in it (a backend that stores the folded text sizes entries so)."""
    return [w for w in indexed.split() if _is_content(w)]


def query_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """The search terms of a user input: distinct content words, in order, at most `max_terms`.

    Search syntax is plain text here: quotes, ``*``, ``-``, ``NEAR``, ``OR``, parentheses,
    colons and SQL are split away or kept as ordinary words. An empty or stop-word-only input
    gives ``[]``, which means "recall nothing". A very long input is cut to `MAX_QUERY_CHARS`.

    Example:
        >>> query_terms('When did Zoë book the "Paris" trip? OR 1=1; DROP TABLE--')
        ['zoe', 'book', 'paris', 'trip', '1', 'drop', 'table']
    """
    if max_terms < 1:
        msg = f"max_terms must be >= 1, got max_terms={max_terms!r}"
        raise ConfigurationError(msg)
    out: dict[str, None] = {}
    for word in content_words(text[:MAX_QUERY_CHARS]):
        out.setdefault(word)
        if len(out) >= max_terms:
            break
    return list(out)


_SUFFIXES = ("ements", "ement", "ing", "ies", "es", "ed", "s")


def light_stem(word: str) -> str:
    """A deliberately small stemmer: plural ``s``/``es``/``ies``, ``ing``, ``ed``, French ``ement``.

    A plural ``s`` leaves at least three letters ("cats" -> "cat"), any other suffix at least
    four ("painting" -> "paint", "sing" stays); ``ss``, ``us`` and ``is`` endings are not
    plurals. Measured on LoCoMo by the recall evaluation.
    """
    if len(word) < 4 or word.isdigit():
        return word
    for suffix in _SUFFIXES:
        if not word.endswith(suffix) or len(word) - len(suffix) < (3 if suffix == "s" else 4):
            continue
        if suffix == "ies":
            return word[:-3] + "y"
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            return word
        return word[: -len(suffix)]
    return word


def inflections(term: str) -> list[str]:
    """`term`, its `light_stem` and the regular English forms of that stem, `term` first:
    ``"activities"`` -> ``["activities", "activity", "activitys", "activitying"]``, ``"hike"``
    -> ``["hike", "hikes", "hiking", "hiked"]``. A form no text holds costs a lookup and finds
    nothing; irregular forms ("ran") are not guessed, numbers and words under three letters
    are left alone.

    An index that does not stem then finds what a stemming one would, and a little more
    ("hike" finds "hiking"): on the LoCoMo dev split, keeping only the forms `light_stem`
    reads as the term's stem answered fewer questions (64.1% against 64.7%, in memory).

    Example:
        >>> inflections("paint")
        ['paint', 'paints', 'painting', 'painted']
    """
    if term.isdigit() or len(term) < 3:  # a number or an initialism has no forms
        return [term]
    stem = light_stem(term)
    candidates = [term, stem]
    if not stem.endswith(("s", "x", "z", "ch", "sh")):  # "finishs" is no word
        candidates.append(stem + "s")
    if stem.endswith(("s", "x", "z", "ch", "sh", "o")):
        candidates.append(stem + "es")
    if stem.endswith("y"):
        candidates += [stem[:-1] + "ies", stem + "ing"]
    elif stem.endswith("e"):
        candidates += [stem[:-1] + "ing", stem + "d"]
    elif not stem.endswith(("ing", "ed", "s")):
        candidates += [stem + "ing", stem + "ed"]
    return list(dict.fromkeys(candidates))


def expanded_query(text: str, *, max_terms: int = 32) -> str:
    """A query that finds the words of `text` in any of their `inflections`, for an index that
    does not stem: the `query_terms` of `text`, then their other forms, at most `max_terms` in
    all (the terms of `text` first). '' when `text` has no term.

    On LoCoMo (dev split, strict rule, `with_rolling_memory` on SQLite, 2,000 tokens) the gold
    answer of a multi-hop question is in the recalled block for 35% of them instead of 28%:
    "What activities does Melanie do?" finds "activity" too.

    Example:
        >>> expanded_query("Which paintings did she finish?")
        'paintings finish painting finishes finishing finished'
    """
    terms = query_terms(text, max_terms=max_terms)
    out = dict.fromkeys(terms)
    for term in terms:
        for form in inflections(term):
            if len(out) >= max_terms:
                break
            out.setdefault(form)
    return " ".join(out)


def bm25_terms(words: Iterable[str], *, stem: bool) -> list[str]:
    """The terms `Bm25Index` counts of these folded words, in order with repeats: the content
    words (`content_words`' rule), each `light_stem`-med when `stem`. A backend that indexes
    at write time (Redis) counts a document's terms and reads a query's with it."""
    kept = [w for w in words if _is_content(w)]
    return [light_stem(w) for w in kept] if stem else kept


def bm25_scores(
    postings: Iterable[Mapping[Hashable, int]],
    length: Callable[[Hashable], int],
    n: int,
    total: int,
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> dict[Hashable, float]:
    """BM25 (Okapi) scores of the documents in `postings`, one mapping ``doc -> term
    frequency`` per distinct query term, in query order (the sum runs in that order, so two
    callers get the same floats); `length(doc)` is a document's number of terms, `n` and
    `total` the number of documents and their summed lengths. `Bm25Index.search` and the
    Redis backend (postings read from its per-session index) both rank with it.

    Example:
        >>> bm25_scores([{"a": 1}], {"a": 3, "b": 5}.__getitem__, 2, 8)
        {'a': 0.7721133150541163}
    """
    mean = total / n if n else 0.0
    mean = mean or 1.0
    scores: dict[Hashable, float] = {}
    for docs in postings:
        if not docs:
            continue
        idf = math.log(1 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
        for doc_id, tf in docs.items():
            norm = k1 * (1 - b + b * length(doc_id) / mean)
            scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
    return scores


class _Stored:
    """A message as a store returned it (`serde.dumps_message`'s JSON, parsed) and its text,
    until `SearchHit.message` is first read."""

    __slots__ = ("data", "name", "role", "text")

    def __init__(self, data: dict[str, Any], text: str, name: object, role: str) -> None:
        self.data = data
        self.text = text
        self.name = name
        self.role = role


class _Message:
    """`SearchHit.message`: the message given, or one a store returned (`stored_hit`) decoded
    when first read (kept in the hit's ``_message``). A recall renders a block from the stored
    text and speaker (`message_text`, `message_speaker`) and decodes no message: decoding was
    most of a search's cost. Two threads reading a stored message at once may each decode it:
    they get equal messages."""

    def __get__(self, hit: object, owner: object = None) -> BaseMessage | None:
        if hit is None:
            return None  # the field's default
        value = hit.__dict__.get("_message")
        if isinstance(value, _Stored):
            value = message_of(value.data)
            hit.__dict__["_message"] = value
        return value

    def __set__(self, hit: object, value: BaseMessage | _Stored | None) -> None:
        hit.__dict__["_message"] = value


@dataclass(frozen=True)
class SearchHit:
    """One result of a search, best first in the list a search returns.

    Attributes:
        kind: ``"message"`` (a transcript message) or ``"fact"`` (a client fact).
        session_id: the message's session (None for a fact).
        seq: the message's sequence number in its session (None for a fact).
        created_at: when the message or fact was written, in seconds (None if unknown).
        score: relevance, higher is better; comparable only within one search.
        message: the message, for a message hit.
        fact: the fact, for a fact hit.
        text: a short plain text of the hit (what was matched).
    """

    kind: Literal["message", "fact"]
    session_id: str | None
    seq: int | None
    created_at: float | None
    score: float
    message: BaseMessage | None = _Message()  # type: ignore[assignment]  # None by default
    fact: Fact | None = None
    text: str = ""

    @property
    def key(self) -> tuple[str, str | None, int | str | None]:
        """What identifies the hit: ``("message", session_id, seq)`` or ``("fact", None, fact id)``."""
        if self.kind == "fact":
            return ("fact", None, self.fact.id if self.fact is not None else None)
        return ("message", self.session_id, self.seq)


_HIT_FIELDS = ("kind", "session_id", "seq", "created_at", "score", "message", "fact", "text")
if tuple(f.name for f in fields(SearchHit)) != _HIT_FIELDS:  # pragma: no cover - `_stored` below
    raise RuntimeError("SearchHit's fields changed: update lexical_search._stored")
_new_hit = object.__new__


def _stored(
    session_id: str | None, seq: int | None, created_at: float | None, score: float, stored: _Stored
) -> SearchHit:
    """``SearchHit("message", session_id, seq, created_at, score, stored, text=stored.text)``
    without the frozen dataclass's ``__init__`` (a call per field; a recall builds 80 hits):
    the same attributes, `_Message` keeps the message in ``_message``."""
    hit = _new_hit(SearchHit)
    hit.__dict__.update(
        kind="message",
        session_id=session_id,
        seq=seq,
        created_at=created_at,
        score=score,
        _message=stored,
        fact=None,
        text=stored.text,
    )
    return hit


_LAZY_TYPES = frozenset({"human", "ai", "system"})
"""Message types whose text a stored hit reads from its JSON (a string content is the text,
`BaseMessage.text`) and whose message is decoded on first read; others are decoded at once."""


def stored_hit(
    session_id: str | None, seq: int | None, created_at: float | None, score: float, payload: str
) -> SearchHit:
    """The hit of a message a store returned as `serde.dumps_message`'s JSON; its message is
    decoded when first read (`SearchHit.message`), its text read at once."""
    data: dict[str, Any] = json.loads(payload)
    body = data.get("data")
    body = body if isinstance(body, dict) else {}
    content = body.get("content")
    if data.get("type") in _LAZY_TYPES and isinstance(content, str):
        # `_Message` decodes it when read; the type is the role (`message_speaker`).
        return _stored(
            session_id, seq, created_at, score, _Stored(data, content, body.get("name"), str(data["type"]))
        )
    message = message_of(data)
    return SearchHit("message", session_id, seq, created_at, score, message, text=str(message.text))


def message_text(hit: SearchHit) -> str | None:
    """The text of the hit's message (None without one), without decoding a stored one.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> message_text(SearchHit("message", "s", 1, None, 1.0, HumanMessage("hi")))
        'hi'
    """
    value = hit.__dict__.get("_message")
    if isinstance(value, _Stored):
        return value.text
    message = hit.message
    return None if message is None else str(message.text)


def message_speaker(hit: SearchHit) -> tuple[object, str]:
    """The name of the hit's message (None without one) and its role: ``"human"`` for a
    `HumanMessage`, ``"ai"`` for an `AIMessage`, else its type (``"message"`` without a
    message); a stored message's read from its JSON, without decoding it.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> message_speaker(SearchHit("message", "s", 1, None, 1.0, HumanMessage("hi", name="Ana")))
        ('Ana', 'human')
    """
    value = hit.__dict__.get("_message")
    if isinstance(value, _Stored):
        return value.name, value.role
    message = hit.message
    name = getattr(message, "name", None)
    if isinstance(message, HumanMessage):
        return name, "human"
    if isinstance(message, AIMessage):
        return name, "ai"
    return name, message.type if message is not None else "message"


class Bm25Index:
    """BM25 (Okapi) relevance over texts kept in memory; documents are added and removed by id.

    The reference scorer: the ``memory://`` backend searches with it, and a Redis server
    without its search module ranks its stored postings with the same `bm25_scores`.
    ``search`` costs the postings of the query terms, not the whole collection.

    Example:
        >>> index = Bm25Index()
        >>> index.add(1, "We adopted a cat named Oscar")
        >>> index.add(2, "The train to Lyon was late")
        >>> index.search(query_terms("What is the cat's name?"))[0][0]
        1
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75, stem: bool = False) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            msg = f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}"
            raise ConfigurationError(msg)
        self.k1 = k1
        self.b = b
        self.stem = stem
        self._postings: dict[str, dict[Hashable, int]] = {}
        self._lengths: dict[Hashable, int] = {}
        self._doc_terms: dict[Hashable, tuple[str, ...]] = {}
        # When each document was (last) added: ties rank in that order without a pass over all.
        self._added: dict[Hashable, int] = {}
        self._clock = 0
        self._total = 0

    def _terms(self, words: Iterable[str]) -> list[str]:
        return bm25_terms(words, stem=self.stem)

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lengths

    def add(self, doc_id: Hashable, text: str) -> None:
        """Index `text` under `doc_id` (replacing what that id had)."""
        self.remove(doc_id)
        terms = self._terms(tokens(text))
        for term, count in Counter(terms).items():
            self._postings.setdefault(term, {})[doc_id] = count
        self._lengths[doc_id] = len(terms)
        self._doc_terms[doc_id] = tuple(set(terms))
        self._added[doc_id] = self._clock
        self._clock += 1
        self._total += len(terms)

    def remove(self, doc_id: Hashable) -> bool:
        """Forget `doc_id`; False if it was not indexed."""
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return False
        self._total -= length
        del self._added[doc_id]
        for term in self._doc_terms.pop(doc_id):
            del self._postings[term][doc_id]
            if not self._postings[term]:
                del self._postings[term]
        return True

    def search(self, terms: Sequence[str], *, limit: int = 10) -> list[tuple[Hashable, float]]:
        """``(doc_id, score)`` of the best `limit` documents holding any of `terms`, best first.

        Ties keep the order the documents were added in. ``[]`` for no terms.
        """
        if limit < 1 or not terms or not self._lengths:
            return []
        postings = (self._postings.get(term, {}) for term in dict.fromkeys(self._terms(terms)))
        n, lengths = len(self._lengths), self._lengths
        scores = bm25_scores(postings, lengths.__getitem__, n, self._total, k1=self.k1, b=self.b)
        added = self._added
        return heapq.nsmallest(limit, scores.items(), key=lambda item: (-item[1], added[item[0]]))


def relevance(
    texts: Mapping[Hashable, str], query: str, *, terms: Sequence[str] | None = None
) -> dict[Hashable, float]:
    """BM25 scores of the `texts` that share a content word with `query`, by their ids.

    For ranking a handful of texts held in memory (a client's facts against the user's latest
    words); an id absent from the answer is not relevant. ``{}`` for an empty or stop-word-only
    query. Stems like the recall evaluation's best setting. `terms`, when the caller already
    has them (`query_terms` of `query`), are used instead of analysing `query` again.

    Example:
        >>> relevance({"a": "Allergic to peanuts", "b": "Lives in Lyon"}, "Any peanut in it?")
        {'a': 0.6931471805599453}
    """
    if terms is None:
        terms = query_terms(query)
    if not terms or not texts:
        return {}
    index = Bm25Index(stem=True)
    for doc_id, text in texts.items():
        index.add(doc_id, text)
    return dict(index.search(terms, limit=len(texts)))


def _quoted_terms(terms: Sequence[str]) -> list[str]:
    # query_terms output is letters and digits only; the escaping below is for any other caller.
    return [t for t in (str(term).strip() for term in terms) if t]


def fts5_query(terms: Sequence[str]) -> str:
    """A SQLite FTS5 ``MATCH`` string: each term a double-quoted string, OR-joined.

    Inside double quotes FTS5 reads no operator, column filter or prefix star; a quote is
    doubled. ``""`` for no terms: the caller then does not query at all.

    Example:
        >>> fts5_query(["paris", "near"])
        '"paris" OR "near"'
    """
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in _quoted_terms(terms))


def tsquery(terms: Sequence[str]) -> str:
    """A PostgreSQL ``to_tsquery`` string: each term a quoted lexeme, ``|``-joined.

    Quotes are doubled and backslashes escaped so no term opens an operator (``&``, ``!``,
    ``<->``, ``:*``). ``""`` for no terms: the caller then does not query at all.

    Example:
        >>> tsquery(["cat", "l'eau"])
        "'cat' | 'l''eau'"
    """
    quoted = (t.replace("\\", "\\\\").replace("'", "''") for t in _quoted_terms(terms))
    return " | ".join(f"'{t}'" for t in quoted)
