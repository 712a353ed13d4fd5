"""The keyless summarizer and the presets on LoCoMo: tokens sent, summary size, answers kept.

Replays LoCoMo conversations (read at run time from ../shared/data/locomo/, never copied)
through `RollingSummaryChatMessageHistory` with `extractive_summarizer`, one preset per row,
one message at a time, as a chat would. For each preset it prints the tokens a model would be
sent over the conversation (view at each user turn) against the full history, the largest
view, the summaries made, and how many of LoCoMo's QA answers (short strings such as dates and
names) are still written in the final summary and the final view, against the transcript (the
ceiling). Counts only, no timings; tokens by `count_tokens_approximately`.

    python -m benchmarks.summarizers --conversations 3 --out benchmarks/results/summarizers.md
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_rolling_memory import (
    PRESETS,
    RollingSummaryChatMessageHistory,
    extractive_summarizer,
    preset,
)


def _locomo() -> Path:
    for parent in Path(__file__).resolve().parents[1:]:
        candidate = parent / "shared" / "data" / "locomo" / "locomo10.zip"
        if candidate.exists():
            return candidate
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.zip"


def _conversations(path: Path, count: int) -> list[tuple[str, list[BaseMessage], list[str]]]:
    """(name, messages, answers) of the first `count` conversations of the release."""
    out: list[tuple[str, list[BaseMessage], list[str]]] = []
    with zipfile.ZipFile(path) as archive:
        for member in sorted(n for n in archive.namelist() if n.endswith(".json"))[:count]:
            data: dict[str, Any] = json.loads(archive.read(member))
            conversation = data.get("conversation", data)
            speaker_a = conversation["speaker_a"]
            numbers = sorted(
                int(k.split("_")[1]) for k in conversation if k.count("_") == 1 and k.startswith("session_")
            )
            messages: list[BaseMessage] = []
            for n in numbers:
                for turn in conversation.get(f"session_{n}", []):
                    cls = HumanMessage if turn.get("speaker") == speaker_a else AIMessage
                    messages.append(cls(turn["text"]))
            answers = [
                str(q["answer"]).strip()
                for q in data.get("qa", [])
                if isinstance(q.get("answer"), (str, int)) and 0 < len(str(q["answer"]).split()) <= 4
            ]
            out.append((Path(member).stem, messages, answers))
    return out


def _kept(answers: list[str], text: str) -> int:
    lowered = text.lower()
    return sum(1 for a in answers if a.lower() in lowered)


@dataclass
class Row:
    preset: str
    sent: int = 0
    full: int = 0
    peak: int = 0
    summaries: int = 0
    summary_words: int = 0
    in_summary: int = 0
    in_view: int = 0
    in_transcript: int = 0
    answers: int = 0


def run(name: str, conversations: list[tuple[str, list[BaseMessage], list[str]]], max_words: int) -> Row:
    row = Row(name)
    for cid, messages, answers in conversations:
        settings = preset(name, max_words=max_words) if name != "none" else {}
        history = (
            RollingSummaryChatMessageHistory(
                f"bench-{cid}", summarizer=extractive_summarizer(max_words=max_words), **settings
            )
            if name != "none"
            else None
        )
        full = 0
        for message in messages:
            full += count_tokens_approximately([message])
            if history is None:
                continue
            history.add_messages([message])
            if isinstance(message, HumanMessage):
                view = count_tokens_approximately(history.messages)
                row.sent += view
                row.peak = max(row.peak, view)
                row.full += full
        transcript = "\n".join(m.text for m in messages)
        row.answers += len(answers)
        row.in_transcript += _kept(answers, transcript)
        if history is not None:
            row.summaries += history.usage.summarizer_calls
            row.summary_words += len(history.summary.split())
            row.in_summary += _kept(answers, history.summary)
            row.in_view += _kept(answers, "\n".join(m.text for m in history.messages))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=None, help="override every preset's word cap")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    path = _locomo()
    if not path.exists():
        print(f"LoCoMo not found at {path}", file=sys.stderr)
        return 1
    conversations = _conversations(path, args.conversations)
    n = len(conversations)
    lines = [
        f"LoCoMo, {n} conversations, {sum(len(m) for _, m, _ in conversations)} messages; "
        "extractive_summarizer; answers = QA answers of at most 4 words",
        "",
        "| preset | tokens sent | vs full history | largest view | summaries | final summary words (mean) "
        "| answers in summary | in final view | in transcript |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in sorted(PRESETS):
        max_words = args.max_words or PRESETS[name].max_words
        row = run(name, conversations, max_words)
        lines.append(
            f"| {name} (fold > {PRESETS[name].max_turns}, {max_words} words) | {row.sent:,} | "
            f"{row.sent / row.full:.1%} of {row.full:,} | {row.peak:,} | {row.summaries} | "
            f"{row.summary_words / n:.0f} | {row.in_summary}/{row.answers} | {row.in_view}/{row.answers} | "
            f"{row.in_transcript}/{row.answers} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(
            "# Keyless summarizer and presets on LoCoMo\n\n```text\npython -m benchmarks.summarizers "
            + " ".join(argv if argv is not None else sys.argv[1:])
            + "\n```\n\n"
            + text
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
