"""The recall step recalls, to the character, the blocks it recalled before it was made faster
(issue 23): a seeded corpus of three clients (60, 300 and 900 messages: relative dates,
questions and their answers, names, long and quoted messages), 12 questions each at three
budgets, asked from a new session and from a session whose view is skipped, on every backend.
The blocks were recorded by the code of commit 630decc (`recall_corpus.py` says how), and again
when excerpts were grouped under one line per day and session (a change meant to change them)."""

from __future__ import annotations

import json

from recall_corpus import CLIENT, CORPORA, RECORDED, blocks, digest

from langchain_rolling_memory.stores import RollingStore


def test_every_backend_recalls_the_blocks_recorded_before(store: RollingStore, request: object) -> None:
    kind = request.node.callspec.params["store"]  # type: ignore[attr-defined]
    expected = json.loads(RECORDED.read_text(encoding="utf-8"))[kind]
    try:
        found = [digest(entry) for entry in blocks(store)]
    finally:
        for seed, _ in CORPORA:
            store.forget(f"{CLIENT}-{seed}")
    changed = [(old, new) for old, new in zip(expected, found, strict=True) if old != new]
    assert not changed, f"{len(changed)} of {len(expected)} blocks changed, first: {changed[:3]}"
