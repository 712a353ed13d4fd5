"""The `rolling-memory` command when a provider or a store fails: one line on stderr that names
the flag to fix, no traceback, a non-zero exit; the real clients talk to the local fake servers."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_rolling_memory_lab.cli import main
from tests.fake_providers import Failure, serve

KEYS = {"openai": "OPENAI_API_KEY", "gemini": "GOOGLE_API_KEY"}
REFUSED = Failure(401, "Incorrect API key provided")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in ("ROLLING_MEMORY_STORE", "ROLLING_MEMORY_HOME", "ROLLING_MEMORY_BASE_URL", *KEYS.values()):
        monkeypatch.delenv(name, raising=False)


def _talk(path: Path, n: int = 40) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            f.write(
                json.dumps({"role": role, "content": f"Turn {i}: we keep item {i} for the budget."}) + "\n"
            )
    return path


def _one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_demo_with_a_refused_key_says_so_in_one_line_and_fails(
    kind: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(kind, lambda request: REFUSED) as server:
        monkeypatch.setenv(KEYS[kind], "bad-key")
        monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", server.base_url)
        assert main(["demo", "--store", "memory://", "--provider", kind]) == 1
    err = _one_line(capsys.readouterr().err)
    assert err.startswith(f"error: --provider {kind}: ")
    assert "HTTP 401: Incorrect API key provided" in err and KEYS[kind] in err
    assert len(server.requests) == 1  # a refused key is never asked again


def test_demo_with_an_unreachable_endpoint_says_so_in_one_line_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", "http://127.0.0.1:1/v1")
    assert main(["demo", "--store", "memory://", "--provider", "openai"]) == 1
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("error: --provider openai: OpenAI: ")
    assert "Connection refused" in err and "$ROLLING_MEMORY_BASE_URL=http://127.0.0.1:1/v1" in err


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_replay_with_a_refused_key_fails_in_one_line_instead_of_a_table(
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    talk = _talk(tmp_path / "talk.jsonl")
    with serve(kind, lambda request: REFUSED) as server:
        monkeypatch.setenv(KEYS[kind], "bad-key")
        monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", server.base_url)
        with caplog.at_level(logging.WARNING, logger="langchain_rolling_memory"):
            assert main(["replay", str(talk), "--summarizer", kind]) == 1
    captured = capsys.readouterr()
    err = _one_line(captured.err)
    assert err.startswith(f"error: --summarizer {kind}: ") and "HTTP 401" in err and KEYS[kind] in err
    assert captured.out == ""  # no table of "0 memory calls"
    assert len(server.requests) == 1
    assert not [r for r in caplog.records if r.name == "langchain_rolling_memory"]


def test_replay_with_a_refused_key_prints_one_line_from_the_installed_command(tmp_path: Path) -> None:
    talk = _talk(tmp_path / "talk.jsonl")
    with serve("openai", lambda request: REFUSED) as server:
        env = {
            **os.environ,
            "OPENAI_API_KEY": "sk-bad",
            "ROLLING_MEMORY_BASE_URL": server.base_url,
            "XDG_DATA_HOME": str(tmp_path / "xdg"),
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "langchain_rolling_memory_lab.cli",
                "replay",
                str(talk),
                "--summarizer",
                "openai",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1
    assert done.stdout == ""
    assert _one_line(done.stderr).startswith("error: --summarizer openai: OpenAI: HTTP 401")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(
            ["demo", "--store", "postgresql://postgres@127.0.0.1:1/x"],
            "error: --store: cannot connect to PostgreSQL",
            id="demo-postgres",
        ),
        pytest.param(
            ["facts", "list", "--client", "ana", "--store", "redis://127.0.0.1:1/0"],
            "error: --store: cannot connect to Redis at redis://127.0.0.1:1/0",
            id="facts-redis",
        ),
        pytest.param(
            ["inspect", "--session", "s1", "--store", "nosuch://x"],
            "error: --store: ",
            id="unknown-scheme",
        ),
    ],
)
def test_a_store_that_cannot_open_names_the_store_flag(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = _one_line(capsys.readouterr().err)
    assert err.startswith(said)
    assert "Connection refused" in err or "nosuch" in err


def test_a_store_from_the_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROLLING_MEMORY_STORE", "redis://127.0.0.1:1/0")
    assert main(["facts", "list", "--client", "ana"]) == 1
    assert _one_line(capsys.readouterr().err).startswith(
        "error: $ROLLING_MEMORY_STORE: cannot connect to Redis"
    )


def _locomo(tmp_path: Path) -> Path:
    turns = [
        {"speaker": "Ana" if i % 2 == 0 else "Ben", "text": f"we talked about item {i}"} for i in range(30)
    ]
    data = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ben", "text": "My cat is called Marmalade."}, *turns],
        "qa": [{"question": "What is Ben's cat called?", "answer": "Marmalade", "category": 4}],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        pytest.param(Failure(404, "The model `gpt-9` does not exist"), "check --model", id="unknown-model"),
        pytest.param(
            Failure(400, "Invalid value for temperature"), "Invalid value for temperature", id="bad-request"
        ),
    ],
)
def test_eval_with_a_model_the_provider_refuses_fails_in_one_line_naming_the_flag(
    failure: Failure,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serve("openai", lambda request: failure) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", server.base_url)
        argv = ["eval", str(_locomo(tmp_path)), "--strategies", "transcript", "--answer-model", "openai"]
        assert main([*argv, "--model", "gpt-9"]) == 1
    captured = capsys.readouterr()
    err = _one_line(captured.err)
    assert err.startswith(f"error: --answer-model openai: OpenAI: HTTP {failure.status}: ") and said in err
    assert captured.out == ""
    assert len(server.requests) == 1


def test_eval_with_an_unreachable_endpoint_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", "http://127.0.0.1:1/v1")
    assert (
        main(["eval", str(_locomo(tmp_path)), "--strategies", "transcript", "--answer-model", "openai"]) == 1
    )
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("error: --answer-model openai: OpenAI: ") and "Connection refused" in err
