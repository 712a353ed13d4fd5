"""Shutting down: wait for a store's background compactions, then close; a closed store is left alone.

Owns the bounded wait for the jobs in flight of one store (`drain`, `adrain`: the
compactions handed to worker threads or event-loop tasks, and the fact extractions they run
once their summary is installed) and its report, `Drained`; and the one line said when a
store closed under pending jobs makes them drop their work. The public entry points are
`Compactor.drain` and the adapters' (the runnable of `with_rolling_memory`,
`RollingMemoryMiddleware`); all reach the same per-store jobs (`background.SessionJobs`).
Does not close the store (the application does, after the drain) and runs no job itself.

The pattern, in a web app's lifespan: stop taking requests, ``await memory.adrain(timeout=...)``,
then ``await store.aclose()``. A store closed first is not an error for the jobs: each checks
the store before it starts and after its summarizer answers, writes nothing, and the whole
store says so once (nothing is lost: the messages are in the transcript, a later turn
compacts them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.runtime.background import SessionJobs

logger = logging.getLogger("langchain_rolling_memory")


@dataclass(frozen=True)
class Drained:
    """What a drain waited for.

    Attributes:
        finished: jobs in flight during the drain that finished (installed, found nothing to
            do, failed and were logged, or were dropped because the store was closed).
        pending: jobs still running when the timeout came (they go on; nothing is lost if
            they are cut short: their messages are in the transcript).
    """

    finished: int
    pending: int


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or math.isnan(timeout)
        or timeout < 0
    ):
        msg = f"timeout must be a number of seconds >= 0 or None (no limit), got {timeout!r}"
        raise ConfigurationError(msg)
    return time.monotonic() + timeout


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class _Watch:
    """The jobs a drain has seen in flight, and the time it has left."""

    def __init__(self, jobs: SessionJobs, deadline: float | None) -> None:
        self.jobs = jobs
        self.deadline = deadline
        self.seen: dict[concurrent.futures.Future[Any], None] = {}
        self.left: float | None = None

    def running(self) -> list[tuple[concurrent.futures.Future[Any], asyncio.Task[Any] | None]] | None:
        """The jobs in flight now (all are remembered); None once none is, or time is up."""
        running = self.jobs.in_flight()
        self.seen.update(dict.fromkeys(future for future, _ in running))
        self.left = _left(self.deadline)
        return running if running and self.left != 0 else None


def _report(seen: Iterable[concurrent.futures.Future[Any]]) -> Drained:
    done = [f.done() for f in seen]
    return Drained(finished=sum(done), pending=len(done) - sum(done))


def _on_loop_thread(task: asyncio.Task[Any] | None) -> bool:
    if task is None or task.done():
        return False
    try:
        return asyncio.get_running_loop() is task.get_loop()
    except RuntimeError:
        return False


def drain(jobs: SessionJobs, timeout: float | None = None) -> Drained:
    """Wait until no job of `jobs` is in flight, or `timeout` seconds (None: no limit).

    Jobs started while it waits are waited for too. Raises RuntimeError on the thread of an
    event loop that runs one of the jobs (waiting there would block the loop the job needs:
    use `adrain`), and `ConfigurationError` for a negative timeout.
    """
    watch = _Watch(jobs, _deadline(timeout))
    while (running := watch.running()) is not None:
        if any(_on_loop_thread(task) for _, task in running):
            msg = "compaction tasks are pending on this thread's event loop: use `await adrain()`"
            raise RuntimeError(msg)
        concurrent.futures.wait([future for future, _ in running], timeout=watch.left)
    return _report(watch.seen)


async def adrain(jobs: SessionJobs, timeout: float | None = None) -> Drained:
    """Async twin of `drain`: awaits without blocking the event loop, whichever loop or
    thread runs the jobs."""
    watch = _Watch(jobs, _deadline(timeout))
    while (running := watch.running()) is not None:
        # asyncio.wait neither cancels what it waits for nor raises its failures (logged
        # where they happened).
        await asyncio.wait([asyncio.wrap_future(future) for future, _ in running], timeout=watch.left)
    return _report(watch.seen)


# ---------------------------------------------------------------- a store closed under its jobs


class _Closable(Protocol):
    @property
    def closed(self) -> bool: ...


def closed(store: _Closable, jobs: SessionJobs, session_id: str, what: str = "a compaction") -> bool:
    """True if `store` is closed: the job then drops its work (said once per store)."""
    if not store.closed:
        return False
    dropped_by_close(jobs, session_id, what)
    return True


def listener_failed(store: _Closable, jobs: SessionJobs, session_id: str) -> None:
    """Log the on_compaction callback's failure (called where it was caught): quiet if the
    store was closed under it."""
    if not closed(store, jobs, session_id, "the on_compaction callback (fact extraction)"):
        logger.exception("rolling memory: the on_compaction callback raised (the summary is kept)")


def lease_not_released(store: _Closable, jobs: SessionJobs, session_id: str) -> None:
    """Log a failed lease release (called where it was caught). Quiet when the store was
    closed or the compaction task is being cancelled (its loop ends): the lease then expires
    after its ttl, or the same compactor takes it again (a cancelled task's compaction is
    finished on a worker thread)."""
    if closed(store, jobs, session_id):
        return
    if _being_cancelled():
        logger.debug("rolling memory: the lease of %r is left to expire (task cancelled)", session_id)
    else:
        logger.exception("rolling memory: could not release the lease of %r", session_id)


def _being_cancelled() -> bool:
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: a worker thread
        return False
    return task is not None and task.cancelling() > 0


_SAID: weakref.WeakSet[SessionJobs] = weakref.WeakSet()


def dropped_by_close(jobs: SessionJobs, session_id: str, what: str) -> None:
    """Say, once per store, that its background work was dropped because it was closed;
    each drop goes to the debug log."""
    with jobs.lock:
        first = jobs not in _SAID
        _SAID.add(jobs)
    if first:
        logger.warning(
            "rolling memory: the store was closed while background compactions were pending: "
            "they are dropped and write nothing (nothing is lost: the messages are in the "
            "transcript, a later turn compacts them); to let them finish, drain before closing "
            "(drain(timeout=...) or await adrain(timeout=...))"
        )
    logger.debug("rolling memory: %s of session %r dropped: the store is closed", what, session_id)
