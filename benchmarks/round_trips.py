"""Round trips per turn on PostgreSQL and Redis, counted at the client's wire, against the targets.

A round trip is a time the client sends and then waits for the server's answer:

* PostgreSQL: libpq's own trace of the connection (``PQtrace``, through psycopg's
  ``pgconn.trace``) lists every protocol message, ``F`` from the client and ``B`` from the
  server; each turn from sending to receiving (an ``F`` line followed by a ``B`` line) is one
  round trip, so a pipeline (several statements, one ``Sync``) counts once and a transaction
  (BEGIN, statements, COMMIT) once per statement. Statements are the ``Bind`` and ``Query``
  messages.
* Redis: the connection class of the client's pool counts each write of packed commands to
  the socket (`CountingConnection.send_packed_command`): a command is one, a pipeline's
  commands go in one write, and a NOSCRIPT fallback counts its extra writes. The commands
  the server runs (those inside the Lua scripts too) come from ``INFO commandstats`` deltas of
  a private ``redis-server`` this script starts on a free port (a shared server counts the
  other clients' commands too); without the binary that column is left empty.

The turns are steady ones (the session exists, holds a fact, no compaction due): a chain turn
through `with_rolling_memory` (recall off, then on) and an agent turn through
`create_agent` with `RollingMemoryMiddleware` (without, then with a checkpointer, then recall
on). The floor of a chain turn is
one round trip (read the history and append the exchange, pipelined), as in the issue.
Each turn runs sync (`invoke`) and async (`ainvoke`, on the native async drivers: a
`psycopg.AsyncConnection`, a `redis.asyncio` client).

    python -m benchmarks.round_trips --out benchmarks/results/round_trips.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from benchmarks._shared import markdown_table
from langchain_rolling_memory import RollingStore, with_rolling_memory

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")

FLOOR = 1
"""Round trips of the bare chain's history: one read and one append, pipelined."""
TARGETS = {
    "chain, recall off": FLOOR + 1,
    "chain, recall on": FLOOR + 3,
    "agent (middleware)": FLOOR + 1,
    "agent (middleware, checkpointer)": FLOOR + 1,
    "agent (middleware), recall on": FLOOR + 3,
    "agent (middleware, checkpointer), recall on": FLOOR + 3,
}
"""The issue's targets: <= 1 round trip beyond the floor, recall on <= 2 more; an agent turn
as a chain turn."""


# ---------------------------------------------------------------- counting at the wire


class PgWire:
    """A psycopg connection traced by libpq; `count()` reads the trace since the last call."""

    def __init__(self, url: str = POSTGRES_URL, loop: asyncio.AbstractEventLoop | None = None) -> None:
        import psycopg

        self.loop = loop
        self.conn: Any = (
            psycopg.connect(url, autocommit=True)
            if loop is None
            else loop.run_until_complete(psycopg.AsyncConnection.connect(url, autocommit=True))
        )
        self._dir = tempfile.TemporaryDirectory()
        self._path = os.path.join(self._dir.name, "trace")
        # libpq writes through a buffered FILE of its own (on an append-only descriptor):
        # `count` ends the trace (PQuntrace flushes it) and starts a new one.
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        self._flags = psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
        self._trace()
        self._seen = 0

    def _trace(self) -> None:
        self.conn.pgconn.trace(self._fd)
        self.conn.pgconn.set_trace_flags(self._flags)

    def count(self) -> tuple[int, int]:
        """(round trips, statements) since the last `count`."""
        self.conn.pgconn.untrace()
        with open(self._path) as trace:
            trace.seek(self._seen)
            text = trace.read()
            self._seen = trace.tell()
        self._trace()
        trips = statements = 0
        previous = ""
        for line in text.splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            side, kind = parts[0], parts[2]
            if side == "F" and kind in ("Bind", "Query"):
                statements += 1
            if side == "B" and previous == "F":
                trips += 1
            previous = side
        return trips, statements

    def close(self) -> None:
        self.conn.pgconn.untrace()
        if self.loop is None:
            self.conn.close()
        else:
            self.loop.run_until_complete(self.conn.close())
        self._dir.cleanup()


def counting_connection_class() -> type[Any]:
    """A redis-py `Connection` that counts its writes to the socket (one per round trip)."""
    import redis

    class CountingConnection(redis.Connection):
        writes = 0

        def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            type(self).writes += 1
            super().send_packed_command(command, check_health)

    return CountingConnection


def async_counting_connection_class() -> type[Any]:
    """The `redis.asyncio` twin of `counting_connection_class`."""
    import redis.asyncio

    class AsyncCountingConnection(redis.asyncio.Connection):
        writes = 0

        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            type(self).writes += 1
            await super().send_packed_command(command, check_health)

    return AsyncCountingConnection


class RedisWire:
    """A redis-py client whose pool counts round trips, and the server's command counts."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop | None = None) -> None:
        import redis
        import redis.asyncio

        self.loop = loop
        self.client: Any
        if loop is None:
            self.connection_class = counting_connection_class()
            pool = redis.ConnectionPool.from_url(
                url, connection_class=self.connection_class, decode_responses=True
            )
            self.client = redis.Redis(connection_pool=pool)
        else:
            self.connection_class = async_counting_connection_class()
            apool = redis.asyncio.ConnectionPool.from_url(
                url, connection_class=self.connection_class, decode_responses=True
            )
            self.client = redis.asyncio.Redis(connection_pool=apool)
        self.pool = self.client.connection_pool
        self._admin = redis.Redis.from_url(url, decode_responses=True)
        self._writes = 0
        self._commands = self._server_commands()

    def _server_commands(self) -> int:
        stats = self._admin.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")

    def count(self) -> tuple[int, int]:
        """(round trips, commands the server ran) since the last `count`."""
        writes = self.connection_class.writes - self._writes
        self._writes = self.connection_class.writes
        commands = self._server_commands()
        ran, self._commands = commands - self._commands, commands
        return writes, ran

    def drop(self, prefix: str) -> None:
        for key in self._admin.scan_iter(f"{prefix}*"):
            self._admin.delete(key)

    def close(self) -> None:
        if self.loop is None:
            self.client.close()
            self.pool.disconnect()
        else:
            self.loop.run_until_complete(self.client.aclose())
            self.loop.run_until_complete(self.pool.disconnect())
        self._admin.close()


@contextlib.contextmanager
def private_redis() -> Iterator[str | None]:
    """A throwaway ``redis-server`` on a free port (its URL), or None without the binary."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.1):
                break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


# ---------------------------------------------------------------- the turns


def _reply(_: Any) -> AIMessage:
    return AIMessage("Noted: the parcel goes to the neighbour at number 12.")


Turn = Callable[[int], None]


def _run(loop: asyncio.AbstractEventLoop | None, call: Callable[[], Any], acall: Callable[[], Any]) -> Any:
    """`call()`, or with a loop `acall()`'s coroutine run on it (the async path)."""
    return call() if loop is None else loop.run_until_complete(acall())


def _fact(store: RollingStore, client: str, loop: asyncio.AbstractEventLoop | None) -> None:
    text = "Prefers deliveries on Saturday mornings"
    _run(loop, lambda: store.add_fact(client, text), lambda: store.aadd_fact(client, text))


EARLIER_QUESTIONS = 6
"""Questions (each with its answer) of an earlier session of the client, in the recall scenario
that recalls them: each recalled question's answer is read with it."""


def _earlier(store: RollingStore, client: str, loop: asyncio.AbstractEventLoop | None) -> None:
    """An earlier session of `client`: `EARLIER_QUESTIONS` parcel questions, each answered."""
    session = f"s-{uuid.uuid4().hex[:8]}"
    messages: list[Any] = []
    for i in range(EARLIER_QUESTIONS):
        messages += [HumanMessage(f"Earlier {i}: when does the parcel arrive?"), AIMessage(f"On day {i}.")]
    _run(
        loop,
        lambda: store.append(session, messages, client_id=client),
        lambda: store.aappend(session, messages, client_id=client),
    )


def chain_turns(
    store: RollingStore,
    *,
    recall: bool,
    loop: asyncio.AbstractEventLoop | None = None,
    answers: bool = False,
) -> Turn:
    """A chain turn through `with_rolling_memory` (a chain that answers at once); with a
    loop, ``ainvoke`` on it. With `answers`, the client has an earlier session whose questions
    the recall finds (and reads the answer of each)."""
    options: dict[str, Any] = {"max_turns": 10_000, "keep_last": 4}
    if recall:
        # With the earlier answers, a block wide enough that the session's own turns never
        # crowd out the earlier questions: the same reads at every turn.
        options["recall_tokens"] = 2000 if answers else 300
    chat = with_rolling_memory(RunnableLambda(_reply), store=store, summarizer=lambda p, m: "s", **options)
    client, session = f"c-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    _fact(store, client, loop)
    if answers:
        _earlier(store, client, loop)
    config: Any = {"configurable": {"client_id": client, "session_id": session}}

    def turn(i: int) -> None:
        messages = [HumanMessage(f"question {i}: when does the parcel arrive?")]
        _run(
            loop, lambda: chat.invoke(messages, config=config), lambda: chat.ainvoke(messages, config=config)
        )

    return turn


def agent_turns(
    store: RollingStore,
    loop: asyncio.AbstractEventLoop | None = None,
    *,
    checkpointer: bool = False,
    recall: bool = False,
) -> Turn:
    """An agent turn: `create_agent` with `RollingMemoryMiddleware`, no tool call, with or
    without a checkpointer (`InMemorySaver`), recall off or on; with a loop, ``ainvoke`` on it."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from benchmarks.agent_middleware import RecordingModel
    from langchain_rolling_memory import RollingMemoryMiddleware

    client, session = f"c-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    _fact(store, client, loop)
    middleware = RollingMemoryMiddleware(
        store=store,
        summarizer=lambda p, m: "s",
        client_id=client,
        max_turns=10_000,
        keep_last=4,
        recall_tokens=300 if recall else None,
    )
    saver = InMemorySaver() if checkpointer else None
    agent = create_agent(
        RecordingModel(reply_fn=lambda _: "Noted."), [], middleware=[middleware], checkpointer=saver
    )
    config: Any = {"configurable": {"thread_id": session}}

    def turn(i: int) -> None:
        state: Any = {"messages": [HumanMessage(f"question {i}: when does the parcel arrive?")]}
        _run(loop, lambda: agent.invoke(state, config=config), lambda: agent.ainvoke(state, config=config))

    return turn


Scenario = Callable[[RollingStore, "asyncio.AbstractEventLoop | None"], Turn]

SCENARIOS: dict[str, Scenario] = {
    "chain, recall off": lambda store, loop: chain_turns(store, recall=False, loop=loop),
    "chain, recall on": lambda store, loop: chain_turns(store, recall=True, loop=loop),
    "chain, recall on, answers read": lambda store, loop: chain_turns(
        store, recall=True, loop=loop, answers=True
    ),
    "agent (middleware)": agent_turns,
    "agent (middleware, checkpointer)": lambda store, loop: agent_turns(store, loop, checkpointer=True),
    "agent (middleware), recall on": lambda store, loop: agent_turns(store, loop, recall=True),
    "agent (middleware, checkpointer), recall on": lambda store, loop: agent_turns(
        store, loop, checkpointer=True, recall=True
    ),
}
"""Each runs sync, and async on a native async driver (`ainvoke`)."""


WARM_UP = 6


@dataclass(frozen=True)
class Count:
    backend: str
    scenario: str
    trips: float
    operations: float | None


def per_turn(
    make: Callable[[int], None], count: Callable[[], tuple[int, int]], turns: int
) -> tuple[float, float]:
    """Round trips and operations per steady turn, after `WARM_UP` turns (psycopg prepares a
    statement at its fifth run: a round trip of its own, once per connection)."""
    for i in range(WARM_UP):
        make(i)
    count()
    for i in range(WARM_UP, WARM_UP + turns):
        make(i)
    trips, operations = count()
    return trips / turns, operations / turns


def _loop(asynchronous: bool) -> asyncio.AbstractEventLoop | None:
    return asyncio.new_event_loop() if asynchronous else None


def _name(scenario: str, loop: asyncio.AbstractEventLoop | None) -> str:
    return scenario if loop is None else f"{scenario}, async"


def measure_postgres(
    turns: int, scenarios: dict[str, Scenario] = SCENARIOS, modes: tuple[bool, ...] = (False, True)
) -> list[Count]:
    """Each scenario on a traced connection handed to the store: a `psycopg.Connection`, or
    (async) a `psycopg.AsyncConnection` serving the store's native async primitives."""
    from langchain_rolling_memory.stores import PostgresRollingStore

    out = []
    for asynchronous in modes:
        for name, build in scenarios.items():
            loop = _loop(asynchronous)
            wire = PgWire(loop=loop)
            prefix = f"rt{uuid.uuid4().hex[:6]}_"
            store = PostgresRollingStore(conn=wire.conn, table_prefix=prefix)
            try:
                trips, statements = per_turn(build(store, loop), wire.count, turns)
                out.append(Count("postgresql", _name(name, loop), trips, statements))
            finally:
                _run(loop, store.close, store.aclose)
                wire.close()
                _drop_tables(prefix)
                if loop is not None:
                    loop.close()
    return out


def _drop_tables(prefix: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for table in ("messages", "summaries", "sessions", "leases", "facts", "meta"):
            conn.execute(f"DROP TABLE IF EXISTS {prefix}{table} CASCADE")


def measure_redis(
    turns: int,
    url: str | None = None,
    scenarios: dict[str, Scenario] = SCENARIOS,
    modes: tuple[bool, ...] = (False, True),
) -> list[Count]:
    """Each scenario on a client whose pool counts its writes, handed to the store: a
    `redis.Redis`, or (async) a `redis.asyncio.Redis` serving the native async primitives."""
    from langchain_rolling_memory.stores import RedisRollingStore

    out = []
    with private_redis() if url is None else contextlib.nullcontext(url) as private:
        server = private or REDIS_URL
        for asynchronous in modes:
            for name, build in scenarios.items():
                loop = _loop(asynchronous)
                wire = RedisWire(server, loop)
                prefix = f"rt{uuid.uuid4().hex[:6]}:"
                store = RedisRollingStore(client=wire.client, key_prefix=prefix)
                try:
                    trips, commands = per_turn(build(store, loop), wire.count, turns)
                    ran = commands if private and url is None else None
                    out.append(Count("redis", _name(name, loop), trips, ran))
                finally:
                    _run(loop, store.close, store.aclose)
                    wire.close()
                    wire.drop(prefix)
                    if loop is not None:
                        loop.close()
    return out


def table(counts: list[Count]) -> str:
    rows = []
    for c in counts:
        target = TARGETS.get(c.scenario.removesuffix(", async"))
        ops = "-" if c.operations is None else f"{c.operations:g}"
        verdict = "-" if target is None else ("yes" if c.trips <= target else "NO")
        rows.append(
            [c.backend, c.scenario, f"{c.trips:g}", ops, "-" if target is None else f"<= {target}", verdict]
        )
    head = ["backend", "turn", "round trips", "statements / commands", "target", "met"]
    return markdown_table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--redis", default=None, help="a Redis URL (default: a private redis-server)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    counts = measure_postgres(args.turns) + measure_redis(args.turns, args.redis)
    text = (
        f"Round trips per steady turn (mean of {args.turns} turns after {WARM_UP} warm-up turns), counted at "
        "the client's wire (`python -m benchmarks.round_trips`). Floor of a chain turn: "
        f"{FLOOR} (a read and an append, pipelined). Statements: PostgreSQL Bind/Query "
        "messages; commands: what the Redis server ran, scripts' commands included.\n\n" + table(counts)
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
