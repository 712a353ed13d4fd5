"""The pure search core: query terms from hostile input, BM25 ranking, and query strings that
a real SQLite FTS5 table accepts whatever the user typed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_rolling_memory.core.lexical_search import (
    MAX_INDEX_CHARS,
    MAX_QUERY_CHARS,
    Bm25Index,
    content_words,
    expanded_query,
    fold,
    fts5_query,
    index_text,
    inflections,
    light_stem,
    query_terms,
    tokens,
    tsquery,
)
from langchain_rolling_memory.errors import ConfigurationError

HOSTILE = [
    pytest.param('"unclosed quote', ["unclosed", "quote"], id="quote"),
    pytest.param("pay* -refund", ["pay", "refund"], id="star-and-minus"),
    pytest.param("paris NEAR lyon", ["paris", "near", "lyon"], id="near-is-a-word"),
    pytest.param("tea OR coffee AND NOT milk", ["tea", "coffee", "milk"], id="boolean-words"),
    pytest.param("(a OR b) AND (c", [], id="parentheses-and-letters"),
    pytest.param("title:secret col:x", ["title", "secret", "col"], id="column-filter"),
    pytest.param("'; DROP TABLE messages; --", ["drop", "table", "messages"], id="sql"),
    pytest.param("x' OR '1'='1", ["1"], id="sql-tautology"),
    pytest.param("^start + {braces} [brackets] <tag>", ["start", "braces", "brackets", "tag"], id="symbols"),
    pytest.param("Élodie a réservé à Noël", ["elodie", "reserve", "noel"], id="french-accents"),
    pytest.param("the of and to", [], id="english-stop-words-only"),
    pytest.param("le la les de des et", [], id="french-stop-words-only"),
    pytest.param("", [], id="empty"),
    pytest.param("   \n\t ", [], id="whitespace"),
    pytest.param("?!*-:()\"'", [], id="punctuation-only"),
    pytest.param("Cat cat CAT", ["cat"], id="repeats-once"),
    pytest.param("room 42 in 2023", ["room", "42", "2023"], id="numbers-kept"),
    pytest.param("snake_case\x00nul", ["snake", "case", "nul"], id="underscore-and-nul"),
]


@pytest.mark.parametrize(("text", "expected"), HOSTILE)
def test_query_terms_reads_search_syntax_as_plain_words(text: str, expected: list[str]) -> None:
    assert query_terms(text) == expected


def test_a_very_long_query_is_cut_to_max_terms_and_max_chars() -> None:
    words = [f"word{i}" for i in range(1000)]
    assert query_terms(" ".join(words)) == words[:32]
    assert query_terms(" ".join(words), max_terms=5) == words[:5]
    assert query_terms("x " * MAX_QUERY_CHARS + "tail") == []


def test_max_terms_below_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_terms must be >= 1, got max_terms=0"):
        query_terms("cat", max_terms=0)


def test_fold_drops_accents_case_and_ligatures() -> None:
    assert fold("ÉCOLE Œuvre Straße") == "ecole oeuvre strasse"


def test_content_words_keep_numbers_and_repeats_and_drop_lone_letters() -> None:
    assert content_words("I have 3 kids, 3 cats & a dog") == ["3", "kids", "3", "cats", "dog"]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("cats", "cat"),
        ("parties", "party"),
        ("painting", "paint"),
        ("painted", "paint"),
        ("sing", "sing"),
        ("class", "class"),
        ("bus", "bus"),
        ("2023", "2023"),
        ("rapidement", "rapid"),
    ],
)
def test_light_stem_strips_only_common_suffixes_of_long_words(word: str, stem: str) -> None:
    assert light_stem(word) == stem


def _corpus(stem: bool = False) -> Bm25Index:
    index = Bm25Index(stem=stem)
    index.add("pets", "We adopted a cat named Oscar last spring")
    index.add("train", "The train to Lyon was late again")
    index.add("cats", "Cats everywhere: cat food, cat toys, cat trees")
    index.add("lyon", "Lyon is lovely in spring; we walked by the river")
    return index


def test_bm25_ranks_the_rarer_term_and_the_denser_document_first() -> None:
    ranked = [doc for doc, _ in _corpus().search(query_terms("cat Oscar"))]
    assert ranked[0] == "pets"  # "oscar" is rare; it outweighs three "cat"s
    assert set(ranked) == {"pets", "cats"}
    assert [doc for doc, _ in _corpus().search(["cat"])] == ["cats", "pets"]


def test_bm25_scores_are_positive_and_sorted_and_limited() -> None:
    hits = _corpus().search(query_terms("cat lyon spring train"), limit=3)
    assert len(hits) == 3
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_bm25_finds_nothing_for_no_terms_or_unknown_terms() -> None:
    assert _corpus().search([]) == []
    assert _corpus().search(["zebra"]) == []
    assert Bm25Index().search(["cat"]) == []


def test_bm25_remove_and_replace_follow_the_documents() -> None:
    index = _corpus()
    assert index.remove("pets") and not index.remove("pets")
    assert [doc for doc, _ in index.search(["oscar"])] == []
    index.add("train", "Oscar took the train")
    assert [doc for doc, _ in index.search(["oscar"])] == ["train"]
    assert [doc for doc, _ in index.search(["late"])] == []
    assert len(index) == 3 and "train" in index


def test_bm25_with_stemming_matches_plurals() -> None:
    assert [doc for doc, _ in _corpus().search(["trees"])] == ["cats"]
    assert {doc for doc, _ in _corpus(stem=True).search(["tree"])} == {"cats"}
    assert _corpus().search(["tree"]) == []


def test_bm25_refuses_impossible_parameters() -> None:
    with pytest.raises(ConfigurationError, match=r"got k1=1\.2, b=2"):
        Bm25Index(b=2)


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute("create virtual table t using fts5(body)")
    db.executemany(
        "insert into t(body) values (?)",
        [
            ("paris near lyon",),
            ("drop table messages",),
            ("tea or coffee",),
            ("title secret",),
            ("élodie noël",),
        ],
    )
    yield db
    db.close()


@pytest.mark.parametrize(("text", "_expected"), HOSTILE)
def test_fts5_query_never_raises_on_hostile_input(
    fts: sqlite3.Connection, text: str, _expected: list[str]
) -> None:
    query = fts5_query(query_terms(text))
    if query:
        fts.execute("select rowid from t where t match ? order by bm25(t)", (query,)).fetchall()
    assert fts.execute("select count(*) from t").fetchone() == (5,)


def test_fts5_query_finds_operator_words_as_words(fts: sqlite3.Connection) -> None:
    def found(text: str) -> list[str]:
        rows = fts.execute("select body from t where t match ?", (fts5_query(query_terms(text)),))
        return sorted(r[0] for r in rows)

    assert found("NEAR") == ["paris near lyon"]
    assert found("title:secret") == ["title secret"]
    assert found("DROP TABLE") == ["drop table messages"]
    assert found("Noël") == ["élodie noël"]  # the default tokenizer folds accents too


@pytest.mark.parametrize(
    "term", ['a"b', "x* OR y", "NEAR(a b)", "col:val", "-neg", "^first", "a\\b"], ids=repr
)
def test_fts5_query_quotes_any_term_a_caller_passes(fts: sqlite3.Connection, term: str) -> None:
    fts.execute("select rowid from t where t match ?", (fts5_query([term, "paris"]),)).fetchall()


def test_query_strings_are_empty_for_no_terms() -> None:
    assert fts5_query([]) == "" and tsquery([]) == ""
    assert fts5_query(["", "  "]) == ""


def test_tsquery_quotes_every_lexeme_and_joins_with_or() -> None:
    assert tsquery(["cat", "oscar"]) == "'cat' | 'oscar'"
    assert tsquery(["it's", "a\\b", "x & !y"]) == "'it''s' | 'a\\\\b' | 'x & !y'"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.integers(MAX_INDEX_CHARS - 60, MAX_INDEX_CHARS + 5), st.text(max_size=80))
def test_index_text_is_bounded_and_starts_with_the_texts_words(head: str, filler: int, tail: str) -> None:
    # The tail straddles the cut: combining marks, ligatures and "ß" change length when folded.
    text = head + "ab " * (filler // 3) + tail
    indexed = index_text(text)
    words = tokens(text)
    assert len(indexed) <= MAX_INDEX_CHARS
    assert indexed.split() == words[: len(indexed.split())]
    if len(fold(text)) <= MAX_INDEX_CHARS:
        assert indexed == " ".join(words)


def test_index_text_keeps_the_words_before_the_cut_and_drops_a_word_across_it() -> None:
    text = "x" * (MAX_INDEX_CHARS - 10) + " start across after"
    assert index_text(text).split()[1:] == ["start"]
    assert index_text(text[:-9]).split()[1:] == ["start", "acr"]  # short enough: all of it
    assert index_text("ÉLÈVE " * 10) == " ".join(["eleve"] * 10)


@pytest.mark.parametrize(
    ("term", "forms"),
    [
        ("activities", ["activities", "activity", "activitys", "activitying"]),
        ("hike", ["hike", "hikes", "hiking", "hiked"]),
        ("camping", ["camping", "camp", "camps", "camped"]),
        ("box", ["box", "boxes", "boxing", "boxed"]),
        ("2023", ["2023"]),
        ("tv", ["tv"]),
    ],
)
def test_inflections_are_the_term_its_stem_and_the_stems_regular_forms(term: str, forms: list[str]) -> None:
    assert inflections(term) == forms


def test_the_expanded_query_puts_the_terms_first_and_stays_within_max_terms() -> None:
    assert expanded_query("Which paintings did she finish?") == (
        "paintings finish painting finishes finishing finished"
    )
    assert query_terms(expanded_query("hikes", max_terms=2)) == ["hikes", "hike"]
    assert expanded_query("the of and") == ""
    words = " ".join(f"word{i}" for i in range(40))
    assert query_terms(expanded_query(words)) == [f"word{i}" for i in range(32)]
