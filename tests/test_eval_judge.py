"""The keyed path of `rolling-memory eval`: the real OpenAI and Gemini clients, pointed at local
fake servers (`fake_providers`), answer from each strategy's memory and grade the answers; the
tests read what reached the server, the J score it implies and the token bill."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from langchain_rolling_memory_lab.cli import main
from langchain_rolling_memory_lab.eval import answer_in_context
from langchain_rolling_memory_lab.judge import ANSWER_PROMPT, JUDGE_PROMPT, read_label
from tests.fake_providers import Failure, FakeProvider, Reply, Request, Text, serve

PROVIDERS = ["openai", "gemini"]
KEYS = {"openai": "OPENAI_API_KEY", "gemini": "GOOGLE_API_KEY"}
GOLD = {
    "What is Ben's cat called?": "Marmalade",
    "When did Ben move to Lisbon?": "June 2023",
    "What did the runner get?": "a medal",
}
DONT_KNOW = "The memory does not say."


def _locomo(tmp_path: Path) -> Path:
    filler = [
        {"speaker": "Ana" if i % 2 == 0 else "Ben", "text": f"small talk number {i} about the weather"}
        for i in range(300)
    ]
    data: dict[str, Any] = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "text": "What is the name of your new cat?"},
            {"speaker": "Ben", "text": "She is called Marmalade."},
            {"speaker": "Ana", "text": "I ran a charity race and got a medal."},
            *filler,
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [{"speaker": "Ben", "text": "I moved to Lisbon last week."}, *filler[:20]],
        "qa": [
            {"question": q, "answer": a, "category": c}
            for (q, a), c in zip(GOLD.items(), (4, 2, 1), strict=True)
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _field(text: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", text, re.MULTILINE)
    assert match, f"no {name!r} line in {text!r}"
    return match.group(1)


@dataclass
class Script:
    """An answer model that answers exactly when the gold answer is in its memory, and a strict
    judge; every reply is kept so that the test can add up the bill."""

    replies: list[tuple[Request, str]] = field(default_factory=list)

    def __call__(self, request: Request) -> Reply:
        system, prompt = request.texts()[0], request.texts()[-1]
        if system == JUDGE_PROMPT:
            gold, answer = _field(prompt, "Gold answer"), _field(prompt, "Generated answer")
            text = json.dumps({"label": "CORRECT" if answer == gold else "WRONG"})
        else:
            assert system == ANSWER_PROMPT
            question = _field(prompt, "Question")
            memory = prompt.split("\n\nQuestion: ")[0]
            text = GOLD[question] if answer_in_context(GOLD[question], memory) else DONT_KNOW
        self.replies.append((request, text))
        return Text(text)

    def of(self, prompt: str) -> list[tuple[Request, str]]:
        return [(r, t) for r, t in self.replies if r.texts()[0] == prompt]


def _run(
    provider: str,
    argv: list[str],
    responder: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[int, FakeProvider]:
    pytest.importorskip("langchain_openai" if provider == "openai" else "langchain_google_genai")
    with serve(provider, responder) as server:  # type: ignore[arg-type]
        monkeypatch.setenv(KEYS[provider], "test-key")
        monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", server.base_url)
        status = main(["eval", *argv, "--answer-model", provider])
    return status, server


@pytest.mark.parametrize("provider", PROVIDERS)
def test_answers_carry_the_memory_and_the_question_and_the_judge_sees_gold_and_answer(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = Script()
    argv = [str(_locomo(tmp_path)), "--strategies", "transcript,last-2000", "--judge", "--json"]
    status, server = _run(provider, argv, script, monkeypatch)
    assert status == 0
    answers, verdicts = script.of(ANSWER_PROMPT), script.of(JUDGE_PROMPT)
    assert len(answers) == len(verdicts) == 2 * 3  # two strategies, three questions
    assert len(server.requests) == 12
    first = answers[0][0].texts()[-1]  # the transcript strategy, first question
    assert "Ben: She is called Marmalade." in first and "Session 1, 8 May 2023" in first
    assert first.endswith("Question: What is Ben's cat called?\nAnswer:")
    for (request, _), (_, answer) in zip(verdicts, answers, strict=True):
        prompt = request.texts()[-1]
        gold = GOLD[_field(prompt, "Question")]
        assert f"Gold answer: {gold}\nGenerated answer: {answer}" in prompt

    data = json.loads(capsys.readouterr().out)
    judged = {row["strategy"]: row for row in data["answers"]["strategies"]}
    in_context = {row["strategy"]: row for row in data["strategies"]}
    # The script answers exactly what is in the memory and the judge is strict: J follows.
    assert judged["transcript"]["j"] == in_context["transcript"]["answer_in_context"] == 1.0
    # The window lost session 1 and has no date line: nothing answered.
    assert judged["last-2000"]["j"] == in_context["last-2000"]["answer_in_context"] == 0.0
    assert judged["transcript"]["categories"] == {"multi-hop": 1.0, "temporal": 1.0, "single-hop": 1.0}
    assert judged["last-2000"]["categories"] == {"multi-hop": 0.0, "temporal": 0.0, "single-hop": 0.0}
    labels = [read_label(text) for _, text in verdicts]
    assert sum(bool(x) for x in labels) == round(3 * (judged["transcript"]["j"] + judged["last-2000"]["j"]))

    # The bill is the sum of what the server reported in each reply's usage.
    def billed(pairs: list[tuple[Request, str]]) -> dict[str, int]:
        return {
            "calls": len(pairs),
            "input_tokens": sum(len(r.wire) // 4 for r, _ in pairs),
            "output_tokens": sum(max(1, len(t.split())) for _, t in pairs),
        }

    assert data["answers"]["bill"] == {"answers": billed(answers), "judge": billed(verdicts)}
    per_strategy = sum(row["answers"]["input_tokens"] for row in judged.values())
    assert per_strategy == data["answers"]["bill"]["answers"]["input_tokens"]


def test_the_table_shows_j_per_category_and_the_bill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(_locomo(tmp_path)), "--strategies", "recall-1000", "--judge", "--model", "gpt-4.1-mini"]
    status, server = _run("openai", argv, Script(), monkeypatch)
    assert status == 0
    assert {r.body["model"] for r in server.requests} == {"gpt-4.1-mini"}  # the judge too, by default
    out = capsys.readouterr().out
    # "What did the runner get?" shares no word with the medal's message: recall misses it.
    assert "| recall 1,000 | 66.7% | 0.0% | 100.0% | 100.0% | 3 |" in out
    assert "answers by openai gpt-4.1-mini:" in out and "judge openai gpt-4.1-mini:" in out


def test_answers_without_judge_are_billed_but_not_graded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(_locomo(tmp_path)), "--strategies", "transcript", "--json", "--questions", "2"]
    status, server = _run("gemini", argv, Script(), monkeypatch)
    assert status == 0 and len(server.requests) == 2  # two questions drawn, no judge call
    data = json.loads(capsys.readouterr().out)
    (row,) = data["answers"]["strategies"]
    assert row["j"] is None and row["questions"] == 2 and data["strategies"][0]["questions"] == 2
    assert data["answers"]["bill"]["judge"]["calls"] == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_key_fails_once_in_one_line(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(_locomo(tmp_path)), "--strategies", "transcript,recall-500", "--judge"]
    status, server = _run(provider, argv, lambda r: Failure(401, "invalid api key"), monkeypatch)
    assert status != 0
    assert len(server.requests) == 1  # no retry, no second question
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("error: ") and "HTTP 401" in line and "refused the API key" in line


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_missing_key_fails_in_one_line_naming_the_variable(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["eval", str(_locomo(tmp_path)), "--answer-model", provider, "--judge"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert f"--answer-model {provider} needs {KEYS[provider]}" in line


def test_judge_without_an_answer_model_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(_locomo(tmp_path)), "--judge"]) == 1
    assert "add --answer-model openai or gemini" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "CORRECT"}', True),
        ('```json\n{"label": "WRONG"}\n```', False),
        ("The answer is CORRECT.", True),
        ("It is not correct: WRONG", False),
        ("I cannot tell", None),
    ],
    ids=["json-correct", "fenced-json-wrong", "plain-word", "last-label-wins", "neither"],
)
def test_judge_replies_are_read_as_labels(reply: str, label: bool | None) -> None:
    assert read_label(reply) is label
