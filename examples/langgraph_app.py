"""A LangGraph agent with rolling memory, everything on PostgreSQL: a small app to copy.

- `create_agent` with `RollingMemoryMiddleware` on our PostgreSQL store: the store keeps every
  message of the branch the graph follows (for recall, export and erasure); the checkpointed
  state holds the summary and the recent turns, and that state is what the model is sent.
- `PostgresSaver` as the checkpointer: each thread's state, bounded however long it runs.
- `RollingFactsStore` as the graph's store: the `save_fact` tool writes a fact with
  ``runtime.store.put(...)``, and the fact is in the user's later prompts, in every thread.
  Other namespaces live in LangGraph's `PostgresStore`.
- A fork from an earlier checkpoint: the model is sent that branch, never the abandoned one.
- `forget_user`: the user erased from our store, the graph's store and the checkpointer.

Run it on a local PostgreSQL (offline by default: a scripted stand-in for the chat model):

    python examples/langgraph_app.py
    DATABASE_URL=postgresql://user@host:5432/db CHAT_MODEL=openai:gpt-4o-mini python examples/langgraph_app.py

`CHAT_MODEL` is any ``init_chat_model`` string (its provider package and key installed).
LangGraph's tables have fixed names, so each run works in a schema of its own, dropped at the
end. `tests/test_example_app.py` runs this file.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import psycopg
from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain.tools import ToolRuntime
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.postgres import PostgresStore

from langchain_rolling_memory import (
    Erased,
    RollingFactsStore,
    RollingMemoryMiddleware,
    RollingStore,
    extractive_summarizer,
    forget_user,
    open_store,
)

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/test"
USER, OTHER_USER = "ana-lopez", "bob-stone"
TRIP, DINNER, OTHER = f"{USER}:trip", f"{USER}:dinner", f"{OTHER_USER}:chat"  # thread ids
MAX_TURNS, KEEP_LAST = 6, 2  # fold when more than 6 messages are unsummarized, keep the last 2
TRIP_TURNS = [
    "Remember my diet: I am vegetarian.",
    "I live in Paris.",
    "Actually, forget that: I live in Rome.",
    "Where do I live?",
    "Plan a weekend trip for me.",
    "Which museums should I see?",
    "Where can I eat near them?",
    "How do I get to the airport?",
]


@tool
def save_fact(topic: str, fact: str, runtime: ToolRuntime) -> str:
    """Save a lasting fact about the user (diet, allergies, preferences) under a one-word
    topic; a new fact on the same topic replaces the old one."""
    user = runtime.config["configurable"]["user_id"]
    assert runtime.store is not None  # the graph's store: create_agent(..., store=...)
    runtime.store.put((user, "facts"), topic, {"content": fact})  # RollingFactsStore: a fact of ours
    return f"Saved under {topic!r}."


class OfflineModel(BaseChatModel):
    """A scripted stand-in for a chat model (no key, no network): "Remember my <topic>:
    <fact>" calls `save_fact`, anything else gets a canned answer."""

    @property
    def _llm_type(self) -> str:
        return "offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineModel:
        return self  # it knows its one tool

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        asked = re.match(r"Remember my (\w+): (.+)", last.text) if last.type == "human" else None
        if asked:
            call = {
                "name": "save_fact",
                "args": {"topic": asked[1], "fact": asked[2]},
                "id": uuid.uuid4().hex,
            }
            reply = AIMessage("", tool_calls=[call])
        elif last.type == "tool":
            reply = AIMessage("Noted.")
        else:
            reply = AIMessage(f"(offline answer to {last.text!r})")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class SentToModel(BaseCallbackHandler):
    """What the chat model was sent, call by call (the memory's own summarizer calls left out)."""

    def __init__(self) -> None:
        self.requests: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, tags: list[str] | None = None, **_: Any
    ) -> None:
        if "rolling_memory" not in (tags or []):
            self.requests.append(messages[0])


@dataclass
class App:
    agent: Any
    store: RollingStore
    graph_store: RollingFactsStore
    checkpointer: PostgresSaver


@contextlib.contextmanager
def open_app(database_url: str) -> Iterator[App]:
    """Our store, LangGraph's checkpointer and store, all on `database_url`, and the agent."""
    name = os.environ.get("CHAT_MODEL")
    model = init_chat_model(name) if name else OfflineModel()
    summarizer = model if name else extractive_summarizer(max_words=60)  # offline: no LLM at all
    with (
        open_store(database_url) as store,  # our tables: lrm_*
        PostgresSaver.from_conn_string(database_url) as checkpointer,
        PostgresStore.from_conn_string(database_url) as langgraph_store,
    ):
        checkpointer.setup()
        langgraph_store.setup()
        graph_store = RollingFactsStore(store, inner=langgraph_store)  # facts: ours; the rest: LangGraph's
        memory = RollingMemoryMiddleware(
            store=store,
            summarizer=summarizer,
            max_turns=MAX_TURNS,
            keep_last=KEEP_LAST,
            memory_tools=(),  # the app has its own save_fact tool
        )
        agent = create_agent(
            model,
            [save_fact],
            system_prompt="You are a helpful travel and food assistant.",
            middleware=[memory],
            checkpointer=checkpointer,
            store=graph_store,
        )
        yield App(agent, store, graph_store, checkpointer)


def thread(user: str, thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "user_id": user}}


def ask(app: App, text: str, config: dict[str, Any]) -> list[list[BaseMessage]]:
    """One turn; returns what the model was sent at each of its calls."""
    sent = SentToModel()
    result = app.agent.invoke({"messages": [HumanMessage(text)]}, {**config, "callbacks": [sent]})
    print(f"  {text!r} -> {result['messages'][-1].text!r}")
    return sent.requests


def last_human(messages: Sequence[BaseMessage]) -> str:
    return next((m.text for m in reversed(messages) if m.type == "human"), "")


@dataclass
class Report:
    """What a run showed (printed by `main`, checked by the test)."""

    trip_state_sizes: list[int]  # messages in the trip thread's checkpointed state, turn by turn
    trip_transcript: int  # messages of the trip thread in our store, folded ones included
    fork_transcript: int  # ... after the fork: the branch the graph follows, nothing it left
    dinner_prompt: list[BaseMessage]  # what the model was sent at the dinner thread's first call
    fork_prompt: list[BaseMessage]  # ... at the fork's first call
    erased: Erased


def run(app: App) -> Report:
    # A setting the app's UI saved: not a fact, so it lives in LangGraph's PostgresStore.
    app.graph_store.put((USER, "settings"), "units", {"units": "metric"})

    print(f"thread {TRIP}:")
    trip, sizes = thread(USER, TRIP), []
    for text in TRIP_TURNS:
        ask(app, text, trip)
        sizes.append(len(app.agent.get_state(trip).values["messages"]))
    transcript = len(app.store.transcript(TRIP))
    print(f"  state: {sizes[-1]} messages; our store: {transcript}")

    # Another thread of the same user: the fact saved in the trip thread is in its prompt.
    print(f"thread {DINNER}:")
    dinner_prompt = ask(app, "What should I cook tonight?", thread(USER, DINNER))[0]
    ask(app, "Something quick, please.", thread(USER, DINNER))
    print(f"thread {OTHER}:")
    ask(app, "Remember my diet: I eat everything.", thread(OTHER_USER, OTHER))

    # Time travel: fork the trip thread from the checkpoint where "I live in Paris." was
    # answered. The snapshot's config names the checkpoint; our tool reads the user from it too.
    paris = next(
        s
        for s in app.agent.get_state_history(trip)
        if not s.next and last_human(s.values["messages"]) == "I live in Paris."
    )
    print(f"fork of {TRIP} at checkpoint {paris.config['configurable']['checkpoint_id']}:")
    fork = {"configurable": {**paris.config["configurable"], "user_id": USER}}
    fork_prompt = ask(app, "Where do I live?", fork)[0]

    # Ana asks to be forgotten: her facts, transcripts, summaries, settings and checkpoints.
    forked = len(app.store.transcript(TRIP))
    erased = forget_user(USER, store=app.store, graph_store=app.graph_store, checkpointer=app.checkpointer)
    print(f"forgot {USER}: threads {', '.join(erased.threads)}, {erased.items} graph-store items, our store")
    return Report(sizes, transcript, forked, dinner_prompt, fork_prompt, erased)


@contextlib.contextmanager
def own_schema(database_url: str, schema: str) -> Iterator[str]:
    """Create `schema`, yield a URL whose connections use it, drop it at the end (the URL
    must not set ``options`` itself)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        separator = "&" if "?" in database_url else "?"
        yield f"{database_url}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    schema = f"langgraph_app_{uuid.uuid4().hex[:10]}"
    print(f"working in schema {schema} (dropped at the end)")
    with own_schema(database_url, schema) as url, open_app(url) as app:
        report = run(app)
    print(
        f"trip thread: at most {max(report.trip_state_sizes)} messages checkpointed, {report.trip_transcript} kept"
    )
    print(f"dinner thread's prompt: {report.dinner_prompt[0].text!r}")
    print(f"fork's prompt: {[m.text for m in report.fork_prompt[1:]]!r}")


if __name__ == "__main__":
    main()
