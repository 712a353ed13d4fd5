"""`recall_block` in one pass: the same excerpts as the quadratic version it replaced, the
budget kept with any counter, and few counter calls."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.lexical_search import SearchHit
from langchain_rolling_memory.core.quoting import one_line
from langchain_rolling_memory.core.recall_block import (
    RECALL_HEADER,
    Recalled,
    _assemble,
    _body,
    _chronological,
    _entry,
    _group_line,
    _group_of,
    _shortest_line,
    _tokens,
    date_note,
    is_question,
    recall_block,
)
from langchain_rolling_memory.core.texts import LANGUAGES

DAY = 1683554160.0


def quadratic_recall_block(
    hits: Sequence[SearchHit],
    *,
    max_tokens: int,
    token_counter: TokenCounter = count_tokens,
    skip: Collection[Hashable] = (),
    neighbours: Mapping[Hashable, SearchHit] | None = None,
    header: str | None = RECALL_HEADER,
) -> Recalled:
    """The oracle: `recall_block` as it was before it was made linear (re-sorts, re-renders and
    re-counts the whole block for each hit), with its excerpts grouped under one line per day
    and session, groups in the order of their oldest excerpt."""
    envelope, counter = token_counter([HumanMessage("")]), token_counter
    seen: set[Hashable] = set(skip)
    chosen: list[SearchHit] = []
    for hit in hits:
        if hit.key in seen:
            continue
        group = [hit]
        follow = neighbours.get(hit.key) if neighbours and is_question(hit) else None
        if follow is not None and follow.key not in seen:
            group.append(follow)
        candidate = _grouped([*chosen, *group])
        text = _assemble(header, _grouped_lines(candidate))
        if _tokens(text, envelope, counter) > max_tokens:
            continue
        seen.update(member.key for member in group)
        chosen = candidate
    if not chosen:
        return Recalled("", (), 0)
    text = _assemble(header, _grouped_lines(chosen))
    return Recalled(text, tuple(chosen), _tokens(text, envelope, counter))


def _grouped(hits: list[SearchHit]) -> list[SearchHit]:
    """Oldest first, each day-and-session group whole, groups by their oldest excerpt."""
    groups: dict[object, list[SearchHit]] = {}
    for hit in sorted(hits, key=_chronological):
        groups.setdefault(_group_of(hit, "en"), []).append(hit)
    return [hit for members in groups.values() for hit in members]


def _grouped_lines(hits: list[SearchHit]) -> list[str]:
    lines: list[str] = []
    for i, hit in enumerate(hits):
        if i == 0 or _group_of(hit, "en") != _group_of(hits[i - 1], "en"):
            lines.append(_group_line(_group_of(hit, "en")))
        lines.append(_entry(hit, one_line(_body(hit)), "en") + date_note(_body(hit), hit.created_at))
    return lines


_WORDS = ["cat", "Oscar", "Lisbon", "June", "painting", "sister", "?", "é", "\n", "<tag>", '"']


@st.composite
def _hit(draw: st.DrawFn, session: str | None = None, seq: int | None = None) -> SearchHit:
    text = " ".join(draw(st.lists(st.sampled_from(_WORDS), max_size=40)))
    session = session or draw(st.sampled_from(["s1", "s2", "bad\nid"]))
    seq = seq or draw(st.integers(1, 30))  # small: repeated keys happen
    created = draw(st.one_of(st.none(), st.sampled_from([DAY, DAY + 86400.0, DAY + 7 * 86400.0])))
    message: BaseMessage = AIMessage(text) if draw(st.booleans()) else HumanMessage(text, name="Caroline")
    return SearchHit("message", session, seq, created, 1.0, message, text=text)


@st.composite
def _case(
    draw: st.DrawFn,
) -> tuple[list[SearchHit], dict[Hashable, SearchHit], set[Hashable], int, str | None]:
    hits = draw(st.lists(_hit(), max_size=40))
    # As `Recaller` reads them: the message after the hit's, in its session.
    neighbours = {h.key: draw(_hit(h.session_id, (h.seq or 0) + 1)) for h in hits if draw(st.booleans())}
    skip = {h.key for h in hits if draw(st.integers(0, 9)) == 0}
    budget = draw(st.integers(0, 700))
    header = draw(st.sampled_from([RECALL_HEADER, None, "h"]))
    return hits, neighbours, skip, budget, header


@settings(max_examples=300, deadline=None)
@given(_case())
def test_the_linear_block_chooses_what_the_quadratic_one_did(
    case: tuple[list[SearchHit], dict[Hashable, SearchHit], set[Hashable], int, str | None],
) -> None:
    hits, neighbours, skip, budget, header = case
    kwargs = {"max_tokens": budget, "skip": skip, "neighbours": neighbours, "header": header}
    new, old = recall_block(hits, **kwargs), quadratic_recall_block(hits, **kwargs)  # type: ignore[arg-type]
    assert new == old
    assert new.tokens <= budget


@settings(max_examples=300, deadline=None)
@given(
    st.text(),
    st.one_of(st.none(), st.text(max_size=3)),
    st.sampled_from(["s1", "bad\nid", "x"]),
    st.one_of(st.none(), st.floats(0, 4e9)),
    st.booleans(),
    st.sampled_from(LANGUAGES),
)
def test_no_rendered_line_is_shorter_than_its_bound(
    text: str, name: str | None, session: str, created: float | None, ai: bool, language: str
) -> None:
    message: BaseMessage = AIMessage(text, name=name) if ai else HumanMessage(text, name=name)
    h = SearchHit("message", session, 1, created, 1.0, message, text=text)
    words = one_line(message.text)
    assert _shortest_line(words, language) <= len(_entry(h, words, language))


def _reversed_words(messages: Sequence[BaseMessage]) -> int:
    # Prices the same characters differently in another order: a line costs its position.
    lines = str(messages[0].content).splitlines()
    return sum(i * len(line.split()) for i, line in enumerate(lines, 1)) if lines else 0


@settings(max_examples=150, deadline=None)
@given(st.lists(_hit(), max_size=30), st.integers(0, 400))
def test_a_counter_that_cares_about_order_still_never_exceeds_the_budget(
    hits: list[SearchHit], budget: int
) -> None:
    block = recall_block(hits, max_tokens=budget, token_counter=_reversed_words, header=None)
    assert block.tokens <= budget
    assert block.tokens == (_reversed_words([HumanMessage(block.text)]) if block.text else 0)


def test_the_counter_runs_once_per_hit_at_most() -> None:
    calls = 0

    def counting(messages: Sequence[BaseMessage]) -> int:
        nonlocal calls
        calls += 1
        return count_tokens(messages)

    hits = [
        SearchHit("message", "s1", i, DAY + i, 1.0, HumanMessage(f"message {i} " * (1 + i % 7)))
        for i in range(300)
    ]
    block = recall_block(hits, max_tokens=2000, token_counter=counting)
    assert 0 < len(block.hits) < len(hits)
    # The envelope, at most one count per hit, and the finished block.
    assert calls <= len(hits) + 2


def test_a_text_too_long_to_fit_is_passed_over_before_its_dates_are_resolved(monkeypatch) -> None:
    """A 5 MB message found by the search used to be rendered with its dates resolved over all
    of its text (seconds) before it was found not to fit: its dates are now looked for only
    once its line without them fits."""
    import langchain_rolling_memory.core.recall_block as recall_block_module

    scanned: list[int] = []
    real = recall_block_module.resolve_relative_dates

    def counting(text: str, day):  # type: ignore[no-untyped-def]
        scanned.append(len(text))
        return real(text, day)

    monkeypatch.setattr(recall_block_module, "resolve_relative_dates", counting)
    huge = SearchHit("message", "s", 1, DAY, 9.0, HumanMessage("yesterday " * 500_000))
    small = SearchHit("message", "s", 2, DAY, 1.0, HumanMessage("I saw Oscar yesterday"))
    block = recall_block([huge, small], max_tokens=200)
    assert "(yesterday = 7 May 2023)" in block.text
    assert [hit.seq for hit in block.hits] == [2]
    assert scanned == [len("I saw Oscar yesterday")]
