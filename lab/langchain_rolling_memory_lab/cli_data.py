"""The `rolling-memory` commands over what a store holds: ``facts list|add|forget|export`` and
``inspect``.

Owns the command bodies that read or change a client's stored facts, sessions and transcripts
through the store API, and how their results are printed. It does not parse arguments or turn
errors into one line (that is `cli`), run conversations (that is `cli_runs`), or open the store
itself (that is `cli_base`).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory_lab.cli_base import new_console, open_from_args, renderers


def _when(timestamp: float) -> str:
    try:
        return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # a stored date no calendar holds
        return f"? ({timestamp!r})"


# ---------------------------------------------------------------------------------- facts


def cmd_facts_list(args: argparse.Namespace) -> int:
    """List a client's facts, oldest first."""
    store = open_from_args(args)
    try:
        facts = store.facts(args.client)
    finally:
        store.close()
    if args.json:
        print(json.dumps([f.to_dict() for f in facts], indent=2, ensure_ascii=False))
        return 0
    console = new_console()
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
    store = open_from_args(args)
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
    store = open_from_args(args)
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
    store = open_from_args(args)
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
    store = open_from_args(args)
    try:
        console = new_console()
        if args.client:
            return int(renderers().render_client(console, store, args.client))
        return int(renderers().render_session(console, store, args.session, last=args.last))
    finally:
        store.close()
