"""Time per turn (add two messages, read the view) as the transcript grows, ours against the stock histories.

For each backend (memory, SQLite, PostgreSQL, Redis) a `RollingSummaryChatMessageHistory`
runs turns on three sessions prefilled with 100, 1,000 and 10,000 messages (in steady
state: a summary covers all but the last few, as after a long conversation), interleaved
so that load from other processes hits every size alike. The same turns run on
langchain-community `SQLChatMessageHistory` (SQLite), langchain-postgres
`PostgresChatMessageHistory` and langchain-redis `RedisChatMessageHistory`, on the same
servers. It prints a table of median milliseconds per turn and the ratios, and writes it
as Markdown.

    python -m benchmarks.store_turn_cost --out benchmarks/results/store_turn_cost.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, count_tokens, open_store
from langchain_rolling_memory.stores import RollingStore

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
SIZES = (100, 1_000, 10_000)

_WORDS = [
    "the",
    "delivery",
    "arrives",
    "on",
    "saturday",
    "morning",
    "and",
    "the",
    "invoice",
    "goes",
    "to",
    "the",
    "billing",
    "address",
    "please",
    "confirm",
    "the",
    "order",
    "number",
    "before",
    "noon",
    "so",
    "that",
    "we",
    "can",
    "reserve",
    "the",
    "slot",
    "for",
    "you",
]


def _message(i: int) -> BaseMessage:
    # 20 to 60 words: typical chat turns, different at each index.
    words = " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(20 + (i * 7) % 41))
    return HumanMessage(f"{i}: {words}") if i % 2 == 0 else AIMessage(f"{i}: {words}")


def _turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {i}: when does it arrive?"), AIMessage(f"answer {i}: on saturday.")]


def _time_turns(histories: dict[int, BaseChatMessageHistory], turns: int) -> dict[int, float]:
    """Median ms per turn for each size; turns interleaved across sizes."""
    samples: dict[int, list[float]] = {n: [] for n in histories}
    for i in range(turns):
        for n, history in histories.items():
            start = time.perf_counter()
            history.add_messages(_turn(i))
            view = history.messages
            samples[n].append((time.perf_counter() - start) * 1000)
            assert view, "a turn must read a non-empty view"
    return {n: statistics.median(values) for n, values in samples.items()}


# ----------------------------------------------------------------------------- ours


def _ours(url: str, turns: int) -> dict[int, float]:
    store = open_store(url)
    try:
        histories: dict[int, BaseChatMessageHistory] = {}
        for n in SIZES:
            session = f"bench-{n}"
            messages = [_message(i) for i in range(n)]
            for chunk in range(0, n, 1000):
                batch = messages[chunk : chunk + 1000]
                store.append(session, batch, token_counts=[count_tokens([m]) for m in batch])
            store.install_summary(
                session, "Earlier: the order and delivery.", covered_seq=n - 6, expected_version=0
            )
            histories[n] = RollingSummaryChatMessageHistory(
                session,
                summarizer=lambda previous, msgs: f"{previous[:200]} +{len(msgs)} messages",
                store=store,
                max_turns=12,
                keep_last=6,
                timeout=None,
            )
        _time_turns(histories, 5)  # warm up connections and prepared statements
        return _time_turns(histories, turns)
    finally:
        _drop_ours(store)
        store.close()


def _drop_ours(store: RollingStore) -> None:
    prefix = getattr(store, "prefix", "")
    name = type(store).__name__
    if name == "PostgresRollingStore":
        import psycopg

        # The store's own database (`vector_search_cost` opens one beside the test database).
        # Its database only: the host and port are the server's, a store opened through a
        # test's proxy (gone by now) included.
        conninfo = getattr(getattr(store.backend, "link", None), "conninfo", POSTGRES_URL)
        database = psycopg.conninfo.conninfo_to_dict(conninfo).get("dbname")
        with psycopg.connect(
            POSTGRES_URL, autocommit=True, **({"dbname": database} if database else {})
        ) as conn:
            for table in ("meta", "sessions", "messages", "summaries", "leases", "facts", "vectors"):
                conn.execute(f"DROP TABLE IF EXISTS {prefix}{table} CASCADE")
    elif name == "RedisRollingStore":
        import redis

        with redis.Redis.from_url(REDIS_URL) as r:
            keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                r.delete(*keys)


# ----------------------------------------------------------------------------- peers


def _prefill(history: BaseChatMessageHistory, n: int) -> None:
    messages = [_message(i) for i in range(n)]
    for chunk in range(0, n, 1000):
        history.add_messages(messages[chunk : chunk + 1000])


def _peer_sql(tmp: Path, turns: int) -> dict[int, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_community.chat_message_histories import SQLChatMessageHistory
    url = f"sqlite:///{tmp / 'peer.db'}"
    histories: dict[int, BaseChatMessageHistory] = {}
    for n in SIZES:
        history = SQLChatMessageHistory(f"bench-{n}", connection=url)
        _prefill(history, n)
        histories[n] = history
    return _time_turns(histories, turns)


def _peer_postgres(tmp: Path, turns: int) -> dict[int, float]:
    import psycopg
    from langchain_postgres import PostgresChatMessageHistory

    table = f"bench_{uuid.uuid4().hex[:8]}"
    conn = psycopg.connect(POSTGRES_URL, autocommit=True)
    try:
        PostgresChatMessageHistory.create_tables(conn, table)
        histories: dict[int, BaseChatMessageHistory] = {}
        for n in SIZES:
            # langchain-postgres wants a UUID session id.
            history = PostgresChatMessageHistory(table, str(uuid.uuid4()), sync_connection=conn)
            _prefill(history, n)
            histories[n] = history
        return _time_turns(histories, turns)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()


def _peer_redis(tmp: Path, turns: int) -> dict[int, float]:
    from langchain_redis import RedisChatMessageHistory

    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    histories: dict[int, BaseChatMessageHistory] = {}
    try:
        for n in SIZES:
            history = RedisChatMessageHistory(
                f"bench-{n}", redis_url=REDIS_URL, key_prefix=prefix, index_name=f"idx:{prefix}"
            )
            _prefill(history, n)
            histories[n] = history
    except Exception as exc:
        if "unknown command 'FT." in str(exc):
            msg = "needs the RediSearch module (Redis Stack); this server is plain Redis (unknown command FT.INFO)"
            raise RuntimeError(msg) from exc
        raise
    return _time_turns(histories, turns)


# ----------------------------------------------------------------------------- report


def _fmt(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms:.2f}"


def _run(label: str, fn: Callable[[], dict[int, float]]) -> tuple[dict[int, float] | None, str]:
    print(f"  {label}...", file=sys.stderr, flush=True)
    try:
        return fn(), ""
    except Exception as exc:  # a peer that cannot run here is reported, not fatal
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:140]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=150, help="measured turns per size (ours)")
    parser.add_argument("--peer-turns", type=int, default=10, help="measured turns per size (peers)")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        prefix = f"bench{uuid.uuid4().hex[:6]}_"
        ours_specs: list[tuple[str, str, str]] = [
            ("memory", "ours: memory", "memory://"),
            ("sqlite", "ours: SQLite", f"sqlite:///{tmp / 'ours.db'}?prefix={prefix}"),
            ("postgres", "ours: PostgreSQL", f"{POSTGRES_URL}?prefix={prefix}"),
            ("redis", "ours: Redis", f"{REDIS_URL}?prefix={prefix}"),
        ]
        peers: list[tuple[str, str, Callable[[Path, int], dict[int, float]]]] = [
            ("sqlite", "langchain-community SQLChatMessageHistory (SQLite)", _peer_sql),
            ("postgres", "langchain-postgres PostgresChatMessageHistory", _peer_postgres),
            ("redis", "langchain-redis RedisChatMessageHistory", _peer_redis),
        ]
        print("measuring (median ms per turn: add 2 messages + read the view)", file=sys.stderr)
        ours: dict[str, tuple[str, dict[int, float] | None, str]] = {}
        for key, label, url in ours_specs:
            result, note = _run(label, lambda url=url: _ours(url, args.turns))  # type: ignore[misc]
            ours[key] = (label, result, note)
        theirs: dict[str, tuple[str, dict[int, float] | None, str]] = {}
        for key, label, fn in peers:
            result, note = _run(label, lambda fn=fn: fn(tmp, args.peer_turns))  # type: ignore[misc]
            theirs[key] = (label, result, note)

    lines = [
        "# Time per turn as the transcript grows",
        "",
        "One turn = add two messages, then read the view (`history.messages`). Median of "
        f"{args.turns} turns per size for ours ({args.peer_turns} for the stock histories), sizes "
        "interleaved. Ours runs `RollingSummaryChatMessageHistory` (max_turns=12, keep_last=6, "
        "a summary covering all but the last messages, compactions included in the turns).",
        "",
        "| implementation | 100 msgs (ms) | 1,000 msgs (ms) | 10,000 msgs (ms) | 10k / 100 | peer at 10k / ours at 10k |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = [(label, result, note, None) for label, result, note in ours.values()]
    rows += [(label, result, note, ours[key][1]) for key, (label, result, note) in theirs.items()]
    for label, result, note, our in rows:
        if result is None:
            lines.append(f"| {label} | could not run: {note} | | | | |")
            continue
        growth = result[SIZES[-1]] / result[SIZES[0]]
        versus = f"{result[SIZES[-1]] / our[SIZES[-1]]:.0f}x" if our else ""
        lines.append(
            f"| {label} | {_fmt(result[100])} | {_fmt(result[1_000])} | {_fmt(result[10_000])} "
            f"| {growth:.2f}x | {versus} |"
        )
    lines += [
        "",
        "Targets: ours at 10,000 within 1.3x of ours at 100; at 10,000 at least 20x faster than each "
        "stock history on the same server.",
        "",
        "Reproduce (servers at `LRM_POSTGRES_URL`, `LRM_REDIS_URL`; stock histories from the `bench` dependency group):",
        "",
        "```text",
        "python -m benchmarks.store_turn_cost --out benchmarks/results/store_turn_cost.md",
        "```",
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
