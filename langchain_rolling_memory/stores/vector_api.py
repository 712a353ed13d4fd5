"""The pure steps around the store's dense-vector methods: the checks of a model name, of the
vectors written and of a vector search's scope, and the rows a search returns as hits; no I/O.

`RollingStore.unembedded`, `put_vectors` and `vector_search` (in `api.py`) call these before a
backend primitive (`contract.py`); the byte layout of a vector is `core.dense`'s.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from langchain_rolling_memory.core.dense import MAX_DIMENSIONS, unpack
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.errors import InvalidArgumentError
from langchain_rolling_memory.stores.contract import VectorWrite

MAX_MODEL_CHARS = 200

UNIT_TOLERANCE = 1e-3
"""How far from 1 a stored vector's length may be: `core.dense.pack` scales to length 1 and
float32 rounding leaves it within about 1e-6. Every backend's score is a dot product read as a
cosine, and the in-process ranking's pre-filter (`stores.vector_rank`) relies on it."""


def vector_problem(blob: bytes) -> str | None:
    """Why `blob` is not `core.dense.pack`'s bytes of a vector (None when it is, or for b'', a
    message with no text): NaN or infinity, or a length other than 1. Checked before a write, so
    that no backend ever scores such a vector (pgvector refuses NaN at search time, and the
    backends would rank it differently).

    Example:
        >>> import struct
        >>> vector_problem(struct.pack("<2f", 0.6, 0.8)) is None
        True
        >>> vector_problem(struct.pack("<2f", 3.0, 4.0))
        'its length is 5, not 1'
    """
    if not blob:
        return None
    floats = unpack(blob)
    if not all(map(math.isfinite, floats)):
        return "it holds NaN or infinity"
    norm = math.sqrt(math.fsum(v * v for v in floats))
    if abs(norm - 1.0) > UNIT_TOLERANCE:
        return f"its length is {norm:.6g}, not 1"
    return None


def check_model(model: object) -> str:
    """An embedding model's name as stored beside its vectors: 1 to 200 printable characters."""
    if not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL_CHARS or not model.isprintable():
        msg = f"model must be a name of 1 to {MAX_MODEL_CHARS} printable characters, got {model!r}"
        raise InvalidArgumentError(msg)
    return model


def check_writes(items: Sequence[VectorWrite]) -> list[VectorWrite]:
    """The vectors to store, checked before anything is written: ids, a positive seq, packed
    float32 bytes of a finite unit vector (`vector_problem`), each message once."""
    checked = []
    seen: set[Hashable] = set()
    for item in items:
        if not isinstance(item, VectorWrite):
            msg = f"put_vectors takes VectorWrite items, got {type(item).__name__}"
            raise InvalidArgumentError(msg)
        session_id, seq, generation, vector = item
        validate_id(session_id)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            msg = f"seq must be an int >= 1, got {seq!r}"
            raise InvalidArgumentError(msg)
        if not isinstance(generation, str):
            msg = f"generation must be the str the listing gave, got {generation!r}"
            raise InvalidArgumentError(msg)
        if not isinstance(vector, bytes) or len(vector) % 4 or len(vector) > 4 * MAX_DIMENSIONS:
            msg = "vector must be core.dense.pack's bytes (float32, at most 8192 of them)"
            raise InvalidArgumentError(msg)
        problem = vector_problem(vector)
        if problem is not None:
            msg = f"the vector of ({session_id!r}, {seq}) is not core.dense.pack's bytes: {problem}"
            raise InvalidArgumentError(msg)
        key = (session_id, seq)
        if key in seen:
            msg = f"put_vectors got ({session_id!r}, {seq}) twice in one call: pass each message once"
            raise InvalidArgumentError(msg)
        seen.add(key)
        checked.append(item)
    return checked


def check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        msg = f"limit must be an int from 1 to 10000, got {limit!r}"
        raise InvalidArgumentError(msg)
    return limit
