"""The store-backed strategy of the evaluation on the server backends: it finds the answer on
PostgreSQL and on Redis, and a closed responder leaves no row or key of its prefix behind
(read on the server, not through the store). Also `run_eval` with `Strategy` objects."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL, raw_contents, wipe

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.stores.postgres.sql import check_prefix as pg_prefix
from langchain_rolling_memory.stores.redis.layout import check_prefix as redis_prefix
from langchain_rolling_memory.stores.urls import split_prefix
from langchain_rolling_memory_lab.eval import run_eval
from langchain_rolling_memory_lab.eval_store import StoreResponder, store_recall, with_fresh_prefix
from langchain_rolling_memory_lab.eval_strategies import Strategy
from langchain_rolling_memory_lab.locomo import EvalConversation, EvalQuestion, EvalTurn, parse_date

_MAY = parse_date("1:56 pm on 8 May, 2023")
_JUNE = parse_date("10:00 am on 20 June, 2023")
CAT = "What is Ben's cat called?"


def _conversation() -> EvalConversation:
    filler = [
        EvalTurn(1, i, HumanMessage(f"small talk number {i} about the weather", name="Ana"), _MAY)
        for i in range(3, 40)
    ]
    turns = [
        EvalTurn(1, 1, HumanMessage("What is the name of your new cat?", name="Ana"), _MAY),
        EvalTurn(1, 2, AIMessage("She is called Marmalade.", name="Ben"), _MAY),
        *filler,
        EvalTurn(2, 1, AIMessage("I moved to Lisbon last week.", name="Ben"), _JUNE),
    ]
    questions = [
        EvalQuestion(CAT, "Marmalade", 4),
        EvalQuestion("When did Ben move to Lisbon?", "June 2023", 2),
    ]
    return EvalConversation("tiny", turns, questions)


# Each server's fixture only probes it: skipped without the server, failed under CI.
SERVERS = [
    pytest.param("pg_store", POSTGRES_URL, "eval", id="postgresql"),
    pytest.param("redis_store", REDIS_URL, "eval:", id="redis"),
]


@pytest.mark.parametrize(("probe", "url", "starts"), SERVERS)
def test_the_store_backed_strategy_finds_the_answer_and_a_closed_responder_leaves_nothing(
    probe: str, url: str, starts: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(probe)
    respond = store_recall(2000, store_url=url)(_conversation())
    store = respond.store
    try:
        assert store.prefix.startswith(starts)
        assert any("Marmalade" in line for line in raw_contents(store))  # loaded on the server
        sent = respond(CAT)
        assert '\n8 May 2023, "session-1":\n' in sent[0].text
        assert '\n- "Ben": "She is called Marmalade."' in sent[0].text
        assert CAT not in respond("Is the cat called Marmalade?")[0].text  # each question's session erased
        respond.close()
        assert raw_contents(store) == []  # no row or key of its prefix but the schema record
        respond.close()  # a second close does nothing
    finally:
        respond.close()
        wipe(store)


@pytest.mark.parametrize(("probe", "url", "starts"), SERVERS)
def test_run_eval_takes_a_server_strategy_object_and_closes_its_responders(
    probe: str, url: str, starts: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(probe)
    opened: list[StoreResponder] = []
    prepare = store_recall(2000, store_url=url)

    def remembering(conversation: EvalConversation) -> StoreResponder:
        opened.append(prepare(conversation))
        return opened[-1]

    strategy = Strategy("on-server", "with_rolling_memory on a server", remembering)
    try:
        rows = run_eval([_conversation(), _conversation()], strategies=["transcript", strategy]).rows()
        assert [r["strategy"] for r in rows] == ["transcript", "on-server"]
        assert rows[1]["answer_in_context"] == 1.0
        prefixes = [r.store.prefix for r in opened]
        assert len(prefixes) == 2 and len(set(prefixes)) == 2  # a fresh prefix per conversation
        assert [raw_contents(r.store) for r in opened] == [[], []]  # closed by run_eval itself
    finally:
        for responder in opened:
            responder.close()
            wipe(responder.store)


def test_run_eval_closes_a_responder_even_when_a_question_fails() -> None:
    closed: list[str] = []

    class Failing:
        def __call__(self, question: str) -> list[BaseMessage]:
            raise RuntimeError("the store went away")

        def close(self) -> None:
            closed.append("closed")

    strategy = Strategy("failing", "fails", lambda conversation: Failing())
    with pytest.raises(RuntimeError, match="went away"):
        run_eval([_conversation()], strategies=[strategy])
    assert closed == ["closed"]


def test_strategy_names_must_differ() -> None:
    twin = Strategy("transcript", "another transcript", lambda conversation: lambda question: [])
    with pytest.raises(ConfigurationError, match=r"different names, got \['transcript'\] more than once"):
        run_eval([_conversation()], strategies=["transcript", twin])


@pytest.mark.parametrize(
    ("url", "driver_url", "pattern", "check"),
    [
        ("postgresql://u@h:5432/db", "postgresql://u@h:5432/db", r"eval[0-9a-f]{8}_", pg_prefix),
        (
            "postgresql://u@h/db?sslmode=disable",
            "postgresql://u@h/db?sslmode=disable",
            r"eval[0-9a-f]{8}_",
            pg_prefix,
        ),
        ("redis://h:6379/0", "redis://h:6379/0", r"eval:[0-9a-f]{8}:", redis_prefix),
        ("rediss://h/1?prefix=mine:", "rediss://h/1", r"eval:[0-9a-f]{8}:", redis_prefix),
    ],
    ids=["postgresql", "postgresql-with-query", "redis", "redis-own-prefix-overridden"],
)
def test_each_conversation_gets_a_fresh_prefix_its_backend_accepts(
    url: str, driver_url: str, pattern: str, check: Callable[[str], str]
) -> None:
    clean, prefix = split_prefix(with_fresh_prefix(url))
    assert clean == driver_url and prefix is not None
    assert re.fullmatch(pattern, prefix) and check(prefix) == prefix
    assert split_prefix(with_fresh_prefix(url))[1] != prefix
