"""The named details of a conversation and how many a summary keeps (issue 24): the pure
heuristics of `lab.details`, table-driven, and their properties."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from langchain_rolling_memory_lab.details import detail_retention, fold, named_details


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "Hello, I'm Ana Lopez from Lyon.",
            [("name", "Ana Lopez"), ("name", "Lyon")],
            id="names-not-at-sentence-start",
        ),
        pytest.param("Lyon is nice. Paris too.", [], id="a-sentence-start-is-no-name"),
        pytest.param("Client: Ana Lopez", [("name", "Ana Lopez")], id="a-name-after-a-colon"),
        pytest.param("We ship with DHL, OK?", [("name", "DHL")], id="acronym-not-courtesy"),
        pytest.param(
            "Order REF-1234 and #4521, also ORD-2024-001.",
            [("code", "REF-1234"), ("code", "#4521"), ("code", "ORD-2024-001")],
            id="codes",
        ),
        pytest.param(
            "Due 12 March 2024, or March 12th, then le 1er avril, 2024-05-02, 03/04 at 14h30 on samedi.",
            [
                ("date", "12 March 2024"),
                ("date", "1er avril"),
                ("date", "2024-05-02"),
                ("date", "03/04"),
                ("date", "14h30"),
                ("date", "samedi"),
            ],
            id="dates-en-fr-one-per-day",
        ),
        pytest.param(
            "It costs 1 250,50 €, or $1,200.00, for 3 boxes and 12.5% off; call me in 2 days.",
            [
                ("number", "1 250,50 €"),
                ("number", "$1,200.00"),
                ("number", "3 boxes"),
                ("number", "12.5%"),
                ("number", "2 days"),
            ],
            id="numbers-with-units",
        ),
        pytest.param(
            "I have 2 questions about room 42.", [("number", "42")], id="bare-numbers-from-two-digits"
        ),
    ],
)
def test_named_details(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(d.kind, d.text) for d in named_details(text)] == expected


@pytest.mark.parametrize(
    ("detail", "summary", "ratio"),
    [
        pytest.param("She is called Élodie.", "ELODIE called.", 1.0, id="kept-case-and-accents"),
        pytest.param(
            "The total was 1 250,50 €.", "Total: EUR 1,250.5.", 1.0, id="kept-thousands-decimal-comma"
        ),
        pytest.param("The total was 1250 euros.", "She paid €1,250.", 1.0, id="kept-currency-symbol-or-word"),
        pytest.param(
            "Deliver by 12 March 2024.", "Due on March 12.", 1.0, id="kept-a-date-written-otherwise"
        ),
        pytest.param(
            "Livraison le 3 mars 2024.", "Delivery 2024-03-03.", 1.0, id="kept-a-french-date-as-iso"
        ),
        pytest.param("Order REF-1234 please.", "About ref 1234.", 1.0, id="kept-a-code-separated-otherwise"),
        pytest.param("Just send 3 boxes.", "3 box sent.", 1.0, id="kept-singular-unit"),
        pytest.param("Deliver by 12 March 2024.", "Due on 12 April.", 0.0, id="lost-another-date"),
        pytest.param("It costs 12 euros.", "It costs 12.5 euros.", 0.0, id="lost-another-amount"),
        pytest.param("It costs 12 euros.", "Keep 12 days.", 0.0, id="lost-another-unit"),
        pytest.param("Order REF-1234 please.", "About REF-12345.", 0.0, id="lost-a-longer-code"),
        pytest.param("Ask Ana tomorrow.", "Ask Anabel.", 0.0, id="lost-a-longer-name"),
    ],
)
def test_a_detail_is_kept_however_written_and_lost_when_it_changes(
    detail: str, summary: str, ratio: float
) -> None:
    assert detail_retention(detail, summary).ratio == ratio


def test_no_detail_gives_no_ratio() -> None:
    assert detail_retention(["hello there", "how are you?"], "hello").ratio is None


def test_fold_removes_case_accents_and_thousands_separators() -> None:
    assert fold("Été  1 250,50 et 1,234.5") == "ete 1250.50 et 1234.5"


# ---------------------------------------------------------------- properties

_PIECES = st.sampled_from(
    [
        "Ana",
        "Lopez",
        "REF-1234",
        "#77",
        "12 March 2024",
        "3 mars",
        "samedi",
        "1 250,50 €",
        "$12",
        "3 boxes",
        "42",
        "ok",
        "the",
        "order",
        "le",
        "client",
        ".",
        ",",
        "\n",
        "I'm",
    ]
)
_TEXT = st.one_of(
    st.lists(_PIECES, min_size=1, max_size=30).map(" ".join),
    st.text(max_size=200),
)


@given(st.lists(_TEXT, min_size=1, max_size=5))
def test_a_summary_equal_to_the_folded_text_keeps_every_detail(messages: list[str]) -> None:
    retention = detail_retention(messages, "\n".join(messages))
    assume(retention.details)
    assert retention.ratio == 1.0
    assert retention.missing == ()


@given(st.lists(_TEXT, min_size=1, max_size=5))
def test_an_empty_summary_keeps_no_detail(messages: list[str]) -> None:
    retention = detail_retention(messages, "")
    assume(retention.details)
    assert retention.ratio == 0.0
    assert retention.kept == ()


@given(st.lists(_TEXT, min_size=1, max_size=5), _TEXT)
def test_the_ratio_is_a_share_of_distinct_details(messages: list[str], summary: str) -> None:
    retention = detail_retention(messages, summary)
    keys = [(d.kind, d.key) for d in retention.details]
    assert len(keys) == len(set(keys))
    assert set(retention.kept) <= set(retention.details)
    assert retention.ratio is None or 0.0 <= retention.ratio <= 1.0
