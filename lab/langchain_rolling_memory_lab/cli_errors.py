"""How the `rolling-memory` command fails: one line naming what to fix, at the first sign.

Owns the line a provider or store failure becomes (the flag or variable the user must fix)
and the guard that stops a run when its summarizer fails before ever succeeding, so that a
refused key never yields a table of "0 memory calls". It parses no arguments and prints
nothing (that is `cli`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.summarizers.base import Summarizer
from langchain_rolling_memory.summarizers.failures import describe_error, status_of

BASE_URL_ENV = "ROLLING_MEMORY_BASE_URL"
MODEL_ENV = "ROLLING_MEMORY_MODEL"


class StopRun(BaseException):
    """The run cannot produce anything meaningful: stop now and say `error` in one line.

    A `BaseException`, like `KeyboardInterrupt`, so that the engine's failure handling (meant
    for a provider's passing trouble: log, back off, carry on) lets it through. The messages
    handed to a history before it are stored.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class FirstCallGuard:
    """Wraps the run's summarizer: if it fails before it ever succeeded, the run stops.

    The client has already retried what was worth retrying (rate limits, 5xx, dropped
    connections); a first call that still fails (a refused key, an unknown model, no server
    at the base URL) would fail every later call the same way. After one success, failures
    are the engine's (logged, backed off), as in an application.
    """

    def __init__(self, inner: Summarizer) -> None:
        self.inner = inner
        self.succeeded = 0

    def _stop_if_first(self, exc: Exception) -> None:
        if not self.succeeded:
            raise StopRun(exc) from exc

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        try:
            result = self.inner.summarize(previous, messages)
        except Exception as exc:
            self._stop_if_first(exc)
            raise
        self.succeeded += 1
        return result

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        try:
            result = await self.inner.asummarize(previous, messages)
        except Exception as exc:
            self._stop_if_first(exc)
            raise
        self.succeeded += 1
        return result


def provider_line(exc: BaseException, flag: str, keys: Sequence[str], model: str = f"${MODEL_ENV}") -> str:
    """``"<flag>: <provider: HTTP status: reason>; <what to fix>"`` for a provider failure;
    `model` is where the run's model name came from (an unknown model is a 404)."""
    status = status_of(exc)
    if status in (401, 403):
        fix = f"set a valid {' or '.join(keys)} for {flag}"
    elif status == 404:
        fix = f"check {model} (the model name) and ${BASE_URL_ENV} for {flag}"
    elif status is None:
        endpoint = os.environ.get(BASE_URL_ENV)
        where = f"${BASE_URL_ENV}={endpoint}" if endpoint else "the network"
        fix = f"{flag} could not reach its endpoint: check {where}"
    else:
        fix = f"{flag} cannot go on; try again later or leave out {flag.split()[0]}"
    return f"{flag}: {describe_error(exc, hint=False)}; {fix}"
