"""Where background work runs: daemon worker threads drained at exit, and calls with a timeout.

Owns the threads (a small pool of daemon workers, a daemon thread per timed call) and the
promise made at interpreter exit: pending work gets a bounded grace period to finish, so a
compaction scheduled just before exit lands, and a hung one cannot keep the process alive.
It knows nothing of compaction itself (that is `engine`).

Why not `concurrent.futures.ThreadPoolExecutor`: its workers are joined without a time limit
at exit (a hung summarizer would hang the process), and work submitted to it from one of its
own workers can wait forever behind the very tasks that submitted it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Workers", "call_with_timeout", "workers"]

logger = logging.getLogger("langchain_rolling_memory")

_T = TypeVar("_T")


class Workers:
    """A few daemon threads that run submitted callables in order of submission.

    Args:
        size: most threads running at once (started on demand, kept while the process lives).
        name: thread name prefix.
    """

    def __init__(self, size: int = 4, name: str = "rolling-memory") -> None:
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._unfinished = 0  # submitted and not finished: threads needed, up to `size`
        # future -> seconds the process may wait for it at exit
        self._pending: dict[concurrent.futures.Future[Any], float] = {}

    def submit(self, fn: Callable[[], _T], *, exit_timeout: float = 30.0) -> concurrent.futures.Future[_T]:
        """Run `fn` on a worker; the process waits up to `exit_timeout` seconds for it at exit."""
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            self._pending[future] = exit_timeout
            self._unfinished += 1
            if self._unfinished > len(self._threads) and len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        future.add_done_callback(self._forget)
        self._queue.put((future, fn))
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.pop(future, None)

    def _run(self) -> None:
        while True:
            future, fn = self._queue.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn
            with self._lock:
                self._unfinished -= 1

    @property
    def pending(self) -> int:
        """Submitted callables that have not finished yet."""
        with self._lock:
            return len(self._pending)

    def drain(self) -> list[concurrent.futures.Future[Any]]:
        """Wait for pending work, each item at most its `exit_timeout`; return what is unfinished."""
        start = time.monotonic()
        while True:
            with self._lock:
                pending = dict(self._pending)
            if not pending:
                return []
            deadline = start + max(pending.values())
            left = deadline - time.monotonic()
            if left <= 0:
                return [f for f in pending if not f.done()]
            # Work finishing may schedule more (a cancelled task handed to a thread): loop.
            concurrent.futures.wait(list(pending), timeout=min(left, 0.5))


workers = Workers()
"""The process-wide workers that run background compactions."""


@atexit.register
def _drain_at_exit() -> None:
    unfinished = workers.drain()
    if unfinished:
        logger.warning(
            "rolling memory: %d background compaction(s) did not finish before exit; nothing "
            "is lost (the messages are in the transcript) and the next turn compacts them",
            len(unfinished),
        )


def call_with_timeout(fn: Callable[[], _T], timeout: float | None) -> _T:
    """Run `fn` in a daemon thread (with the caller's context) and wait at most `timeout` seconds.

    On timeout `TimeoutError` is raised and the thread is abandoned: being a daemon, it can
    neither block the caller nor the interpreter's exit.
    """
    if timeout is None:
        return fn()
    context = contextvars.copy_context()
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = context.run(fn)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="rolling-memory-call", daemon=True).start()
    if not done.wait(timeout):
        msg = f"the summarizer took longer than timeout={timeout}s"
        raise TimeoutError(msg)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
