"""`stores.vector_rank.closest`, the ranking every in-process vector search uses: with numpy (a float32
product, then the few near the cut scored exactly) it returns what the pure-Python scorer returns,
scores, order and ties included; without numpy it is that scorer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import langchain_rolling_memory.core.dense as dense
import langchain_rolling_memory.stores.vector_rank as rank
from langchain_rolling_memory.core.dense import pack, scorer
from langchain_rolling_memory.stores.vector_rank import closest

pytest.importorskip("numpy")  # the dev install has it (the notebooks' plots); CI always runs this

_PLAIN = [-1.0, -0.5, 0.0, 0.25, 0.5, 1.0]  # few values: many equal vectors, so many ties at the cut
vectors = st.lists(st.sampled_from(_PLAIN), min_size=3, max_size=3).map(pack)
shelf = st.lists(st.one_of(vectors, st.just(b""), st.just(pack([1.0, 0.0]))), max_size=60)


def _reference(query: bytes, stored: list[bytes], limit: int) -> list[tuple[int, float]]:
    score = scorer(query)
    found = [(i, s) for i, blob in enumerate(stored) if (s := score(blob)) is not None]
    return sorted(found, key=lambda pair: (-pair[1], pair[0]))[:limit]


@settings(max_examples=300, deadline=None)
@given(query=vectors, stored=shelf, limit=st.integers(min_value=0, max_value=12))
def test_closest_is_the_exact_ranking_with_or_without_numpy(
    query: bytes, stored: list[bytes], limit: int
) -> None:
    expected = _reference(query, stored, limit)
    assert closest(query, stored, limit) == expected
    original = rank._numpy
    rank._numpy = lambda: None  # type: ignore[assignment]
    try:
        assert closest(query, stored, limit) == expected
    finally:
        rank._numpy = original  # type: ignore[assignment]


def test_numpy_scores_only_the_vectors_near_the_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2,000 vectors, limit 5: the exact scorer runs on the few the float32 product keeps.
    stored = [pack([1.0, i / 2000.0, 0.0]) for i in range(2000)]
    calls = 0
    exact = dense.scorer

    def counting(query: bytes):  # type: ignore[no-untyped-def]
        score = exact(query)

        def counted(blob: bytes) -> float | None:
            nonlocal calls
            calls += 1
            return score(blob)

        return counted

    monkeypatch.setattr(rank, "scorer", counting)
    best = closest(pack([1.0, 0.0, 0.0]), stored, 5)
    assert [i for i, _ in best] == [0, 1, 2, 3, 4]
    assert calls <= 50  # the ~30 within `_MARGIN` of the cut, not all 2,000
