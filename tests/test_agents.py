"""RollingMemoryMiddleware in real `create_agent` graphs driven by scripted chat models."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from agent_models import ScriptedChatModel, kinds, system_text, text_of, tool_call, tool_pairs_intact
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import OwnershipError, RollingStore, open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware
from langchain_rolling_memory.core.graph_state import state_summary
from langchain_rolling_memory.errors import ConfigurationError, InvalidIdError


@tool
def weather(city: str) -> str:
    """Current weather of a city."""
    return f"18°C and cloudy in {city}"


class RecordingSummarizer:
    """A function summarizer that records what it was asked to fold."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[BaseMessage]]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append((previous, list(messages)))
        return f"summary {len(self.calls)}: " + " | ".join(m.text for m in messages if m.text)[:200]


@dataclass
class Ctx:
    client_id: str
    session_id: str


def config(session: str, client: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": session}
    if client is not None:
        configurable["client_id"] = client
    return {"configurable": configurable}


def build(
    model: ScriptedChatModel,
    store: RollingStore,
    *,
    checkpointer: bool = True,
    summarizer: Any = None,
    **options: Any,
) -> tuple[Any, RollingMemoryMiddleware]:
    options.setdefault("max_turns", 6)
    options.setdefault("keep_last", 2)
    memory = RollingMemoryMiddleware(store=store, summarizer=summarizer or RecordingSummarizer(), **options)
    agent = create_agent(
        model,
        [weather],
        system_prompt="You are a delivery assistant.",
        middleware=[memory],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    return agent, memory


def user(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


# ---------------------------------------------------------------------- the done-when scenario


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_two_sessions_facts_reach_the_same_client_only(store: RollingStore, checkpointer: bool) -> None:
    model = ScriptedChatModel(
        script=[
            tool_call("remember", {"text": "Gets deliveries on Saturdays", "key": "delivery_day"}, "c1"),
            AIMessage("Noted: Saturdays."),
        ]
    )
    agent, _ = build(model, store, checkpointer=checkpointer)

    agent.invoke(user("Please deliver on Saturdays from now on."), config("s1", "ana"))
    assert [f.text for f in store.facts("ana")] == ["Gets deliveries on Saturdays"]
    assert store.facts("ana")[0].source == "tool"

    agent.invoke(user("When do you deliver to me?"), config("s2", "ana"))
    assert "Gets deliveries on Saturdays" in system_text(model.requests[-1])
    # The new session starts from nothing but the facts: session 1's messages are not in it.
    assert "Please deliver on Saturdays" not in text_of(model.requests[-1])

    agent.invoke(user("When do you deliver to me?"), config("s3", "bob"))
    assert "Saturdays" not in text_of(model.requests[-1])
    assert store.facts("bob") == []


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_the_extractor_learns_a_fact_after_compaction_for_the_next_session(
    store: RollingStore, checkpointer: bool
) -> None:
    extractor_model = ScriptedChatModel(
        script=[
            AIMessage(
                '{"add": [{"text": "Allergic to peanuts", "key": "allergy"}], "update": [], "delete": []}'
            )
        ]
    )
    model = ScriptedChatModel()
    agent, _ = build(
        model, store, checkpointer=checkpointer, max_turns=4, keep_last=2, extractor=extractor_model
    )
    for text in ["Hi, I am allergic to peanuts.", "What snacks do you have?", "And for dinner?"]:
        agent.invoke(user(text), config("s1", "ana"))
    # The extractor was asked about exactly the folded messages, once.
    assert len(extractor_model.requests) == 1
    assert "allergic to peanuts" in extractor_model.requests[0][-1].text
    assert [(f.text, f.source) for f in store.facts("ana")] == [("Allergic to peanuts", "extractor")]

    agent.invoke(user("Suggest a dessert."), config("s2", "ana"))
    assert "Allergic to peanuts" in system_text(model.requests[-1])
    agent.invoke(user("Suggest a dessert."), config("s3", "bob"))
    assert "peanuts" not in text_of(model.requests[-1])


def test_forget_and_session_state_tools_are_bound_to_the_run() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Lives in Lyon", key="city")
    store.add_fact("bob", "Lives in Lyon", key="city")
    model = ScriptedChatModel(
        script=[
            tool_call("forget_fact", {"fact": "city"}, "c1"),
            tool_call("update_session_state", {"updates": {"cart": ["A-1"], "step": "payment"}}, "c2"),
            AIMessage("done"),
            AIMessage("next"),
        ]
    )
    agent, memory = build(model, store, memory_tools=("remember", "forget_fact", "update_session_state"))
    assert sorted(t.name for t in memory.tools) == ["forget_fact", "remember", "update_session_state"]
    agent.invoke(user("I moved, forget my city; add A-1 to my cart"), config("s1", "ana"))
    assert store.facts("ana") == []
    assert [f.text for f in store.facts("bob")] == ["Lives in Lyon"]
    assert store.get_state("s1") == {"cart": ["A-1"], "step": "payment"}
    agent.invoke(user("what is in my cart?"), config("s1", "ana"))
    assert '{"cart": ["A-1"], "step": "payment"}' in system_text(model.requests[-1])


@pytest.mark.parametrize(
    "tools", [("remember", "delete_everything"), "remember"], ids=["unknown", "a-string"]
)
def test_unknown_memory_tools_are_refused(tools: Any) -> None:
    with pytest.raises(ConfigurationError, match="memory_tools"):
        RollingMemoryMiddleware(
            store=open_store("memory://"), summarizer=RecordingSummarizer(), memory_tools=tools
        )


def test_the_model_cannot_choose_whose_memory_it_writes() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(
        script=[tool_call("remember", {"text": "Owes nothing", "client_id": "victim"}, "c1"), AIMessage("ok")]
    )
    agent, memory = build(model, store)
    assert "client_id" not in memory.tools[0].args
    agent.invoke(user("hi"), config("s1", "mallory"))
    assert [f.text for f in store.facts("mallory")] == ["Owes nothing"]
    assert store.facts("victim") == []


def test_remember_without_a_client_stores_nothing_and_tells_the_model() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(script=[tool_call("remember", {"text": "Likes tea"}, "c1"), AIMessage("ok")])
    agent, _ = build(model, store)
    out = agent.invoke(user("I like tea"), config("s1"))
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert "no client" in answer.text
    assert store.sessions("anyone") == []


def test_client_and_session_come_from_the_runtime_context() -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Prefers email")
    model = ScriptedChatModel(script=[tool_call("remember", {"text": "Works nights"}, "c1"), AIMessage("ok")])
    memory = RollingMemoryMiddleware(store=store, summarizer=RecordingSummarizer())
    agent = create_agent(model, [], middleware=[memory], context_schema=Ctx)
    agent.invoke(user("hello"), context=Ctx(client_id="ana", session_id="ctx-session"))
    assert "Prefers email" in system_text(model.requests[-1])
    assert kinds(store.transcript("ctx-session")) == ["human", "ai", "tool", "ai"]
    assert store.sessions("ana") == ["ctx-session"]
    assert [f.text for f in store.facts("ana")] == ["Prefers email", "Works nights"]


def test_a_fixed_client_id_applies_to_runs_that_name_none() -> None:
    store = open_store("memory://")
    store.add_fact("solo", "Vegetarian")
    model = ScriptedChatModel()
    agent, _ = build(model, store, client_id="solo")
    agent.invoke(user("dinner ideas?"), config("s1"))
    assert "Vegetarian" in system_text(model.requests[-1])


def test_a_run_without_a_session_id_gets_a_clear_error_and_writes_nothing() -> None:
    store = open_store("memory://")
    agent, _ = build(ScriptedChatModel(), store, checkpointer=False)
    with pytest.raises(ConfigurationError, match="thread_id"):
        agent.invoke(user("hello"))


@pytest.mark.parametrize("bad", ["../etc", "a b", "x" * 200, "s;DROP"], ids=["dots", "space", "long", "sql"])
def test_an_unsafe_session_id_is_refused_before_anything_is_written(bad: str) -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    agent, _ = build(model, store)
    with pytest.raises(InvalidIdError):
        agent.invoke(user("hello"), config(bad, "ana"))
    assert model.requests == []
    assert store.sessions("ana") == []


def test_a_session_of_another_client_is_refused() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    agent, _ = build(model, store)
    agent.invoke(user("mine"), config("s1", "ana"))
    with pytest.raises(OwnershipError):
        agent.invoke(user("let me in"), config("s1", "bob"))
    assert len(store.transcript("s1")) == 2


def test_a_run_of_another_client_cannot_read_a_session_even_without_writing() -> None:
    from langgraph.runtime import Runtime

    store = open_store("memory://")
    store.append("s1", [HumanMessage("ana's secret")], client_id="ana")
    memory = RollingMemoryMiddleware(store=store, summarizer=RecordingSummarizer())
    runtime = Runtime(context={"client_id": "bob", "session_id": "s1"})
    with pytest.raises(OwnershipError, match="another client"):
        memory.before_model({"messages": []}, runtime)
    assert (
        memory.before_model({"messages": []}, Runtime(context={"client_id": "ana", "session_id": "s1"}))
        is None
    )


def test_the_private_state_channel_is_the_one_the_run_helpers_track() -> None:
    from langchain_rolling_memory.adapters.agent_run import PERSISTED_KEY
    from langchain_rolling_memory.adapters.middleware import RollingMemoryState

    assert PERSISTED_KEY in RollingMemoryState.__annotations__


# ---------------------------------------------------------------------- each message stored once


def _turns(agent: Any, texts: Sequence[str], session: str = "s1") -> None:
    for text in texts:
        agent.invoke(user(text), config(session, "ana"))


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_each_message_of_each_turn_is_stored_exactly_once(checkpointer: bool) -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(
        script=[tool_call("weather", {"city": "Paris"}, "w1"), AIMessage("Cloudy."), AIMessage("Bye.")]
    )
    agent, _ = build(model, store, checkpointer=checkpointer, max_turns=50, keep_last=2)
    _turns(agent, ["Weather in Paris?", "Thanks"])
    transcript = store.transcript("s1")
    assert kinds(transcript) == ["human", "ai", "tool", "ai", "human", "ai"]
    assert [m.text for m in transcript if isinstance(m, HumanMessage)] == ["Weather in Paris?", "Thanks"]
    assert len({m.id for m in transcript}) == len(transcript)


def test_messages_sent_again_with_their_ids_are_not_stored_twice() -> None:
    # A stateless client (no checkpointer) that sends the whole conversation back each time.
    store = open_store("memory://")
    model = ScriptedChatModel()
    agent, _ = build(model, store, checkpointer=False, max_turns=50, keep_last=2)
    conversation: list[BaseMessage] = []
    for text in ["one", "two", "three"]:
        conversation.append(HumanMessage(text, id=f"h-{text}"))
        conversation = agent.invoke({"messages": conversation}, config("s1", "ana"))["messages"]
    assert [m.text for m in store.transcript("s1")] == ["one", "ok 1", "two", "ok 2", "three", "ok 3"]
    assert [m.text for m in model.requests[-1][1:]] == ["one", "ok 1", "two", "ok 2", "three"]


def test_the_store_keeps_every_message_while_the_checkpointed_state_holds_the_view() -> None:
    store = open_store("memory://")
    summarizer = RecordingSummarizer()
    model = ScriptedChatModel()
    agent, memory = build(model, store, summarizer=summarizer, max_turns=4, keep_last=2)
    _turns(agent, [f"question {i}" for i in range(6)])
    state = agent.get_state(config("s1")).values["messages"]
    assert len(store.transcript("s1")) == 12
    assert summarizer.calls, "older messages were folded"
    # The state holds the summary and what it does not cover, as the model was sent them.
    assert state[0].id == "rolling-memory-summary"
    assert len(state) <= 1 + 4 + 1
    last = model.requests[-1]
    assert kinds(last)[:2] == ["system", "human"]
    assert last[1].text.startswith("[Summary of the earlier conversation")
    assert [m.text for m in last[2:]] == [m.text for m in state[1:-1]]
    # What was folded is exactly the start of the transcript, in order, once.
    folded = [m for _, batch in summarizer.calls for m in batch]
    assert [m.text for m in folded] == [m.text for m in store.transcript("s1")[: len(folded)]]
    usage = memory.usage_of(state)
    assert (usage.compactions, usage.folded_messages) == (len(summarizer.calls), len(folded))


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_stream_stores_the_same_transcript_as_invoke(checkpointer: bool) -> None:
    store = open_store("memory://")
    model = ScriptedChatModel(script=[tool_call("weather", {"city": "Oslo"}, "w1"), AIMessage("Cold.")])
    agent, _ = build(model, store, checkpointer=checkpointer)
    chunks = list(agent.stream(user("Weather in Oslo?"), config("s1", "ana"), stream_mode="updates"))
    assert chunks
    assert kinds(store.transcript("s1")) == ["human", "ai", "tool", "ai"]


def test_a_session_started_without_a_checkpointer_continues_with_one() -> None:
    store = open_store("memory://")
    model = ScriptedChatModel()
    plain, _ = build(model, store, checkpointer=False)
    _turns(plain, ["first"])
    saved, _ = build(model, store, checkpointer=True)
    _turns(saved, ["second", "third"])
    assert [m.text for m in store.transcript("s1") if isinstance(m, HumanMessage)] == [
        "first",
        "second",
        "third",
    ]
    assert "first" in text_of(model.requests[-1])


def test_a_session_moves_from_a_history_chain_to_the_agent_and_back() -> None:
    from langchain_rolling_memory import RollingSummaryChatMessageHistory

    store = open_store("memory://")
    summarizer = RecordingSummarizer()

    def history() -> RollingSummaryChatMessageHistory:
        return RollingSummaryChatMessageHistory(
            "s1", summarizer=summarizer, store=store, client_id="ana", max_turns=4, keep_last=2
        )

    for i in range(3):
        history().add_messages([HumanMessage(f"chain question {i}"), AIMessage(f"chain answer {i}")])
    before = history().messages
    assert before[0].text.startswith("[Summary")

    model = ScriptedChatModel()
    agent, _ = build(model, store, summarizer=summarizer, max_turns=4, keep_last=2)
    agent.invoke(user("agent question"), config("s1", "ana"))
    # The agent's first request is the chain's view plus the new question.
    assert [m.text for m in model.requests[0][1:]] == [m.text for m in before] + ["agent question"]

    after = history()
    assert [m.text for m in after.transcript][-2:] == ["agent question", "ok 1"]
    assert after.messages[-1].text == "ok 1"


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_a_malformed_tool_call_never_leaves_an_unanswered_call_or_an_orphan_result(
    checkpointer: bool,
) -> None:
    store = open_store("memory://")
    malformed = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "weather",
                "args": "{oops",
                "id": "bad-1",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = ScriptedChatModel(script=[malformed, AIMessage("fine"), AIMessage("still fine")])
    agent, _ = build(model, store, checkpointer=checkpointer)
    _turns(agent, ["one", "two", "three"])
    for request in model.requests[1:]:
        body = [m for m in request if m.type != "system"]
        answered = [i for i, m in enumerate(body) if isinstance(m, ToolMessage) and m.tool_call_id == "bad-1"]
        calling = [i for i, m in enumerate(body) if isinstance(m, AIMessage) and m.invalid_tool_calls]
        assert [i + 1 for i in calling] == answered, kinds(body)
    assert any(isinstance(m, AIMessage) and m.invalid_tool_calls for m in store.transcript("s1"))


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_human_in_the_loop_pause_stores_the_call_once_after_the_decision(decision: str) -> None:
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.types import Command

    store = open_store("memory://")
    model = ScriptedChatModel(script=[tool_call("weather", {"city": "Paris"}, "w1"), AIMessage("done")])
    memory = RollingMemoryMiddleware(store=store, summarizer=RecordingSummarizer())
    review = HumanInTheLoopMiddleware(interrupt_on={"weather": True})
    agent = create_agent(model, [weather], middleware=[memory, review], checkpointer=InMemorySaver())
    paused = agent.invoke(user("Weather in Paris?"), config("s1", "ana"))
    assert "__interrupt__" in paused
    answer: dict[str, Any] = (
        {"type": decision} if decision == "approve" else {"type": decision, "message": "no"}
    )
    agent.invoke(Command(resume={"decisions": [answer]}), config("s1", "ana"))
    transcript = store.transcript("s1")
    assert kinds(transcript) == ["human", "ai", "tool", "ai"]
    assert transcript[2].status == ("success" if decision == "approve" else "error")


# ---------------------------------------------------------------------- policies


def test_token_policy_folds_and_keeps_tool_pairs_together() -> None:
    store = open_store("memory://")
    summarizer = RecordingSummarizer()
    script: list[Any] = []
    for i in range(6):
        script += [
            tool_call("weather", {"city": f"city{i}"}, f"w{i}"),
            AIMessage(f"It is cloudy in city{i}. " * 5),
        ]
    model = ScriptedChatModel(script=script)
    agent, _ = build(model, store, summarizer=summarizer, max_turns=None, max_tokens=200, keep_tokens=80)
    _turns(agent, [f"What is the weather in city{i}? " * 3 for i in range(6)])
    assert summarizer.calls
    for _previous, batch in summarizer.calls:
        assert tool_pairs_intact(batch)
    for request in model.requests:
        assert kinds(request)[0] == "system"
        assert tool_pairs_intact(request[1:])


def test_failing_summarizer_loses_nothing_and_the_agent_answers() -> None:
    store = open_store("memory://")

    def broken(previous: str, messages: Sequence[BaseMessage]) -> str:
        raise RuntimeError("provider down")

    model = ScriptedChatModel()
    agent, _ = build(model, store, summarizer=broken, max_turns=4, keep_last=2)
    _turns(agent, [f"q{i}" for i in range(4)])
    assert len(store.transcript("s1")) == 8
    assert store.summary("s1") is None
    assert all(isinstance(r[-1], HumanMessage) for r in model.requests)


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
def test_background_compaction_runs_off_the_turn(checkpointer: bool) -> None:
    store = open_store("memory://")
    summarizer = RecordingSummarizer()
    model = ScriptedChatModel()
    agent, memory = build(
        model,
        store,
        summarizer=summarizer,
        max_turns=4,
        keep_last=2,
        background=True,
        checkpointer=checkpointer,
    )
    _turns(agent, [f"q{i}" for i in range(3)])
    memory.flush("s1")
    folded = [m.text for m in summarizer.calls[0][1]]
    assert folded == [m.text for m in store.transcript("s1")[: len(folded)]]
    assert len(model.requests) == 3  # summarized off the turns: no model call waited for it
    _turns(agent, ["q3"])
    assert model.requests[-1][1].text.startswith("[Summary of the earlier conversation")
    assert "summary 1" in model.requests[-1][1].text


# ---------------------------------------------------------------------- async


@pytest.mark.parametrize("checkpointer", [True, False], ids=["checkpointer", "no-checkpointer"])
async def test_async_agent_two_sessions_and_transcript(store: RollingStore, checkpointer: bool) -> None:
    model = ScriptedChatModel(
        script=[
            tool_call("remember", {"text": "Lives in Lyon", "key": "city"}, "c1"),
            tool_call("weather", {"city": "Lyon"}, "w1"),
            AIMessage("Sunny in Lyon."),
        ]
    )
    agent, _ = build(model, store, checkpointer=checkpointer)
    await agent.ainvoke(user("I live in Lyon, weather?"), config("s1", "ana"))
    assert kinds(await store.atranscript("s1")) == ["human", "ai", "tool", "ai", "tool", "ai"]
    await agent.ainvoke(user("again"), config("s2", "ana"))
    assert "Lives in Lyon" in system_text(model.requests[-1])
    await agent.ainvoke(user("again"), config("s3", "bob"))
    assert "Lyon" not in text_of(model.requests[-1])


async def test_async_stream_and_background_compaction() -> None:
    store = open_store("memory://")
    summarizer = RecordingSummarizer()
    model = ScriptedChatModel()
    agent, memory = build(model, store, summarizer=summarizer, max_turns=4, keep_last=2, background=True)
    for i in range(3):
        async for _ in agent.astream(user(f"q{i}"), config("s1", "ana")):
            pass
    await memory.aflush("s1")
    assert len(await store.atranscript("s1")) == 6
    assert summarizer.calls
    await agent.ainvoke(user("q3"), config("s1", "ana"))
    state = agent.get_state(config("s1")).values["messages"]
    assert state_summary(state) is not None
    assert "summary 1" in model.requests[-1][1].text


# ---------------------------------------------------------------------- packaging


def test_importing_the_package_does_not_import_langchain_or_langgraph() -> None:
    import subprocess
    import sys

    code = (
        "import sys, langchain_rolling_memory as m; "
        "assert 'RollingMemoryMiddleware' in m.__all__; "
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('langchain', 'langgraph')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_name_in_all_resolves_and_the_middleware_is_served_lazily() -> None:
    import langchain_rolling_memory as package

    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert package.RollingMemoryMiddleware is RollingMemoryMiddleware
    assert "RollingMemoryMiddleware" in dir(package)
    with pytest.raises(AttributeError, match="NoSuchThing"):
        package.NoSuchThing  # noqa: B018


def test_without_langchain_the_middleware_names_the_agents_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import sys

    from langchain_rolling_memory.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "langchain", None)
    monkeypatch.delitem(sys.modules, "langchain_rolling_memory.adapters.middleware")
    with pytest.raises(MissingExtraError, match=r"langchain-rolling-memory\[agents\]"):
        importlib.import_module("langchain_rolling_memory.adapters.middleware")


# ---------------------------------------------------------------------- streaming


def _streaming_agent(background: bool) -> tuple[Any, RollingMemoryMiddleware, RollingStore]:
    from langchain_core.language_models import GenericFakeChatModel

    store = open_store("memory://")
    summarizer = GenericFakeChatModel(messages=iter([AIMessage(f"SUMMARY-TEXT {i}") for i in range(20)]))
    agent, memory = build(
        ScriptedChatModel(), store, summarizer=summarizer, max_turns=2, keep_last=1, background=background
    )
    return agent, memory, store


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_streamed_messages_never_show_the_summary_as_an_agent_reply(background: bool) -> None:
    agent, memory, _ = _streaming_agent(background)
    streamed: list[str] = []
    for i in range(5):
        for chunk, _meta in agent.stream(user(f"q{i}"), config("s1", "ana"), stream_mode="messages"):
            if chunk.type.startswith("ai"):  # the state's summary is a user-role update, not a reply
                streamed.append(chunk.text)
        memory.flush("s1")
    record = state_summary(agent.get_state(config("s1")).values["messages"])
    assert record is not None
    assert record.text.startswith("SUMMARY-TEXT")
    assert streamed
    assert not any("SUMMARY-TEXT" in text for text in streamed)


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
async def test_async_streamed_messages_never_show_the_summary(background: bool) -> None:
    agent, memory, _ = _streaming_agent(background)
    streamed: list[str] = []
    for i in range(5):
        async for chunk, _meta in agent.astream(user(f"q{i}"), config("s1", "ana"), stream_mode="messages"):
            if chunk.type.startswith("ai"):
                streamed.append(chunk.text)
        await memory.aflush("s1")
    record = state_summary((await agent.aget_state(config("s1"))).values["messages"])
    assert record is not None
    assert streamed
    assert not any("SUMMARY-TEXT" in text for text in streamed)
