"""The named details of a text (names, numbers, dates, codes) and how many a summary keeps.

Owns the heuristics that find a conversation's details (regular expressions, English and
French) and the retention of one compaction: the details of the folded messages, those the
new summary still carries, the ratio. Pure and model-free, so it measures any summarizer the
same way; it is a yardstick for the replay, not a reader: it misses names at the start of a
sentence and numbers written in words.

Matching is normalised: case, accents, thousands separators and decimal commas do not count
(``1 250,50 €`` is ``1,250.50 EUR``), a date matches however it is written (``12 March
2024``, ``March 12``, ``12 mars 2024``, ``2024-03-12``), a code however it is separated
(``REF-1234``, ``ref 1234``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

DetailKind = Literal["code", "date", "number", "name"]

_MONTHS = {
    name: month
    for month, names in enumerate(
        (
            ("january", "jan", "janvier", "janv"),
            ("february", "feb", "fevrier", "fevr"),
            ("march", "mar", "mars"),
            ("april", "apr", "avril", "avr"),
            ("may", "mai"),
            ("june", "jun", "juin"),
            ("july", "jul", "juillet", "juil"),
            ("august", "aug", "aout"),
            ("september", "sep", "sept", "septembre"),
            ("october", "oct", "octobre"),
            ("november", "nov", "novembre"),
            ("december", "dec", "decembre"),
        ),
        start=1,
    )
    for name in names
}
_WEEKDAYS = {
    name: day
    for day, names in enumerate(
        (
            ("monday", "lundi"),
            ("tuesday", "mardi"),
            ("wednesday", "mercredi"),
            ("thursday", "jeudi"),
            ("friday", "vendredi"),
            ("saturday", "samedi"),
            ("sunday", "dimanche"),
        )
    )
    for name in names
}
# Month names as written (accents optional), and their short forms.
_MONTH = r"(?:janvier|janv|january|jan|f[ée]vrier|f[ée]vr|february|feb|mars|march|mar|avril|avr|april|apr|mai|may|juin|june|jun|juillet|juil|july|jul|ao[uû]t|august|aug|septembre|september|sept|sep|octobre|october|oct|novembre|november|nov|d[ée]cembre|december|dec)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche)"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th|er)?"
_YEAR = r"(?:1[89]\d\d|2\d{3})"

_DATE = re.compile(
    rf"(?<![\w/.-])(?:"
    rf"(?P<iso>{_YEAR})-(?P<iso_m>0?[1-9]|1[0-2])-(?P<iso_d>[12]\d|3[01]|0?[1-9])"
    rf"|(?P<num>\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|\d{{1,2}}\.\d{{1,2}}\.\d{{2,4}})"
    rf"|(?:{_WEEKDAY}\s+)?(?P<dm_d>{_DAY})\s+(?P<dm_m>{_MONTH})(?:\s+(?P<dm_y>{_YEAR}))?"
    rf"|(?:{_WEEKDAY},?\s+)?(?P<md_m>{_MONTH})\s+(?P<md_d>{_DAY})(?:,?\s+(?P<md_y>{_YEAR}))?"
    rf"|(?P<my_m>{_MONTH})\s+(?P<my_y>{_YEAR})"
    rf"|(?P<time>(?:[01]?\d|2[0-3])[:h][0-5]\d)"
    rf"|(?P<wd>{_WEEKDAY})s?"
    rf")(?![\w/])",
    re.IGNORECASE,
)
# A code: letters and digits together, at least one capital (REF-1234, X200, ORD-2024-001), or #1234.
_CODE = re.compile(
    r"(?<![\w#-])(?:#\d+|(?=[\w/-]*\d)(?=[\w/-]*[A-Z])[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)*)(?![\w-])"
)
_UNITS = {
    "%": "%",
    "percent": "%",
    "pourcent": "%",
    "€": "eur",
    "eur": "eur",
    "euro": "eur",
    "euros": "eur",
    "$": "usd",
    "usd": "usd",
    "dollar": "usd",
    "dollars": "usd",
    "£": "gbp",
    "gbp": "gbp",
    "kg": "kg",
    "g": "g",
    "km": "km",
    "m": "m",
    "cm": "cm",
    "mm": "mm",
    "l": "l",
    "ml": "ml",
    "h": "h",
    "min": "min",
}
_UNIT_WORDS = (
    r"%|€|\$|£|eur|euros?|usd|dollars?|gbp|percent|pour ?cent|kg|km|cm|mm|ml|min|g|m|l|h|"
    r"items?|units?|pieces?|pi[eè]ces?|articles?|boxes|box|bo[iî]tes?|packs?|bottles?|bouteilles?|"
    r"pages?|days?|jours?|weeks?|semaines?|months?|mois|years?|ans?|hours?|heures?|minutes?|"
    r"nights?|nuits?|people|persons?|personnes?|seats?|places?|users?|utilisateurs?|licen[cs]es?"
)
_AMOUNT = r"\d{1,3}(?:[,.\u00a0\u202f ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
_NUMBER = re.compile(
    rf"(?<![\w.,])(?:(?P<pre>[€$£])\s?(?P<a>{_AMOUNT})|(?P<b>{_AMOUNT})(?:\s?(?P<unit>{_UNIT_WORDS})(?![\w]))?)"
    r"(?![\w]|[.,]\d)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s*|\n\s*|[\"«“(\[-]\s*)$")
_NOT_NAMES = {
    "i",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "ok",
    "okay",
    "hi",
    "hello",
    "mr",
    "mrs",
    "ms",
    "dr",
    "m",
    "mme",
    "mlle",
    "monsieur",
    "madame",
    "am",
    "pm",
    "tv",
}


def fold(text: str) -> str:
    """`text` as details are compared: no accents, no case, one space between words, numbers
    without thousands separators and with a decimal point (``"Été 1 250,50"`` gives
    ``"ete 1250.50"``)."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    bare = " ".join(bare.casefold().split())
    return _number_key(bare)


def _number_key(text: str) -> str:
    # 1,250.50 / 1.250,50 / 1 250,50 -> 1250.50; 12,5 -> 12.5 (a separator before exactly three
    # digits groups thousands; otherwise it is the decimal mark).
    text = re.sub(r"(?<=\d)[,.\u00a0\u202f ](?=\d{3}(?!\d))", "", text)
    return re.sub(r"(?<=\d),(?=\d)", ".", text)


@dataclass(frozen=True)
class Detail:
    """One named detail: what it is, as written, and the key it is matched by."""

    kind: DetailKind
    text: str
    key: str


def _date_key(match: re.Match[str]) -> str:
    g = match.groupdict()
    if g["iso"]:
        return f"{int(g['iso'])}-{int(g['iso_m']):02d}-{int(g['iso_d']):02d}"
    if g["num"]:
        return "/".join(str(int(part)) for part in re.split(r"[/.]", g["num"]))
    if g["time"]:
        hours, minutes = re.split(r"[:h]", g["time"].casefold())
        return f"time-{int(hours)}:{minutes}"
    if g["wd"]:
        return f"weekday-{_WEEKDAYS[fold(g['wd'])]}"
    month_text = g["dm_m"] or g["md_m"] or g["my_m"]
    month = _MONTHS[fold(month_text)]
    day = g["dm_d"] or g["md_d"]
    year = g["dm_y"] or g["md_y"] or g["my_y"]
    day_part = f"-{int(_digits(day)):02d}" if day else ""
    return f"{year or '*'}-{month:02d}{day_part}"


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _same_date(a: str, b: str) -> bool:
    """Date keys that name the same day: a missing year (``*``) matches any year."""
    if a == b:
        return True
    if "-" not in a or "-" not in b or a.startswith("weekday") or b.startswith("weekday"):
        return False
    ya, rest_a = a.split("-", 1)
    yb, rest_b = b.split("-", 1)
    return rest_a == rest_b and "*" in (ya, yb)


def _unit(text: str) -> str:
    """One spelling per unit: symbols and currency names to codes, plurals to singulars."""
    word = fold(text).replace(" ", "")
    if word in _UNITS:
        return _UNITS[word]
    if word.endswith(("xes", "ses")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _same_number(a: str, b: str) -> bool:
    """Number keys of the same value, with the same unit unless one has none."""
    value_a, _, unit_a = a.partition(" ")
    value_b, _, unit_b = b.partition(" ")
    return value_a == value_b and (unit_a == unit_b or not unit_a or not unit_b)


def _number_detail(match: re.Match[str]) -> Detail:
    amount = match["a"] or match["b"]
    unit_text = match["pre"] or match["unit"] or ""
    unit = _unit(unit_text) if unit_text else ""
    value = _number_key(amount.replace("\u00a0", " ").replace("\u202f", " "))
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return Detail("number", match.group(0), f"{value} {unit}".strip())


def _at_sentence_start(text: str, start: int) -> bool:
    return bool(_SENTENCE_START.search(text[max(0, start - 4) : start]))


def _is_name_word(text: str, word: re.Match[str]) -> bool:
    written = word.group(0)
    return (
        written[0].isupper()
        and len(written) > 1
        and not any(c.isdigit() for c in written)
        and fold(written) not in _NOT_NAMES
        and not _at_sentence_start(text, word.start())
    )


def named_details(text: str) -> list[Detail]:
    """The details of `text`, each once (a date: once per day), in order of first appearance.

    Codes first (``REF-1234``, ``#4521``), then dates (``12 March 2024``, ``le 3 mars``,
    ``2024-03-12``, ``12/03``, week days), then numbers with their unit (``12 euros``,
    ``1 250,50 €``, ``3 boxes``; a bare number only from two digits), then capitalised names
    not at the start of a sentence (``Ana Lopez``, ``Lyon``, ``DHL``). A span read as one kind
    is not read again as another.

    Example:
        >>> [(d.kind, d.key) for d in named_details("Hello, I'm Ana. Order REF-1234: 3 boxes by 12 March.")]
        [('name', 'ana'), ('code', 'ref1234'), ('number', '3 box'), ('date', '*-03-12')]
    """
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Detail]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    def add(start: int, end: int, detail: Detail) -> None:
        taken.append((start, end))
        found.append((start, detail))

    for m in _CODE.finditer(text):
        add(m.start(), m.end(), Detail("code", m.group(0), re.sub(r"[\W_]+", "", fold(m.group(0)))))
    for m in _DATE.finditer(text):
        if free(m.start(), m.end()):
            add(m.start(), m.end(), Detail("date", m.group(0), _date_key(m)))
    for m in _NUMBER.finditer(text):
        if free(m.start(), m.end()) and (m["pre"] or m["unit"] or len(_digits(m.group(0))) >= 2):
            add(m.start(), m.end(), _number_detail(m))
    # Names: runs of capitalised words, none at the start of a sentence (its capital says
    # nothing) and none a courtesy word; "Hello Ana Lopez" gives "Ana Lopez".
    runs: list[list[int]] = []
    for m in _WORD.finditer(text):
        if not (_is_name_word(text, m) and free(m.start(), m.end())):
            continue
        if runs and text[runs[-1][1] : m.start()] == " ":
            runs[-1][1] = m.end()
        else:
            runs.append([m.start(), m.end()])
    for start, end in runs:
        add(start, end, Detail("name", text[start:end], fold(text[start:end])))
    details: list[Detail] = []
    for _, detail in sorted(found, key=lambda item: item[0]):
        if not any(_same(detail, earlier) for earlier in details):
            details.append(detail)
    return details


def _same(detail: Detail, other: Detail) -> bool:
    """`other` names what `detail` names (a date: the same day; a number: the same value)."""
    return other.kind == detail.kind and (
        other.key == detail.key
        or (detail.kind == "date" and _same_date(detail.key, other.key))
        or (detail.kind == "number" and _same_number(detail.key, other.key))
    )


def is_kept(detail: Detail, summary: str, *, summary_details: Sequence[Detail] | None = None) -> bool:
    """Whether `summary` still carries `detail`: a detail of the summary with the same key (a
    date: the same day), or the detail's folded text among the summary's folded words."""
    theirs = named_details(summary) if summary_details is None else summary_details
    if any(_same(detail, other) for other in theirs):
        return True
    if detail.kind == "code":  # "ref 1234" for REF-1234: its letter and digit runs, any separator
        needle = r"[\s_/#.-]*".join(re.findall(r"[^\W\d_]+|\d+", detail.key))
    else:
        needle = re.escape(fold(detail.text))
    return bool(needle) and re.search(rf"(?<![\w]){needle}(?![\w]|[.,]\d)", fold(summary)) is not None


@dataclass(frozen=True)
class DetailRetention:
    """The details of some folded text and the ones a summary kept."""

    details: tuple[Detail, ...]
    kept: tuple[Detail, ...]

    @property
    def missing(self) -> tuple[Detail, ...]:
        return tuple(d for d in self.details if d not in self.kept)

    @property
    def ratio(self) -> float | None:
        """Share of the details kept; None when there was no detail to keep."""
        return len(self.kept) / len(self.details) if self.details else None


def detail_retention(folded: str | Iterable[str], summary: str) -> DetailRetention:
    """How many of the details of `folded` (a text, or the texts of the folded messages) the
    `summary` keeps.

    Example:
        >>> r = detail_retention(["I'm Ana, I need 3 boxes of REF-1234 by 12 March."], "Ana wants 3 boxes.")
        >>> [d.text for d in r.kept], [d.text for d in r.missing], round(r.ratio or 0, 2)
        (['Ana', '3 boxes'], ['REF-1234', '12 March'], 0.5)
    """
    text = folded if isinstance(folded, str) else "\n".join(folded)
    details = named_details(text)
    theirs = named_details(summary)
    kept = tuple(d for d in details if is_kept(d, summary, summary_details=theirs))
    return DetailRetention(tuple(details), kept)
