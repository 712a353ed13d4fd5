"""`summarizer=` takes what LangChain's `SummarizationMiddleware` takes: a model string (built
with `init_chat_model`, called here through the real clients against the local fake servers)
and any Runnable (LCEL chains over fake chat models), beside functions and chat models."""

from __future__ import annotations

from typing import Any

import pytest
from fake_providers import serve
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store, with_rolling_memory
from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError
from langchain_rolling_memory.summarizers import ChatModelSummarizer, RunnableSummarizer, as_summarizer
from langchain_rolling_memory.summarizers.coerce import SUMMARY_PREFIX

pytest.importorskip("langchain")

SUMMARY = (
    "Ana, a client from Lyon, wants every order delivered on Saturdays only; "
    "the assistant noted it and will apply it to her next deliveries."
)


def turns(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}") if i % 2 == 0 else AIMessage(f"answer {i}") for i in range(n)]


# ---------------------------------------------------------------- model strings


def test_an_openai_model_string_summarizes_through_the_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve("openai", lambda request: SUMMARY) as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
        history = RollingSummaryChatMessageHistory(
            "s1", summarizer="openai:gpt-4o-mini", max_turns=4, keep_last=2, timeout=10
        )
        history.add_messages(turns(5))
    assert history.summary == SUMMARY
    assert len(provider.requests) == 1
    request = provider.requests[0]
    assert request.body["model"] == "gpt-4o-mini"
    assert any("question 0" in text for text in request.texts())
    # The default summary prompt was sent, as for a chat model object.
    assert any("summar" in text.lower() for text in request.texts())


def test_a_gemini_model_string_summarizes_through_the_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_google_genai")
    with serve("gemini", lambda request: SUMMARY) as provider:
        monkeypatch.setenv("GOOGLE_API_KEY", "test")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", provider.base_url)
        summarizer = as_summarizer("google_genai:gemini-2.5-flash")
        result = summarizer.summarize("", turns(3))
    assert result.text == SUMMARY
    assert len(provider.requests) == 1
    assert "gemini-2.5-flash" in provider.requests[0].path


async def test_a_model_string_summarizes_in_async_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve("openai", lambda request: SUMMARY) as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
        history = RollingSummaryChatMessageHistory(
            "s1", summarizer="openai:gpt-4o-mini", max_turns=4, keep_last=2, timeout=10
        )
        await history.aadd_messages(turns(5))
        assert await history.asummary() == SUMMARY
    assert len(provider.requests) == 1


def test_with_rolling_memory_builds_a_model_string_once(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(6)]))
    with serve("openai", lambda request: SUMMARY) as provider:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
        store = open_store("memory://")
        chat = with_rolling_memory(
            answers, store=store, summarizer="openai:gpt-4o-mini", max_turns=4, keep_last=2, timeout=10
        )
        built = as_summarizer_calls(monkeypatch)
        for i in range(3):
            chat.invoke(
                [HumanMessage(f"q{i}")], config={"configurable": {"client_id": "ana", "session_id": "s1"}}
            )
    assert built == []  # each turn's history reuses the summarizer built by with_rolling_memory
    assert store.summary("s1") is not None
    assert store.summary("s1").text == SUMMARY  # type: ignore[union-attr]


def as_summarizer_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every model string built from now on."""
    from langchain_rolling_memory.summarizers import coerce

    built: list[str] = []
    real = coerce.init_chat_model

    def spy(name: str) -> Any:
        built.append(name)
        return real(name)

    monkeypatch.setattr(coerce, "init_chat_model", spy)
    return built


def test_an_unknown_provider_is_one_clear_line() -> None:
    with pytest.raises(ConfigurationError, match=r"summarizer='nope:model'.*infer model provider") as info:
        as_summarizer("nope:model")
    assert "\n" not in str(info.value)


def test_a_missing_key_is_reported_when_the_memory_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY") as info:
        RollingSummaryChatMessageHistory("s1", summarizer="openai:gpt-4o-mini")
    assert "\n" not in str(info.value)


def test_a_provider_package_not_installed_is_a_missing_extra() -> None:
    pytest.importorskip("langchain")
    try:
        import langchain_anthropic  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("langchain-anthropic is installed here")
    with pytest.raises(MissingExtraError, match="langchain-anthropic"):
        as_summarizer("anthropic:claude-sonnet-4-5")


def test_a_model_string_gets_the_chat_model_prompt_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    summarizer = as_summarizer("openai:gpt-4o-mini", language="fr", max_words=50)
    assert isinstance(summarizer, ChatModelSummarizer)
    assert summarizer.max_words == 50
    assert summarizer.language == "fr"


# ---------------------------------------------------------------- runnables


class Recording(GenericFakeChatModel):
    requests: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic field, copied per instance

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def chain_model(*replies: str | AIMessage) -> Recording:
    return Recording(
        messages=iter(r if isinstance(r, AIMessage) else AIMessage(r) for r in replies), requests=[]
    )


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Summarize this conversation in one sentence."), MessagesPlaceholder("messages")]
)


def test_an_lcel_chain_returning_a_string_is_a_summarizer() -> None:
    model = chain_model("first summary", "second summary")
    chain = PROMPT | model | StrOutputParser()
    history = RollingSummaryChatMessageHistory("s1", summarizer=chain, max_turns=4, keep_last=2)
    history.add_messages(turns(5))
    assert history.summary == "first summary"
    first = model.requests[0]
    assert first[0].content == "Summarize this conversation in one sentence."
    assert [m.content for m in first[1:]] == ["question 0", "answer 1", "question 2"]
    history.add_messages(turns(4))
    assert history.summary == "second summary"
    # The previous summary leads the next input, as SummarizationMiddleware leaves it.
    second = model.requests[1]
    assert second[1].content == SUMMARY_PREFIX + "first summary"
    assert isinstance(second[1], HumanMessage)


def test_a_chain_returning_a_message_keeps_its_text_and_usage() -> None:
    reply = AIMessage(
        "the summary", usage_metadata={"input_tokens": 321, "output_tokens": 7, "total_tokens": 328}
    )
    history = RollingSummaryChatMessageHistory(
        "s1", summarizer=PROMPT | chain_model(reply), max_turns=4, keep_last=2
    )
    history.add_messages(turns(5))
    assert history.summary == "the summary"
    assert history.usage.input_tokens == 321
    assert history.usage.output_tokens == 7


async def test_an_async_runnable_is_called_with_ainvoke() -> None:
    seen: list[list[BaseMessage]] = []

    async def summarize(messages: list[BaseMessage]) -> str:
        seen.append(messages)
        return f"{len(messages)} messages"

    history = RollingSummaryChatMessageHistory(
        "s1", summarizer=RunnableLambda(summarize), max_turns=4, keep_last=2
    )
    await history.aadd_messages(turns(5))
    assert await history.asummary() == "3 messages"
    assert [m.content for m in seen[0]] == ["question 0", "answer 1", "question 2"]


def test_a_runnable_returning_something_else_fails_the_compaction_loudly() -> None:
    errors: list[BaseException] = []
    history = RollingSummaryChatMessageHistory(
        "s1",
        summarizer=RunnableLambda(lambda messages: {"summary": "x"}),
        max_turns=4,
        keep_last=2,
        on_error=lambda session, exc: errors.append(exc),
    )
    history.add_messages(turns(5))
    assert history.summary == ""
    assert len(history.transcript) == 5  # nothing lost
    assert errors
    assert "must return a str or a message, got dict" in str(errors[0])


def test_a_runnable_summarizes_for_the_agent_middleware_too() -> None:
    pytest.importorskip("langgraph")
    from langchain_rolling_memory import RollingMemoryMiddleware

    model = chain_model("agent summary")
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"), summarizer=PROMPT | model | StrOutputParser(), max_turns=4, keep_last=2
    )
    assert isinstance(memory.compactor.summarizer, RunnableSummarizer)
    memory.store.append("s1", turns(5))
    memory.compactor.advance("s1")
    assert memory.store.summary("s1").text == "agent summary"  # type: ignore[union-attr]


def test_anything_else_is_refused_with_the_accepted_forms() -> None:
    with pytest.raises(ConfigurationError, match=r"a model string .* a Runnable"):
        as_summarizer(42)  # type: ignore[arg-type]
