"""The pure steps around the store's dense-vector methods: the checks of a model name, of the
vectors written and of a vector search's scope, and the rows a search returns as hits; no I/O.

`RollingStore.unembedded`, `put_vectors` and `vector_search` (in `api.py`) call these before a
backend primitive (`contract.py`); the byte layout of a vector is `core.dense`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_rolling_memory.core.dense import MAX_DIMENSIONS
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.errors import InvalidArgumentError
from langchain_rolling_memory.stores.contract import VectorWrite

MAX_MODEL_CHARS = 200


def check_model(model: object) -> str:
    """An embedding model's name as stored beside its vectors: 1 to 200 printable characters."""
    if not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL_CHARS or not model.isprintable():
        msg = f"model must be a name of 1 to {MAX_MODEL_CHARS} printable characters, got {model!r}"
        raise InvalidArgumentError(msg)
    return model


def check_writes(items: Sequence[VectorWrite]) -> list[VectorWrite]:
    """The vectors to store, checked: ids, a positive seq, packed float32 bytes."""
    checked = []
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
        checked.append(item)
    return checked


def check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10_000:
        msg = f"limit must be an int from 1 to 10000, got {limit!r}"
        raise InvalidArgumentError(msg)
    return limit
