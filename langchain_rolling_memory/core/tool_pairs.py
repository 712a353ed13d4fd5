"""The tool-pair rule: cuts that keep each tool call with its results, and the repair of a list
whose pairs were broken before it reached us; pure functions, no I/O.

A *cut* is tool-safe when the kept part does not start with a `ToolMessage` and no
`ToolMessage` in the kept part answers an `AIMessage` that was cut away (parallel tool calls
included). Where to cut for the limits is `cuts`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage


def _unsafe_suffix(messages: Sequence[BaseMessage]) -> list[int]:
    """For each cut c, the smallest index of an AIMessage answered by a ToolMessage at >= c."""
    owner: dict[str, int] = {}
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    owner[str(call["id"])] = i
    n = len(messages)
    lowest = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        lowest[i] = lowest[i + 1]
        message = messages[i]
        if isinstance(message, ToolMessage) and message.tool_call_id in owner:
            lowest[i] = min(lowest[i], owner[message.tool_call_id])
    return lowest


def is_tool_safe(messages: Sequence[BaseMessage], cut: int) -> bool:
    """True if cutting at `cut` keeps every tool call with its results."""
    if cut <= 0 or cut >= len(messages):
        return True
    if isinstance(messages[cut], ToolMessage):
        return False
    return _unsafe_suffix(messages)[cut] >= cut


def tool_safe_cut(messages: Sequence[BaseMessage], cut: int, *, keep_more: bool = True) -> int:
    """Move `cut` to the nearest tool-safe cut.

    Args:
        messages: the list being cut.
        cut: the wanted cut, clamped to ``[0, len(messages)]``.
        keep_more: move towards the start (keep more messages) if True, towards the end
            (keep fewer, so a hard limit holds) if False.
    """
    n = len(messages)
    cut = max(0, min(cut, n))
    lowest = _unsafe_suffix(messages)

    def safe(c: int) -> bool:
        if c >= n or (c <= 0 and keep_more):
            return True
        # Moving forward also skips tool results at the very start of a partial list
        # (a window read from the end of a transcript), whose call is not in the list.
        return not isinstance(messages[c], ToolMessage) and lowest[c] >= c

    step = -1 if keep_more else 1
    while not safe(cut):
        cut += step
    return cut


def pending_calls(messages: Sequence[BaseMessage]) -> int:
    """Index of a trailing `AIMessage` whose tool calls still wait for results (a turn in
    progress: the results will be appended after it), else ``len(messages)``. Folding it now
    would leave those results orphans in every later view."""
    answered: set[str] = set()
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AIMessage) and any(
            str(c.get("id")) not in answered for c in message.tool_calls
        ):
            return i
        break
    return len(messages)


_NO_RESULT = "No result was recorded for this tool call (it was interrupted or its arguments were malformed)."


def _call_ids(message: AIMessage) -> dict[str, str]:
    # Providers send invalid tool calls as calls too (OpenAI requires an answer to each).
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    return {str(c["id"]): str(c.get("name") or "unknown") for c in calls if c.get("id")}


def pair_tool_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with every tool call answered right after its `AIMessage`, and no orphan
    tool result, so that providers accept the request.

    A call left without a result (a run interrupted between the call and its result, or a
    call whose arguments were malformed) gets an error result; a tool result that does not
    follow its call (LangChain's own answer to a malformed call, stored after the next user
    message) is left out. Well-formed lists come back unchanged.
    """
    out: list[BaseMessage] = []
    pending: dict[str, str] = {}

    def close() -> None:
        out.extend(
            ToolMessage(_NO_RESULT, tool_call_id=call_id, name=name, status="error")
            for call_id, name in pending.items()
        )
        pending.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            if pending.pop(message.tool_call_id, None) is not None:
                out.append(message)
            continue
        close()
        out.append(message)
        if isinstance(message, AIMessage):
            pending.update(_call_ids(message))
    close()
    return out
