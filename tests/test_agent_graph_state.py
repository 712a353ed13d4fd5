"""The agent middleware's view follows the graph state: forks, time travel, `RemoveMessage`,
edits and replays, with `InMemorySaver` and the real `PostgresSaver`; the state stays bounded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from agent_models import ScriptedChatModel, text_of
from graph_savers import async_postgres_saver, postgres_saver
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_rolling_memory import RollingStore, open_store
from langchain_rolling_memory.adapters.middleware import RollingMemoryMiddleware

PARIS = "I live in Paris"
ROME = "Actually, forget that: I live in Rome"
WHERE = "Where do I live?"


class RecordingSummarizer:
    """Summarizes by quoting what it folds, and records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[BaseMessage]]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append((previous, list(messages)))
        return f"summary {len(self.calls)}: " + " | ".join(m.text for m in messages if m.text)[:300]


@pytest.fixture(params=["memory", "postgres"])
def saver(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemorySaver()
        return
    with postgres_saver() as real:
        yield real


def build(
    saver: Any, store: RollingStore | None = None, **options: Any
) -> tuple[Any, ScriptedChatModel, RollingMemoryMiddleware]:
    options.setdefault("max_turns", 6)
    options.setdefault("keep_last", 2)
    options.setdefault("summarizer", RecordingSummarizer())
    model = ScriptedChatModel()
    memory = RollingMemoryMiddleware(store=store or open_store("memory://"), memory_tools=(), **options)
    agent = create_agent(model, [], system_prompt="You are helpful.", middleware=[memory], checkpointer=saver)
    return agent, model, memory


def config(session: str = "s1", client: str | None = "ana") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": session}
    if client is not None:
        configurable["client_id"] = client
    return {"configurable": configurable}


def user(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def three_turns(agent: Any, cfg: dict[str, Any]) -> None:
    for text in (PARIS, ROME, WHERE):
        agent.invoke(user(text), cfg)


def end_of_turn(agent: Any, cfg: dict[str, Any], messages: int) -> Any:
    """The checkpoint that ended the turn leaving `messages` messages in the state."""
    for snapshot in agent.get_state_history(cfg):
        if not snapshot.next and len(snapshot.values["messages"]) == messages:
            return snapshot
    raise AssertionError(f"no finished turn with {messages} messages")


def with_client(snapshot_config: dict[str, Any], client: str = "ana") -> dict[str, Any]:
    return {"configurable": {**snapshot_config["configurable"], "client_id": client}}


def find(agent: Any, cfg: dict[str, Any], text: str) -> BaseMessage:
    return next(m for m in agent.get_state(cfg).values["messages"] if m.text == text)


# ---------------------------------------------------------------------- forks and time travel


def test_a_fork_from_the_first_turn_sends_paris_only(saver: Any) -> None:
    store = open_store("memory://")
    agent, model, _ = build(saver, store)
    three_turns(agent, config())
    first = end_of_turn(agent, config(), 2)
    agent.invoke(user(WHERE), with_client(first.config))
    sent = text_of(model.requests[-1])
    assert PARIS in sent
    assert "Rome" not in sent
    # The store holds the branch the graph follows (what recall searches); the checkpointer's
    # history keeps the abandoned one.
    humans = [m.text for m in store.transcript("s1") if isinstance(m, HumanMessage)]
    assert humans == [PARIS, WHERE]
    assert ROME in str(list(agent.get_state_history(config())))


def test_a_fork_from_the_root_checkpoint_sends_nothing_of_the_abandoned_turns(saver: Any) -> None:
    agent, model, _ = build(saver)
    three_turns(agent, config())
    root = list(agent.get_state_history(config()))[-1]
    agent.invoke(user("Hello, where do I live?"), with_client(root.config))
    sent = text_of(model.requests[-1])
    assert "Paris" not in sent
    assert "Rome" not in sent


def test_a_removed_message_is_never_sent_again(saver: Any) -> None:
    agent, model, _ = build(saver)
    three_turns(agent, config())
    rome = find(agent, config(), ROME)
    agent.update_state(config(), {"messages": [RemoveMessage(id=str(rome.id))]})
    agent.invoke(user(WHERE), config())
    agent.invoke(user("And now?"), config())
    for request in model.requests[-2:]:
        assert "Rome" not in text_of(request)
        assert PARIS in text_of(request)


def test_a_human_edit_of_a_message_is_what_the_model_is_sent(saver: Any) -> None:
    agent, model, _ = build(saver)
    three_turns(agent, config())
    rome = find(agent, config(), ROME)
    agent.update_state(config(), {"messages": [HumanMessage("I live in Oslo", id=rome.id)]})
    agent.invoke(user(WHERE), config())
    sent = text_of(model.requests[-1])
    assert "Oslo" in sent
    assert "Rome" not in sent


def test_replaying_a_snapshot_without_a_client_id_uses_the_threads_client(saver: Any) -> None:
    store = open_store("memory://")
    store.add_fact("ana", "Prefers short answers")
    agent, model, _ = build(saver, store)
    three_turns(agent, config())
    first = end_of_turn(agent, config(), 2)
    # StateSnapshot.config names the thread and the checkpoint only: no client_id.
    assert "client_id" not in first.config["configurable"]
    agent.invoke(user(WHERE), first.config)
    sent = model.requests[-1]
    assert "Prefers short answers" in text_of(sent)
    assert PARIS in text_of(sent)
    assert "Rome" not in text_of(sent)
    # Re-running a checkpoint as it was (input None) works the same way.
    start = next(
        s
        for s in agent.get_state_history(config())
        if s.next and s.next[0].endswith("before_model") and len(s.values["messages"]) == 1
    )
    agent.invoke(None, start.config)
    assert [m.text for m in model.requests[-1][1:]] == [PARIS]


def test_another_client_naming_the_thread_is_still_refused(saver: Any) -> None:
    from langchain_rolling_memory import OwnershipError

    agent, model, _ = build(saver)
    three_turns(agent, config())
    asked = len(model.requests)
    with pytest.raises(OwnershipError):
        agent.invoke(user(WHERE), config(client="mallory"))
    assert len(model.requests) == asked


# ---------------------------------------------------------------------- bounded state


def test_the_checkpointed_state_stays_bounded_by_the_policy(saver: Any) -> None:
    # 210 turns in memory; 60 on PostgreSQL keep the test within a few seconds.
    turns = 210 if isinstance(saver, InMemorySaver) else 60
    store = open_store("memory://")
    agent, model, _ = build(saver, store, max_turns=12, keep_last=6)
    largest = 0
    for i in range(turns):
        agent.invoke(user(f"turn {i}"), config())
        largest = max(largest, len(agent.get_state(config()).values["messages"]))
    # The summary, at most max_turns unsummarized messages, and the turn's question and answer.
    assert largest <= 1 + 12 + 2
    assert len(store.transcript("s1")) == 2 * turns
    last = model.requests[-1]
    assert last[1].text.startswith("[Summary of the earlier conversation")
    assert last[-1].text == f"turn {turns - 1}"


def test_the_summary_in_the_state_records_what_it_covers(saver: Any) -> None:
    agent, _, memory = build(saver, max_turns=4, keep_last=2)
    for i in range(4):
        agent.invoke(user(f"q{i}"), config())
    messages = agent.get_state(config()).values["messages"]
    head = messages[0]
    assert head.id == "rolling-memory-summary"
    covered = head.additional_kwargs["rolling_memory"]
    assert covered["covered"] == 3  # q0, its answer and q1, folded at turn 3 (5 > max_turns)
    assert isinstance(covered["lineage"], str)
    assert [m.text for m in messages[1:]][-2:] == ["q3", "ok 4"]
    assert memory.usage_of(messages).compactions >= 1


# ---------------------------------------------------------------------- background folds


def test_a_background_fold_lands_at_the_next_turn_and_keeps_the_state_bounded(saver: Any) -> None:
    summarizer = RecordingSummarizer()
    agent, model, memory = build(saver, summarizer=summarizer, max_turns=4, keep_last=2, background=True)
    largest = 0
    for i in range(12):
        agent.invoke(user(f"q{i}"), config())
        memory.flush("s1")
        largest = max(largest, len(agent.get_state(config()).values["messages"]))
    assert summarizer.calls
    assert largest <= 1 + 4 + 2 + 2
    assert model.requests[-1][1].text.startswith("[Summary of the earlier conversation")


def test_a_background_fold_of_messages_edited_since_is_not_used(saver: Any) -> None:
    summarizer = RecordingSummarizer()
    agent, model, memory = build(saver, summarizer=summarizer, max_turns=4, keep_last=2, background=True)
    three_turns(agent, config())
    memory.flush("s1")
    assert summarizer.calls, "a fold of the first turns was planned and summarized"
    paris = find(agent, config(), PARIS)
    agent.update_state(config(), {"messages": [HumanMessage("I live in Oslo", id=paris.id)]})
    agent.invoke(user(WHERE), config())
    sent = text_of(model.requests[-1])
    assert "Paris" not in sent
    assert "Oslo" in sent


def test_a_background_fold_planned_before_forget_never_lands(saver: Any) -> None:
    store = open_store("memory://")
    summarizer = RecordingSummarizer()
    agent, model, memory = build(
        saver, store, summarizer=summarizer, max_turns=4, keep_last=2, background=True
    )
    three_turns(agent, config())
    memory.flush("s1")
    assert summarizer.calls
    store.forget("ana")
    agent.invoke(user("Hello again"), config())
    assert "summary 1" not in text_of(model.requests[-1])


def test_an_inline_fold_planned_before_forget_never_lands(saver: Any) -> None:
    store = open_store("memory://")

    def forgetting(previous: str, messages: Sequence[BaseMessage]) -> str:
        store.forget("ana")  # an erase while the summarizer runs
        return "summary of what was erased"

    agent, model, _ = build(saver, store, summarizer=forgetting, max_turns=4, keep_last=2)
    three_turns(agent, config())
    state = agent.get_state(config()).values["messages"]
    assert all(m.id != "rolling-memory-summary" for m in state)
    assert "summary of what was erased" not in text_of(model.requests[-1])


# ---------------------------------------------------------------------- async


@pytest.mark.parametrize("kind", ["memory", "postgres"])
async def test_an_async_fork_sends_paris_only(kind: str) -> None:
    async def run(saver: Any) -> None:
        agent, model, _ = build(saver)
        for text in (PARIS, ROME, WHERE):
            await agent.ainvoke(user(text), config())
        first = None
        async for snapshot in agent.aget_state_history(config()):
            if not snapshot.next and len(snapshot.values["messages"]) == 2:
                first = snapshot
        assert first is not None
        await agent.ainvoke(user(WHERE), first.config)
        sent = text_of(model.requests[-1])
        assert PARIS in sent
        assert "Rome" not in sent

    if kind == "memory":
        await run(InMemorySaver())
    else:
        async with async_postgres_saver() as saver:
            await run(saver)


def test_a_tool_loop_keeps_every_call_with_its_result_across_folds(saver: Any) -> None:
    from agent_models import tool_call, tool_pairs_intact
    from langchain_core.tools import tool

    @tool
    def weather(city: str) -> str:
        """Current weather of a city."""
        return f"cloudy in {city}"

    script: list[AIMessage] = []
    for i in range(6):
        script += [tool_call("weather", {"city": f"c{i}"}, f"w{i}"), AIMessage(f"cloudy {i}")]
    model = ScriptedChatModel(script=script)
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"),
        summarizer=RecordingSummarizer(),
        max_turns=5,
        keep_last=2,
        memory_tools=(),
    )
    agent = create_agent(model, [weather], middleware=[memory], checkpointer=saver)
    for i in range(6):
        agent.invoke(user(f"weather in c{i}?"), config())
    for request in model.requests:
        assert tool_pairs_intact(request[1:])
        assert request[-1].type in ("human", "tool")
    assert tool_pairs_intact(
        [m for m in agent.get_state(config()).values["messages"] if m.id != "rolling-memory-summary"]
    )


def test_the_turn_cost_benchmark_prints_a_row_per_middleware_and_size(tmp_path: Any) -> None:
    from benchmarks import agent_turn_cost

    out = tmp_path / "agent_turn_cost.md"
    agent_turn_cost.main(["--sizes", "20", "40", "--turns", "2", "--out", str(out)])
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| ")][2:]
    assert len(rows) == 3 * 2
    ours = [row.split(" | ") for row in rows if "RollingMemoryMiddleware" in row]
    assert [int(cells[4]) <= 1 + 12 + 2 for cells in ours] == [True, True]  # state messages, bounded


def test_background_folds_that_never_land_still_leave_the_state_bounded_by_the_cap(saver: Any) -> None:
    import threading

    release = threading.Event()
    inline: list[int] = []

    def summarize(previous: str, messages: Sequence[BaseMessage]) -> str:
        # timeout=None: called on the thread of the fold (a background worker's, or the turn's).
        if threading.current_thread().name.startswith("rolling-memory-"):
            release.wait(10)  # a worker's fold lands too late (another replica, a slow model)
        else:
            inline.append(len(messages))
        return "summary of the older turns, in a few words"

    agent, _, memory = build(
        saver, summarizer=summarize, max_turns=4, keep_last=2, hard_cap=8, background=True, timeout=None
    )
    largest = 0
    try:
        for i in range(15):
            agent.invoke(user(f"q{i}"), config())
            largest = max(largest, len(agent.get_state(config()).values["messages"]))
    finally:
        release.set()
        memory.flush("s1")
    assert inline, "past the cap the turn folded inline"
    assert largest <= 1 + 8 + 2


def test_a_fork_made_with_update_state_on_an_older_checkpoint_sends_that_branch(saver: Any) -> None:
    agent, model, _ = build(saver)
    three_turns(agent, config())
    first = end_of_turn(agent, config(), 2)
    forked = agent.update_state(first.config, {"messages": [HumanMessage("I work in Lyon")]})
    agent.invoke(user(WHERE), forked)
    sent = text_of(model.requests[-1])
    assert PARIS in sent
    assert "Lyon" in sent
    assert "Rome" not in sent


def test_a_human_in_the_loop_edit_is_sent_as_the_state_holds_it(saver: Any) -> None:
    from agent_models import tool_call
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool
    from langgraph.types import Command

    @tool
    def weather(city: str) -> str:
        """Current weather of a city."""
        return f"cloudy in {city}"

    model = ScriptedChatModel(script=[tool_call("weather", {"city": "Paris"}, "w1"), AIMessage("done")])
    memory = RollingMemoryMiddleware(
        store=open_store("memory://"), summarizer=RecordingSummarizer(), memory_tools=()
    )
    review = HumanInTheLoopMiddleware(interrupt_on={"weather": True})
    agent = create_agent(model, [weather], middleware=[memory, review], checkpointer=saver)
    assert "__interrupt__" in agent.invoke(user("Weather where I live?"), config())
    edit = {"type": "edit", "edited_action": {"name": "weather", "args": {"city": "Rome"}}}
    agent.invoke(Command(resume={"decisions": [edit]}), config())
    # The reviewed exchange as the state holds it (this LangChain notes the edit in the result).
    state = agent.get_state(config()).values["messages"]
    assert [m.id for m in model.requests[-1]] == [m.id for m in state[:-1]]
    assert "cloudy in Rome" in text_of(model.requests[-1])
