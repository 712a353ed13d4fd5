"""One async resource per event loop, opened at the loop's first call, closed when it ends.

Owns a store's table of its async pools (or clients) by event loop. An async connection
belongs to the loop that made it, so a store used from several loops (``asyncio.run`` called
again and again, a thread per loop) holds one resource per loop; the resource of a loop that
ends must go with it. Before, the store kept one slot: every new loop replaced it, and a
PostgreSQL pool whose close was cut short by the loop's end stayed connected (20 loops, 20
backends held). Does not know the drivers: each backend gives how to open, close and drop.

How a resource ends:
- its loop ends through ``asyncio.run`` (or any runner that cancels the pending tasks): the
  `close_with_loop` guard runs `close` then, and the loop opens no other (a task's cleanup
  that runs after it raises `StoreError`);
- its loop was closed by hand (no task cancelled): the next loop that uses the store, or the
  store's `close`, finds the loop closed and calls `drop`, which must not need the loop;
- the store closes: each loop's guard is cancelled on its own loop (at once if that loop is
  idle, else when it next runs), a closed loop's resource is dropped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import langchain_rolling_memory.stores.forks as forks
from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores.lifecycle import close_now, close_with_loop

R = TypeVar("R")

_ENDED = (
    "this event loop is ending (its tasks were cancelled) and the store's connections on it are "
    "closed; make the call from a running loop (finish the work before the loop ends)"
)


@dataclass
class _Entry(Generic[R]):
    resource: R
    guard: asyncio.Task[None] | None = None
    ended: bool = False


class PerLoop(Generic[R]):
    """The async resources of one store, one per event loop.

    Args:
        open: opens a resource on the running loop.
        close: closes one on its own loop (run by the loop's guard).
        drop: closes one without a loop (its loop is closed); best effort, never raises.
    """

    def __init__(
        self,
        open: Callable[[], Awaitable[R]],
        close: Callable[[R], Awaitable[None]],
        drop: Callable[[R], None],
    ) -> None:
        self._open, self._close, self._drop = open, close, drop
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[R]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self) -> R:
        """The running loop's resource, opened now if it has none."""
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None:
            if entry.ended:
                raise self.ended_error()
            return entry.resource
        self.drop_dead()
        resource = await self._open()
        with self._lock:
            entry = self._entries.get(loop)
            if entry is None:  # this task's resource is the loop's
                mine = self._entries[loop] = _Entry(resource)
        if entry is not None:  # another task of this loop opened one meanwhile
            await self._close(resource)
            return entry.resource
        mine.guard = close_with_loop(lambda: self._end(loop, mine))
        return resource

    def ended(self) -> bool:
        """True if the running loop's resource was closed by its end (see `get`)."""
        entry = self._entries.get(asyncio.get_running_loop())
        return entry is not None and entry.ended

    def ended_error(self) -> StoreError:
        return StoreError(_ENDED)

    async def _end(self, loop: asyncio.AbstractEventLoop, entry: _Entry[R]) -> None:
        # The entry stays, marked, until the loop is closed: a task that runs its cleanup
        # after the guard (the loop's end cancels them all at once) must not open a new
        # resource there, which nothing would close.
        entry.ended = True
        await self._close(entry.resource)

    def drop_dead(self) -> None:
        """Drop the resources of the loops closed without ending them."""
        with self._lock:
            dead = [self._entries.pop(loop) for loop in list(self._entries) if loop.is_closed()]
        for entry in dead:
            if not entry.ended:
                self._drop(entry.resource)

    def close(self) -> None:
        """Close every loop's resource, from sync code (see the module docstring)."""
        with self._lock:
            entries, self._entries = list(self._entries.items()), {}
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, entry in entries:
            guard = entry.guard
            if entry.ended:
                continue
            if loop.is_closed() or guard is None:
                self._drop(entry.resource)
            elif loop.is_running():  # this thread's (a sync close from async code) or another's
                try:
                    loop.call_soon_threadsafe(guard.cancel)
                except RuntimeError:  # closed meanwhile
                    self._drop(entry.resource)
            elif running is None:
                loop.run_until_complete(close_now(guard))
            else:  # an idle loop cannot run while another runs in this thread
                self._drop(entry.resource)

    async def aclose(self) -> None:
        """Close the running loop's resource on it, then the others as `close` does."""
        with self._lock:
            entry = self._entries.pop(asyncio.get_running_loop(), None)
        if entry is not None and not entry.ended:
            if entry.guard is not None:
                await close_now(entry.guard)
            else:
                await self._close(entry.resource)
        self.close()

    def abandon(self) -> None:
        """In a forked child: forget the parent's resources without closing them (`forks`)."""
        self._lock = threading.Lock()  # a parent thread may have held it at the fork
        entries, self._entries = list(self._entries.values()), {}
        forks.abandon(*(e.resource for e in entries), *(e.guard for e in entries))
