"""Dates as the store keeps them: seconds since 1970, checked to lie before the year 9999; pure.

Owns turning a caller's date (seconds or a `datetime`, naive read as UTC) into checked
seconds, with an error that names the argument and guesses a wrong unit (milliseconds...).
Used for a message's `created_at` and a fact's `expires_at`; reads no clock.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from langchain_rolling_memory.errors import ConfigurationError

MAX_DATE = datetime(9999, 1, 1, tzinfo=timezone.utc).timestamp()
"""A stored date is before this (1 January 9999, in seconds). A date past the year 9999 (a
date in milliseconds, `datetime.max`) cannot be a `datetime`: stored, it broke every recall
that showed it. The year of margin keeps any time zone's rendering of a date in range."""

_UNITS = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))


def seconds(value: object, name: str, error: type[ValueError] = ConfigurationError) -> float:
    """`value` (seconds since the epoch or a datetime, naive read as UTC) as seconds from 1970 to
    before `MAX_DATE`; `error` naming `name` otherwise."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        try:
            found = aware.timestamp()
        except OverflowError:  # within a day of datetime.min or datetime.max
            found = -math.inf if aware.year == 1 else math.inf
        return _in_range(found, value, name, error)
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= 2**64:  # no float, and a repr that can be thousands of digits long
            bits = f"an int of {value.bit_length()} bits"
            return _in_range(math.inf if value > 0 else -math.inf, bits, name, error)
        return _in_range(float(value), value, name, error)
    if isinstance(value, float) and math.isfinite(value):
        return _in_range(value, value, name, error)
    msg = (
        f"{name} must be seconds since the epoch (a finite number) or a datetime, "
        f"got {value!r:.80}; pass time.time()-style seconds or a datetime"
    )
    raise error(msg)


def _in_range(found: float, value: object, name: str, error: type[ValueError]) -> float:
    if 0 <= found < MAX_DATE:
        return found
    why = "before 1970" if found < 0 else "in the year 9999 or later"
    unit = next(((scale, unit) for scale, unit in _UNITS if found / scale < MAX_DATE), None)
    if found > 0 and unit is not None and isinstance(value, (int, float)):
        fix = f"it looks like {unit[1]}: divide it by {unit[0]:,.0f}"
    else:
        fix = "pass time.time()-style seconds or a datetime"
    msg = (
        f"{name} must be seconds from 1970 to before the year 9999 (0 <= t < {MAX_DATE:.0f}), "
        f"got {value if isinstance(value, str) else repr(value)}, {why}; {fix}"
    )
    raise error(msg)
