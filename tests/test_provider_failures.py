"""Provider failures through the real OpenAI and Gemini clients at the local fake servers:
a permanent error (400, 401, 403, 404) is requested once and said in one line, once per
session; a rate limit or a 503 is retried by the client and then succeeds; the fallback window
is warned once per session, by name."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, gemini_summarizer, openai_summarizer
from langchain_rolling_memory.summarizers import describe_error, is_permanent_error
from tests.fake_providers import Failure, FakeProvider, Reply, Text, serve

PROVIDERS = ["openai", "gemini"]
NAMES = {"openai": "OpenAI", "gemini": "Gemini"}
SUMMARY = (
    "Ana Ruiz, a client from Lyon, wants her deliveries on Saturdays only and asked the "
    "assistant to keep that rule for every future order."
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def summarizer_for(provider: FakeProvider, **options: Any) -> Any:
    factory = openai_summarizer if provider.kind == "openai" else gemini_summarizer
    return factory(api_key="test", base_url=provider.base_url, **options)


def replies(*items: Reply) -> Any:
    queue = list(items)
    return lambda request: queue.pop(0) if len(queue) > 1 else queue[0]


def turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}"), AIMessage(f"answer {i}")]


def errors_logged(caplog: pytest.LogCaptureFixture, level: int = logging.ERROR) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "langchain_rolling_memory" and r.levelno == level]


# ---------------------------------------------------------------- one summarizer call


@pytest.mark.parametrize("status", [400, 401, 403, 404])
@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_permanent_error_is_requested_once_and_said_in_one_line(kind: str, status: int) -> None:
    with (
        serve(kind, replies(Failure(status, "Incorrect API key provided"))) as provider,
        pytest.raises(Exception, match="Incorrect API key provided") as raised,
    ):
        summarizer_for(provider, retries=3).summarize("", [HumanMessage("I'm Ana")])
    assert len(provider.requests) == 1
    assert is_permanent_error(raised.value)
    line = describe_error(raised.value)
    assert line.startswith(f"{NAMES[kind]}: HTTP {status}: Incorrect API key provided")
    assert "\n" not in line


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(Failure(429, "slow down", headers={"retry-after": "0"}), id="429-retry-after-0"),
        pytest.param(Failure(503), id="503"),
    ],
)
@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_rate_limit_or_an_outage_is_retried_by_the_client_then_succeeds(
    kind: str, failure: Failure
) -> None:
    with serve(kind, replies(failure, Text(SUMMARY))) as provider:
        result = summarizer_for(provider, retries=2).summarize("", [HumanMessage("I'm Ana")])
    assert result.text == SUMMARY
    assert len(provider.requests) == 2
    assert provider.requests[0].body == provider.requests[1].body
    if kind == "openai":  # the SDK's own retry, not a fresh request of ours
        assert provider.requests[1].headers.get("x-stainless-retry-count") == "1"


def test_retries_zero_is_a_single_request() -> None:
    with (
        serve("openai", replies(Failure(503), Text(SUMMARY))) as provider,
        pytest.raises(Exception, match="503"),
    ):
        summarizer_for(provider, retries=0).summarize("", [HumanMessage("I'm Ana")])
    assert len(provider.requests) == 1


# ---------------------------------------------------------------- through a history


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_bad_key_is_tried_once_reported_once_and_not_retried_every_turn(
    kind: str, background: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock, errors = Clock(), []
    with serve(kind, replies(Failure(401, "Incorrect API key provided"))) as provider:
        history = RollingSummaryChatMessageHistory(
            "ana-s1",
            summarizer=summarizer_for(provider),
            max_turns=4,
            keep_last=2,
            background=background,
            clock=clock,
            backoff=2.0,
            max_backoff=300.0,
            on_error=lambda sid, exc: errors.append((sid, exc)),
        )
        with caplog.at_level(logging.DEBUG, logger="langchain_rolling_memory"):
            for i in range(8):
                history.add_messages(turn(i))
                history.flush()
                clock.now += 30.0  # a transient back-off (2 s, doubling) would be over by now
            assert len(provider.requests) == 1
            clock.now += 300.0  # the longest back-off is over: one more attempt, said quietly
            history.add_messages(turn(9))
            history.flush()
    assert len(provider.requests) == 2
    assert [sid for sid, _ in errors] == ["ana-s1", "ana-s1"]
    assert len(history.transcript) == 18  # nothing lost
    [record] = errors_logged(caplog)
    message = record.getMessage()
    assert "'ana-s1'" in message and f"{NAMES[kind]}: HTTP 401: Incorrect API key provided" in message
    assert "\n" not in message and record.exc_info is None
    assert any("HTTP 401" in r.getMessage() for r in errors_logged(caplog, logging.DEBUG))


class Failing:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls += 1
        raise ConnectionError("provider down")


def test_the_fallback_window_is_warned_once_per_session_by_name(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    histories = [
        RollingSummaryChatMessageHistory(
            session, summarizer=Failing(), max_turns=4, keep_last=2, hard_cap=6, clock=clock, backoff=1.0
        )
        for session in ("ana-s1", "ana-s2")
    ]
    with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
        for i in range(6):
            for history in histories:
                history.add_messages(turn(i))
                assert len(history.messages) <= 6
            clock.now += 5.0
    warned = [r.getMessage() for r in errors_logged(caplog, logging.WARNING)]
    assert len(warned) == 2
    assert "'ana-s1'" in warned[0] and "'ana-s2'" in warned[1]
    assert all("falls back to a plain window" in w for w in warned)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "task"])
async def test_async_a_bad_key_is_tried_once_and_reported_once(
    background: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock, errors = Clock(), []
    with serve("openai", replies(Failure(401, "Incorrect API key provided"))) as provider:
        history = RollingSummaryChatMessageHistory(
            "ana-s2",
            summarizer=summarizer_for(provider),
            max_turns=4,
            keep_last=2,
            background=background,
            clock=clock,
            on_error=lambda sid, exc: errors.append(exc),
        )
        with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
            for i in range(8):
                await history.aadd_messages(turn(i))
                await history.aflush()
                clock.now += 30.0
    assert len(provider.requests) == 1 and len(errors) == 1
    [record] = errors_logged(caplog)
    assert "'ana-s2'" in record.getMessage() and "OpenAI: HTTP 401" in record.getMessage()
    assert len(await history.atranscript()) == 16  # nothing lost
