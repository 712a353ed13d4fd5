"""`with_rolling_memory` is typed as the runnable it wraps: ``invoke`` returns the chain's output type.

This module is in mypy's files (pyproject ``[tool.mypy]``, run by ``make lint``): each
``assert_type`` fails the type check if a call is typed as anything else (``Any`` included, which
is what the `RunnableWithMessageHistory` base gave before issue 22). At run time the tests check
that the values are what the types say.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, assert_type

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig

from langchain_rolling_memory import Drained, RollingMemoryRunnable, open_store, with_rolling_memory

CONFIG: RunnableConfig = {"configurable": {"session_id": "s1"}}


def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
    return "summary"


def model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(4)]))


def test_a_wrapped_chat_model_returns_its_message() -> None:
    chat = with_rolling_memory(model(), store=open_store("memory://"), summarizer=summarize)
    reply = chat.invoke([HumanMessage("hi")], config=CONFIG)
    assert_type(reply, AIMessage)
    assert isinstance(reply, AIMessage)
    replies = chat.batch([[HumanMessage("a")], [HumanMessage("b")]], config=CONFIG)
    assert_type(replies, list[AIMessage])
    assert all(isinstance(r, AIMessage) for r in replies)
    chunks = chat.stream([HumanMessage("c")], config=CONFIG)
    assert_type(chunks, Iterator[AIMessage])
    assert all(isinstance(c, AIMessage) for c in chunks)


async def test_ainvoke_returns_the_same_type() -> None:
    chat = with_rolling_memory(model(), store=open_store("memory://"), summarizer=summarize)
    reply = await chat.ainvoke([HumanMessage("hi")], config=CONFIG)
    assert_type(reply, AIMessage)
    assert isinstance(reply, AIMessage)
    drained = await chat.adrain(timeout=1)
    assert_type(drained, Drained)


def test_a_chain_ending_in_a_parser_returns_a_string() -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = prompt | model() | StrOutputParser()
    chat = with_rolling_memory(
        chain,
        store=open_store("memory://"),
        summarizer=summarize,
        input_messages_key="question",
        history_messages_key="history",
    )
    assert_type(chat, RollingMemoryRunnable[dict[str, Any], str])
    text = chat.invoke({"question": "hi"}, config=CONFIG)
    assert_type(text, str)
    assert text == "answer 0"
    assert_type(chat.drain(timeout=1), Drained)
