"""Our histories inside LangChain's `RunnableWithMessageHistory`, in each input layout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableFieldSpec, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_rolling_memory import (
    RollingSummaryChatMessageHistory,
    WindowedChatMessageHistory,
    open_store,
)
from langchain_rolling_memory.stores import RollingStore


class RecordingModel:
    """A chat model stand-in that records every prompt it is sent and answers in sequence."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def __call__(self, prompt: Any) -> AIMessage:
        messages = prompt.to_messages() if hasattr(prompt, "to_messages") else list(prompt)
        self.prompts.append(messages)
        return AIMessage(f"answer {len(self.prompts)}")

    @property
    def runnable(self) -> RunnableLambda[Any, AIMessage]:
        return RunnableLambda(self)


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return (previous + " " + " ".join(m.text for m in messages)).strip()


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def config(session_id: str, **more: str) -> dict[str, Any]:
    return {"configurable": {"session_id": session_id, **more}}


HistoryFactory = Callable[[str], BaseChatMessageHistory]


def factories(store: RollingStore) -> dict[str, HistoryFactory]:
    return {
        "rolling": lambda sid: RollingSummaryChatMessageHistory(
            sid, summarizer=summarize, store=store, max_turns=12, keep_last=6
        ),
        "windowed": lambda sid: WindowedChatMessageHistory(sid, store=store, max_messages=20),
    }


@pytest.mark.parametrize("kind", ["rolling", "windowed"])
@pytest.mark.parametrize("layout", ["messages", "dict"])
def test_behaves_like_in_memory_history_while_no_compaction_is_due(
    store: RollingStore, kind: str, layout: str
) -> None:
    reference_histories: dict[str, InMemoryChatMessageHistory] = {}

    def reference(session_id: str) -> InMemoryChatMessageHistory:
        return reference_histories.setdefault(session_id, InMemoryChatMessageHistory())

    def run(get_history: Callable[[str], BaseChatMessageHistory]) -> tuple[list[list[str]], list[str]]:
        model = RecordingModel()
        if layout == "messages":
            chain = RunnableWithMessageHistory(model.runnable, get_history)
            for i in range(5):  # 10 messages: under max_turns=12 and max_messages=20
                chain.invoke([HumanMessage(f"q{i}")], config=config("same"))
        else:
            prompt = ChatPromptTemplate.from_messages(
                [("system", "sys"), MessagesPlaceholder("history"), ("human", "{question}")]
            )
            chain = RunnableWithMessageHistory(
                prompt | model.runnable,
                get_history,
                input_messages_key="question",
                history_messages_key="history",
            )
            for i in range(5):
                chain.invoke({"question": f"q{i}"}, config=config("same"))
        return [texts(p) for p in model.prompts], texts(get_history("same").messages)

    assert run(factories(store)[kind]) == run(reference)


def test_message_list_input_compacts_and_stores_each_message_once(store: RollingStore) -> None:
    model = RecordingModel()
    chain = RunnableWithMessageHistory(model.runnable, factories(store)["rolling"])
    for i in range(20):
        chain.invoke([HumanMessage(f"q{i}")], config=config("list"))
    transcript = texts(store.transcript("list"))
    assert transcript == [x for i in range(20) for x in (f"q{i}", f"answer {i + 1}")]
    last_prompt = model.prompts[-1]
    assert last_prompt[0].id == "rolling-memory-summary"
    assert "q0" in last_prompt[0].text  # folded into the summary, not lost
    assert len(last_prompt) <= 1 + 12 + 1


def test_a_compaction_landing_mid_call_neither_duplicates_nor_drops(store: RollingStore) -> None:
    """Another process compacts the session while the chain runs; the call saves exactly its turn."""
    make = factories(store)["rolling"]
    seed = make("mid")
    for i in range(6):
        seed.add_messages([HumanMessage(f"old q{i}"), AIMessage(f"old a{i}")])  # 12: at the threshold

    def model_and_other_writer(messages: list[BaseMessage]) -> AIMessage:
        other = make("mid")
        other.add_messages([HumanMessage("other q"), AIMessage("other a")])  # crosses: compacts
        assert store.summary("mid") is not None
        return AIMessage("the answer")

    chain = RunnableWithMessageHistory(RunnableLambda(model_and_other_writer), make)
    chain.invoke([HumanMessage("new q")], config=config("mid"))
    transcript = texts(store.transcript("mid"))
    assert transcript[-4:] == ["other q", "other a", "new q", "the answer"]
    assert len(transcript) == 16
    assert transcript.count("new q") == 1


async def test_async_chain_with_message_list_input(store: RollingStore) -> None:
    model = RecordingModel()
    chain = RunnableWithMessageHistory(model.runnable, factories(store)["rolling"])
    for i in range(10):
        await chain.ainvoke([HumanMessage(f"q{i}")], config=config("async"))
    assert len(store.transcript("async")) == 20
    assert model.prompts[-1][0].id == "rolling-memory-summary"


def test_history_factory_config_carries_client_and_session(store: RollingStore) -> None:
    def get_history(client_id: str, session_id: str) -> RollingSummaryChatMessageHistory:
        return RollingSummaryChatMessageHistory(
            session_id, client_id=client_id, summarizer=summarize, store=store, max_turns=4, keep_last=2
        )

    model = RecordingModel()
    chain = RunnableWithMessageHistory(
        model.runnable,
        get_history,
        history_factory_config=[
            ConfigurableFieldSpec(id="client_id", annotation=str, is_shared=True),
            ConfigurableFieldSpec(id="session_id", annotation=str, is_shared=True),
        ],
    )
    for i in range(3):
        chain.invoke([HumanMessage(f"q{i}")], config=config("s-1", client_id="client-7"))
    chain.invoke([HumanMessage("other")], config=config("s-2", client_id="client-8"))
    assert store.sessions("client-7") == ["s-1"]
    assert store.sessions("client-8") == ["s-2"]
    assert store.summary("s-1") is not None
    assert len(store.transcript("s-1")) == 6


def test_dict_input_with_output_key_and_rolling_summary_in_prompt(tmp_path: Any) -> None:
    with open_store(f"sqlite:///{tmp_path / 'chain.db'}") as store:
        model = RecordingModel()
        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
        chain = RunnableWithMessageHistory(
            prompt | model.runnable | RunnableLambda(lambda m: {"answer": m}),
            lambda sid: RollingSummaryChatMessageHistory(
                sid, summarizer=summarize, store=store, max_turns=4, keep_last=2
            ),
            input_messages_key="question",
            history_messages_key="history",
            output_messages_key="answer",
        )
        for i in range(4):
            chain.invoke({"question": f"q{i}"}, config=config("dict"))
        sent = model.prompts[-1]
        assert sent[0].id == "rolling-memory-summary"
        assert "q0" in sent[0].text
        assert texts(sent[-1:]) == ["q3"]
        assert len(store.transcript("dict")) == 8


def test_windowed_history_passes_langchains_interface_check(store: RollingStore) -> None:
    """LangChain's own `test_interfaces` (runnables/test_history.py), on our window: a leading
    system message and the first exchange fit, so all three are kept (issue 20, defect 10)."""
    history = factories(store)["windowed"]("iface")
    history.add_message(SystemMessage(content="system"))
    history.add_message(HumanMessage(content="human 1"))
    history.add_message(AIMessage(content="ai"))
    assert str(history) == "System: system\nHuman: human 1\nAI: ai"


@pytest.mark.parametrize("kind", ["rolling", "windowed"])
def test_a_greeting_before_the_first_question_reaches_the_model(store: RollingStore, kind: str) -> None:
    make = factories(store)[kind]
    make("greet").add_messages([SystemMessage("be brief"), AIMessage("Hello! How can I help?")])
    model = RecordingModel()
    chain = RunnableWithMessageHistory(model.runnable, make)
    chain.invoke([HumanMessage("q0")], config=config("greet"))
    chain.invoke([HumanMessage("q1")], config=config("greet"))
    assert texts(model.prompts[-1]) == ["be brief", "Hello! How can I help?", "q0", "answer 1", "q1"]
