"""Relative dates in a message, resolved against the day it was written; pure, reads no clock.

Owns finding the expressions that name a day by its distance from the message ("yesterday",
"last Friday", "next month", "two weeks ago", "hier", "vendredi dernier", "il y a 3 jours"),
in English and in French whatever the block's language (users mix them), and resolving each
against the message's own date: `resolve_relative_dates`. A recalled excerpt shows what it
resolves to beside the quoted text (`recall_block`), so that a model reading "yesterday" in a
message of 8 May 2023 knows it meant 7 May 2023; the text itself is never changed.

The rules, one per expression kind (weeks start on Monday):
- a day: yesterday / hier -1, the day before yesterday / avant-hier -2, tomorrow / demain +1,
  the day after tomorrow / apres-demain +2, last night / hier soir -1; N days ago / il y a N
  jours -N, in N days / dans N jours +N.
- a weekday: last Friday / vendredi dernier is the latest Friday strictly before the message's
  day, next Friday / vendredi prochain the first one strictly after it, this Friday the
  Friday of the message's week.
- a week: last / this / next week (la semaine derniere, cette semaine, la semaine prochaine) is
  the week before, of or after the message's, shown by its Monday; N weeks ago -7N days, in N
  weeks +7N days (a day).
- a weekend: last / this / next weekend (le week-end dernier, ce week-end, le week-end
  prochain) is the Saturday of the week before, of or after the message's.
- a month or a year: last / this / next month or year (le mois dernier, l'annee prochaine, l'an
  dernier...), N months / years ago (il y a N mois / ans), shown as a month or a year.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

Unit = Literal["day", "week", "weekend", "month", "year"]


@dataclass(frozen=True)
class RelativeDate:
    """One expression of a text and the day it means.

    Attributes:
        start: where the expression starts in the text.
        end: where it ends (``text[start:end]`` is the expression as written).
        phrase: the expression in lower case, its spaces collapsed (what a note shows).
        day: the day it means; for a week its Monday, for a weekend its Saturday, for a month
            its first day, for a year the 1st of January.
        unit: what `day` stands for: ``"day"``, ``"week"``, ``"weekend"``, ``"month"``, ``"year"``.
    """

    start: int
    end: int
    phrase: str
    day: date
    unit: Unit


_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_FR = ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "un": 1,
    "une": 1,
    "deux": 2,
    "trois": 3,
    "quatre": 4,
    "cinq": 5,
    "sept": 7,
    "huit": 8,
    "neuf": 9,
    "dix": 10,
    "onze": 11,
    "douze": 12,
}
_MOST = 999  # "N units ago" beyond this is not a date anyone means (and would leave the calendar)

# Each word of a fixed day, with its offset in days.
_FIXED_DAYS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "last night": -1,
    "yesterday": -1,
    "tomorrow": 1,
    "avant-hier": -2,
    "avant hier": -2,
    "après-demain": 2,
    "apres-demain": 2,
    "après demain": 2,
    "apres demain": 2,
    "hier soir": -1,
    "hier": -1,
    "demain": 1,
}
_E = "[eéè]"  # French accents, written or not
_UNITS_EN = {"day": "day", "week": "week", "month": "month", "year": "year"}
_UNITS_FR = {
    "jour": "day",
    "semaine": "week",
    "mois": "month",
    "an": "year",
    "annee": "year",
    "année": "year",
}
_NUMBER = r"(?P<n>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"

_PATTERNS: list[tuple[str, str]] = [
    (
        "fixed",
        "|".join(re.escape(p).replace(r"\ ", r"\s+") for p in sorted(_FIXED_DAYS, key=len, reverse=True)),
    ),
    ("ago_en", _NUMBER + r"\s+(?P<unit>day|week|month|year)s?\s+ago"),
    ("in_en", r"in\s+" + _NUMBER + r"\s+(?P<unit>day|week)s?"),
    ("ago_fr", r"il\s+y\s+a\s+" + _NUMBER + rf"\s+(?P<unit>jours?|semaines?|mois|ans?|ann{_E}es?)"),
    ("in_fr", r"dans\s+" + _NUMBER + r"\s+(?P<unit>jours?|semaines?)"),
    ("weekday_en", r"(?P<which>last|next|this)\s+(?P<wd>" + "|".join(_WEEKDAYS_EN) + ")"),
    ("weekday_fr", r"(?P<wd>" + "|".join(_WEEKDAYS_FR) + rf")\s+(?P<which>derni{_E}r|prochain)"),
    ("period_en", r"(?P<which>last|next|this)\s+(?P<unit>week-?end|week|month|year)"),
    (
        "period_fr",
        rf"(?:la\s+|le\s+|l'|l’)?(?P<unit>semaine|week-?end|mois|ann{_E}e|an)\s+(?P<which>derni{_E}re?|prochaine?)",
    ),
    ("this_fr", rf"(?:cette\s+(?P<unit_s>semaine|ann{_E}e)|ce\s+(?P<unit_m>week-?end|mois(?:-ci)?))"),
]
_INNER_NAME = re.compile(r"\(\?P<\w+>")
# One alternative per pattern, named after it; the inner groups are read by the pattern alone.
_EXPRESSIONS = re.compile(
    "|".join(rf"(?P<{name}>\b(?:{_INNER_NAME.sub('(?:', pattern)})\b)" for name, pattern in _PATTERNS),
    re.IGNORECASE,
)
_PARTS = {name: re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE) for name, pattern in _PATTERNS}
# The same alternatives behind one word boundary (every one starts at one): they match where
# `_EXPRESSIONS` does, 3-5x as fast. Without IGNORECASE on an ASCII text in lower case (every
# pattern is in lower case, and lower case moves no boundary in ASCII); with it otherwise.
_ALTERNATIVES = "|".join(
    rf"(?P<{name}>(?:{_INNER_NAME.sub('(?:', pattern)})\b)" for name, pattern in _PATTERNS
)
_FAST = re.compile(rf"\b(?:{_ALTERNATIVES})")
_FAST_ANY_CASE = re.compile(rf"\b(?:{_ALTERNATIVES})", re.IGNORECASE)


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _which(word: str) -> int:
    word = word.lower()
    if word.startswith(("last", "derni")):
        return -1
    return 1 if word.startswith(("next", "prochain")) else 0


def _unit(word: str) -> Unit:
    word = word.lower().replace("-", "").rstrip("s") if word.lower() != "mois" else "mois"
    if word in ("weekend",):
        return "weekend"
    found = _UNITS_EN.get(word) or _UNITS_FR.get(word) or _UNITS_FR.get(word.replace("é", "e"))
    if found == "day":
        return "day"
    if found == "week":
        return "week"
    if found == "month" or word.startswith("mois"):
        return "month"
    return "year"


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def _shift(day: date, unit: Unit, n: int) -> tuple[date, Unit]:
    """`day` moved by `n` units: days and weeks to a day, months and years to their start."""
    if unit == "day":
        return day + timedelta(days=n), "day"
    if unit == "week":
        return day + timedelta(days=7 * n), "day"
    if unit == "month":
        return _add_months(day, n), "month"
    return date(day.year + n, 1, 1), "year"


def _period(day: date, unit: Unit, which: int) -> date:
    """The week (its Monday), weekend (its Saturday), month or year before, of or after `day`'s."""
    if unit == "week":
        return _monday(day) + timedelta(days=7 * which)
    if unit == "weekend":
        return _monday(day) + timedelta(days=7 * which + 5)
    if unit == "month":
        return _add_months(day, which)
    return date(day.year + which, 1, 1)


def _weekday(day: date, weekday: int, which: int) -> date:
    if which < 0:
        return day - timedelta(days=(day.weekday() - weekday - 1) % 7 + 1)
    if which > 0:
        return day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1)
    return _monday(day) + timedelta(days=weekday)


def _resolve(kind: str, found: re.Match[str], day: date) -> tuple[date, Unit] | None:
    groups = found.groupdict()
    if kind == "fixed":
        offset = _FIXED_DAYS[" ".join(found.group().lower().split())]
        return day + timedelta(days=offset), "day"
    if kind in ("ago_en", "ago_fr", "in_en", "in_fr"):
        n = _count(groups["n"])
        if n > _MOST:
            return None
        return _shift(day, _unit(groups["unit"]), -n if kind.startswith("ago") else n)
    if kind in ("weekday_en", "weekday_fr"):
        names = _WEEKDAYS_EN if kind == "weekday_en" else _WEEKDAYS_FR
        return _weekday(day, names.index(groups["wd"].lower()), _which(groups["which"])), "day"
    if kind == "this_fr":
        unit = _unit((groups["unit_s"] or groups["unit_m"]).split("-")[0])
        return _period(day, unit, 0), unit
    unit = _unit(groups["unit"])
    return _period(day, unit, _which(groups["which"])), unit


# A word every expression holds (a weekday ends in "day", a weekend holds "week"): a text with
# none of them has no relative date, known without the expressions (3-4 us a message instead
# of 50-120; `tests/test_relative_dates.py` checks it finds what the expressions find).
_ANCHORS = r"day|tomorrow|night|hier|demain|week|month|year|jour|semaine|mois|derni|prochain|cette|il\s+y\s+a"
_ANCHOR = re.compile(_ANCHORS)  # on an ASCII text in lower case: exact, and fast (no IGNORECASE)
# Else with IGNORECASE, as the expressions match: "ſ" is an "s" and "K" (Kelvin) a "k" to them.
_ANCHOR_ANY_CASE = re.compile(_ANCHORS, re.IGNORECASE)


def may_hold_dates(text: str) -> bool:
    """False when `text` has no relative date for sure (it holds no word one needs).

    Example:
        >>> may_hold_dates("We adopted a cat"), may_hold_dates("We adopted a cat YESTERDAY")
        (False, True)
    """
    if text.isascii():
        return _ANCHOR.search(text.lower()) is not None
    return _ANCHOR_ANY_CASE.search(text) is not None


def resolve_relative_dates(text: str, day: date) -> list[RelativeDate]:
    """Every relative date of `text`, in order, resolved against `day` (the message's date).

    Example:
        >>> [(r.phrase, str(r.day), r.unit) for r in resolve_relative_dates(
        ...     "I went yesterday; we fly next month, vendredi dernier aussi.", date(2023, 5, 8))]
        [('yesterday', '2023-05-07', 'day'), ('next month', '2023-06-01', 'month'), ('vendredi dernier', '2023-05-05', 'day')]
    """
    if not may_hold_dates(text):
        return []
    if text.isascii():
        return _resolved(text, _FAST.finditer(text.lower()), day)
    return _resolved(text, _FAST_ANY_CASE.finditer(text), day)


def _every_relative_date(text: str, day: date) -> list[RelativeDate]:
    """`resolve_relative_dates` without the check of `may_hold_dates` nor the faster
    expressions (the tests' oracle)."""
    return _resolved(text, _EXPRESSIONS.finditer(text), day)


def _resolved(text: str, matches: Iterator[re.Match[str]], day: date) -> list[RelativeDate]:
    """The relative dates `matches` found in `text` (or in its lower case: only their
    positions and names are read), resolved against `day`."""
    out: list[RelativeDate] = []
    for found in matches:
        kind = found.lastgroup
        if kind is None:  # pragma: no cover - every alternative is named
            continue
        written = text[found.start() : found.end()]
        part = _PARTS[kind].fullmatch(written)
        if part is None:  # pragma: no cover - the same pattern, alone
            continue
        try:
            resolved = _resolve(kind, part, day)
        except (OverflowError, ValueError):  # a date out of the calendar: no note, nothing lost
            resolved = None
        except KeyError:  # a word the expressions match only by case folding ("yeſterday")
            resolved = None
        if resolved is not None:
            phrase = " ".join(written.lower().split())
            out.append(RelativeDate(found.start(), found.end(), phrase, *resolved))
    return out
