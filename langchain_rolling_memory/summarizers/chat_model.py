"""A summarizer on top of any LangChain chat model: prompt, call, read usage, clean."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

from langchain_rolling_memory.policy import count_tokens
from langchain_rolling_memory.prompts import SummaryPrompt, clean_summary, default_prompt
from langchain_rolling_memory.summarizers.base import SummaryResult

__all__ = ["ChatModelSummarizer", "chat_model_summarizer"]


class ChatModelSummarizer:
    """Prompts a chat model for the summary; sync and async share the prepare/finish steps.

    An unusable reply (empty or title-only after cleaning) gets one retry with a stricter
    instruction; the cleaned best effort is returned after that (possibly empty, which the
    engine treats as a failure and retries later).
    """

    def __init__(self, model: BaseChatModel, *, prompt: SummaryPrompt, max_words: int = 120) -> None:
        self.model = model
        self.prompt = prompt
        self.max_words = max_words

    def _request(self, previous: str, messages: Sequence[BaseMessage], strict: bool) -> list[BaseMessage]:
        return self.prompt.messages(previous, messages, max_words=self.max_words, strict=strict)

    def _finish(self, request: list[BaseMessage], reply: BaseMessage) -> tuple[SummaryResult, bool]:
        raw = reply.text
        text = clean_summary(raw, max_words=self.max_words)
        usage = reply.usage_metadata if isinstance(reply, AIMessage) else None
        if usage:
            result = SummaryResult(text, usage.get("input_tokens"), usage.get("output_tokens"))
        else:
            result = SummaryResult(text, count_tokens(request), count_tokens([reply]))
        usable = bool(text) and len(raw.split()) <= 2 * self.max_words
        return result, usable

    @staticmethod
    def _merge(first: SummaryResult, second: SummaryResult) -> SummaryResult:
        return SummaryResult(
            second.text or first.text,
            (first.input_tokens or 0) + (second.input_tokens or 0),
            (first.output_tokens or 0) + (second.output_tokens or 0),
        )

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        request = self._request(previous, messages, strict=False)
        result, usable = self._finish(request, self.model.invoke(request))
        if usable:
            return result
        retry = self._request(previous, messages, strict=True)
        second, _ = self._finish(retry, self.model.invoke(retry))
        return self._merge(result, second)

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        request = self._request(previous, messages, strict=False)
        result, usable = self._finish(request, await self.model.ainvoke(request))
        if usable:
            return result
        retry = self._request(previous, messages, strict=True)
        second, _ = self._finish(retry, await self.model.ainvoke(retry))
        return self._merge(result, second)

    def __repr__(self) -> str:
        return f"ChatModelSummarizer({type(self.model).__name__})"


def chat_model_summarizer(
    model: BaseChatModel,
    *,
    prompt: SummaryPrompt | None = None,
    language: str = "en",
    max_words: int = 120,
) -> ChatModelSummarizer:
    """A summarizer that prompts `model` with the default (or your) summary prompt.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Summary: Ana likes tea.")]))
        >>> chat_model_summarizer(model).summarize("", [HumanMessage("I'm Ana, I like tea")]).text
        'Ana likes tea.'
    """
    return ChatModelSummarizer(model, prompt=prompt or default_prompt(language), max_words=max_words)
