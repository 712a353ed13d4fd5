"""The in-process ranking of stored vectors: what the memory and SQLite backends run for a dense
search (`closest`), exact, and fast with numpy when it is installed (the ``dense`` extra).

Owns the choice between numpy and pure Python, kept out of `core.dense` (which stays pure, with
the scorer both paths share). Does no I/O: a backend reads the scope's vectors and passes them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from langchain_rolling_memory.core.dense import scorer

_MARGIN = 1e-4
"""How far below the `limit`-th float32 score a vector may be and still be scored exactly
(`closest`): a float32 product of two unit vectors is off by ~1e-6 at most, so nothing the exact
ranking would keep is left out."""


@functools.cache
def _numpy() -> Any:
    """numpy when it is installed (the ``dense`` extra), else None: it only makes `closest` faster."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def closest(query: bytes, vectors: Sequence[bytes], limit: int) -> list[tuple[int, float]]:
    """The `limit` stored vectors closest to `query`: (index in `vectors`, cosine), best first,
    ties by index; a vector of another length, or an empty one, is never found.

    The scores, the order and the ties are `scorer`'s whether numpy is installed or not. With
    numpy, one float32 product of all the vectors keeps those within `_MARGIN` of the
    `limit`-th, and only they are scored exactly: a few ms for 10,000 vectors of 384
    dimensions instead of ~150 ms in pure Python (`benchmarks/vector_search_cost.py`).

    Example:
        >>> from langchain_rolling_memory.core.dense import pack
        >>> closest(pack([1.0, 0.0]), [pack([0.0, 1.0]), pack([1.0, 1.0]), b"", pack([1.0, 0.0])], 2)
        [(3, 1.0), (1, 0.7071067690849304)]
    """
    if limit <= 0 or not query:
        return []
    size = len(query)
    score = scorer(query)
    candidates = [i for i, blob in enumerate(vectors) if len(blob) == size]
    np = _numpy()
    if np is not None and len(candidates) > limit:
        matrix = np.frombuffer(b"".join(vectors[i] for i in candidates), dtype="<f4").reshape(
            len(candidates), -1
        )
        rough = matrix @ np.frombuffer(query, dtype="<f4")
        cut = np.partition(rough, len(candidates) - limit)[len(candidates) - limit]
        candidates = [candidates[i] for i in np.flatnonzero(rough >= cut - _MARGIN)]
    scored = [(i, s) for i in candidates if (s := score(vectors[i])) is not None]
    scored.sort(key=lambda pair: (-pair[1], pair[0]))
    return scored[:limit]
