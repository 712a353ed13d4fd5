"""A wrapper that bills a summarizer calling no model as an LLM summarizer would be billed.

Owns the estimate only (prompt and reply token counts); the summary text is the wrapped
summarizer's, unchanged. Used by the replay and the demo so that the keyless summarizer never
makes summarizing look free.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage

from langchain_rolling_memory.core.cuts import TokenCounter, count_tokens
from langchain_rolling_memory.core.prompts import DEFAULT_MAX_WORDS, default_prompt
from langchain_rolling_memory.core.summary_result import SummaryResult
from langchain_rolling_memory.summarizers.base import Summarizer


class EstimatedCostSummarizer:
    """Bills a summarizer that calls no model (the keyless one) as an LLM summarizer would be.

    The keyless summarizer costs nothing, which would make summarizing look free. This wrapper
    counts what an LLM given the same work would be billed: the default summary prompt
    (previous summary and folded messages) as input, the summary as output, one call. With
    ``record_only`` the result is returned unchanged and the estimate is only added up in
    `estimated_tokens` (so a persistent store keeps the true, zero, cost).
    """

    def __init__(
        self,
        inner: Summarizer,
        *,
        token_counter: TokenCounter = count_tokens,
        max_words: int = DEFAULT_MAX_WORDS,
        record_only: bool = False,
    ) -> None:
        self.inner = inner
        self.token_counter = token_counter
        self.max_words = max_words
        self.record_only = record_only
        self.estimated_tokens = 0

    def _bill(self, previous: str, messages: Sequence[BaseMessage], result: SummaryResult) -> SummaryResult:
        if result.calls:
            return result
        request = default_prompt().messages(previous, messages, max_words=self.max_words)
        billed_in = self.token_counter(request)
        billed_out = self.token_counter([AIMessage(result.text)])
        self.estimated_tokens += billed_in + billed_out
        if self.record_only:
            return result
        return SummaryResult(result.text, billed_in, billed_out, calls=1)

    def summarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return self._bill(previous, messages, self.inner.summarize(previous, messages))

    async def asummarize(self, previous: str, messages: Sequence[BaseMessage]) -> SummaryResult:
        return self._bill(previous, messages, await self.inner.asummarize(previous, messages))
