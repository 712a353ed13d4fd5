"""When and how to compact: load, plan, summarize, install with compare-and-swap, back off.

Owns the compaction procedure and its failure handling (timeouts, retries with back-off,
leases so one process summarizes a window) and the one step an adapter takes after an
append (`Compactor.advance`). It does the I/O and the failure handling only: what to fold and what a turn
shows are decided by the pure `planner`, where to cut by `cuts`; it holds no framing
(`framing`), no storage (`stores`) and no threads or tasks (`background`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import itertools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import date, datetime, timezone
from typing import Any, Unpack

from langchain_core.messages import BaseMessage

import langchain_rolling_memory.engine.shutdown as shutdown
from langchain_rolling_memory.core.cuts import FoldPolicy, TokenCounter, count_tokens
from langchain_rolling_memory.core.planner import Planner
from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS
from langchain_rolling_memory.core.records import (
    CompactionResult,
    MemoryRead,
    SessionState,
    StoredMessage,
    SummaryRecord,
)
from langchain_rolling_memory.core.settings import (
    DEFAULT_BACKOFF,
    DEFAULT_EXIT_TIMEOUT,
    DEFAULT_LANGUAGE,
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_SUMMARY_CHARS,
    DEFAULT_MAX_TOPIC_SECTIONS,
    DEFAULT_START_DELAY,
    DEFAULT_TIMEOUT,
    CompactionCallback,
    CompactionListener,
    CompactionOptions,
    ErrorCallback,
    MemorySettings,
)
from langchain_rolling_memory.core.texts import check_language
from langchain_rolling_memory.core.topics import TopicDetector, TopicLabels
from langchain_rolling_memory.core.topics import topic_labels as labels_for
from langchain_rolling_memory.engine.shutdown import Drained
from langchain_rolling_memory.runtime.background import call_with_timeout, jobs_of, run_coroutine_sync
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.contract import OPERATOR, ReadAs
from langchain_rolling_memory.summarizers.base import Summarizer, SummarizerLike, in_memory
from langchain_rolling_memory.summarizers.coerce import as_summarizer, context_window
from langchain_rolling_memory.summarizers.failures import describe_error, is_permanent_error

logger = logging.getLogger("langchain_rolling_memory")

_PROCESS = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
_OWNERS = itertools.count()


class Unread:
    """The type of `UNREAD`."""


UNREAD = Unread()
"""`Compactor.advance`'s `summary` when the caller did not read it with its append."""


def _owner() -> str:
    """A lease owner id unique to one compactor: host and a random token (two replicas may
    share a hostname and a pid), the pid (a forked child inherits the token), a counter."""
    return f"{_PROCESS}:{os.getpid()}:{next(_OWNERS)}"


def utc_today() -> date:
    """Today's date in UTC: the same for every replica, whatever its time zone."""
    return datetime.now(timezone.utc).date()


def _install_args(done: CompactionResult, owner: str) -> dict[str, Any]:
    """`install_summary`'s keywords for `done`: a compare-and-swap on the version below it
    that holds only while `owner` still holds the session's lease. Every erase (forget,
    clear_session, purge) deletes the lease, so a compaction started before an erase never
    installs after it, whatever the new conversation holds at the same seqs."""
    return {
        "covered_seq": done.covered_seq,
        "expected_version": done.version - 1,
        "meta": dict(done.meta),
        "lease_owner": owner,
        "generation": done.generation,
    }


class Compactor:
    """Runs compactions of one store with one summarizer and one policy.

    Usually made by `build` from a `MemorySettings` (where every setting is documented once);
    this constructor takes the policy and the summarizer ready-made.

    Args:
        store: where transcripts and summaries live.
        summarizer: a `Summarizer` (see `as_summarizer`).
        policy: when to fold and how much to keep.
        token_counter: counts messages whose token count was not stored with them.
        max_words: word cap applied to every summary before it is stored.
        timeout: seconds a summarizer call may take before it counts as failed.
        lease_ttl: seconds a compaction lease lasts (a crashed compactor blocks no longer).
        backoff: seconds before the first retry after a failure; doubles at each failure.
        max_backoff: longest wait between retries.
        on_error: optional ``(session_id, exception)`` callback for failed compactions.
        on_compaction: optional callback (sync or async function, or a `CompactionListener`)
            told about each installed summary, e.g. a fact extractor; its failures are
            logged and never undo the compaction.
        topic_detector: optional ``(message) -> bool`` (see `keyword_topic_shift`): when a
            user message starts a new topic, the finished topic is folded at once and kept
            as its own section of the summary; later compactions rewrite only the current
            topic's section.
        topic_labels: section labels (default: those of `language`, ``Topic 1: ...``,
            ``Current topic: ...``).
        max_topic_sections: finished sections kept; beyond, the two oldest are joined.
        max_summary_chars: character cap applied to every summary with `max_words`.
        max_summary_tokens: token cap applied to every summary after `max_words`, counted
            with `token_counter` (None: no token cap); also stated in the prompt of a
            summarizer built without a token cap of its own (`base.in_memory`).
        language: the memory's language (``"en"``, ``"fr"``; anything else is refused): the
            frame the summary is sent under, the default section labels, and the summarizer's
            texts when it was built without a language of its own (`in_memory_language`).
        today: wall-clock date of a finished topic section (default `utc_today`; None:
            undated sections). Not the back-off `clock`.
        clock: monotonic clock for back-off (injected for tests).
        exit_timeout: seconds the interpreter waits at exit for a background compaction of
            this compactor that is still running (it is not lost if cut short: its
            messages are in the transcript and the next turn compacts them).
        start_delay: seconds a background compaction waits before it starts, so that its
            store I/O and Python work do not compete (CPython runs one thread at a time) with
            the end of the turn that scheduled it: the summary is for the next turn.
    """

    def __init__(
        self,
        store: RollingStore,
        summarizer: Summarizer,
        policy: FoldPolicy,
        *,
        token_counter: TokenCounter = count_tokens,
        max_words: int = DEFAULT_MAX_WORDS,
        timeout: float | None = DEFAULT_TIMEOUT,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        backoff: float = DEFAULT_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        on_error: ErrorCallback | None = None,
        on_compaction: CompactionListener | CompactionCallback | None = None,
        topic_detector: TopicDetector | None = None,
        topic_labels: TopicLabels | None = None,
        max_topic_sections: int = DEFAULT_MAX_TOPIC_SECTIONS,
        max_summary_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
        max_summary_tokens: int | None = None,
        language: str = DEFAULT_LANGUAGE,
        today: Callable[[], date] | None = utc_today,
        clock: Callable[[], float] = time.monotonic,
        exit_timeout: float = DEFAULT_EXIT_TIMEOUT,
        start_delay: float = DEFAULT_START_DELAY,
        summary_ack: bool = False,
    ) -> None:
        self.store = store
        self.language = check_language(language)
        self.summarizer = in_memory(summarizer, language, max_summary_tokens)
        self.planner = Planner(
            policy,
            token_counter=token_counter,
            max_words=max_words,
            topic_detector=topic_detector,
            topic_labels=topic_labels or labels_for(language),
            max_topic_sections=max_topic_sections,
            max_summary_chars=max_summary_chars,
            max_summary_tokens=max_summary_tokens,
            language=language,
            today=today,
            summary_ack=summary_ack,
        )
        self.timeout = timeout
        self.lease_ttl = lease_ttl
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.on_error = on_error
        self.on_compaction = on_compaction
        self.clock = clock
        self.exit_timeout = exit_timeout
        self.start_delay = start_delay
        self.owner = _owner()
        self._jobs = jobs_of(store)

    @classmethod
    def build(
        cls,
        store: RollingStore,
        summarizer: SummarizerLike,
        *,
        settings: MemorySettings | None = None,
        **options: Unpack[CompactionOptions],
    ) -> Compactor:
        """A compactor from `MemorySettings` (`settings`, with `options` replaced): what the
        histories and the agent middleware build.

        `summarizer` is anything `as_summarizer` accepts, built with the settings' `language`,
        `max_words` and `structured`; a ``("fraction", f)`` `trigger` / `keep` is read from its model's
        context window. The settings that are not a compaction's (`background`,
        `recall_tokens`, `max_fact_tokens`) are left to the adapter.

        Example:
            >>> from langchain_rolling_memory import open_store
            >>> compactor = Compactor.build(open_store("memory://"), lambda p, m: "s", max_turns=4, keep_last=2)
            >>> compactor.policy.max_turns, compactor.language
            (4, 'en')
        """
        chosen = MemorySettings.resolve(settings, options, owner="Compactor.build", accepts=CompactionOptions)
        model = as_summarizer(
            summarizer, language=chosen.language, max_words=chosen.max_words, structured=chosen.structured
        )
        policy = chosen.fold_policy(lambda: context_window(model))
        return cls(
            store,
            model,
            policy,
            token_counter=chosen.token_counter,
            max_words=chosen.max_words,
            timeout=chosen.timeout,
            lease_ttl=chosen.lease_ttl,
            backoff=chosen.backoff,
            max_backoff=chosen.max_backoff,
            on_error=chosen.on_error,
            on_compaction=chosen.on_compaction,
            topic_detector=chosen.topic_detector,
            topic_labels=chosen.topic_labels,
            max_topic_sections=chosen.max_topic_sections,
            max_summary_chars=chosen.max_summary_chars,
            max_summary_tokens=chosen.max_summary_tokens,
            language=chosen.language,
            today=utc_today if chosen.today == "utc" else chosen.today,
            clock=chosen.clock or time.monotonic,
            exit_timeout=chosen.exit_timeout,
            start_delay=chosen.start_delay,
            summary_ack=chosen.summary_ack,
        )

    @property
    def policy(self) -> FoldPolicy:
        return self.planner.policy

    # ------------------------------------------------------------------ reading

    def load(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SessionState:
        """The session's state: summary and tail in one read. An adapter passes its run's
        `client_id` (None included): the store then refuses another client's session in that
        same read (see `RollingStore.read`)."""
        limit = self.planner.read_limit
        turn = self.store.read_turn(session_id, limit=limit, client_id=client_id)
        return self._find_question(session_id, self.planner.state(*turn), client_id)

    async def aload(self, session_id: str, *, client_id: ReadAs = OPERATOR) -> SessionState:
        limit = self.planner.read_limit
        turn = await self.store.aread_turn(session_id, limit=limit, client_id=client_id)
        return await self._afind_question(session_id, self.planner.state(*turn), client_id)

    def load_memory(self, session_id: str, *, client_id: str | None) -> tuple[SessionState, MemoryRead]:
        """`load`, with the session's state and the client's facts read by the same call
        (`RollingStore.read_memory`: one round trip on PostgreSQL and Redis): what a turn
        shows besides the view, read once."""
        read = self.store.read_memory(session_id, limit=self.planner.read_limit, client_id=client_id)
        return self._find_question(session_id, self.planner.state(*read.turn), client_id), read

    async def aload_memory(
        self, session_id: str, *, client_id: str | None
    ) -> tuple[SessionState, MemoryRead]:
        read = await self.store.aread_memory(session_id, limit=self.planner.read_limit, client_id=client_id)
        return await self._afind_question(session_id, self.planner.state(*read.turn), client_id), read

    # Behind a backlog whose read tail holds no user message (a long tool loop while
    # compaction fails), the question is in the unread part: read it, newest page first,
    # so that the view still sends it. Only that degraded state pays these reads.

    def _find_question(self, session_id: str, state: SessionState, client_id: ReadAs) -> SessionState:
        if not self.planner.lacks_question(state):
            return state
        found: StoredMessage | None = None
        for page in self.planner.question_pages(state):
            rows = self.store.read(session_id, client_id=client_id, **page)
            found = Planner.latest(self.planner.state(None, rows))
            if found is not None:
                break
        return self.planner.with_found(state, found)

    async def _afind_question(self, session_id: str, state: SessionState, client_id: ReadAs) -> SessionState:
        if not self.planner.lacks_question(state):
            return state
        found: StoredMessage | None = None
        for page in self.planner.question_pages(state):
            rows = await self.store.aread(session_id, client_id=client_id, **page)
            found = Planner.latest(self.planner.state(None, rows))
            if found is not None:
                break
        return self.planner.with_found(state, found)

    def due(self, state: SessionState) -> int:
        """How many of the tail's messages a compaction would fold now (0: none due)."""
        return self.planner.due(state)

    def view(self, state: SessionState, session_id: str | None = None) -> list[BaseMessage]:
        """Summary message (if any) then the unsummarized tail, or a capped window if too long.

        Falling back to the window is warned once per session (named by `session_id`) until
        a compaction of it succeeds.
        """
        view, fell_back = self.planner.window(state)
        if fell_back is not None and (
            session_id is None or self._jobs.first_report(session_id, "fallback window")
        ):
            logger.warning(
                "rolling memory: %s unsummarized messages in session %r (compaction failing or "
                "behind); the view falls back to a plain window until a summary lands",
                fell_back,
                session_id,
            )
        return view

    # ------------------------------------------------------------------ planning

    def in_backoff(self, session_id: str) -> bool:
        return self._jobs.in_backoff(session_id, self.clock())

    def _begin(self, session_id: str, state: SessionState, force: bool) -> bool:
        if not force and self.in_backoff(session_id):
            return False
        return self.due(state) > 0 or (force and bool(state.tail))

    # ------------------------------------------------------------------ failures and listeners

    def _fail(self, session_id: str, exc: BaseException) -> None:
        if shutdown.closed(self.store, self._jobs, session_id):  # shutting down: nothing to retry
            return
        # A bad key or model name fails the same way every time: wait the longest at once.
        permanent = is_permanent_error(exc)
        first = self.max_backoff if permanent else self.backoff
        delay = self._jobs.failed(session_id, self.clock(), first=first, longest=self.max_backoff)
        line = describe_error(exc)
        # One line, once per session and cause (until a success); the repeats go to debug.
        level = logging.ERROR if self._jobs.first_report(session_id, line) else logging.DEBUG
        logger.log(
            level,
            "rolling memory: compaction of session %r failed: %s; nothing was lost, %s in %.0fs",
            session_id,
            line,
            "a permanent error, next attempt" if permanent else "retrying",
            delay,
        )
        if self.on_error is not None:
            try:
                self.on_error(session_id, exc)
            except Exception:
                logger.exception("rolling memory: the on_error callback raised")

    def _notify(self, result: CompactionResult) -> None:
        listener = self.on_compaction
        if listener is None:
            return
        try:
            if isinstance(listener, CompactionListener):
                listener.on_compaction(result)
            elif inspect.iscoroutinefunction(listener):
                run_coroutine_sync(lambda: listener(result))
            else:
                listener(result)
        except Exception:
            shutdown.listener_failed(self.store, self._jobs, result.session_id)

    async def _anotify(self, result: CompactionResult) -> None:
        listener = self.on_compaction
        if listener is None:
            return
        try:
            if isinstance(listener, CompactionListener):
                await listener.aon_compaction(result)
            elif inspect.iscoroutinefunction(listener):
                await listener(result)
            else:
                # A sync callback may do I/O (a model call): keep it off the event loop.
                await asyncio.to_thread(listener, result)
        except Exception:
            shutdown.listener_failed(self.store, self._jobs, result.session_id)

    # ------------------------------------------------------------------ compaction: the twins

    def _read_backlog(self, session_id: str, state: SessionState) -> list[StoredMessage]:
        """The oldest chunk of a backlog, read on to the end of a tool group that starts it
        and reaches past it (folded whole, never split)."""
        oldest = self.store.read(session_id, **self.planner.backlog(state))
        while (more := self.planner.group_rest(oldest)) is not None:
            rows = self.store.read(session_id, **more)
            if not rows:
                break
            oldest = [*oldest, *rows]
        return oldest

    async def _aread_backlog(self, session_id: str, state: SessionState) -> list[StoredMessage]:
        """`_read_backlog`'s twin."""
        oldest = await self.store.aread(session_id, **self.planner.backlog(state))
        while (more := self.planner.group_rest(oldest)) is not None:
            rows = await self.store.aread(session_id, **more)
            if not rows:
                break
            oldest = [*oldest, *rows]
        return oldest

    def compact(
        self, session_id: str, state: SessionState | None = None, *, force: bool = False
    ) -> CompactionResult | None:
        """Fold the due messages into the summary; None if nothing was due or it failed.

        Never raises for a summarizer failure: it is logged, reported to `on_error`, and
        retried after a back-off. The transcript is never touched.
        """
        state = state if state is not None else self.load(session_id)
        if not self._begin(session_id, state, force):
            return None
        try:
            if not self.store.claim(session_id, self.owner, self.lease_ttl):
                return None
        except Exception as exc:  # a store outage must not escape add_messages after the append
            self._fail(session_id, exc)
            return None
        try:
            # Re-read under the lease: another process may have folded these messages already,
            # or the session may have been erased (its generation changed: nothing of it to
            # fold, and whatever holds its id now is not this turn's to summarize).
            fresh = self.planner.fresh(state, self.store.read_turn(session_id, limit=0)) or self.load(
                session_id
            )
            if fresh.generation != state.generation:
                return None
            state = fresh
            oldest = self._read_backlog(session_id, state) if state.truncated else None
            if (
                oldest is not None
                and self.store.read_turn(session_id, limit=0).generation != state.generation
            ):
                return None  # erased between the two reads: the backlog may be another session's
            plan = self.planner.plan(state, oldest, force)
            if plan is None:
                return None
            summarize = functools.partial(self.summarizer.summarize, plan.previous, plan.messages)
            done = self.planner.outcome(session_id, state, plan, call_with_timeout(summarize, self.timeout))
            if not self.store.install_summary(session_id, done.summary, **_install_args(done, self.owner)):
                return None  # another writer installed first, or the session was erased meanwhile
        except Exception as exc:
            self._fail(session_id, exc)
            return None
        finally:
            try:
                self.store.release(session_id, self.owner)
            except Exception:
                shutdown.lease_not_released(self.store, self._jobs, session_id)
        self._jobs.succeeded(session_id)
        self._notify(done)
        return done

    async def acompact(
        self, session_id: str, state: SessionState | None = None, *, force: bool = False
    ) -> CompactionResult | None:
        """Async twin of `compact`: awaits the summarizer, never blocks the event loop."""
        state = state if state is not None else await self.aload(session_id)
        if not self._begin(session_id, state, force):
            return None
        try:
            if not await self.store.aclaim(session_id, self.owner, self.lease_ttl):
                return None
        except Exception as exc:
            self._fail(session_id, exc)
            return None
        try:
            fresh = self.planner.fresh(
                state, await self.store.aread_turn(session_id, limit=0)
            ) or await self.aload(session_id)
            if fresh.generation != state.generation:
                return None
            state = fresh
            oldest = await self._aread_backlog(session_id, state) if state.truncated else None
            if (
                oldest is not None
                and (await self.store.aread_turn(session_id, limit=0)).generation != state.generation
            ):
                return None
            plan = self.planner.plan(state, oldest, force)
            if plan is None:
                return None
            summarize = self.summarizer.asummarize(plan.previous, plan.messages)
            done = self.planner.outcome(
                session_id, state, plan, await asyncio.wait_for(summarize, self.timeout)
            )
            if not await self.store.ainstall_summary(
                session_id, done.summary, **_install_args(done, self.owner)
            ):
                return None
        except Exception as exc:
            self._fail(session_id, exc)
            return None
        finally:
            try:
                await self.store.arelease(session_id, self.owner)
            except Exception:
                shutdown.lease_not_released(self.store, self._jobs, session_id)
        self._jobs.succeeded(session_id)
        await self._anotify(done)
        return done

    # ------------------------------------------------------------------ folds kept elsewhere

    def fold(
        self,
        session_id: str,
        state: SessionState,
        oldest: list[StoredMessage] | None = None,
        *,
        still: Callable[[CompactionResult], bool] | None = None,
    ) -> CompactionResult | None:
        """Summarize what `state` has due and return it, installing nothing: for an adapter
        that keeps the summary itself (the agent middleware keeps it in the LangGraph state).

        `state` may be built from anything but the store (positions as seqs); `oldest` is the
        backlog chunk to fold first (see `Planner.plan`). Failures as for `compact`: logged,
        reported to `on_error`, backed off, never raised. `still(result)` says whether the
        result may still be used (False, e.g. the session was erased meanwhile: it is dropped
        and nobody is told); the listener (a fact extractor) is told of every other one.
        """
        plan = self.planner.plan(state, oldest, False) if self._begin(session_id, state, False) else None
        if plan is None:
            return None
        try:
            summarize = functools.partial(self.summarizer.summarize, plan.previous, plan.messages)
            done = self.planner.outcome(session_id, state, plan, call_with_timeout(summarize, self.timeout))
            if still is not None and not still(done):
                return None
        except Exception as exc:
            self._fail(session_id, exc)
            return None
        self._jobs.succeeded(session_id)
        self._notify(done)
        return done

    async def afold(
        self,
        session_id: str,
        state: SessionState,
        oldest: list[StoredMessage] | None = None,
        *,
        still: Callable[[CompactionResult], Awaitable[bool]] | None = None,
    ) -> CompactionResult | None:
        """Async twin of `fold`."""
        plan = self.planner.plan(state, oldest, False) if self._begin(session_id, state, False) else None
        if plan is None:
            return None
        try:
            summarize = self.summarizer.asummarize(plan.previous, plan.messages)
            done = self.planner.outcome(
                session_id, state, plan, await asyncio.wait_for(summarize, self.timeout)
            )
            if still is not None and not await still(done):
                return None
        except Exception as exc:
            self._fail(session_id, exc)
            return None
        self._jobs.succeeded(session_id)
        await self._anotify(done)
        return done

    def _fold_job(
        self,
        session_id: str,
        state: SessionState,
        oldest: list[StoredMessage] | None,
        landed: Callable[[CompactionResult], None],
    ) -> Callable[[], CompactionResult | None]:
        def run() -> CompactionResult | None:
            done = (
                None
                if shutdown.closed(self.store, self._jobs, session_id)
                else self.fold(session_id, state, oldest)
            )
            if done is not None:
                landed(done)
            return done

        return run

    def schedule_fold(
        self,
        session_id: str,
        state: SessionState,
        oldest: list[StoredMessage] | None,
        landed: Callable[[CompactionResult], None],
    ) -> bool:
        """Run `fold` on a background worker thread and hand its result to `landed`, unless a
        job of the session is in flight (in this process); False if one was. `flush` and
        `drain` wait for it as for `schedule`."""
        run = self._fold_job(session_id, state, oldest, landed)

        def delayed() -> CompactionResult | None:
            time.sleep(self.start_delay)
            return run()

        return self._jobs.submit(session_id, delayed, exit_timeout=self.exit_timeout)

    def aschedule_fold(
        self,
        session_id: str,
        state: SessionState,
        oldest: list[StoredMessage] | None,
        landed: Callable[[CompactionResult], None],
    ) -> bool:
        """Async twin of `schedule_fold`: a task of the running loop (a worker thread if the
        loop shuts down first, as for `aschedule`)."""

        async def job() -> CompactionResult | None:
            await asyncio.sleep(self.start_delay)
            closed = shutdown.closed(self.store, self._jobs, session_id)
            done = None if closed else await self.afold(session_id, state, oldest)
            if done is not None:
                landed(done)
            return done

        return self._jobs.start_task(
            session_id,
            job,
            fallback=self._fold_job(session_id, state, oldest, landed),
            exit_timeout=self.exit_timeout,
            name=f"rolling-memory fold {session_id}",
        )

    # ------------------------------------------------------------------ after an append

    def _wanted(self, session_id: str, state: SessionState) -> bool:
        return bool(self.due(state)) and not self.in_backoff(session_id)

    def _after(self, state: SessionState, result: CompactionResult | None) -> SessionState | None:
        """`state` after an inline compaction's `result` (None: reload, see `folded`)."""
        return state if result is None else self.planner.folded(state, result)

    def advance(
        self,
        session_id: str,
        state: SessionState | None = None,
        *,
        appended: Sequence[StoredMessage] = (),
        background: bool = False,
        client_id: ReadAs = OPERATOR,
        summary: SummaryRecord | Unread | None = UNREAD,
        current: bool = False,
    ) -> SessionState:
        """The one step an adapter takes after appending to a session: its state, then a due
        compaction (unless in back-off), inline or handed to the background.

        `state` is what was known before `appended` was written; when the new rows extend it
        exactly (see `Planner.extend`), one summary read replaces reading the tail again (none
        when the caller read `summary` with its append, `RollingStore.append_and_summary`);
        otherwise (or with None) the state is read. With `current`, `state` was just read
        (nothing appended since) and is used as it is. Returns the state to `view`: with an
        inline compaction folded in; a scheduled one lands for a later turn. Its reads are
        made as `client_id` (see `load`).
        """
        if not (current and state is not None):
            known = state if appended else None
            if known is not None and isinstance(summary, Unread):
                summary = self.store.summary(session_id, client_id=client_id)
            record = None if isinstance(summary, Unread) else summary
            state = (known and self.planner.extend(known, appended, record)) or self.load(
                session_id, client_id=client_id
            )
        if not self._wanted(session_id, state):
            return state
        if background:
            self.schedule(session_id, state)
            return state
        return self._after(state, self.compact(session_id, state)) or self.load(
            session_id, client_id=client_id
        )

    async def aadvance(
        self,
        session_id: str,
        state: SessionState | None = None,
        *,
        appended: Sequence[StoredMessage] = (),
        background: bool = False,
        client_id: ReadAs = OPERATOR,
        summary: SummaryRecord | Unread | None = UNREAD,
        current: bool = False,
    ) -> SessionState:
        """Async twin of `advance`: a background compaction is a task of the running loop."""
        if not (current and state is not None):
            known = state if appended else None
            if known is not None and isinstance(summary, Unread):
                summary = await self.store.asummary(session_id, client_id=client_id)
            record = None if isinstance(summary, Unread) else summary
            state = (known and self.planner.extend(known, appended, record)) or await self.aload(
                session_id, client_id=client_id
            )
        if not self._wanted(session_id, state):
            return state
        if background:
            self.aschedule(session_id, state)
            return state
        done = await self.acompact(session_id, state)
        return self._after(state, done) or await self.aload(session_id, client_id=client_id)

    # ------------------------------------------------------------------ background

    def schedule(self, session_id: str, state: SessionState | None = None) -> bool:
        """Run `compact` on a background worker thread unless one is already in flight for
        the session (in this process); False if one was.

        `state`, the state that found a compaction due, spares the worker a read (it is
        checked again under the lease, like in `compact`).

        The process waits for it at exit (up to `exit_timeout`); `flush` waits for it now.
        """
        return self._jobs.submit(
            session_id, lambda: self._delayed_compact(session_id, state), exit_timeout=self.exit_timeout
        )

    def aschedule(self, session_id: str, state: SessionState | None = None) -> bool:
        """Run `acompact` as a task of the running loop unless a compaction of the session is
        already in flight (in this process); False if one was.

        If the loop shuts down first (``asyncio.run`` cancels leftover tasks), the compaction
        is handed to a worker thread, so it still lands (see `schedule`).
        """
        return self._jobs.start_task(
            session_id,
            lambda: self._delayed_acompact(session_id, state),
            fallback=lambda: self._compact_unless_closed(session_id),
            exit_timeout=self.exit_timeout,
            name=f"rolling-memory compaction {session_id}",
        )

    def _delayed_compact(self, session_id: str, state: SessionState | None) -> CompactionResult | None:
        if self.start_delay > 0:
            time.sleep(self.start_delay)
        return self._compact_unless_closed(session_id, state)

    def _compact_unless_closed(
        self, session_id: str, state: SessionState | None = None
    ) -> CompactionResult | None:
        if shutdown.closed(self.store, self._jobs, session_id):  # closed while the job waited
            return None
        return self.compact(session_id, state)

    async def _delayed_acompact(self, session_id: str, state: SessionState | None) -> CompactionResult | None:
        if self.start_delay > 0:
            await asyncio.sleep(self.start_delay)
        if shutdown.closed(self.store, self._jobs, session_id):
            return None
        return await self.acompact(session_id, state)

    def pending(self, session_id: str) -> concurrent.futures.Future[CompactionResult | None] | None:
        """The in-flight background compaction of the session in this process, if any."""
        return self._jobs.pending(session_id)

    def flush(self, session_id: str, timeout: float | None = None) -> bool:
        """Wait for the session's background compaction (thread or task) to finish.

        Returns False if it was still running after `timeout` seconds. Raises RuntimeError
        when called on the thread of the event loop that runs the compaction task (waiting
        there would block the very loop it needs: use `aflush`).
        """
        return self._jobs.flush(session_id, timeout)

    async def aflush(self, session_id: str, timeout: float | None = None) -> bool:
        """Async twin of `flush`: awaits without blocking the event loop."""
        return await self._jobs.aflush(session_id, timeout)

    def drain(self, timeout: float | None = None) -> Drained:
        """Wait for the background compactions of this store (every compactor's on the same
        store object, in this process) and the fact extractions they run, up to `timeout`
        seconds (None: no limit); at shutdown, before closing the store. See `shutdown.drain`.
        """
        return shutdown.drain(self._jobs, timeout)

    async def adrain(self, timeout: float | None = None) -> Drained:
        """Async twin of `drain`: awaits without blocking the event loop."""
        return await shutdown.adrain(self._jobs, timeout)
