"""One turn step (`engine.turn`): the chain and the agent assemble the same memory, and what the
facts block shows is never recalled again in the same prompt, on every backend."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from agent_models import ScriptedChatModel, system_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever

from langchain_rolling_memory import RollingStore, open_store, with_rolling_memory
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.framing import MEMORY_MESSAGE_ID
from langchain_rolling_memory.core.quoting import quote_text
from langchain_rolling_memory.engine.recaller import Recaller
from langchain_rolling_memory.engine.turn import TurnStep

CAT = "My cat is called Oscar"
QUESTION = "what is my cat called?"
MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def summarize(previous: str, messages: list[BaseMessage]) -> str:
    return "s"


def memory_of(request: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in request if m.id == MEMORY_MESSAGE_ID)


def quiet_model() -> ScriptedChatModel:
    # "okay" is a stop word: the replies the runs store are never recalled.
    return ScriptedChatModel(default="okay", script=[AIMessage("Okay.") for _ in range(4)])


async def chain_memory(
    store: RollingStore, client: str, session: str, question: str, *, run: str = "sync", **options: Any
) -> str:
    model = quiet_model()
    chat = with_rolling_memory(model, store=store, summarizer=summarize, **options)
    config = {"configurable": {"client_id": client, "session_id": session}}
    if run == "sync":
        chat.invoke([HumanMessage(question)], config=config)
    else:
        await chat.ainvoke([HumanMessage(question)], config=config)
    return memory_of(model.requests[0])


async def agent_memory(
    store: RollingStore, client: str, session: str, question: str, *, run: str = "sync", **options: Any
) -> str:
    model = quiet_model()
    memory = RollingMemoryMiddleware(store=store, summarizer=summarize, **options)
    agent = create_agent(model, [], middleware=[memory])  # no system prompt: the system text is the memory
    config = {"configurable": {"thread_id": session, "client_id": client}}
    if run == "sync":
        agent.invoke({"messages": [HumanMessage(question)]}, config=config)
    else:
        await agent.ainvoke({"messages": [HumanMessage(question)]}, config=config)
    return system_text(model.requests[0])


# ---------------------------------------------------------------------- the cat, on every backend


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_the_chain_shows_a_fact_once_not_again_in_recall(store: RollingStore, run: str) -> None:
    store.add_fact("ana", CAT)
    memory = await chain_memory(store, "ana", f"s-{run}", QUESTION, run=run, recall_tokens=500)
    assert memory.count(quote_text(CAT)) == 1, memory


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_the_agent_shows_a_fact_once_not_again_in_recall(store: RollingStore, run: str) -> None:
    store.add_fact("ana", CAT)
    memory = await agent_memory(store, "ana", f"t-{run}", QUESTION, run=run, recall_tokens=500)
    assert memory.count(quote_text(CAT)) == 1, memory


async def test_a_fact_left_out_of_the_facts_block_by_its_budget_is_still_recalled() -> None:
    store = open_store("memory://")
    store.add_fact("ana", CAT)
    for i in range(10):  # pinned facts come first: they fill the budget
        store.add_fact("ana", f"Visited the museum number {i} of the city", pinned=True)
    memory = await chain_memory(store, "ana", "s", QUESTION, recall_tokens=500, max_fact_tokens=20)
    assert memory.count(quote_text(CAT)) == 1, memory
    assert f"fact: {quote_text(CAT)}" in memory, memory  # in the recall, not the facts block


async def test_a_message_saying_what_a_shown_fact_says_is_not_recalled_again(store: RollingStore) -> None:
    store.add_fact("ana", CAT)
    store.append(
        "old", [HumanMessage(CAT), AIMessage("What a nice name.")], client_id="ana", created_at=MAY_8
    )
    for run in ("sync", "async"):
        chain = await chain_memory(store, "ana", f"s-{run}", QUESTION, run=run, recall_tokens=500)
        agent = await agent_memory(store, "ana", f"t-{run}", QUESTION, run=run, recall_tokens=500)
        assert chain.count(quote_text(CAT)) == 1, chain
        assert agent.count(quote_text(CAT)) == 1, agent


async def test_the_recall_variable_of_a_prompt_leaves_out_the_shown_fact() -> None:
    store = open_store("memory://")
    store.add_fact("ana", CAT)
    store.append("old", [HumanMessage("Oscar sleeps in the garden")], client_id="ana", created_at=MAY_8)
    model = quiet_model()
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Facts:\n{facts}\nRecall:\n{recall}"), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chat = with_rolling_memory(
        prompt | model,
        store=store,
        summarizer=summarize,
        input_messages_key="q",
        history_messages_key="history",
        recall_tokens=500,
    )
    chat.invoke(
        {"q": "Where does my cat Oscar sleep?"},
        config={"configurable": {"client_id": "ana", "session_id": "s"}},
    )
    sent = model.requests[0][0].text
    assert sent.count(quote_text(CAT)) == 1, sent
    assert '"Oscar sleeps in the garden"' in sent


class _Notes(BaseRetriever):
    texts: list[str]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(text) for text in self.texts]


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_a_retriever_document_saying_a_shown_fact_is_left_out(run: str) -> None:
    store = open_store("memory://")
    store.add_fact("ana", CAT)
    notes = _Notes(texts=[CAT, "Oscar is a tabby"])
    chain = await chain_memory(store, "ana", f"s-{run}", QUESTION, run=run, recall=notes)
    agent = await agent_memory(store, "ana", f"t-{run}", QUESTION, run=run, recall=notes)
    for memory in (chain, agent):
        assert memory.count(quote_text(CAT)) == 1, memory
        assert '"Oscar is a tabby"' in memory


# ---------------------------------------------------------------------- the step itself


async def test_the_step_and_its_async_twin_assemble_the_same_block(store: RollingStore) -> None:
    store.add_fact("ana", CAT)
    store.add_fact("ana", "Prefers tea", key="drink")
    store.append("old", [HumanMessage("Oscar chased the tram")], client_id="ana", created_at=MAY_8)
    store.set_state("now", {"step": "vet"}, client_id="ana")
    step = TurnStep(store, recaller=Recaller(store, 500))
    question = "What did my cat Oscar do?"
    view = [HumanMessage(question)]
    block = step.read("ana", "now", query=question, view=view)
    assert block == await step.aread("ana", "now", query=question, view=view)
    assert block.render().count(quote_text(CAT)) == 1
    assert '"Oscar chased the tram"' in block.recall
    assert block.state == '{"step": "vet"}'


def test_without_a_recaller_the_step_searches_nothing() -> None:
    class NoSearch(type(open_store("memory://"))):  # type: ignore[misc]
        def _search(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("searched")

    store = NoSearch()
    store.add_fact("ana", CAT)
    assert TurnStep(store).read("ana", "s", query=QUESTION).recall == ""


# ---------------------------------------------------------------------- property: once, and the same


WORDS = ["cat", "oscar", "lisbon", "hotel", "tram", "peanut", "marta", "garden", "blue", "train"]
phrase = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


def shown(memory: str) -> tuple[list[str], list[str]]:
    """The quoted words of each line of the facts block (``- "text"``, ``- ["key"] "text"``)
    and the recall lines (``- 8 May 2023, "session", user: "text"``)."""
    facts, recalled = [], []
    for line in memory.splitlines():
        if line.startswith(('- "', '- ["')):
            facts.append(json.loads(line[line.rfind(' "', 0, len(line) - 1) + 1 :]))
        elif line.startswith("- "):
            recalled.append(line)
    return facts, recalled


def words_of(line: str) -> str:
    return json.loads(line[line.rfind(' "', 0, len(line) - 1) + 1 :])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    facts=st.lists(st.tuples(phrase, st.booleans()), max_size=5, unique_by=lambda f: f[0]),
    said=st.lists(phrase, max_size=4, unique=True),
    question=st.lists(st.sampled_from([*WORDS, "what", "is", "my", "where"]), min_size=1, max_size=5).map(
        lambda words: " ".join(words) + "?"
    ),
    budget=st.sampled_from([8, 400]),
    state=st.one_of(st.none(), st.fixed_dictionaries({"step": st.sampled_from(["paying", "booked"])})),
)
async def test_nothing_is_shown_twice_and_both_adapters_send_the_same_memory(
    store: RollingStore,
    facts: list[tuple[str, bool]],
    said: list[str],
    question: str,
    budget: int,
    state: dict[str, str] | None,
) -> None:
    client, session = f"c{uuid.uuid4().hex[:8]}", f"s{uuid.uuid4().hex[:8]}"
    for text, pinned in facts:
        store.add_fact(client, text, pinned=pinned)
    if said:
        turns = [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(said)]
        store.append(f"old-{session}", turns, client_id=client, created_at=MAY_8)
    if state is not None:
        store.set_state(session, state, client_id=client)
    options = {"recall_tokens": 500, "max_fact_tokens": budget}
    # The same session: the agent's view holds what the chain's turn stored, so both recall alike.
    chain = await chain_memory(store, client, session, question, **options)
    agent = await agent_memory(store, client, session, question, **options)
    assert chain == agent
    fact_lines, recalled = shown(chain)
    assert len(fact_lines) == len(set(fact_lines)), chain  # each fact once
    assert len(recalled) == len(set(recalled)), chain  # each excerpt once
    # What the facts block says is never recalled again.
    assert not set(fact_lines) & {words_of(line) for line in recalled}, chain
