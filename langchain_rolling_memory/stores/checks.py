"""The argument checks of the public store API: each checks one argument and returns it ready for a backend.

Owns what is refused at the boundary and how (ids are `ids.validate_id`, text no backend can
store exactly is `serde.check_storable`), and serializing messages, state and summary meta
for the primitives. Pure: no I/O and no clock (the caller passes "now"); the API that calls
these is `api.py`.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.serde import check_storable, dumps_message
from langchain_rolling_memory.errors import ConfigurationError, InvalidArgumentError, InvalidTextError
from langchain_rolling_memory.stores.contract import OPERATOR, Reader, SummaryWrite

MAX_TOKEN_COUNT = 2**31 - 1
"""The largest token count a store keeps: PostgreSQL's INTEGER column (what one backend stores, all store)."""


def token_count(value: object, what: str) -> int:
    """`value` as a token count to store: an int from 0 to `MAX_TOKEN_COUNT`, checked before any write.

    A float with a whole value (``3.0``) is that int. A fraction (``2.75``) is refused, not
    rounded: a count is priced against a budget, so a counter that returns fractions is
    averaging or estimating, and how to round is its author's choice (``math.ceil`` never
    under-counts); stored, it made a Redis session unreadable. bool is refused: it is an int
    to Python but never a count.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or not 0 <= int(value) <= MAX_TOKEN_COUNT
    ):
        hint = "round a fraction up with math.ceil" if isinstance(value, float) else "pass an int or None"
        msg = f"{what} must be a whole number of tokens from 0 to {MAX_TOKEN_COUNT:,}, got {value!r}; {hint}"
        raise ConfigurationError(msg)
    return int(value)


def message_rows(
    messages: Sequence[BaseMessage], token_counts: Sequence[int | None] | None
) -> list[tuple[str, int | None]]:
    """``(payload_json, tokens)`` per message, all serialized before anything is written."""
    if isinstance(messages, (str, bytes, BaseMessage)) or not isinstance(messages, Sequence):
        msg = f"messages must be a sequence of BaseMessage, got {type(messages).__name__}"
        raise TypeError(msg)
    if token_counts is not None and len(token_counts) != len(messages):
        msg = (
            f"token_counts must have one entry per message, got {len(token_counts)} "
            f"for {len(messages)} messages"
        )
        raise InvalidArgumentError(msg)
    payloads = []
    for index, message in enumerate(messages):
        try:
            payloads.append(dumps_message(message))
        except InvalidTextError as exc:
            msg = f"message {index} of {len(messages)}: {exc}"
            raise InvalidTextError(msg) from exc
    if token_counts is None:
        return [(payload, None) for payload in payloads]
    counts = [None if c is None else token_count(c, f"token_counts[{i}]") for i, c in enumerate(token_counts)]
    return list(zip(payloads, counts, strict=True))


def optional_client(client_id: str | None) -> str | None:
    return None if client_id is None else validate_id(client_id, kind="client_id")


def reader(client_id: object) -> Reader | None:
    """The owner check of a session read: None for the operator's (unchecked) read."""
    if client_id is OPERATOR:
        return None
    return Reader(None if client_id is None else validate_id(client_id, kind="client_id"))


def search_reader(client_id: object) -> Reader | None:
    """The owner check of a read that follows a search: a client's own sessions only (as its
    search reads), never one that is nobody's; None (a run naming no client) reads only
    sessions that are nobody's; the operator's read is unchecked."""
    if client_id is OPERATOR or client_id is None:
        return reader(client_id)
    return Reader(validate_id(client_id, kind="client_id"), exact=True)


def check_count(name: str, value: object) -> None:
    # bool is an int to Python but never a count; a negative seq reads differently per backend.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        msg = f"{name} must be an int >= 0, got {value!r}; pass 0 to start from the beginning"
        raise InvalidArgumentError(msg)


def check_points(points: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """`messages_after`'s (session id, seq) pairs, checked (ids valid, seqs counts)."""
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence):
        msg = f"points must be a sequence of (session_id, seq) pairs, got {type(points).__name__}"
        raise InvalidArgumentError(msg)
    out: list[tuple[str, int]] = []
    for point in points:
        if not isinstance(point, tuple) or len(point) != 2:
            msg = f"each point must be a (session_id, seq) pair, got {point!r}"
            raise InvalidArgumentError(msg)
        session_id, seq = point
        validate_id(session_id)
        check_count("seq", seq)
        out.append((session_id, seq))
    return out


def check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        msg = f"limit must be a non-negative int or None (all), got {limit!r}"
        raise InvalidArgumentError(msg)


def cutoff(older_than: float | None, now: float) -> float:
    """The time before which `purge` deletes a session (None: none, ``-inf``)."""
    if older_than is None:
        return -math.inf
    if not isinstance(older_than, (int, float)) or isinstance(older_than, bool) or not older_than >= 0:
        msg = f"older_than must be a number of seconds >= 0 (or None: no session), got {older_than!r}"
        raise ConfigurationError(msg)
    return now - older_than


def summary_args(
    session_id: str,
    text: str,
    covered_seq: int,
    expected_version: int,
    meta: Mapping[str, Any] | None,
    lease_owner: str | None,
    now: float,
    generation: str | None = None,
) -> SummaryWrite:
    """The one argument of the `cas_summary` primitive, checked and serialized.

    A NUL or lone surrogate in the text is refused here: stored raw, it would fail on
    PostgreSQL every time, and the compaction would be retried forever.
    """
    validate_id(session_id)
    if not isinstance(text, str):
        msg = f"summary text must be a string, got {type(text).__name__}: {text!r:.80}"
        raise TypeError(msg)
    check_storable(text, what="summary text")
    check_count("covered_seq", covered_seq)
    check_count("expected_version", expected_version)
    if lease_owner is not None:
        if not isinstance(lease_owner, str) or not lease_owner:
            msg = f"lease_owner must be the owner passed to claim() (a non-empty str) or None, got {lease_owner!r}"
            raise ConfigurationError(msg)
        check_storable(lease_owner, what="lease owner")
    if generation is not None and (not isinstance(generation, str) or not generation.isascii()):
        msg = f"generation must be the str that read_turn() returned, or None, got {generation!r:.80}"
        raise ConfigurationError(msg)
    meta_json = json.dumps(dict(meta or {}))
    return SummaryWrite(
        session_id, text, covered_seq, meta_json, expected_version, now, lease_owner, generation
    )


def lease_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        msg = f"a lease owner must be a non-empty string, got {owner!r}; use e.g. uuid.uuid4().hex"
        raise InvalidArgumentError(msg)
    return check_storable(owner, what="lease owner")


def lease_ttl(ttl: object) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < float("inf"):
        msg = f"a lease ttl must be a finite number of seconds > 0, got {ttl!r}"
        raise InvalidArgumentError(msg)
    return float(ttl)


def pinned_flag(pinned: object) -> bool:
    if not isinstance(pinned, bool):
        msg = f"pinned must be True or False, got {pinned!r}"
        raise ConfigurationError(msg)
    return pinned


def merged_state(state: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """`state` with `updates` merged in (shallow): a key set to None is removed, any other
    value replaces the key's."""
    if not isinstance(updates, Mapping):
        msg = f"updates must be a mapping (a JSON object), got {type(updates).__name__}"
        raise TypeError(msg)
    merged = dict(state)
    for key, value in updates.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def state_json(state: Mapping[str, Any]) -> str:
    if not isinstance(state, Mapping):
        msg = f"state must be a mapping (a JSON object), got {type(state).__name__}"
        raise TypeError(msg)
    try:
        text = json.dumps(dict(state), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        msg = f"state must be JSON-serializable: {exc}"
        raise InvalidArgumentError(msg) from exc
    # JSON escapes NUL and control characters, so they round-trip; a lone surrogate cannot.
    return check_storable(text, what="state (as JSON)", allow_nul=True)


def rewind_seq(rewind: object) -> int | None:
    """An append's `rewind` checked: None, or a seq (an int >= 0) past which rows are withdrawn."""
    if rewind is None:
        return None
    if isinstance(rewind, bool) or not isinstance(rewind, int) or rewind < 0:
        msg = f"rewind must be None or an int >= 0 (the seq past which rows are withdrawn), got {rewind!r}"
        raise InvalidArgumentError(msg)
    return rewind
