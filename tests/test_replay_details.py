"""`rolling-memory replay` measures how many of a conversation's named details each summary
keeps (issue 24): per compaction, the names, numbers, dates and codes of the folded messages
and those the new summary still carries."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from langchain_rolling_memory.summarizers import extractive_summarizer
from langchain_rolling_memory_lab.cli import main
from langchain_rolling_memory_lab.conversations import ConversationMessage
from langchain_rolling_memory_lab.replay import Strategy, replay

SUPPORT_CHAT = [
    ("user", "Hello, my blender stopped working. It is the Vortex model, reference REF-4471."),
    ("assistant", "Sorry to hear that. When did you buy it?"),
    ("user", "On 3 March 2024, order #88213, I paid 149.90 euros for 2 units."),
    ("assistant", "Thank you. Both units are under warranty until 3 March 2026."),
    ("user", "Only one is broken. Can Chronopost pick it up?"),
    ("assistant", "Yes. A courier can come on Saturday between 9:00 and 12:00."),
    ("user", "Saturday is fine."),
    ("assistant", "Booked. You will get the pickup label by email."),
    ("user", "Thanks, and the replacement?"),
    ("assistant", "It ships once the broken unit reaches our Lyon workshop."),
    ("user", "How long does that take?"),
    ("assistant", "Usually 5 days."),
]
STRATEGY = Strategy("summary", "summary", max_turns=6, keep_last=2)


def _chat() -> list[ConversationMessage]:
    return [ConversationMessage(role, text) for role, text in SUPPORT_CHAT]


def _vague(previous: str, messages: Sequence[BaseMessage]) -> str:
    """A summarizer that keeps the gist and drops every detail."""
    return "The user has a problem with a product and the assistant arranged a return."


def test_each_compaction_reports_the_details_it_folded_and_those_the_summary_kept() -> None:
    report = replay(_chat(), strategies=[STRATEGY], summarizer=extractive_summarizer(max_words=200))
    first = report.result("summary").compactions[0]
    folded = [d.text for d in first.retention.details]
    assert folded[:6] == ["Vortex", "REF-4471", "3 March 2024", "#88213", "149.90 euros", "2 units"]
    assert "Chronopost" in folded
    assert first.folded >= 5
    assert first.ratio is not None
    assert first.ratio >= 0.8  # an extractive summary quotes the sentences that hold them


def test_a_summarizer_that_drops_the_details_scores_lower() -> None:
    extractive = replay(_chat(), strategies=[STRATEGY], summarizer=extractive_summarizer(max_words=200))
    vague = replay(_chat(), strategies=[STRATEGY], summarizer=_vague)
    kept, dropped = extractive.result("summary"), vague.result("summary")
    assert len(kept.compactions) == len(dropped.compactions) > 0
    assert kept.detail_retention is not None
    assert dropped.detail_retention == 0.0 < kept.detail_retention
    first = vague.compaction_rows("summary")[0]
    assert first["kept"] == 0
    assert first["retention"] == 0.0
    assert "REF-4471" in first["missing"]  # type: ignore[operator]
    assert {r["strategy"]: r["detail_retention"] for r in vague.rows()} == {"summary": 0.0}


def test_a_summary_that_repeats_the_folded_messages_keeps_them_all() -> None:
    def verbatim(previous: str, messages: Sequence[BaseMessage]) -> str:
        return "\n".join(m.text for m in messages)

    report = replay(_chat(), strategies=[STRATEGY], summarizer=verbatim)
    assert report.result("summary").detail_retention == 1.0


def test_strategies_without_a_summary_have_no_compactions() -> None:
    report = replay(_chat(), strategies=[Strategy("full", "full"), Strategy("window", "window", window=4)])
    assert all(not r.compactions and r.detail_retention is None for r in report.results)
    assert [row["detail_retention"] for row in report.rows()] == [None, None]


def _replay_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, *options: str) -> str:
    """What `rolling-memory replay` prints for `n` messages of the support chat, folding often."""
    talk = tmp_path / "support.jsonl"
    with talk.open("w", encoding="utf-8") as f:
        for i in range(n):
            role, text = SUPPORT_CHAT[i % len(SUPPORT_CHAT)]
            f.write(json.dumps({"role": role, "content": text}) + "\n")
    assert main(["replay", str(talk), "--max-turns", "6", "--keep-last", "2", *options]) == 0
    return capsys.readouterr().out


def test_the_replay_command_prints_the_compactions_and_their_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _replay_command(tmp_path, capsys, 300)
    assert "summary: named details (names, numbers, dates, codes) kept by each summary" in out
    assert "retention" in out
    assert "summary: 49 compactions, named details kept: mean" in out
    assert "19 more" in out  # past 40, the first and last 15 are listed, the others counted
    assert "summary+facts: the same compactions as summary (mean" in out


def test_the_replay_json_has_every_compaction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(_replay_command(tmp_path, capsys, 48, "--json"))
    assert set(data["compactions"]) == {"summary", "summary+facts"}
    rows = data["compactions"]["summary"]
    assert len(rows) == 7
    assert all(0 <= r["kept"] <= r["details"] for r in rows)
    means = {r["strategy"]: r["detail_retention"] for r in data["strategies"]}
    assert means["full"] is None
    assert means["summary"] == pytest.approx(sum(r["retention"] for r in rows) / len(rows), abs=1e-3)
