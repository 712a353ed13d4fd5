"""One turn through `with_rolling_memory`, built on langchain-core's `Runnable` alone (issue 22, no
deprecated base): every input and output layout of `RunnableWithMessageHistory` stores exactly the
turn, a streamed reply is stored whole (also when the reader stops early), a failed chain stores
nothing, a compaction that fails after the answer loses nothing, and the output is typed as the
chain's. A turn's runs and threads are `test_runnable_runs.py`'s."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_rolling_memory import (
    RollingMemoryRunnable,
    RollingStore,
    open_store,
    with_rolling_memory,
)

REPLY = "one two three four"


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return f"{previous} {len(messages)} folded".strip()


def cfg(session: str = "s1") -> dict[str, Any]:
    return {"configurable": {"client_id": "ana", "session_id": session}}


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def stored(store: RollingStore, session: str = "s1") -> list[tuple[str, str]]:
    return [(type(m).__name__, m.text) for m in store.transcript(session, client_id="ana")]


def streaming_model() -> GenericFakeChatModel:
    """Streams `REPLY` word by word (GenericFakeChatModel splits on spaces)."""
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(REPLY)))


# ---------------------------------------------------------------- the layouts


def _history_prompt() -> ChatPromptTemplate:
    return ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])


LAYOUTS: dict[str, tuple[Any, dict[str, Any], Any, Any]] = {
    # name: (chain builder, with_rolling_memory keys, first input, second input)
    "message-list": (lambda m: m, {}, [HumanMessage("q0")], [HumanMessage("q1")]),
    "one-message": (lambda m: m, {}, HumanMessage("q0"), HumanMessage("q1")),
    "string": (lambda m: m, {}, "q0", "q1"),
    "input-key-holding-messages": (
        lambda m: ChatPromptTemplate.from_messages([MessagesPlaceholder("messages")]) | m,
        {"input_messages_key": "messages"},
        {"messages": [HumanMessage("q0")]},
        {"messages": [HumanMessage("q1")]},
    ),
    "input-and-history-keys": (
        lambda m: _history_prompt() | m,
        {"input_messages_key": "question", "history_messages_key": "history"},
        {"question": "q0"},
        {"question": "q1"},
    ),
    "dict-output-with-output-key": (
        lambda m: _history_prompt() | m | RunnableLambda(lambda reply: {"answer": reply, "n": 1}),
        {
            "input_messages_key": "question",
            "history_messages_key": "history",
            "output_messages_key": "answer",
        },
        {"question": "q0"},
        {"question": "q1"},
    ),
    "string-output": (
        lambda m: _history_prompt() | m | StrOutputParser(),
        {"input_messages_key": "question", "history_messages_key": "history"},
        {"question": "q0"},
        {"question": "q1"},
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_stores_the_turn_and_sends_the_history(store: RollingStore, layout: str) -> None:
    build, keys, first, second = LAYOUTS[layout]
    model = ScriptedChatModel()
    chat = with_rolling_memory(build(model), store=store, summarizer=summarize, **keys)
    chat.invoke(first, config=cfg())
    out = chat.invoke(second, config=cfg())
    assert stored(store) == [
        ("HumanMessage", "q0"),
        ("AIMessage", "ok 1"),
        ("HumanMessage", "q1"),
        ("AIMessage", "ok 2"),
    ]
    assert texts(model.requests[1]) == ["q0", "ok 1", "q1"]
    answer = out["answer"] if isinstance(out, dict) else out
    assert (answer if isinstance(answer, str) else answer.text) == "ok 2"


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_each_layout_stores_the_turn_async(store: RollingStore, layout: str) -> None:
    build, keys, first, second = LAYOUTS[layout]
    model = ScriptedChatModel()
    chat = with_rolling_memory(build(model), store=store, summarizer=summarize, **keys)
    await chat.ainvoke(first, config=cfg())
    await chat.ainvoke(second, config=cfg())
    assert texts(await store.atranscript("s1", client_id="ana")) == ["q0", "ok 1", "q1", "ok 2"]
    assert texts(model.requests[1]) == ["q0", "ok 1", "q1"]


def test_an_input_that_is_no_message_is_refused_before_the_model_and_writes_nothing(
    store: RollingStore,
) -> None:
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    # A ValueError, as `RunnableWithMessageHistory` raised: code that caught it still does.
    with pytest.raises(ValueError, match=r"with_rolling_memory.*got int"):
        chat.invoke(42, config=cfg())
    assert model.requests == []
    assert store.session_info("s1") is None


def test_a_keyed_chain_called_with_a_list_is_refused_before_the_model(store: RollingStore) -> None:
    build, keys, _, _ = LAYOUTS["input-and-history-keys"]
    model = ScriptedChatModel()
    chat = with_rolling_memory(build(model), store=store, summarizer=summarize, **keys)
    with pytest.raises(ValueError, match=r"input_messages_key='question'.*a dict, got list"):
        chat.invoke([HumanMessage("q0")], config=cfg())
    assert model.requests == []
    assert store.session_info("s1") is None


def test_an_output_that_holds_no_message_is_a_clear_error(store: RollingStore) -> None:
    chat = with_rolling_memory(RunnableLambda(lambda messages: 42), store=store, summarizer=summarize)
    with pytest.raises(ValueError, match=r"the chain's output.*got int.*output_messages_key"):
        chat.invoke([HumanMessage("q0")], config=cfg())


# ---------------------------------------------------------------- streams


def test_a_streamed_reply_reaches_the_reader_in_chunks_and_is_stored_whole(store: RollingStore) -> None:
    chat = with_rolling_memory(streaming_model(), store=store, summarizer=summarize)
    chunks = list(chat.stream([HumanMessage("q0")], config=cfg()))
    assert len(chunks) > 1
    assert "".join(c.text for c in chunks) == REPLY
    assert stored(store) == [("HumanMessage", "q0"), ("AIMessage", REPLY)]


async def test_an_async_streamed_reply_is_stored_whole(store: RollingStore) -> None:
    chat = with_rolling_memory(streaming_model(), store=store, summarizer=summarize)
    chunks = [c async for c in chat.astream([HumanMessage("q0")], config=cfg())]
    assert "".join(c.text for c in chunks) == REPLY
    assert stored(store) == [("HumanMessage", "q0"), ("AIMessage", REPLY)]


def test_a_stream_the_reader_stops_early_still_stores_the_question_and_what_was_shown(
    store: RollingStore,
) -> None:
    chat = with_rolling_memory(streaming_model(), store=store, summarizer=summarize)
    stream = chat.stream([HumanMessage("q0")], config=cfg())
    shown = next(stream)
    stream.close()
    assert stored(store) == [("HumanMessage", "q0"), ("AIMessage", shown.text)]


async def test_an_async_stream_stopped_early_stores_what_was_shown(store: RollingStore) -> None:
    chat = with_rolling_memory(streaming_model(), store=store, summarizer=summarize)
    stream = chat.astream([HumanMessage("q0")], config=cfg())
    shown = await anext(stream)
    await stream.aclose()
    assert stored(store) == [("HumanMessage", "q0"), ("AIMessage", shown.text)]


def test_a_streamed_tool_call_is_stored_as_a_tool_call(store: RollingStore) -> None:
    call = AIMessageChunk("", tool_call_chunks=[{"name": "weather", "args": '{"city": "Paris"}', "id": "c1"}])

    def model(messages: Any) -> Any:
        yield call

    chat = with_rolling_memory(RunnableLambda(model), store=store, summarizer=summarize)
    list(chat.stream([HumanMessage("weather?")], config=cfg()))
    reply = store.transcript("s1", client_id="ana")[-1]
    assert isinstance(reply, AIMessage) and not isinstance(reply, AIMessageChunk)
    assert reply.tool_calls == [
        {"name": "weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    ]


# ---------------------------------------------------------------- failures


def test_a_chain_that_fails_stores_nothing(store: RollingStore) -> None:
    def down(messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("provider down")

    chat = with_rolling_memory(RunnableLambda(down), store=store, summarizer=summarize)
    with pytest.raises(ConnectionError):
        chat.invoke([HumanMessage("q0")], config=cfg())
    assert store.transcript("s1", client_id="ana") == []


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream"])
async def test_a_compaction_failing_after_the_answer_loses_nothing(store: RollingStore, mode: str) -> None:
    def summarizer_down(previous: str, messages: Sequence[BaseMessage]) -> str:
        raise ConnectionError("summarizer down")

    chat = with_rolling_memory(
        streaming_model(), store=store, summarizer=summarizer_down, max_turns=2, keep_last=1
    )
    for i in range(3):
        if mode == "invoke":
            chat.invoke([HumanMessage(f"q{i}")], config=cfg())
        elif mode == "ainvoke":
            await chat.ainvoke([HumanMessage(f"q{i}")], config=cfg())
        else:
            list(chat.stream([HumanMessage(f"q{i}")], config=cfg()))
    assert texts(store.transcript("s1", client_id="ana")) == [x for i in range(3) for x in (f"q{i}", REPLY)]
    assert store.summary("s1", client_id="ana") is None


# ---------------------------------------------------------------- a stable view within a call


def test_a_writer_landing_mid_call_is_neither_duplicated_nor_sent(store: RollingStore) -> None:
    """Another process appends to the session while the chain runs: the chain was sent the view
    read at the start, and the call stores exactly its own turn after the other writer's."""
    other = with_rolling_memory(
        RunnableLambda(lambda messages: AIMessage("other a")), store=store, summarizer=summarize
    )
    sent: list[list[BaseMessage]] = []

    def model_and_other_writer(messages: list[BaseMessage]) -> AIMessage:
        sent.append(list(messages))
        other.invoke([HumanMessage("other q")], config=cfg())
        return AIMessage("the answer")

    store.append("s1", [HumanMessage("old q"), AIMessage("old a")], client_id="ana")
    chat = with_rolling_memory(RunnableLambda(model_and_other_writer), store=store, summarizer=summarize)
    chat.invoke([HumanMessage("new q")], config=cfg())
    assert texts(sent[0]) == ["old q", "old a", "new q"]
    assert texts(store.transcript("s1", client_id="ana")) == [
        "old q",
        "old a",
        "other q",
        "other a",
        "new q",
        "the answer",
    ]


# ---------------------------------------------------------------- the base


def test_the_runnable_is_not_built_on_the_deprecated_class() -> None:
    assert not issubclass(RollingMemoryRunnable, RunnableWithMessageHistory)
    chat = with_rolling_memory(ScriptedChatModel(), store=open_store("memory://"), summarizer=summarize)
    assert isinstance(chat, RollingMemoryRunnable)


def test_the_output_type_and_schema_are_the_wrapped_runnables() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    chat = with_rolling_memory(model, store=store, summarizer=summarize)
    assert chat.OutputType == model.OutputType
    assert chat.get_output_jsonschema() == model.get_output_jsonschema()
    parsed = _history_prompt() | model | StrOutputParser()
    as_text = with_rolling_memory(
        parsed,
        store=store,
        summarizer=summarize,
        input_messages_key="question",
        history_messages_key="history",
    )
    assert as_text.OutputType is str


def test_the_input_schema_and_the_config_fields_are_those_of_a_message_history_chain() -> None:
    store = open_store("memory://")
    chat = with_rolling_memory(
        _history_prompt() | ScriptedChatModel(),
        store=store,
        summarizer=summarize,
        input_messages_key="question",
        history_messages_key="history",
    )
    assert list(chat.get_input_jsonschema()["properties"]) == ["question"]
    assert {"client_id", "session_id", "thread_id", "user_id"} <= {s.id for s in chat.config_specs}
    assert [s.id for s in chat.history_factory_config] == ["client_id", "session_id", "thread_id", "user_id"]
    listed = with_rolling_memory(ScriptedChatModel(), store=store, summarizer=summarize)
    assert listed.get_input_jsonschema()["type"] == "array"
