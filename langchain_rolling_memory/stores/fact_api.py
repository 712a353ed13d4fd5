"""The plans behind the store's fact methods: a checked fact write as a plan a backend runs.

Owns turning a fact call (`RollingStore.add_fact`, `update_fact`) into a plan that a backend
runs inside its atomic read-then-write step (`change_facts`), and checking `planned_from`;
the rules themselves (limits, duplicates, keys) are in `fact_rules.py`, when a fact expires
in `retention.py`, the public methods in `api.py`. Pure: no I/O and no clock.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime

import langchain_rolling_memory.core.fact_rules as fact_rules
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.records import Fact, FactFilter, FactPlan, SessionMark
from langchain_rolling_memory.core.retention import Retention, check_ttl
from langchain_rolling_memory.errors import ConfigurationError

ExpiresAt = float | datetime | None
"""``expires_at=`` of a fact write: seconds since the epoch or a datetime (naive: UTC)."""


@dataclasses.dataclass(frozen=True)
class FactOptions:
    """The fact settings of a store (see `RollingStore`), checked when built: a store checks
    them before it opens anything."""

    max_fact_chars: int = 500
    max_facts: int = 200
    fact_filter: FactFilter | None = None
    fact_ttl: float | None = None

    def __post_init__(self) -> None:
        fact_rules.check_limits(self.max_fact_chars, self.max_facts)
        if self.fact_ttl is not None:
            ttl = check_ttl(self.fact_ttl, name="fact_ttl", error=ConfigurationError)
            object.__setattr__(self, "fact_ttl", ttl)


def plan_add(
    client_id: str,
    checked: tuple[str, str | None],
    source: str,
    pinned: bool,
    keep: tuple[Retention, float],
    max_facts: int,
) -> FactPlan:
    """A plan that writes the checked fact (new or replacing a keyed one), or nothing for a
    duplicate; its time and id are fixed here, so a backend may run it more than once.
    A pinned fact stays pinned; `pinned=True` pins a new, replaced or duplicate fact."""
    (text, key), (kept, now) = checked, keep
    new = Fact(uuid.uuid4().hex, client_id, text, key, source, now, now)

    def plan(existing: list[Fact]) -> Fact | None:
        fact = fact_rules.plan_add(existing, new, max_facts=max_facts, retention=kept)
        if fact is None:
            same = fact_rules.find_fact(existing, text, key) if pinned else None
            return dataclasses.replace(same, pinned=True) if same and not same.pinned else None
        was = next((f.pinned for f in existing if f.id == fact.id), False)
        return dataclasses.replace(fact, pinned=pinned or was)

    return plan


def plan_update(
    fact_id: str, text: str, keep: tuple[Retention, float], max_chars: int, fact_filter: FactFilter | None
) -> FactPlan:
    """A plan that rewrites the text of fact `fact_id` (None: no such fact, or filtered)."""
    kept, now = keep

    def plan(existing: list[Fact]) -> Fact | None:
        return fact_rules.plan_update(
            existing, fact_id, text, max_chars=max_chars, fact_filter=fact_filter, now=now, retention=kept
        )

    return plan


def mark_of(mark: object) -> SessionMark | None:
    """`planned_from` checked: None or a `SessionMark` of a valid session id."""
    if mark is None:
        return None
    if not isinstance(mark, SessionMark) or not isinstance(mark.generation, str):
        msg = f"planned_from must be a SessionMark (a read's session and generation) or None, got {mark!r}"
        raise TypeError(msg)
    validate_id(mark.session_id)
    return mark
