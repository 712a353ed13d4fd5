"""The rules a client's facts keep (text, key, source, limits, dedup, keyed replacement); pure.

Owns checking one fact, planning an add or an update against the facts already stored, and
checking a whole extractor reply before any of it is applied. Does no I/O and never reads
the clock or makes ids: the caller passes ``now`` and the new fact's id. The store runs these
plans inside its atomic read-then-write step; the extractor checks its reply with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import FACT_SOURCES, Fact, FactFilter
from langchain_rolling_memory.core.retention import NO_RETENTION, Retention
from langchain_rolling_memory.core.serde import odd_character
from langchain_rolling_memory.errors import ConfigurationError, FactError


def check_limits(max_fact_chars: int, max_facts: int) -> None:
    """Refuse fact limits that are not positive."""
    if max_fact_chars < 1 or max_facts < 1:
        msg = (
            "max_fact_chars and max_facts must be positive, got "
            f"max_fact_chars={max_fact_chars!r}, max_facts={max_facts!r}"
        )
        raise ConfigurationError(msg)


def normalize_text(text: object) -> str:
    """The fact's words separated by single spaces; `FactError` if it is not a string or holds
    a character some backend cannot store exactly (NUL, lone surrogate)."""
    if not isinstance(text, str):
        msg = f"a fact must be a string, got {type(text).__name__}: {text!r:.80}"
        raise FactError(msg)
    why = odd_character(text, allow_nul=False)
    if why is not None:
        msg = f"a fact cannot be stored: it contains {why}; got {text[:40]!r}"
        raise FactError(msg)
    return " ".join(text.split())


def _not_empty(text: str) -> str:
    if not text:
        msg = "a fact must not be empty"
        raise FactError(msg)
    return text


def _short_enough(text: str, max_chars: int) -> str:
    if len(text) > max_chars:
        msg = (
            f"a fact may have at most {max_chars} characters, got {len(text)}: "
            f"{text[:40]!r}...; shorten it or raise max_fact_chars"
        )
        raise FactError(msg)
    return text


def check_key(key: str | None) -> str | None:
    """A fact key is an id (no key: None); `InvalidIdError` otherwise."""
    return None if key is None else validate_id(key, kind="fact key")


def check_text(text: object, *, max_chars: int) -> str:
    """The normalized text of a fact, refused if empty or longer than `max_chars`."""
    return _short_enough(_not_empty(normalize_text(text)), max_chars)


def check_fact(
    text: object, key: str | None, source: str, *, max_chars: int, fact_filter: FactFilter | None
) -> tuple[str, str | None] | None:
    """Validate and filter a fact: ``(text, key)`` to store, or None if the filter refused it.

    The length limit applies to what the filter returns, so a filter may shorten a fact.
    """
    clean = _not_empty(normalize_text(text))
    key = check_key(key)
    if source not in FACT_SOURCES:
        msg = f"source must be one of {FACT_SOURCES}, got {source!r}"
        raise FactError(msg)
    if fact_filter is not None:
        filtered = fact_filter(clean, key)
        if filtered is None:
            return None
        clean = normalize_text(filtered)
        if not clean:
            return None
    return _short_enough(clean, max_chars), key


def plan_add(
    existing: Sequence[Fact], new: Fact, *, max_facts: int, retention: Retention = NO_RETENTION
) -> Fact | None:
    """The fact to write for `new`, a checked fact as it is stored if it is new (its id, client,
    text, key and source; created and updated now): the keyed fact it replaces, or `new`
    itself; None for an exact duplicate, unless `retention` names a new expiry for it.
    `FactError` past `max_facts`. `existing` holds the live facts only (not the expired)."""
    text, key, now = new.text, new.key, new.updated_at
    for fact in existing:
        if key is not None and fact.key == key:
            if fact.text == text:
                return _renewed(fact, retention, now)
            expires = retention.renewed(fact.expires_at)
            return dataclasses.replace(new, id=fact.id, created_at=fact.created_at, expires_at=expires)
    for fact in existing:
        if fact.text.casefold() == text.casefold() and (key is None or fact.key is None):
            return _renewed(fact, retention, now)
    if len(existing) >= max_facts:
        msg = (
            f"client {new.client_id!r} already has {len(existing)} facts (max_facts="
            f"{max_facts}); delete some or raise max_facts"
        )
        raise FactError(msg)
    return dataclasses.replace(new, expires_at=retention.of_new())


def _renewed(fact: Fact, retention: Retention, now: float) -> Fact | None:
    """A duplicate is written again only to take the expiry its call named (None: nothing)."""
    if not retention.named or retention.at == fact.expires_at:
        return None
    return dataclasses.replace(fact, updated_at=now, expires_at=retention.at)


def plan_update(
    existing: Sequence[Fact],
    fact_id: str,
    text: object,
    *,
    max_chars: int,
    fact_filter: FactFilter | None,
    now: float,
    retention: Retention = NO_RETENTION,
) -> Fact | None:
    """Fact `fact_id` with its new text and its renewed expiry (see `retention`); None if there
    is no such live fact or the filter refused it."""
    for fact in existing:
        if fact.id == fact_id:
            checked = check_fact(text, fact.key, fact.source, max_chars=max_chars, fact_filter=fact_filter)
            if checked is None:
                return None
            expires = retention.renewed(fact.expires_at)
            return dataclasses.replace(fact, text=checked[0], updated_at=now, expires_at=expires)
    return None


def find_fact(existing: Sequence[Fact], text: str, key: str | None) -> Fact | None:
    """The stored fact an add of ``(text, key)`` resolved to: same key, or same text."""
    for fact in existing:
        if (key is not None and fact.key == key) or fact.text.casefold() == text.casefold():
            return fact
    return None


@dataclass(frozen=True)
class ReplyPlan:
    """A checked reply: fact ids to delete, ``(id, text)`` to update, ``(text, key)`` to add."""

    deletes: list[str]
    updates: list[tuple[str, str]]
    adds: list[tuple[str, str | None]]


def check_reply(
    known: Mapping[str, Fact],
    *,
    deletes: Sequence[str],
    updates: Sequence[tuple[str, str]],
    adds: Sequence[tuple[str, str | None]],
    max_chars: int,
    max_facts: int,
) -> ReplyPlan:
    """Check every change of a reply before any is applied; raise on the first bad one.

    Args:
        known: the client's facts by the alias the reply names them with.
        deletes: aliases to delete. updates: ``(alias, text)``. adds: ``(text, key or "")``.
        max_chars: longest fact text. max_facts: most facts the client may have after the reply.
    """

    def fact_id(alias: str) -> str:
        if alias not in known:
            msg = f"unknown fact id {alias!r} (known: {sorted(known)})"
            raise FactError(msg)
        return known[alias].id

    gone = [fact_id(a) for a in deletes]
    changed = [(fact_id(alias), check_text(text, max_chars=max_chars)) for alias, text in updates]
    new = [(check_text(text, max_chars=max_chars), check_key(key or None)) for text, key in adds]
    if set(gone) & {i for i, _ in changed}:
        msg = "the reply both updates and deletes the same fact"
        raise FactError(msg)
    # Adds that neither replace a keyed fact nor repeat one grow the count: refuse the whole
    # reply up front rather than apply its deletes and updates, then stop at the limit.
    keys = {f.key for f in known.values() if f.key}
    texts = {f.text.casefold() for f in known.values()}
    fresh = {(t.casefold(), k) for t, k in new if not (k and k in keys) and t.casefold() not in texts}
    left = len(known) - len(set(gone)) + len(fresh)
    if left > max_facts:
        msg = f"the reply would leave {left} facts (max_facts={max_facts})"
        raise FactError(msg)
    return ReplyPlan(gone, changed, new)
