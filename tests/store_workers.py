"""Entry points of the child processes of the multi-process tests (spawned, so importable).

Each child opens the store by URL, like an app server would, and records what it did in
files, so the parent checks real effects only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_rolling_memory import Compactor, RollingSummaryChatMessageHistory, open_store
from langchain_rolling_memory.core.cuts import FoldPolicy
from langchain_rolling_memory.summarizers import as_summarizer


def record_line(path: str, line: str) -> None:
    # O_APPEND writes of one short line are atomic between processes.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line]


class RecordingSummarizer:
    """Writes one line per call (pid and the seqs it was asked to fold), then answers."""

    def __init__(self, calls_file: str, pause: float = 0.0, hang: bool = False) -> None:
        self.calls_file = calls_file
        self.pause = pause
        self.hang = hang

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        record_line(self.calls_file, f"{os.getpid()} {len(messages)}")
        if self.hang:
            time.sleep(600)  # killed by the test long before
        time.sleep(self.pause)
        return f"summary of {len(messages)} messages after [{previous[:40]}]"


def append_worker(url: str, session_id: str, writer: str, count: int, start: Any) -> None:
    store = open_store(url)
    try:
        start.wait(60)
        for k in range(count):
            store.append(session_id, [HumanMessage(f"{writer}:{k}")], client_id="client-1")
    finally:
        store.close()


def compact_worker(url: str, session_id: str, calls_file: str, start: Any, pause: float) -> None:
    store = open_store(url)
    try:
        compactor = Compactor(
            store,
            as_summarizer(RecordingSummarizer(calls_file, pause)),
            FoldPolicy(max_turns=12, keep_last=6),
            timeout=None,
            lease_ttl=60,
        )
        start.wait(60)
        compactor.compact(session_id)
    finally:
        store.close()


def turns_worker(url: str, session_id: str, writer: str, turns: int, calls_file: str, start: Any) -> None:
    store = open_store(url)
    try:
        history = RollingSummaryChatMessageHistory(
            session_id,
            summarizer=RecordingSummarizer(calls_file, pause=0.05),
            store=store,
            max_turns=8,
            keep_last=4,
            timeout=None,
        )
        start.wait(60)
        for k in range(turns):
            history.add_messages([HumanMessage(f"{writer}:q{k}"), AIMessage(f"{writer}:a{k}")])
    finally:
        store.close()


def hanging_compactor(url: str, session_id: str, calls_file: str, lease_ttl: float) -> None:
    store = open_store(url)
    compactor = Compactor(
        store,
        as_summarizer(RecordingSummarizer(calls_file, hang=True)),
        FoldPolicy(max_turns=12, keep_last=6),
        timeout=None,
        lease_ttl=lease_ttl,
    )
    compactor.compact(session_id)


def facts_worker(url: str, client_id: str, writer: str, rounds: int, start: Any) -> None:
    store = open_store(url)
    try:
        start.wait(60)
        # Every writer adds the same new facts in the same order, so they race on each one.
        for k in range(rounds):
            store.add_fact(client_id, f"Fact number {k}")
            store.add_fact(client_id, f"Value {k} from {writer}", key=f"key-{k}")
    finally:
        store.close()
