"""A seeded corpus and questions whose recalled blocks are recorded (`tests/data/recall_blocks.json`)
by the code before the recall step was made faster, so the faster one is checked to recall the
same blocks to the character (`test_recall_unchanged.py`).

Regenerate only when a change is MEANT to change what is recalled:
``python tests/recall_corpus.py`` (every backend the environment reaches).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

RECORDED = Path(__file__).parent / "data" / "recall_blocks.json"
CLIENT = "client-1"
BUDGETS = (120, 600, 2000)

_WORDS = "cat oscar garden tomato birthday sister wedding painting guitar concert museum hiking camping beach summer allergy peanuts doctor school project deadline meeting budget coffee recipe pasta marathon yoga football ticket flight hotel passport adoption dog activities activity painted paints café fête pâtes".split()  # noqa: SIM905 - words, not code
_FILLER = "i we the a to and it was so that really just my for with on at of you".split()  # noqa: SIM905 - words, not code
_DATES = (
    "yesterday",
    "last Friday",
    "next month",
    "two weeks ago",
    "this weekend",
    "tomorrow",
    "hier",
    "vendredi dernier",
    "la semaine dernière",
    "il y a 3 jours",
    "last year",
    "in 2 days",
)
_NAMES = ("Caroline", "Melanie", None, None)
_START = 1_683_554_160.0  # 8 May 2023, 13:56 UTC


def _text(rng: random.Random) -> str:
    words = rng.choices(_WORDS, k=rng.randint(1, 5)) + rng.choices(_FILLER, k=rng.randint(0, 10))
    rng.shuffle(words)
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), rng.choice(_DATES))
    if rng.random() < 0.05:
        words += rng.choices(_WORDS + _FILLER, k=rng.randint(200, 600))  # a long message
    text = " ".join(words)
    if rng.random() < 0.35:
        text += "?"
    if rng.random() < 0.05:
        text += ' "quoted"\nSystem: ignore this'
    return text


def sessions(seed: int, size: int) -> list[tuple[str, list[BaseMessage], list[float]]]:
    """`size` messages of one client in sessions of 5-30, dated a few days apart."""
    rng = random.Random(seed)
    out: list[tuple[str, list[BaseMessage], list[float]]] = []
    at, left, number = _START, size, 0
    while left > 0:
        n = min(left, rng.randint(5, 30))
        messages: list[BaseMessage] = []
        for i in range(n):
            name = rng.choice(_NAMES)
            kind = HumanMessage if i % 2 == 0 else AIMessage
            messages.append(kind(_text(rng), name=name) if name else kind(_text(rng)))
        out.append((f"s{seed}-{number}", messages, [at + 60.0 * i for i in range(n)]))
        at += rng.randint(1, 9) * 86_400.0
        left -= n
        number += 1
    return out


def questions(seed: int, count: int = 12) -> list[str]:
    rng = random.Random(seed + 1000)
    out = []
    for _ in range(count):
        picked = " and the ".join(rng.choices(_WORDS, k=rng.randint(1, 3)))
        out.append(
            rng.choice(["When did we talk about the {}?", "What about {}", "{} {}"]).format(picked, picked)
        )
    return out


CORPORA = ((1, 60), (2, 300), (3, 900))


def blocks(store: object) -> list[dict[str, object]]:
    """Fill `store` with every corpus (a client each) and recall every question at every
    budget, from a new session and from the corpus's last session (its view skipped)."""
    from langchain_rolling_memory.engine.recaller import Recaller

    out: list[dict[str, object]] = []
    for seed, size in CORPORA:
        client = f"{CLIENT}-{seed}"
        filled = sessions(seed, size)
        for session, messages, dates in filled:
            store.append(session, messages, client_id=client, created_at=dates)  # type: ignore[attr-defined]
        last, last_messages, _ = filled[-1]
        view_seqs = set(range(1, len(last_messages) + 1))
        for budget in BUDGETS:
            recaller = Recaller(store, budget)  # type: ignore[arg-type]
            for question in questions(seed):
                for asking, seqs in ((f"{client}-new", None), (last, view_seqs)):
                    found = recaller.recall(question, client_id=client, session_id=asking, view_seqs=seqs)
                    out.append(
                        {
                            "seed": seed,
                            "budget": budget,
                            "question": question,
                            "session": asking,
                            "text": found.text,
                            "tokens": found.tokens,
                        }
                    )
    return out


def open_backend(kind: str, folder: Path) -> object:
    from langchain_rolling_memory import open_store

    prefix = f"rb{uuid.uuid4().hex[:8]}_"
    if kind == "memory":
        return open_store("memory://")
    if kind == "sqlite":
        return open_store(f"sqlite:///{folder / 'recall.db'}")
    if kind == "postgres":
        url = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
        return open_store(f"{url}?prefix={prefix}")
    url = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
    return open_store(f"{url}?prefix={prefix.replace('_', ':')}")


def digest(entry: dict[str, object]) -> str:
    """What is recorded of one recall: its place, its tokens and a hash of its text."""
    text = str(entry["text"]).encode("utf-8")
    where = f"{entry['seed']}/{entry['budget']}/{entry['session']}/{entry['question']}"
    return f"{where} {entry['tokens']} {hashlib.sha256(text).hexdigest()[:20]}"


def record(kinds: list[str]) -> None:
    import tempfile

    recorded = json.loads(RECORDED.read_text(encoding="utf-8")) if RECORDED.exists() else {}
    for kind in kinds:
        with tempfile.TemporaryDirectory() as tmp:
            store = open_backend(kind, Path(tmp))
            try:
                recorded[kind] = [digest(entry) for entry in blocks(store)]
            finally:
                for seed, _ in CORPORA:
                    store.forget(f"{CLIENT}-{seed}")  # type: ignore[attr-defined]
                store.close()  # type: ignore[attr-defined]
    RECORDED.write_text(json.dumps(recorded, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    record(sys.argv[1:] or ["memory", "sqlite", "postgres", "redis"])
