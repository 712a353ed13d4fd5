"""A store's end: closed at exit, closed with its event loop, and the error of a store not set up.

Owns the one ``atexit`` hook that closes the stores still open when the interpreter exits, and
the guard that closes an async pool or client when its event loop ends; the public lifecycle
(``with``, `setup()`, `close()`) is `RollingStore`'s (`api.py`), and each backend owns what its
`setup` creates and what its `close` releases. Does not open connections.

Why the exit hook: a psycopg pool left open until the interpreter finalizes is closed by its
``__del__``, which joins its worker threads; from Python 3.13 on, threads no longer run once
finalization has begun, so each join waits its full 5 s timeout and a script that never closed
its PostgreSQL store took some 20 s to exit. ``atexit`` hooks run before that point, while
the workers still answer.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

from langchain_rolling_memory.errors import StoreError

logger = logging.getLogger("langchain_rolling_memory")


class Closable(Protocol):
    """What the exit hook needs of a store: whether it is closed, and how to close it."""

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...


def not_set_up(where: str, cause: object) -> StoreError:
    """The error of a store opened with ``setup=False`` whose tables or keys do not exist."""
    msg = (
        f"{where} do not exist ({cause}); this store was opened with setup=False: run "
        "store.setup() (or await store.asetup()) once with a role that may create them"
    )
    return StoreError(msg)


_OPEN: weakref.WeakSet[Closable] = weakref.WeakSet()
_GUARD = threading.Lock()


def close_at_exit(store: Closable) -> None:
    """Close `store` when the interpreter exits if it is still open then (held weakly)."""
    with _GUARD:
        _OPEN.add(store)


@atexit.register
def _close_open_stores() -> None:
    with _GUARD:
        stores = list(_OPEN)
    for store in stores:
        if store.closed:
            continue
        try:
            store.close()
        except Exception as exc:  # an exit hook must not hide the program's own outcome
            logger.warning("rolling memory: closing %s at exit failed: %s", type(store).__name__, exc)


def close_with_loop(close: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
    """Run `close()` when the running event loop ends; return the guard task.

    Async connections belong to their loop. A script that ends ``asyncio.run(main())``
    without ``await store.aclose()`` left them open, and on Python 3.13 it could hang for
    ever: ``asyncio.run`` cancels every task at its end, and psycopg_pool's tasks swallow
    that cancellation while a connection attempt is in flight, so the wait never ended. The
    guard is an idle task: cancelled with all the others, it closes the pool or client then
    (which stops the pool's workers), inside the same wait. Cancelling it closes at once.
    """

    async def guard() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await close()
            raise
        # A loop closed with this task still pending destroys it (GeneratorExit): nothing can
        # be awaited then, so nothing is tried (a `finally` awaiting would raise in the collector).

    return asyncio.get_running_loop().create_task(guard(), name="rolling-memory-close-with-loop")


async def close_now(guard: asyncio.Task[None]) -> None:
    """Cancel a `close_with_loop` guard and wait for its close to finish."""
    guard.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await guard
