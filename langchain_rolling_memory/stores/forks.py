"""Fork safety of the stores: a forked child drops what it inherited and never closes it.

Owns the registry of live store objects and the one ``os.register_at_fork`` hook that tells
each of them, in the child, that it was forked. Does not open connections: each backend's
``_after_fork`` hands its inherited connections to `abandon` and opens fresh ones on next use.

Why abandon rather than close: an inherited connection is the parent's. Closing a SQLite
connection in the child releases the child's POSIX locks on the database file (they are per
process, so a garbage store's close breaks the live store's writes); finishing a psycopg
connection sends the server a goodbye on the parent's socket; a psycopg pool's worker threads
do not exist in the child. Keeping the objects referenced until the child exits means no
destructor ever runs on them there.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol


class ForkAware(Protocol):
    def _after_fork(self) -> None:
        """Called in the child right after a fork: drop inherited connections and locks."""


_LIVE: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_GUARD = threading.Lock()
# Inherited connections, kept referenced in the child so that no destructor closes them.
_ABANDONED: list[object] = []


def track(store: ForkAware) -> None:
    """Register a store so that a forked child gives it fresh connections."""
    with _GUARD:
        _LIVE.add(store)


def abandon(*inherited: object) -> None:
    """Keep `inherited` objects alive, unused and unclosed, for the rest of this process."""
    _ABANDONED.extend(obj for obj in inherited if obj is not None)


def _after_fork_in_child() -> None:
    global _GUARD
    # A parent thread may have held the guard at the fork; that thread does not exist here.
    _GUARD = threading.Lock()
    for store in list(_LIVE):  # stores that are garbage but not yet collected included
        store._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
