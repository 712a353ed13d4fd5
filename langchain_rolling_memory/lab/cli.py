"""The `rolling-memory` command: argument parsing, where the store lives, rich output, errors
as one line. The work itself is in `demo`, `replay`, `conversations` and the store API.

Store location, first found: ``--store URL``, ``$ROLLING_MEMORY_STORE`` (a URL),
``$ROLLING_MEMORY_HOME/memory.db``, ``$XDG_DATA_HOME/rolling-memory/memory.db``,
``~/.local/share/rolling-memory/memory.db``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_rolling_memory.errors import (
    ConfigurationError,
    MissingCredentialsError,
    RollingMemoryError,
    StoreError,
    require,
)
from langchain_rolling_memory.lab.cli_errors import FirstCallGuard, StopRun, is_provider_error, provider_line
from langchain_rolling_memory.stores import RollingStore, open_store

if TYPE_CHECKING:
    from langchain_rolling_memory.lab.judge import AnswerGrader

__all__ = ["default_store_url", "main", "provider_models"]

STORE_ENV = "ROLLING_MEMORY_STORE"
HOME_ENV = "ROLLING_MEMORY_HOME"

# provider -> (module, extra, key variables, default model)
_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "openai": ("langchain_openai", "openai", ("OPENAI_API_KEY",), "gpt-4o-mini"),
    "gemini": ("langchain_google_genai", "google", ("GOOGLE_API_KEY", "GEMINI_API_KEY"), "gemini-2.5-flash"),
}


def default_store_url() -> str:
    """The store URL used when ``--store`` is not given (see the module docstring)."""
    url = os.environ.get(STORE_ENV)
    if url:
        return url
    home = os.environ.get(HOME_ENV)
    if home:
        folder = Path(home).expanduser()
    else:
        data = os.environ.get("XDG_DATA_HOME") or (
            os.environ.get("LOCALAPPDATA") if os.name == "nt" else None
        )
        folder = (Path(data) if data else Path.home() / ".local" / "share") / "rolling-memory"
    return f"sqlite:///{(folder / 'memory.db').resolve().as_posix()}"


def provider_models(name: str) -> tuple[Any, Any]:
    """``(chat model, summarizer)`` of a real provider; a clear error if its key or extra is missing.

    The model is ``$ROLLING_MEMORY_MODEL`` (default ``gpt-4o-mini`` / ``gemini-2.5-flash``);
    ``$ROLLING_MEMORY_BASE_URL`` points both at another endpoint (a proxy, a local server).
    """
    module, extra, keys, default = _PROVIDERS[name]
    if not any(os.environ.get(k) for k in keys):
        msg = (
            f"--provider {name} needs {' or '.join(keys)} in the environment; set it, "
            "or leave out --provider to run offline with no key"
        )
        raise MissingCredentialsError(msg)
    require(module, extra, feature=f"--provider {name}")
    model_name = os.environ.get("ROLLING_MEMORY_MODEL", default)
    options: dict[str, Any] = {}
    if os.environ.get("ROLLING_MEMORY_BASE_URL"):
        options["base_url"] = os.environ["ROLLING_MEMORY_BASE_URL"]
    if name == "openai":
        from langchain_openai import ChatOpenAI

        from langchain_rolling_memory.summarizers import openai_summarizer

        return ChatOpenAI(model=model_name, **options), openai_summarizer(model_name, **options)
    from langchain_google_genai import ChatGoogleGenerativeAI

    from langchain_rolling_memory.summarizers import gemini_summarizer

    return ChatGoogleGenerativeAI(model=model_name, **options), gemini_summarizer(model_name, **options)


def _console(stderr: bool = False) -> Any:
    require("rich", "cli", feature="the rolling-memory command")
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    wide = stream.isatty() or "COLUMNS" in os.environ
    return Console(file=stream, width=None if wide else 120, highlight=False)


def _shown(url: str) -> str:
    """The URL with the home folder written ``~``, as people type it."""
    home = Path.home().as_posix()
    return url.replace(home, "~", 1) if home != "/" else url


def _render() -> Any:
    """The rich renderers, once rich is known to be installed."""
    require("rich", "cli", feature="the rolling-memory command")
    from langchain_rolling_memory.lab import cli_render

    return cli_render


def _open(args: argparse.Namespace) -> RollingStore:
    """The store of ``--store`` (or its default); an error names where the URL came from."""
    try:
        return open_store(args.store or default_store_url())
    except (StoreError, ConfigurationError) as exc:
        where = (
            "--store" if args.store else f"${STORE_ENV}" if os.environ.get(STORE_ENV) else "the default store"
        )
        raise type(exc)(f"{where}: {exc}") from None


def _provider_flag(args: argparse.Namespace) -> tuple[str, tuple[str, ...], str]:
    """The flag that chose the provider of this run, as typed, its key variables, and where
    the model name came from."""
    for attribute, flag in (
        ("provider", "--provider"),
        ("summarizer", "--summarizer"),
        ("answer_model", "--answer-model"),
    ):
        name = getattr(args, attribute, None)
        if name in _PROVIDERS:
            model = "--model" if attribute == "answer_model" else "$ROLLING_MEMORY_MODEL"
            return f"{flag} {name}", _PROVIDERS[name][2], model
    return "the provider", (), "$ROLLING_MEMORY_MODEL"


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


# ---------------------------------------------------------------------------------- demo


def cmd_demo(args: argparse.Namespace) -> int:
    """Run a scripted two-session conversation (a new employee) through rolling memory.

    Offline by default: the embedded SQLite store, the keyless summarizer and a keyless
    chat model that answers only from its prompt. Shows, turn by turn, the tokens sent with
    rolling memory against the full history, each summary as it changes, the facts learned,
    and the facts injected into session 2's prompt. --provider uses a real model (its key
    must be set).
    """
    from langchain_rolling_memory.extractor import FactExtractor
    from langchain_rolling_memory.lab.demo import run_demo

    model = summarizer = extractor = None
    if args.provider != "offline":
        model, summarizer = provider_models(args.provider)
        summarizer = FirstCallGuard(summarizer)
        extractor = FactExtractor(model)
    console = _console()
    url = args.store or default_store_url()
    store = _open(args)
    try:
        if args.reset and args.client:
            store.forget(args.client)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="RunnableWithMessageHistory is deprecated")
            turns = run_demo(
                store,
                model=model,
                summarizer=summarizer,
                extractor=extractor,
                client_id=args.client,
                max_turns=args.max_turns,
                keep_last=args.keep_last,
            )
            _render().render_demo(console, turns, store_url=_shown(url), provider=args.provider)
    finally:
        store.close()
    return 0


# ---------------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a conversation file under several memory strategies and compare their tokens.

    FILE is JSONL ({"role": ..., "content": ...} per line, optional "session" and "client"),
    JSON (a list of such objects) or LoCoMo (a conversation .json or locomo10.zip). Each
    strategy (full buffer, window, rolling summary, rolling summary + facts) uses the same
    summarizer; the table gives the input tokens sent, memory calls and their tokens, the
    prompt-cacheable share and the break-even message count. --plot draws cumulative tokens.
    """
    from langchain_rolling_memory.lab.conversations import ConversationMessage, load_conversation
    from langchain_rolling_memory.lab.replay import default_strategies, replay

    conversation = load_conversation(args.file, conversation=args.conversation)
    if args.one_session:
        conversation = [
            ConversationMessage(m.role, m.content, "session-1", m.client, m.where) for m in conversation
        ]
    summarizer = FirstCallGuard(provider_models(args.summarizer)[1]) if args.summarizer != "keyless" else None
    strategies = default_strategies(window=args.window, max_turns=args.max_turns, keep_last=args.keep_last)
    console = _console()
    if args.plot:
        require("matplotlib", "plot", feature="replay --plot")
    with _progress(len(conversation)) as advance:
        report = replay(conversation, strategies=strategies, summarizer=summarizer, on_progress=advance)
    if args.json:
        print(
            json.dumps(
                {"messages": report.messages, "sessions": report.sessions, "strategies": report.rows()},
                indent=2,
            )
        )
    else:
        _render().render_replay(console, report, source=str(args.file), summarizer=args.summarizer)
    if args.plot:
        from langchain_rolling_memory.lab.plots import plot_replay

        plot_replay(report, path=args.plot, title=Path(args.file).name)
        (console if not args.json else _console(stderr=True)).print(f"plot written to {args.plot}")
    return 0


class _progress:
    """A rich progress bar on stderr for long files (nothing for short ones or non-terminals)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Callable[[int, int], None]:
        console = _console(stderr=True)
        if self.total >= 100 and console.is_terminal:
            from rich.progress import Progress

            self.bar = Progress(console=console, transient=True)
            self.bar.start()
            task = self.bar.add_task("replaying", total=self.total)
            return lambda done, total: self.bar.update(task, completed=done)
        return lambda done, total: None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------------------------- facts


def cmd_facts_list(args: argparse.Namespace) -> int:
    """List a client's facts, oldest first."""
    store = _open(args)
    try:
        facts = store.facts(args.client)
    finally:
        store.close()
    if args.json:
        print(json.dumps([f.to_dict() for f in facts], indent=2, ensure_ascii=False))
        return 0
    console = _console()
    from rich.markup import escape
    from rich.table import Table

    if not facts:
        console.print(f"no facts for client {escape(args.client)}")
        return 0
    table = Table(title=f"facts of {escape(args.client)}")
    for column in ("id", "key", "text", "source", "updated"):
        table.add_column(column, overflow="fold")
    for f in facts:
        # A fact is text a user or a model wrote: never Rich markup (links, hidden styles, "[/]").
        table.add_row(escape(f.id), escape(f.key or ""), escape(f.text), f.source, _when(f.updated_at))
    console.print(table)
    return 0


def cmd_facts_add(args: argparse.Namespace) -> int:
    """Add a fact about a client (a fact with the --key of an existing one replaces it)."""
    store = _open(args)
    try:
        fact = store.add_fact(args.client, args.text, key=args.key, source="code")
    finally:
        store.close()
    if fact is None:
        print(f"the store's fact filter refused the fact; nothing stored for {args.client}")
        return 1
    print(f"{fact.id}\t{fact.key or '-'}\t{fact.text}")
    return 0


def cmd_facts_forget(args: argparse.Namespace) -> int:
    """Delete one fact (FACT_ID), or with --all erase everything stored about the client:
    facts, sessions, transcripts, summaries and state."""
    if bool(args.fact_id) == bool(args.all):
        msg = "facts forget takes a FACT_ID or --all (everything about the client), not both or neither"
        raise ConfigurationError(msg)
    store = _open(args)
    try:
        if args.all:
            sessions = store.sessions(args.client)
            facts = store.facts(args.client)
            store.forget(args.client)
            print(f"forgot client {args.client}: {len(facts)} facts, {len(sessions)} sessions")
            return 0
        if not store.delete_fact(args.client, args.fact_id):
            print(f"client {args.client} has no fact {args.fact_id}", file=sys.stderr)
            return 1
        print(f"deleted fact {args.fact_id}")
        return 0
    finally:
        store.close()


def cmd_facts_export(args: argparse.Namespace) -> int:
    """Export everything stored about a client (facts, sessions, transcripts) as JSON."""
    store = _open(args)
    try:
        data = store.export(args.client)
    finally:
        store.close()
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        print(f"exported client {args.client} to {args.output}")
    else:
        print(text)
    return 0


# ---------------------------------------------------------------------------------- inspect


def cmd_inspect(args: argparse.Namespace) -> int:
    """Show a session (summary, usage, the next view, the last messages) or a client's sessions."""
    if bool(args.session) == bool(args.client):
        msg = "inspect takes --session ID or --client ID"
        raise ConfigurationError(msg)
    store = _open(args)
    try:
        console = _console()
        if args.client:
            return int(_render().render_client(console, store, args.client))
        return int(_render().render_session(console, store, args.session, last=args.last))
    finally:
        store.close()


# ---------------------------------------------------------------------------------- eval


def cmd_eval(args: argparse.Namespace) -> int:
    """Score memory strategies on LoCoMo: is the gold answer in what the model would be sent?

    FILE is the LoCoMo release (locomo10.zip) or a LoCoMo .json. For every question of
    categories 1-4, each strategy (whole transcript, last 2,000 tokens, rolling summary,
    recall at 500/1,000/2,000 tokens, summary + recall) gives the memory the model would be
    sent; the table shows how often every content word of the gold answer is in it, per
    category, with memory tokens (mean, p95) and search time per question. Offline, no key.

    With a key, --answer-model openai|gemini has that model answer each question from each
    strategy's memory, and --judge has a judge model (the same one unless --judge-provider
    or --judge-model says otherwise) grade every answer against the gold one, CORRECT or
    WRONG, as in the mem0 paper: J is the share judged correct, per strategy and category,
    with the input and output tokens of answers and judge. --questions N draws N questions for a cheap run. Keys come
    from OPENAI_API_KEY or GOOGLE_API_KEY; $ROLLING_MEMORY_BASE_URL points at another endpoint.
    """
    from langchain_rolling_memory.lab.eval import (
        CATEGORIES,
        DEFAULT_STRATEGIES,
        STRATEGIES,
        format_table,
        read_locomo,
        run_eval,
        sample_questions,
    )

    if args.plot:
        require("matplotlib", "plot", feature="eval --plot")
    if args.judge and not args.answer_model:
        msg = "--judge grades the answers of --answer-model; add --answer-model openai or gemini"
        raise ConfigurationError(msg)
    names = args.strategies.split(",") if args.strategies else list(DEFAULT_STRATEGIES)
    grader = _grader(args) if args.answer_model else None
    conversations = read_locomo(args.file)
    if args.conversations:
        conversations = conversations[: args.conversations]
    if args.questions is not None:
        conversations = sample_questions(conversations, args.questions)
    report = run_eval(conversations, strategies=names, source=Path(args.file).name, on_answer=grader)
    if args.json:
        data = report.to_json()
        if grader is not None:
            data["answers"] = grader.to_json(CATEGORIES)
        print(json.dumps(data, indent=2))
    else:
        print(format_table(report))
        if grader is not None:
            from langchain_rolling_memory.lab.judge import format_judged

            labels = {name: STRATEGIES[name].label for name in names}
            print("\n" + format_judged(grader, labels, CATEGORIES))
    if args.plot:
        from langchain_rolling_memory.lab.eval import plot_eval

        plot_eval(report, path=args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _grader(args: argparse.Namespace) -> AnswerGrader:
    """The answer model and, with --judge, the judge model; keys checked before any work."""
    from langchain_rolling_memory.lab.judge import PROVIDERS, AnswerGrader, provider_chat

    answer_model = args.model or PROVIDERS[args.answer_model][3]
    grader = AnswerGrader(
        provider_chat(args.answer_model, answer_model), answer_name=f"{args.answer_model} {answer_model}"
    )
    if args.judge:
        provider = args.judge_provider or args.answer_model
        same = provider == args.answer_model
        judge_model = args.judge_model or (answer_model if same else PROVIDERS[provider][3])
        grader.judge = provider_chat(
            provider, judge_model, flag="--judge-provider" if not same else "--judge"
        )
        grader.judge_name = f"{provider} {judge_model}"
    return grader


# ---------------------------------------------------------------------------------- parser


def _doc(fn: Callable[..., Any]) -> tuple[str, str]:
    doc = inspect.cleandoc(fn.__doc__ or "")
    return doc.split("\n\n")[0].replace("\n", " "), doc


def _command(
    subparsers: Any,
    name: str,
    fn: Callable[[argparse.Namespace], int],
    parents: Sequence[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    short, long = _doc(fn)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=short,
        description=long,
        parents=list(parents),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=fn)
    return parser


def build_parser() -> argparse.ArgumentParser:
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store",
        metavar="URL",
        help=f"memory://, sqlite:///file.db, postgresql://..., redis://... (default: ${STORE_ENV} or the embedded SQLite file)",
    )
    client = argparse.ArgumentParser(add_help=False)
    client.add_argument("--client", required=True, metavar="ID", help="the client id")

    parser = argparse.ArgumentParser(
        prog="rolling-memory",
        description="Bounded, lossless memory for LangChain: demo, replay, facts and inspect.\n\n"
        + (__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = _command(sub, "demo", cmd_demo, [store])
    demo.add_argument("--provider", choices=["offline", *_PROVIDERS], default="offline")
    demo.add_argument(
        "--client", metavar="ID", help="the employee's client id (default: a fresh one per run)"
    )
    demo.add_argument("--reset", action="store_true", help="forget --client first, so the demo starts clean")
    demo.add_argument(
        "--max-turns", type=int, default=4, help="fold when this many messages are unsummarized"
    )
    demo.add_argument("--keep-last", type=int, default=2, help="messages kept verbatim after a fold")

    rp = _command(sub, "replay", cmd_replay, [])
    rp.add_argument("file", type=Path, metavar="FILE")
    rp.add_argument("--plot", metavar="FILE.png", help="write cumulative tokens per strategy to this PNG")
    rp.add_argument("--window", type=int, default=12, help="messages in the window strategy")
    rp.add_argument(
        "--max-turns", type=int, default=12, help="rolling summary: fold above this many messages"
    )
    rp.add_argument("--keep-last", type=int, default=6, help="rolling summary: messages kept verbatim")
    rp.add_argument("--summarizer", choices=["keyless", *_PROVIDERS], default="keyless")
    rp.add_argument("--one-session", action="store_true", help="ignore session fields: one long conversation")
    rp.add_argument("--conversation", default="0", help="LoCoMo zip: index (0-9) or file stem such as 26")
    rp.add_argument("--json", action="store_true", help="print the figures as JSON")

    facts = sub.add_parser("facts", help="list, add, forget or export a client's facts")
    fsub = facts.add_subparsers(dest="facts_command", metavar="ACTION", required=True)
    fl = _command(fsub, "list", cmd_facts_list, [store, client])
    fl.add_argument("--json", action="store_true")
    fa = _command(fsub, "add", cmd_facts_add, [store, client])
    fa.add_argument("text", help="the fact, one sentence")
    fa.add_argument("--key", help="a key such as team: a later fact with the same key replaces this one")
    ff = _command(fsub, "forget", cmd_facts_forget, [store, client])
    ff.add_argument("fact_id", nargs="?", metavar="FACT_ID")
    ff.add_argument("--all", action="store_true", help="erase everything about the client")
    fe = _command(fsub, "export", cmd_facts_export, [store, client])
    fe.add_argument("--output", "-o", metavar="FILE.json")

    ins = _command(sub, "inspect", cmd_inspect, [store])
    ins.add_argument("--session", metavar="ID")
    ins.add_argument("--client", metavar="ID", help="list the client's sessions and facts instead")
    ins.add_argument("--last", type=int, default=6, help="messages of the transcript to show")

    ev = _command(sub, "eval", cmd_eval, [])
    ev.add_argument("file", type=Path, metavar="FILE")
    ev.add_argument(
        "--strategies", metavar="A,B", help="comma-separated strategy names (default: the main ones)"
    )
    ev.add_argument("--conversations", type=int, metavar="N", help="only the first N conversations")
    ev.add_argument("--plot", metavar="FILE.png", help="write answer in context against tokens to this PNG")
    ev.add_argument("--json", action="store_true", help="print the figures as JSON")
    ev.add_argument(
        "--answer-model", choices=list(_PROVIDERS), help="a real model answers each question (needs its key)"
    )
    ev.add_argument(
        "--model", metavar="NAME", help="the answer model's name (default: gpt-4o-mini / gemini-2.5-flash)"
    )
    ev.add_argument("--judge", action="store_true", help="grade the answers CORRECT/WRONG (the J score)")
    ev.add_argument(
        "--judge-provider",
        choices=list(_PROVIDERS),
        help="the judge's provider (default: the answer model's)",
    )
    ev.add_argument("--judge-model", metavar="NAME", help="the judge's model (default: the answer model)")
    ev.add_argument(
        "--questions", type=int, metavar="N", help="draw N questions at random (same draw each run)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``rolling-memory``; returns the exit status.

    Example:
        >>> main(["facts", "list", "--store", "memory://", "--client", "c1", "--json"])
        []
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error: argparse already printed it
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    try:
        return int(args.func(args))
    except StopRun as stop:  # the summarizer failed before it ever succeeded
        print(f"error: {provider_line(stop.error, *_provider_flag(args))}", file=sys.stderr)
        return 1
    except (RollingMemoryError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not is_provider_error(exc):
            raise
        print(f"error: {provider_line(exc, *_provider_flag(args))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
