"""The LangGraph example app (examples/langgraph_app.py) runs on the local PostgreSQL.

It is run in-process, offline (its scripted model), in a schema of its own; the checks are
those a user of the app would make: what the model was sent (the facts in the second thread,
only the fork's branch at the fork), how many messages each checkpoint holds, and what is left
of the user in the database after `forget_user`: our tables, LangGraph's checkpoint and store
tables, read raw. Without the server the test is skipped (failed under ``CI``) with the reason.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import _probe, server_unavailable
from store_kit import POSTGRES_URL

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "langgraph_app.py"


@pytest.fixture(scope="module")
def app_module() -> ModuleType:
    """The example, imported from its file (examples/ is not a package: users copy the file)."""
    _probe("postgres")
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError as exc:  # the dev extra installs it
        server_unavailable("postgres checkpointer", f"langgraph-checkpoint-postgres is not installed ({exc})")
    spec = importlib.util.spec_from_file_location("langgraph_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ran(app_module: ModuleType) -> Iterator[tuple[Any, Any, str]]:
    """One offline run in a fresh schema: (report, app, URL of the schema), before it is dropped."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CHAT_MODEL", raising=False)
        schema = f"test_langgraph_app_{uuid.uuid4().hex[:10]}"
        with app_module.own_schema(POSTGRES_URL, schema) as url, app_module.open_app(url) as app:
            yield app_module.run(app), app, url


def _text(messages: list[Any]) -> str:
    return "\n".join(m.text for m in messages)


def _rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql, params).fetchall())


def _all_rows(url: str) -> list[str]:
    """Every row of every table in the schema, as text (bytes and JSON values included)."""
    lines = []
    for (table,) in _rows(
        url, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ):
        lines += [f"{table}: {row!r}" for row in _rows(url, f'SELECT * FROM "{table}"')]
    return lines


def test_the_fact_saved_in_one_thread_is_in_the_prompt_of_the_users_other_thread(
    app_module: ModuleType, ran: tuple[Any, Any, str]
) -> None:
    report, _, _ = ran
    system, *conversation = report.dinner_prompt
    assert "I am vegetarian." in system.text
    assert [m.text for m in conversation] == ["What should I cook tonight?"]  # a new thread: no trip turns


def test_the_forks_model_call_holds_its_branch_and_never_the_abandoned_one(
    app_module: ModuleType, ran: tuple[Any, Any, str]
) -> None:
    report, _, _ = ran
    sent = _text(report.fork_prompt)
    assert "Paris" in sent and "Where do I live?" in sent
    for abandoned in ("Rome", *app_module.TRIP_TURNS[3 + 1 :]):  # the turns after Paris's, but the question
        assert abandoned not in sent, f"the fork was sent {abandoned!r}"


def test_the_checkpointed_state_stays_bounded_while_the_store_keeps_every_message(
    app_module: ModuleType, ran: tuple[Any, Any, str]
) -> None:
    report, _, _ = ran
    bound = 1 + app_module.MAX_TURNS + 2  # the summary, the cap, the turn's new pair
    assert max(report.trip_state_sizes) <= bound, report.trip_state_sizes
    # Every message of the branch (each turn's question and answer at least), beyond the state.
    assert report.trip_transcript >= 2 * len(report.trip_state_sizes) > max(report.trip_state_sizes)
    # The fork's branch: the turns up to the fork and the fork's own, none it left.
    assert 0 < report.fork_transcript < report.trip_transcript


def test_after_forget_user_nothing_of_the_user_is_left_in_any_table(
    app_module: ModuleType, ran: tuple[Any, Any, str]
) -> None:
    report, app, url = ran
    user, threads = app_module.USER, (app_module.TRIP, app_module.DINNER)
    assert sorted(report.erased.threads) == sorted(threads)
    assert report.erased.items == 1  # the units setting (the diet fact is ours: erased by forget first)
    # LangGraph's tables, by thread and namespace.
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        assert _rows(url, f"SELECT 1 FROM {table} WHERE thread_id = ANY(%s)", list(threads)) == [], table
    assert _rows(url, "SELECT prefix, key FROM store WHERE prefix LIKE %s", f"{user}%") == []
    assert app.graph_store.search((user,)) == []
    # Our store, through its API.
    assert app.store.facts(user) == [] and app.store.sessions(user) == []
    assert all(app.store.transcript(t) == [] for t in threads)
    # Every row of every table, read raw: no id, fact or message of the user.
    rows = _all_rows(url)
    markers = (user, "vegetarian", "Paris", "Rome", "weekend trip", "cook tonight", "metric")
    assert [line for line in rows if any(m in line for m in markers)] == []
    # The scan does read the texts: the other user's message is found in each table that holds it.
    holding = {line.split(":", 1)[0] for line in rows if "I eat everything." in line}
    assert {"checkpoint_blobs", "checkpoint_writes", "lrm_facts", "lrm_messages"} <= holding
    # The other user is untouched.
    other = app_module.OTHER_USER
    assert [f.text for f in app.store.facts(other)] == ["I eat everything."]
    assert app.checkpointer.get_tuple(app_module.thread(other, app_module.OTHER)) is not None


def test_main_runs_offline_and_drops_its_schema(
    app_module: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CHAT_MODEL", raising=False)
    monkeypatch.setenv("DATABASE_URL", POSTGRES_URL)
    app_module.main()
    out = capsys.readouterr().out
    assert f"forgot {app_module.USER}: threads" in out
    schema = out.split("working in schema ", 1)[1].split()[0]
    assert (
        _rows(POSTGRES_URL, "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", schema) == []
    )
