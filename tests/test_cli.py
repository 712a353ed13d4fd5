"""The `rolling-memory` command, called as `main(argv)` with its output read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_rolling_memory import RollingSummaryChatMessageHistory, open_store
from langchain_rolling_memory.core.framing import MEMORY_MESSAGE_ID
from langchain_rolling_memory_lab.cli import main
from langchain_rolling_memory_lab.cli_base import default_store_url
from langchain_rolling_memory_lab.demo import run_demo
from tests.fake_providers import Request, serve


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the real data directory or sees a provider key."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name in (
        "ROLLING_MEMORY_STORE",
        "ROLLING_MEMORY_HOME",
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'cli.db').as_posix()}"


def test_default_store_is_a_sqlite_file_under_the_data_directory(tmp_path: Path) -> None:
    assert (
        default_store_url() == f"sqlite:///{(tmp_path / 'xdg' / 'rolling-memory' / 'memory.db').as_posix()}"
    )


def test_environment_variables_choose_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLING_MEMORY_HOME", str(tmp_path / "home"))
    assert default_store_url().endswith("/home/memory.db")
    monkeypatch.setenv("ROLLING_MEMORY_STORE", "memory://")
    assert default_store_url() == "memory://"


def test_demo_runs_offline_on_the_default_store_and_shows_the_facts_in_session_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "xdg" / "rolling-memory" / "memory.db").is_file()
    session_2 = out.split("Session 2", 1)[1]
    injected = session_2.split("turn 2.1", 1)[0]
    assert "facts injected into session 2" in injected
    assert "Logistics team" in injected
    assert "peanut allergy" in injected
    assert "summary updated" in out
    assert "fact replaced" in out
    assert re.search(r"│ total\s+│\s+│\s+\d+ │\s+\d+ │", out), "the final table has a total row"


def test_demo_twice_on_one_store_uses_a_fresh_client_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _sqlite(tmp_path)
    assert main(["demo", "--store", url]) == 0
    assert main(["demo", "--store", url]) == 0
    clients = set(re.findall(r"\((demo-[0-9a-f]{8})-s1\)", capsys.readouterr().out))
    assert len(clients) == 2


def test_demo_reset_forgets_the_named_client_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _sqlite(tmp_path)
    assert main(["demo", "--store", url, "--client", "sam"]) == 0
    assert main(["demo", "--store", url, "--client", "sam", "--reset"]) == 0
    store = open_store(url)
    try:
        assert store.last_seq("sam-s1") == 20  # not 40: the first run was forgotten
    finally:
        store.close()


def test_the_second_session_prompt_really_carries_the_remembered_facts() -> None:
    turns = list(run_demo(open_store("memory://"), client_id="sam"))
    first_of_2 = next(t for t in turns if t.session == 2)
    memory = [m for m in first_of_2.prompt if m.id == MEMORY_MESSAGE_ID]
    assert len(memory) == 1
    assert isinstance(memory[0], SystemMessage)
    system = memory[0].text
    assert "Logistics team" in system
    assert "peanut allergy" in system
    assert "Payments team" not in system  # the team fact was replaced, not duplicated
    # Nothing of session 1's transcript is in the prompt: the facts carried it.
    assert all("badge" not in m.text for m in first_of_2.prompt)
    assert "Logistics" in first_of_2.answer
    assert "peanut" in first_of_2.answer
    assert first_of_2.rolling_tokens < first_of_2.full_tokens


def test_the_demos_keyless_summary_changes_at_each_compaction_and_keeps_the_newest() -> None:
    turns = [t for t in run_demo(open_store("memory://"), client_id="sam") if t.session == 1]
    updated = [t.summary for t in turns if t.summary_changed]
    assert len(updated) >= 3
    assert len(set(updated)) == len(updated)  # no panel repeats an earlier one
    assert "security training" in updated[-1]  # turn 1.8, the newest folded turn (issue 15)
    assert "Sam Rivera" in updated[-1]  # who the user is stays


def test_the_demo_shows_every_summary_it_installs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--store", "memory://", "--client", "sam"]) == 0
    panels = capsys.readouterr().out.split("summary updated")[1:]
    assert len(panels) >= 3
    assert "security training" in panels[-1].split("turn 1.10", 1)[0]  # in the panel itself


@pytest.mark.parametrize(
    ("provider", "variable"), [("openai", "OPENAI_API_KEY"), ("gemini", "GOOGLE_API_KEY")]
)
def test_demo_with_a_provider_but_no_key_says_so_in_one_line(
    provider: str, variable: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--store", "memory://", "--provider", provider]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert variable in err
    assert "Traceback" not in err


def _write_jsonl(path: Path, n: int) -> Path:
    topics = [
        "the invoice",
        "a delivery on Saturday",
        "the budget of 300 EUR",
        "my team change",
        "the deadline",
    ]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            role = "user" if i % 2 == 0 else "assistant"
            text = (
                f"Turn {i}: about {topics[i % len(topics)]}, we decided to keep item {i} because it matters."
            )
            f.write(json.dumps({"role": role, "content": text}) + "\n")
    return path


def test_replay_of_200_messages_prints_its_table_and_writes_its_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    talk = _write_jsonl(tmp_path / "talk.jsonl", 200)
    png = tmp_path / "tokens.png"
    assert main(["replay", str(talk), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for label in (
        "full buffer",
        "window of 12 messages",
        "rolling summary (max_turns=12, keep_last=6)",
        "rolling summary (max_turns=12, keep_last=6) + client facts",
    ):
        assert label in out
    # The summary line wraps at the terminal's width, where the file's path ends: read it unwrapped.
    prose = " ".join(out.split())
    assert "200 messages" in prose
    assert "pays for itself from message" in prose
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_replay_json_output_has_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    talk = _write_jsonl(tmp_path / "talk.jsonl", 60)
    assert main(["replay", str(talk), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["strategy"]: r for r in data["strategies"]}
    assert data["messages"] == 60
    assert rows["full"]["input_tokens"] > rows["summary"]["input_tokens"] > 0
    assert rows["summary"]["memory_calls"] > 0


def test_replay_of_a_bad_line_names_the_line_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    talk = _write_jsonl(tmp_path / "talk.jsonl", 4)
    with talk.open("a", encoding="utf-8") as f:
        f.write('{"role": "user", "content": "fine"}\n{"role": "user" "content": "oops"}\n')
    assert main(["replay", str(talk)]) == 1
    captured = capsys.readouterr()
    assert "line 6" in captured.err
    assert "not valid JSON" in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_facts_add_list_export_forget_round_trip_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _sqlite(tmp_path)
    assert (
        main(
            ["facts", "add", "--store", url, "--client", "ana", "Works in the Payments team", "--key", "team"]
        )
        == 0
    )
    assert main(["facts", "add", "--store", url, "--client", "ana", "Allergic to peanuts"]) == 0
    assert (
        main(
            [
                "facts",
                "add",
                "--store",
                url,
                "--client",
                "ana",
                "Works in the Logistics team",
                "--key",
                "team",
            ]
        )
        == 0
    )
    capsys.readouterr()

    assert main(["facts", "list", "--store", url, "--client", "ana", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert [(f["key"], f["text"]) for f in facts] == [
        ("team", "Works in the Logistics team"),
        (None, "Allergic to peanuts"),
    ]
    assert main(["facts", "list", "--store", url, "--client", "ana"]) == 0
    assert "Logistics" in capsys.readouterr().out

    out_file = tmp_path / "ana.json"
    assert main(["facts", "export", "--store", url, "--client", "ana", "-o", str(out_file)]) == 0
    exported = json.loads(out_file.read_text(encoding="utf-8"))
    assert exported["client_id"] == "ana"
    assert len(exported["facts"]) == 2

    peanut = next(f["id"] for f in facts if f["key"] is None)
    assert main(["facts", "forget", "--store", url, "--client", "ana", peanut]) == 0
    assert main(["facts", "forget", "--store", url, "--client", "ana", peanut]) == 1
    assert main(["facts", "forget", "--store", url, "--client", "ana", "--all"]) == 0
    capsys.readouterr()
    assert main(["facts", "list", "--store", url, "--client", "ana", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    "text",
    [
        "[/] closes nothing",
        "[link=https://evil.example]click[/link] here",
        "[black on black]hidden[/] text",
        "[bold]loud[/bold]",
    ],
)
def test_facts_list_shows_markup_in_a_fact_as_plain_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # one table row per fact: the text is not folded
    url = _sqlite(tmp_path)
    assert main(["facts", "add", "--store", url, "--client", "ana", text]) == 0
    capsys.readouterr()
    assert main(["facts", "list", "--store", url, "--client", "ana"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert " ".join(text.split()) in shown


def test_facts_refuse_a_bad_client_id_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "add", "--store", _sqlite(tmp_path), "--client", "../etc", "x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: client_id may only contain")
    assert err.count("\n") == 1


def test_inspect_shows_the_summary_and_the_last_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _sqlite(tmp_path)
    store = open_store(url)
    history = RollingSummaryChatMessageHistory(
        "s1",
        store=store,
        client_id="ana",
        summarizer=lambda prev, msgs: "Ana asked about invoices.",
        max_turns=4,
        keep_last=2,
    )
    for i in range(4):
        history.add_messages([HumanMessage(f"question {i}"), AIMessage(f"answer {i}")])
    store.close()

    assert main(["inspect", "--store", url, "--session", "s1", "--last", "3"]) == 0
    out = capsys.readouterr().out
    assert "client ana" in out
    assert "8 messages" in out
    assert "Ana asked about invoices." in out
    assert "summary v" in out
    assert "answer 3" in out
    assert "question 0" not in out
    assert main(["inspect", "--store", url, "--client", "ana"]) == 0
    assert "s1" in capsys.readouterr().out
    assert main(["inspect", "--store", url, "--session", "nobody"]) == 1


def test_help_comes_from_the_docstrings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--help"]) == 0
    assert "break-even" in capsys.readouterr().out
    assert main(["nonsense"]) == 2


def _provider_script(request: Request) -> str:
    """Answers like a provider would: facts for the extractor, a summary, or a chat answer."""
    texts = request.texts()
    system = " ".join(texts[:1])
    if "durable facts" in system:
        new = texts[-1].rsplit("<messages>", 1)[-1]
        adds = []
        if "peanut" in new:
            adds.append({"text": "Has a severe peanut allergy", "key": "allergy"})
        if "Logistics" in new:
            adds.append({"text": "Moves to the Logistics team", "key": "team"})
        return json.dumps({"add": adds, "update": [], "delete": []})
    if "running summary" in system:
        return "Sam Rivera, a new data analyst, asked about onboarding."
    return "Here is what the handbook says."


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_demo_with_a_provider_sends_the_remembered_facts_in_session_2(
    provider: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_openai" if provider == "openai" else "langchain_google_genai")
    with serve(provider, _provider_script) as server:
        monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "GOOGLE_API_KEY", "test-key")
        monkeypatch.setenv("ROLLING_MEMORY_BASE_URL", server.base_url)
        assert main(["demo", "--store", "memory://", "--provider", provider]) == 0
    out = capsys.readouterr().out
    assert "Here is what the handbook says." in out
    chats = [r for r in server.requests if "onboarding assistant" in r.wire]
    assert len(chats) == 12
    first_of_session_2 = next(r for r in chats if "Hi again!" in r.texts()[-1])
    prompt = " ".join(first_of_session_2.texts())
    assert "Moves to the Logistics team" in prompt
    assert "Has a severe peanut allergy" in prompt
    assert "badge" not in prompt  # nothing of session 1's transcript: the facts carried it
    assert any("running summary" in r.wire for r in server.requests), "the provider summarized"


def test_replay_of_a_long_file_shows_a_progress_bar_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from rich.console import Console

    from langchain_rolling_memory_lab import cli_runs

    terminal = io.StringIO()
    plain = cli_runs.new_console
    monkeypatch.setattr(
        cli_runs,
        "new_console",
        lambda stderr=False: Console(file=terminal, force_terminal=True, width=100) if stderr else plain(),
    )
    assert main(["replay", str(_write_jsonl(tmp_path / "talk.jsonl", 200))]) == 0
    assert "replaying" in terminal.getvalue()
    assert "100%" in terminal.getvalue()


@pytest.mark.parametrize("stored", [1.7e12 * 1000, -1e20, float("inf"), float("nan")])
def test_a_stored_date_no_calendar_holds_is_shown_not_raised(stored: float) -> None:
    from langchain_rolling_memory_lab.cli_data import _when

    assert _when(stored) == f"? ({stored!r})"
    assert _when(0.0) == "1970-01-01 00:00:00Z"
