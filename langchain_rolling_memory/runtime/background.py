"""Where background work runs: worker threads drained at exit, per-session jobs, calls in a thread.

Owns the threads (a small pool of daemon workers, a daemon thread per call run aside), which
run work in the context of the code that handed it over (so a summary made in the background
is traced as a child of the chain that scheduled it), and the promise made at interpreter exit:
pending work gets a bounded grace period to finish, so a compaction scheduled just before exit
lands, and a hung one cannot keep the process alive. Owns too the per-store bookkeeping of
which session has a job in flight (a worker's, or an event-loop task's) and of its failures.
It takes callables and knows nothing of compaction itself (that is `engine.compaction`, which imports
this module, never the reverse).

Why not `concurrent.futures.ThreadPoolExecutor`: its workers are joined without a time limit
at exit (a hung summarizer would hang the process), and work submitted to it from one of its
own workers can wait forever behind the very tasks that submitted it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import functools
import logging
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
        """Run `fn` on a worker, in a copy of the caller's context; the process waits up to
        `exit_timeout` seconds for it at exit.

        The context carries the caller's run config (callbacks, tags): a model call made by `fn`
        is traced as a child of the chain or agent run that submitted it, not as an orphan root.
        """
        call = functools.partial(contextvars.copy_context().run, fn)
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
        self._queue.put((future, call))
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


# ---------------------------------------------------------------- one call in its own thread


def _in_thread(fn: Callable[[], _T], timeout: float | None, *, name: str) -> _T:
    """Run `fn` in a daemon thread with the caller's context; wait at most `timeout` seconds.

    Its result or exception comes back to the caller's thread. On timeout `TimeoutError` is
    raised and the thread is abandoned: being a daemon, it can neither block the caller nor
    the interpreter's exit.
    """
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

    threading.Thread(target=target, name=name, daemon=True).start()
    if not done.wait(timeout):
        msg = f"the summarizer took longer than timeout={timeout}s"
        raise TimeoutError(msg)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def call_with_timeout(fn: Callable[[], _T], timeout: float | None) -> _T:
    """Run `fn` and wait at most `timeout` seconds (None: in this thread, no limit).

    With a timeout, `fn` runs in a daemon thread that is abandoned if it hangs (see `_in_thread`).
    """
    if timeout is None:
        return fn()
    return _in_thread(fn, timeout, name="rolling-memory-call")


def run_coroutine_sync(factory: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine from sync code without touching a running event loop.

    With no loop in this thread, `asyncio.run` is used. Inside a running loop (sync code
    called from async code), the coroutine runs on a fresh loop in a helper thread: never
    a nested or re-entered loop, so it cannot deadlock the caller's loop.
    """

    async def main() -> _T:
        return await factory()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    return _in_thread(lambda: asyncio.run(main()), None, name="lrm-async-summarizer")


# ---------------------------------------------------------------- per-session jobs of one store


@dataclass
class _Failures:
    """Failed attempts of one session in a row, when the next may start (monotonic), and the
    failures already logged (each is said once per session, until a compaction succeeds)."""

    count: int = 0
    retry_at: float = 0.0
    said: set[str] = field(default_factory=set)


class SessionJobs:
    """Per-store, in-process bookkeeping shared by every compactor of the same store.

    At most one job per session is in flight: `pending` holds its future (a worker's, or the
    mirror of an event-loop task's); the tasks are held strongly too, since the event loop
    keeps only weak references to them. Failures in a row are counted per session, for an
    exponential back-off shared by every compactor of the store.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._failures: dict[str, _Failures] = {}
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def in_backoff(self, session_id: str, now: float) -> bool:
        """True if the session failed and its next attempt is not due before `now`."""
        with self.lock:
            failures = self._failures.get(session_id)
            return failures is not None and now < failures.retry_at

    def failed(self, session_id: str, now: float, *, first: float, longest: float) -> float:
        """Count a failure; return the wait before the next attempt (`first`, doubled at each
        failure in a row, at most `longest`)."""
        with self.lock:
            failures = self._failures.setdefault(session_id, _Failures())
            failures.count += 1
            delay = min(longest, first * 2.0 ** (failures.count - 1))
            failures.retry_at = now + delay
        return delay

    def first_report(self, session_id: str, line: str) -> bool:
        """True the first time `line` is reported for the session since its last success."""
        with self.lock:
            said = self._failures.setdefault(session_id, _Failures()).said
            if line in said:
                return False
            said.add(line)
            return True

    def succeeded(self, session_id: str) -> None:
        """Forget the session's failures."""
        with self.lock:
            self._failures.pop(session_id, None)

    def _free(self, session_id: str) -> bool:
        """True if no job of the session is in flight (caller holds the lock)."""
        current = self._pending.get(session_id)
        return current is None or current.done()

    def _settle(self, session_id: str, future: concurrent.futures.Future[Any]) -> None:
        with self.lock:
            if self._pending.get(session_id) is future:
                del self._pending[session_id]

    def submit(self, session_id: str, fn: Callable[[], Any], *, exit_timeout: float) -> bool:
        """Run `fn` on a worker thread unless a job of the session is in flight; False if one was."""
        with self.lock:
            if not self._free(session_id):
                return False
            future = workers.submit(fn, exit_timeout=exit_timeout)
            self._pending[session_id] = future
        future.add_done_callback(lambda f: self._settle(session_id, f))
        return True

    def start_task(
        self,
        session_id: str,
        job: Callable[[], Coroutine[Any, Any, Any]],
        *,
        fallback: Callable[[], Any],
        exit_timeout: float,
        name: str,
    ) -> bool:
        """Run `job()` as a task of the running loop unless a job of the session is in flight;
        False if one was.

        If the task is cancelled (``asyncio.run`` cancels leftover tasks when its loop shuts
        down), `fallback` runs on a worker thread instead, so the work still lands.
        """
        loop = asyncio.get_running_loop()
        with self.lock:
            if not self._free(session_id):
                return False
            mirror: concurrent.futures.Future[Any] = concurrent.futures.Future()
            mirror.set_running_or_notify_cancel()
            # The task runs in a copy of this context (asyncio's default), so its model calls are
            # children of the caller's run; the fallback, submitted from the task's done callback,
            # runs in the context that callback was added in: this one too.
            task = loop.create_task(job(), name=name)
            self._pending[session_id] = mirror
            self._tasks[session_id] = task
        mirror.add_done_callback(lambda f: self._settle(session_id, f))
        task.add_done_callback(lambda t: self._task_done(session_id, mirror, t, fallback, exit_timeout))
        return True

    def _task_done(
        self,
        session_id: str,
        mirror: concurrent.futures.Future[Any],
        task: asyncio.Task[Any],
        fallback: Callable[[], Any],
        exit_timeout: float,
    ) -> None:
        with self.lock:
            if self._tasks.get(session_id) is task:
                del self._tasks[session_id]
        if task.cancelled():
            # The loop is closing (or someone cancelled us): finish on a worker thread.
            handoff = workers.submit(fallback, exit_timeout=exit_timeout)
            handoff.add_done_callback(lambda f: _copy_outcome(f, mirror))
            return
        exc = task.exception()
        if exc is not None:
            mirror.set_exception(exc)
        else:
            mirror.set_result(task.result())

    def in_flight(self) -> list[tuple[concurrent.futures.Future[Any], asyncio.Task[Any] | None]]:
        """Every job in flight now, with its task when it is one (what `shutdown.drain` waits for)."""
        with self.lock:
            return [(f, self._tasks.get(s)) for s, f in self._pending.items() if not f.done()]

    def pending(self, session_id: str) -> concurrent.futures.Future[Any] | None:
        """The session's job in flight in this process, if any."""
        with self.lock:
            future = self._pending.get(session_id)
        return None if future is None or future.done() else future

    def flush(self, session_id: str, timeout: float | None = None) -> bool:
        """Wait for the session's job (thread or task) to finish; False if it was still
        running after `timeout` seconds.

        Raises RuntimeError when called on the thread of the event loop that runs the job's
        task (waiting there would block the very loop it needs: use `aflush`).
        """
        with self.lock:
            future = self._pending.get(session_id)
            task = self._tasks.get(session_id)
        if future is None:
            return True
        if task is not None and not task.done() and _on_loop_thread(task.get_loop()):
            msg = "a compaction task is pending on this thread's event loop: use `await aflush()`"
            raise RuntimeError(msg)
        done, _ = concurrent.futures.wait([future], timeout=timeout)
        return bool(done)

    async def aflush(self, session_id: str, timeout: float | None = None) -> bool:
        """Async twin of `flush`: awaits without blocking the event loop."""
        with self.lock:
            future = self._pending.get(session_id)
        if future is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        except asyncio.TimeoutError:
            return False
        except Exception:  # the job's own failure was logged where it happened
            return True
        return True


def _copy_outcome(source: concurrent.futures.Future[Any], target: concurrent.futures.Future[Any]) -> None:
    exc = source.exception()
    if exc is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_JOBS: weakref.WeakKeyDictionary[Any, SessionJobs] = weakref.WeakKeyDictionary()
_JOBS_LOCK = threading.Lock()


def jobs_of(owner: object) -> SessionJobs:
    """The bookkeeping of `owner` (a store), shared by everything that uses the same store."""
    # A history is built at every call of a chain: keep this lookup off the lock when we can.
    jobs = getattr(owner, "_lrm_jobs", None)
    if isinstance(jobs, SessionJobs):
        return jobs
    with _JOBS_LOCK:
        jobs = _JOBS.get(owner)
        if jobs is None:
            jobs = _JOBS[owner] = SessionJobs()
        with contextlib.suppress(AttributeError):  # __slots__: the weak dictionary still works
            owner._lrm_jobs = jobs  # type: ignore[attr-defined]
        return jobs
