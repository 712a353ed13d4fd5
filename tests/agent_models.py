"""Scripted chat models for agent tests: replies in order, tool calls, a record of every request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class ScriptedChatModel(BaseChatModel):
    """Answers with `script` in order (a reply, or a function of the request) and records
    each request it receives in `requests`; `bind_tools` returns the model itself."""

    script: list[AIMessage | Callable[[list[BaseMessage]], AIMessage]] = Field(default_factory=list)
    requests: list[list[BaseMessage]] = Field(default_factory=list)
    default: str = "ok"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.requests.append(list(messages))
        if not self.script:
            return AIMessage(f"{self.default} {len(self.requests)}")
        reply = self.script.pop(0)
        message = reply(messages) if callable(reply) else reply
        return message.model_copy()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])


def tool_call(name: str, args: dict[str, Any], call_id: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def text_of(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in messages)


def system_text(request: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in request if isinstance(m, SystemMessage))


def kinds(messages: Sequence[BaseMessage]) -> list[str]:
    names = {HumanMessage: "human", AIMessage: "ai", ToolMessage: "tool", SystemMessage: "system"}
    return [names.get(type(m), type(m).__name__) for m in messages]


def tool_pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    """Every ToolMessage answers a tool call made earlier in the list, and every tool call
    of an AIMessage is answered before the next non-tool message."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AIMessage):
            open_calls = {str(c["id"]) for c in message.tool_calls}
    return not open_calls
