"""A client-side deadline for calls on a server connection: one thread that severs a socket
the server never answers.

A server-side `statement_timeout` is enforced by the server's own process: a paused or frozen
server (SIGSTOP, a hung VM) enforces nothing, and its kernel still acknowledges our packets,
so keepalives and TCP timeouts never fire and a turn would wait as long as the server is
paused. `Deadlines` is the backstop: past the deadline it shuts the connection's socket down,
so the driver's blocked read returns an error at once. Driver-free: it needs only a socket
file descriptor; what the caller raises is the caller's.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator


def sever(fileno: int) -> None:
    """Shut down the socket behind `fileno` (both ways) without closing the caller's descriptor:
    the blocked reader wakes up with an end of file, and its driver marks the connection broken."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fileno)) as dup:
        dup.shutdown(socket.SHUT_RDWR)


class Watch:
    """One armed deadline; `fired` tells, after the call, whether it was severed."""

    __slots__ = ("fired", "key")

    def __init__(self, key: int) -> None:
        self.key = key
        self.fired = False


class Deadlines:
    """A daemon thread that runs each armed action at its deadline unless it was disarmed first.

    Arming and disarming cost a heap push and a set update under a lock: cheap enough for every
    statement of a turn.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Watch, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    @contextlib.contextmanager
    def watch(self, seconds: float, action: Callable[[], None]) -> Iterator[Watch]:
        """Run `action` if the block is still running after `seconds`."""
        watch = self._arm(seconds, action)
        try:
            yield watch
        finally:
            with self._cond:
                self._live.discard(watch.key)

    def _arm(self, seconds: float, action: Callable[[], None]) -> Watch:
        with self._cond:
            if self._thread is None or self._pid != os.getpid():  # none yet, or a forked child
                self._pid = os.getpid()
                self._heap, self._live = [], set()
                self._thread = threading.Thread(
                    target=self._loop, name="rolling-memory-deadlines", daemon=True
                )
                self._thread.start()
            watch = Watch(next(self._keys))
            self._live.add(watch.key)
            due = self._clock() + seconds
            # The thread sleeps until the earliest deadline in the heap (or, empty, until told):
            # only a new earliest one needs to wake it. Statements arm the same timeout, so
            # that is the first one after an idle spell, not one wake-up (and a GIL hand-off)
            # per statement.
            wake = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, watch.key, watch, action))
            if wake:
                self._cond.notify()
            return watch

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # disarmed: drop it
                if not self._heap:
                    self._cond.wait()
                    continue
                due, key, watch, action = self._heap[0]
                left = due - self._clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(key)
                watch.fired = True
            with contextlib.suppress(Exception):
                action()
