"""Relative dates resolved against the message's own date, and shown beside a recalled excerpt."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from langchain_rolling_memory.core import relative_dates as rd
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.quoting import quote_text
from langchain_rolling_memory.core.recall_block import MAX_DATE_NOTES, date_note, recall_block, render_hit
from langchain_rolling_memory.core.relative_dates import resolve_relative_dates

MONDAY = date(2023, 5, 8)  # LoCoMo's first session: a Monday


def _seconds(day: date) -> float:
    return datetime(day.year, day.month, day.day, 13, 56, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("I went to the support group yesterday.", [("yesterday", "2023-05-07", "day")]),
        ("The day before yesterday I ran", [("the day before yesterday", "2023-05-06", "day")]),
        ("See you tomorrow!", [("tomorrow", "2023-05-09", "day")]),
        ("Last Friday we painted", [("last friday", "2023-05-05", "day")]),
        (
            "next Monday, then this Sunday",
            [("next monday", "2023-05-15", "day"), ("this sunday", "2023-05-14", "day")],
        ),
        ("last week", [("last week", "2023-05-01", "week")]),
        ("We went camping last weekend", [("last weekend", "2023-05-06", "weekend")]),
        ("next month is June", [("next month", "2023-06-01", "month")]),
        ("I started last year", [("last year", "2022-01-01", "year")]),
        (
            "two weeks ago and 3 days ago",
            [("two weeks ago", "2023-04-24", "day"), ("3 days ago", "2023-05-05", "day")],
        ),
        ("10 years ago", [("10 years ago", "2013-01-01", "year")]),
        ("in 2 weeks", [("in 2 weeks", "2023-05-22", "day")]),
        (
            "hier soir, avant-hier et après-demain",
            [
                ("hier soir", "2023-05-07", "day"),
                ("avant-hier", "2023-05-06", "day"),
                ("après-demain", "2023-05-10", "day"),
            ],
        ),
        ("vendredi dernier", [("vendredi dernier", "2023-05-05", "day")]),
        ("la semaine dernière", [("la semaine dernière", "2023-05-01", "week")]),
        ("le week-end prochain", [("le week-end prochain", "2023-05-20", "weekend")]),
        (
            "l'an dernier, il y a deux ans",
            [("l'an dernier", "2022-01-01", "year"), ("il y a deux ans", "2021-01-01", "year")],
        ),
        ("dans 3 jours", [("dans 3 jours", "2023-05-11", "day")]),
        ("a hierarchy of domaines; yesterdays; lastly Friday", []),
    ],
)
def test_relative_dates_resolve_against_the_message_day(text: str, found: list[tuple[str, str, str]]) -> None:
    assert [(r.phrase, str(r.day), r.unit) for r in resolve_relative_dates(text, MONDAY)] == found


def test_a_weekday_is_resolved_strictly_before_or_after_the_day_it_is_said() -> None:
    friday = date(2023, 5, 12)
    assert [str(r.day) for r in resolve_relative_dates("last Friday, next Friday, this Friday", friday)] == [
        "2023-05-05",
        "2023-05-19",
        "2023-05-12",
    ]


def test_an_excerpt_shows_the_day_meant_beside_its_unchanged_text() -> None:
    hit = SearchHit(
        "message", "session-3", 4, _seconds(MONDAY), 1.0, HumanMessage("I went yesterday", name="Caroline")
    )
    assert (
        render_hit(hit)
        == '- 8 May 2023, "session-3", "Caroline": "I went yesterday" (yesterday = 7 May 2023)'
    )
    assert render_hit(hit, dates=False) == '- 8 May 2023, "session-3", "Caroline": "I went yesterday"'
    french = SearchHit("message", "s", 1, _seconds(MONDAY), 1.0, HumanMessage("hier et la semaine prochaine"))
    assert render_hit(french, "fr").endswith(
        '"hier et la semaine prochaine" (hier = 7 mai 2023; la semaine prochaine = semaine du 15 mai 2023)'
    )
    block = recall_block([hit], max_tokens=100, header=None)
    assert block.text.endswith("(yesterday = 7 May 2023)")


def test_no_note_for_an_undated_hit_and_at_most_a_few_per_line() -> None:
    assert date_note("yesterday", None) == ""
    text = "yesterday, tomorrow, last week, next week, last month, next month"
    assert date_note(text, _seconds(MONDAY)).count(" = ") == MAX_DATE_NOTES
    assert date_note("yesterday and yesterday", _seconds(MONDAY)) == " (yesterday = 7 May 2023)"


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _months(day: date, n: int) -> date:
    index = day.year * 12 + day.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)


# (expression, what it means said on a day, the unit shown)
_CASES: list[tuple[Callable[[int], str], Callable[[date, int], date], str]] = [
    (lambda n: "yesterday", lambda d, n: d - timedelta(days=1), "day"),
    (lambda n: "tomorrow", lambda d, n: d + timedelta(days=1), "day"),
    (lambda n: "the day before yesterday", lambda d, n: d - timedelta(days=2), "day"),
    (lambda n: "hier", lambda d, n: d - timedelta(days=1), "day"),
    (lambda n: "après-demain", lambda d, n: d + timedelta(days=2), "day"),
    (lambda n: f"{n} days ago", lambda d, n: d - timedelta(days=n), "day"),
    (lambda n: f"{n} weeks ago", lambda d, n: d - timedelta(days=7 * n), "day"),
    (lambda n: f"in {n} days", lambda d, n: d + timedelta(days=n), "day"),
    (lambda n: f"il y a {n} jours", lambda d, n: d - timedelta(days=n), "day"),
    (lambda n: f"dans {n} semaines", lambda d, n: d + timedelta(days=7 * n), "day"),
    (lambda n: "last week", lambda d, n: _monday(d) - timedelta(days=7), "week"),
    (lambda n: "la semaine prochaine", lambda d, n: _monday(d) + timedelta(days=7), "week"),
    (lambda n: "next weekend", lambda d, n: _monday(d) + timedelta(days=12), "weekend"),
    (lambda n: "last month", lambda d, n: _months(d, -1), "month"),
    (lambda n: "le mois prochain", lambda d, n: _months(d, 1), "month"),
    (lambda n: f"{n} months ago", lambda d, n: _months(d, -n), "month"),
    (lambda n: "next year", lambda d, n: date(d.year + 1, 1, 1), "year"),
    (lambda n: f"{n} years ago", lambda d, n: date(d.year - n, 1, 1), "year"),
    (lambda n: "l'année dernière", lambda d, n: date(d.year - 1, 1, 1), "year"),
]


@settings(max_examples=600)  # 19 kinds of expression, each on every weekday
@given(
    day=st.dates(min_value=date(1990, 1, 1), max_value=date(2100, 12, 31)),
    case=st.sampled_from(_CASES),
    n=st.integers(min_value=1, max_value=60),
    case_change=st.sampled_from([str.lower, str.upper, str.title]),
    before=st.text(alphabet="qxz ,.\n\"'", max_size=12),
    after=st.text(alphabet="qxz ,.\n\"'", max_size=12),
)
def test_the_resolved_date_is_the_message_date_moved_by_the_expression(
    day: date,
    case: tuple[Callable[[int], str], Callable[[date, int], date], str],
    n: int,
    case_change: Callable[[str], str],
    before: str,
    after: str,
) -> None:
    phrase, meaning, unit = case
    expression = case_change(phrase(n))
    text = f"{before} {expression} {after}"
    (found,) = resolve_relative_dates(text, day)
    assert (found.day, found.unit) == (meaning(day, n), unit)
    assert text[found.start : found.end] == expression
    # Shown beside the text, which is left exactly as it was.
    hit = SearchHit("message", "s", 1, _seconds(day), 1.0, HumanMessage(text))
    line = render_hit(hit)
    assert line == render_hit(hit, dates=False) + date_note(text, _seconds(day))
    assert line.startswith(f"- {render_hit(hit, dates=False)[2:]}") and quote_text(text) in line


@given(
    day=st.dates(min_value=date(1990, 1, 8), max_value=date(2100, 12, 24)),
    weekday=st.sampled_from(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]),
    which=st.sampled_from(["last", "next"]),
)
def test_last_and_next_weekdays_are_within_a_week_of_the_day_and_that_weekday(
    day: date, weekday: str, which: str
) -> None:
    (found,) = resolve_relative_dates(f"{which} {weekday}", day)
    assert found.day.strftime("%A").lower() == weekday
    gap = (found.day - day).days
    assert 1 <= -gap <= 7 if which == "last" else 1 <= gap <= 7


# Words of every expression kind, a few near misses, and characters IGNORECASE folds onto
# ASCII letters ("ſ" is an "s", "K" a "k", "ı" an "i"): the pre-check must miss none of them.
_PIECES = [
    *rd._FIXED_DAYS,
    *rd._NUMBERS,
    *rd._WEEKDAYS_EN,
    *rd._WEEKDAYS_FR,
    *rd._UNITS_EN,
    *rd._UNITS_FR,
    "ago",
    "in",
    "il y a",
    "dans",
    "last",
    "next",
    "this",
    "la",
    "le",
    "l'",
    "l’",
    "cette",
    "ce",
    "dernier",
    "dernière",
    "derniere",
    "prochain",
    "prochaine",
    "weekend",
    "week-end",
    "mois-ci",
    "days",
    "weeks",
    "years",
    "ans",
    "années",
    "3",
    "12",
    "1000",
    "cat",
    "today",
    "ſ",
    "K",
    "ı",
    "İ",
    "YESTERDAY",
    "Last",
    "NEXT",
    "\t",
    "\n",
    "\x1f",
    "\u00a0",
    ".",
    ",",
]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_PIECES),
            st.sampled_from(_PIECES).map(str.upper),
            st.sampled_from(_PIECES).map(lambda p: p.replace("s", "ſ").replace("k", "K").replace("i", "ı")),
            st.text(max_size=3),
        ),
        max_size=12,
    ),
    st.sampled_from([" ", "  ", "\t", ""]),
)
def test_the_quick_check_never_hides_a_relative_date(pieces: list[str], glue: str) -> None:
    text = glue.join(pieces)
    day = date(2023, 5, 8)
    assert resolve_relative_dates(text, day) == rd._every_relative_date(text, day)
    if rd._every_relative_date(text, day):
        assert rd.may_hold_dates(text)


def test_the_quick_check_passes_texts_without_dates_over() -> None:
    assert not rd.may_hold_dates("We adopted a cat named Oscar, and the train to Lyon was late.")
    assert rd.may_hold_dates("see you on Monday")  # may: the expressions decide
    assert resolve_relative_dates("see you on Monday", date(2023, 5, 8)) == []
