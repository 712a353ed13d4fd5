"""How long a fact is kept: checking a retention and choosing the expiry a fact write gives; pure.

A retention is `ttl=` (seconds from now), `expires_at=` (a date) or a store's default
`fact_ttl`. A fact whose ``expires_at`` is at or before the store's clock is expired: every
backend leaves it out of the statement or script that lists or searches facts, and `purge`
deletes it. Renewal rule, for a write that restates a fact (a keyed replacement, an
`update_fact`, an exact duplicate added with a retention): the retention the call names, else
the store's `fact_ttl` counted from now; with neither, the fact keeps the expiry it had, so a
fact given a retention never becomes permanent through an update that names none.

Does no I/O and reads no clock: the caller passes ``now``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from langchain_rolling_memory.core.dates import MAX_DATE, seconds
from langchain_rolling_memory.errors import FactError


def check_ttl(value: object, *, name: str = "ttl", error: type[ValueError] = FactError) -> float:
    """A retention in seconds: a finite number > 0 that ends before the year 9999."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or not 0 < number < MAX_DATE:
        msg = (
            f"{name} must be a number of seconds > 0 (and before the year 9999), got {value!r:.80}; "
            f"e.g. {name}=30 * 86400 for 30 days, or None for no expiry"
        )
        raise error(msg)
    return float(number)


@dataclass(frozen=True)
class Retention:
    """The expiry one fact write asks for.

    Attributes:
        at: the expiry named by the call (`ttl` or `expires_at`), else the store default's
            (``now + fact_ttl``); None: neither.
        named: whether the call itself named it.
    """

    at: float | None = None
    named: bool = False

    def of_new(self) -> float | None:
        """The expiry of a new fact."""
        return self.at

    def renewed(self, old: float | None) -> float | None:
        """The expiry of a fact restated by this write, which had `old` (see the module)."""
        return self.at if self.at is not None else old


NO_RETENTION = Retention()
"""A write that names no retention, on a store with no `fact_ttl`."""


def retention(
    ttl: object = None, expires_at: object = None, *, now: float, default_ttl: float | None = None
) -> Retention:
    """Check a call's `ttl` / `expires_at` (at most one; `FactError` otherwise, before anything
    is written) and combine it with the store's `default_ttl`."""
    if ttl is not None and expires_at is not None:
        msg = f"give ttl= or expires_at=, not both; got ttl={ttl!r:.40}, expires_at={expires_at!r:.40}"
        raise FactError(msg)
    if ttl is not None:
        at = now + check_ttl(ttl)
        if at >= MAX_DATE:
            msg = f"ttl must end before the year 9999, got ttl={ttl!r}; give fewer seconds, or None for no expiry"
            raise FactError(msg)
        return Retention(at, named=True)
    if expires_at is not None:
        at = seconds(expires_at, "expires_at", FactError)
        if at <= now:
            msg = (
                f"expires_at must be after now ({now:.0f}), got {expires_at!r:.80}: the fact would be "
                "expired at once; give a future date, or delete the fact instead"
            )
            raise FactError(msg)
        return Retention(at, named=True)
    return Retention(None if default_ttl is None else now + default_ttl)
