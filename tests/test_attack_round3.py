"""Attack round 3: what the model is sent, checked against the product's first promise (it sees
exactly what it is entitled to see), on every backend where the path exists.

Each test here failed on the code it was written against; a defect not fixed yet is marked
``xfail(strict=True)`` with its reason, so the suite stays green and the test flips to a
failure (XPASS) the day the defect is fixed without removing the mark.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from agent_models import text_of
from conftest import _probe, unique_prefix
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from store_kit import REDIS_URL, wipe
from test_agent_graph_state import (
    PARIS,
    ROME,
    WHERE,
    build,
    config,
    end_of_turn,
    find,
    three_turns,
    user,
    with_client,
)

from langchain_rolling_memory import RollingStore, index_vectors
from langchain_rolling_memory.adapters.memory_tools import TOOL_BUILDERS
from langchain_rolling_memory.core import fact_rules
from langchain_rolling_memory.engine.recaller import Recaller

FAKE = DeterministicFakeEmbedding(size=16)

# ---------------------------------------------------------------------- graph state and recall


def _recalled(sent: str) -> str:
    """The recall block of a request's text (what the store's search put in the prompt)."""
    head = "Excerpts of earlier conversations"
    return sent[sent.index(head) :] if head in sent else ""


def test_a_fork_never_recalls_the_turns_it_abandoned(store: RollingStore) -> None:
    agent, model, _ = build(InMemorySaver(), store, recall_tokens=500)
    three_turns(agent, config())
    first = end_of_turn(agent, config(), 2)
    agent.invoke(user(WHERE), with_client(first.config))
    sent = text_of(model.requests[-1])
    assert PARIS in sent
    assert "Rome" not in sent, _recalled(sent)


def test_a_removed_message_is_never_recalled(store: RollingStore) -> None:
    agent, model, _ = build(InMemorySaver(), store, recall_tokens=500)
    three_turns(agent, config())
    rome = find(agent, config(), ROME)
    agent.update_state(config(), {"messages": [RemoveMessage(id=str(rome.id))]})
    agent.invoke(user(WHERE), config())
    sent = text_of(model.requests[-1])
    assert PARIS in sent
    assert "Rome" not in sent, _recalled(sent)


def test_another_thread_never_recalls_a_branch_the_graph_abandoned(store: RollingStore) -> None:
    agent, model, _ = build(InMemorySaver(), store, recall_tokens=500)
    three_turns(agent, config())
    first = end_of_turn(agent, config(), 2)
    agent.invoke(user("I live in Paris, yes"), with_client(first.config))  # t1 now holds Paris only
    agent.invoke(user(WHERE), config("s2"))
    sent = text_of(model.requests[-1])
    assert "Rome" not in sent, _recalled(sent)


# ---------------------------------------------------------------------- session state written from a read


@pytest.mark.parametrize("erase", ["clear_session", "forget"])
def test_a_state_update_planned_before_an_erase_never_writes_the_erased_state(
    store: RollingStore, erase: str
) -> None:
    store.set_state("s1", {"card": "4111 1111 1111 1111"}, client_id="ana")
    # The erase lands after the backend's read of the state (the tool's read before the fix,
    # `update_state`'s since), once: what the update wrote is read after.
    real = store._sync.get_state
    erased: list[bool] = []

    def read_then_erased(session_id: str, reader: Any = None) -> str | None:
        state = real(session_id, reader)
        if erased:
            return state
        erased.append(True)
        # The user's erase lands here, after the tool's read and before its write.
        if erase == "clear_session":
            store.clear_session("s1")
        else:
            store.forget("ana")
        return state

    store._sync.get_state = read_then_erased  # type: ignore[method-assign]
    tool = TOOL_BUILDERS["update_session_state"](store, "ana", "s1")
    tool.invoke({"updates": {"city": "Lyon"}})
    store._sync.get_state = real  # type: ignore[method-assign]
    assert erased == [True]
    assert store.get_state("s1", client_id="ana") == {"city": "Lyon"}


# ---------------------------------------------------------------------- Redis: vectors and expiry


@pytest.mark.parametrize("write", ["append", "set_state"])
def test_redis_vectors_expire_with_their_session_whatever_store_wrote_them(write: str) -> None:
    _probe("redis")
    from langchain_rolling_memory.stores.redis import RedisRollingStore

    prefix = unique_prefix()
    plain = RedisRollingStore(REDIS_URL, key_prefix=prefix)
    expiring = RedisRollingStore(REDIS_URL, key_prefix=prefix, ttl=60)
    try:
        plain.append("s1", [HumanMessage("my secret plan")], client_id="ana")
        assert index_vectors(plain, FAKE, client_id="ana") == 1
        if write == "append":
            expiring.append("s1", [HumanMessage("more words")], client_id="ana")
        else:
            expiring.set_state("s1", {"k": 1}, client_id="ana")
        with redis.Redis.from_url(REDIS_URL) as r:
            session = r.pttl(plain.keys.info("s1"))
            assert 0 < session <= 60_000
            # The vectors are one of the session's keys: they expire with it, never after it.
            assert 0 < r.pttl(plain.keys.part("s1", "vec")) <= session + 5
    finally:
        plain.close()
        expiring.close()
        wipe(plain)


# ---------------------------------------------------------------------- a fact deleted during its update


def test_a_fact_deleted_while_its_update_is_planned_stays_deleted(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = store.add_fact("ana", "Lives at 12 rue de la Paix", key="address")
    real = fact_rules.plan_update
    racing: list[threading.Thread] = []
    deleted: list[bool] = []

    def planned_while_deleted(existing: Any, fact_id: str, text: object, **options: Any) -> Any:
        if not racing:
            # The user deletes the fact while the update is planned from what it read: a store
            # that serializes the two lets the delete wait (then it erases the update) or
            # makes the update see it gone; it never loses the delete.
            racing.append(threading.Thread(target=lambda: deleted.append(store.delete_fact("ana", fact_id))))
            racing[0].start()
            racing[0].join(timeout=1.0)
        return real(existing, fact_id, text, **options)

    monkeypatch.setattr(fact_rules, "plan_update", planned_while_deleted)
    store.update_fact("ana", fact.id, "Lives at 3 place Bellecour")
    racing[0].join()
    assert deleted == [True]
    assert store.facts("ana") == []


async def test_a_fact_deleted_while_its_async_update_is_planned_stays_deleted(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = await store.aadd_fact("ana", "Lives at 12 rue de la Paix", key="address")
    real = fact_rules.plan_update
    racing: list[threading.Thread] = []
    deleted: list[bool] = []

    def planned_while_deleted(existing: Any, fact_id: str, text: object, **options: Any) -> Any:
        if not racing:
            racing.append(threading.Thread(target=lambda: deleted.append(store.delete_fact("ana", fact_id))))
            racing[0].start()
            racing[0].join(timeout=1.0)
        return real(existing, fact_id, text, **options)

    monkeypatch.setattr(fact_rules, "plan_update", planned_while_deleted)
    await store.aupdate_fact("ana", fact.id, "Lives at 3 place Bellecour")
    racing[0].join()
    assert deleted == [True]
    assert await store.afacts("ana") == []


# ---------------------------------------------------------------------- a recalled question's answer


@pytest.mark.parametrize("next_owner", ["bob", None])
def test_a_recalled_questions_answer_never_comes_from_outside_the_search_scope(
    store: RollingStore, next_owner: str | None
) -> None:
    # The answer is read with the search's scope (the client's own sessions), checked in the
    # read itself: neither another client's text nor an anonymous run's comes back.
    store.append("s1", [HumanMessage("Where is the cat?"), AIMessage("Under the bed")], client_id="ana")
    real = store.messages_after

    def after_an_erase(points: Any, *, client_id: Any) -> Any:
        # Between the search and the read of the answers: the session is erased and its id
        # written again by someone else.
        store.clear_session("s1")
        store.append("s1", [HumanMessage("hello"), AIMessage("my iban is FR76 0000")], client_id=next_owner)
        return real(points, client_id=client_id)

    store.messages_after = after_an_erase  # type: ignore[method-assign]
    recalled = Recaller(store, 800).recall("where is the cat?", client_id="ana", session_id=None).text
    assert "Where is the cat?" in recalled  # read before the erase: in flight
    assert "iban" not in recalled
