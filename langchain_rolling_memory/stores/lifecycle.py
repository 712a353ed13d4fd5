"""A store's life: ``with`` / ``async with``, `setup()`, closed is closed, closed at exit.

Owns the public lifecycle methods every backend shares, the one ``atexit`` hook that closes
the stores still open when the interpreter exits, and the guard that closes an async pool or
client when its event loop ends; each backend owns what its `_setup` creates and what its
`close` releases. Does not open connections.

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
from types import TracebackType
from typing import TypeVar

from langchain_rolling_memory.errors import StoreError

logger = logging.getLogger("langchain_rolling_memory")

_S = TypeVar("_S", bound="Lifecycle")


class Lifecycle:
    """Mixed into `RollingStore`: the lifecycle API around a backend's `_setup` and `close`.

    A store is usable from its constructor on (which runs `setup()` unless given
    ``setup=False``) until `close()`; after that every call raises `StoreError`. ``with
    store:`` closes it on exit, ``async with store:`` awaits `aclose()`.
    """

    _closed: bool = False

    @property
    def closed(self) -> bool:
        """True once `close()` or `aclose()` was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            msg = f"this {type(self).__name__} is closed; open a new store (closing is final)"
            raise StoreError(msg)

    def setup(self) -> None:
        """Create or migrate the store's tables or keys; safe to call again (idempotent).

        The constructor calls it unless given ``setup=False``, for a process whose database
        role may not create tables: run ``setup()`` once from a deployment step instead.
        """
        self._check_open()
        self._setup()

    def _setup_or_close(self) -> None:
        """`setup` from a constructor: if it fails, what the constructor opened is closed
        before the error goes on, so a store that cannot be set up leaves nothing open."""
        try:
            self.setup()
        except BaseException:
            self.close()
            raise

    async def asetup(self) -> None:
        """`setup` from async code (native on PostgreSQL, a worker thread elsewhere)."""
        self._check_open()
        await self._asetup()

    def _setup(self) -> None:
        """Create or migrate the schema; backends with one override it."""

    async def _asetup(self) -> None:
        await asyncio.to_thread(self._setup)

    def close(self) -> None:
        """Release the store's connections (never those handed in by the caller); final."""
        self._closed = True

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self: _S) -> _S:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self: _S) -> _S:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def not_set_up(where: str, cause: object) -> StoreError:
    """The error of a store opened with ``setup=False`` whose tables or keys do not exist."""
    msg = (
        f"{where} do not exist ({cause}); this store was opened with setup=False: run "
        "store.setup() (or await store.asetup()) once with a role that may create them"
    )
    return StoreError(msg)


_OPEN: weakref.WeakSet[Lifecycle] = weakref.WeakSet()
_GUARD = threading.Lock()


def close_at_exit(store: Lifecycle) -> None:
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
