"""The `rolling-memory` command: its parser, `main`, and every failure as one line (no traceback).
The commands are in `cli_runs` (demo, replay, eval) and `cli_data` (facts, inspect); what they share
(the store, the provider models, the console) is in `cli_base`.

Store location, first found: ``--store URL``, ``$ROLLING_MEMORY_STORE`` (a URL),
``$ROLLING_MEMORY_HOME/memory.db``, ``$XDG_DATA_HOME/rolling-memory/memory.db``,
``~/.local/share/rolling-memory/memory.db``.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_rolling_memory.errors import RollingMemoryError
from langchain_rolling_memory.summarizers.failures import is_provider_error
from langchain_rolling_memory_lab.cli_base import (
    MODEL_PROVIDERS,
    STORE_ENV,
)
from langchain_rolling_memory_lab.cli_data import (
    cmd_facts_add,
    cmd_facts_export,
    cmd_facts_forget,
    cmd_facts_list,
    cmd_inspect,
)
from langchain_rolling_memory_lab.cli_errors import StopRun, provider_line
from langchain_rolling_memory_lab.cli_runs import cmd_demo, cmd_eval, cmd_replay


def _provider_flag(args: argparse.Namespace) -> tuple[str, tuple[str, ...], str]:
    """The flag that chose the provider of this run, as typed, its key variables, and where
    the model name came from."""
    for attribute, flag in (
        ("provider", "--provider"),
        ("summarizer", "--summarizer"),
        ("answer_model", "--answer-model"),
    ):
        name = getattr(args, attribute, None)
        if name in MODEL_PROVIDERS:
            model = "--model" if attribute == "answer_model" else "$ROLLING_MEMORY_MODEL"
            return f"{flag} {name}", MODEL_PROVIDERS[name][2], model
    return "the provider", (), "$ROLLING_MEMORY_MODEL"


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
    demo.add_argument("--provider", choices=["offline", *MODEL_PROVIDERS], default="offline")
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
    rp.add_argument("--summarizer", choices=["keyless", *MODEL_PROVIDERS], default="keyless")
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
    ev.add_argument(
        "--strict",
        action="store_true",
        help="score by the strict rule: a plain English stop-word list, no accent folding",
    )
    ev.add_argument(
        "--split",
        choices=["all", "dev", "held-out"],
        default="all",
        help="only the dev conversations, or only the held-out ones (47-50); default: all, both reported",
    )
    ev.add_argument("--plot", metavar="FILE.png", help="write answer in context against tokens to this PNG")
    ev.add_argument("--json", action="store_true", help="print the figures as JSON")
    ev.add_argument(
        "--answer-model",
        choices=list(MODEL_PROVIDERS),
        help="a real model answers each question (needs its key)",
    )
    ev.add_argument(
        "--model", metavar="NAME", help="the answer model's name (default: gpt-4o-mini / gemini-2.5-flash)"
    )
    ev.add_argument("--judge", action="store_true", help="grade the answers CORRECT/WRONG (the J score)")
    ev.add_argument(
        "--judge-provider",
        choices=list(MODEL_PROVIDERS),
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
