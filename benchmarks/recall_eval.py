"""The LoCoMo recall evaluation as a benchmark: every strategy side by side, one Markdown table.

The same run as ``rolling-memory eval``, with the measuring variants (no neighbours, no
stemming) added; writes ``benchmarks/results/recall_eval.md`` with ``--write``.

With ``--stores sqlite,postgresql,redis`` it measures instead what ``with_rolling_memory`` sends
on each backend: the whole transcript (the yardstick), the store-backed recall whose memory
message fits 2,000 tokens on SQLite (``store-recall-fit-2000``, always there as the reference),
and the same recall on each server backend named, each conversation under a fresh prefix,
erased after it. Servers are reached at ``$LRM_POSTGRES_URL`` and ``$LRM_REDIS_URL`` (defaults:
the local servers); ``--write`` then writes ``benchmarks/results/recall_backends.md``.

    python -m benchmarks.recall_eval [--write] [--conversations N] [--stores sqlite,postgresql,redis]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from urllib.parse import urlsplit

from benchmarks._shared import RESULTS, locomo_path
from langchain_rolling_memory_lab.eval import run_eval
from langchain_rolling_memory_lab.eval_report import format_table
from langchain_rolling_memory_lab.eval_store import recall_tokens_within, store_recall
from langchain_rolling_memory_lab.eval_strategies import Strategy, installed_strategies
from langchain_rolling_memory_lab.locomo import read_locomo

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")
# --stores name -> (label, URL); SQLite is the registry's own row (a temporary file).
SERVERS = {"postgresql": ("PostgreSQL", POSTGRES_URL), "redis": ("Redis", REDIS_URL)}
STORES = ("sqlite", *SERVERS)


def backend_strategies(stores: list[str]) -> list[str | Strategy]:
    """The whole transcript, the SQLite store-backed recall within 2,000 tokens, and the same
    recall on each server backend of `stores`."""
    fit = recall_tokens_within(2000)
    chosen: list[str | Strategy] = ["transcript", "store-recall-fit-2000"]
    for name in stores:
        if name in SERVERS:
            label, url = SERVERS[name]
            chosen.append(
                Strategy(
                    f"store-recall-fit-2000-{name}",
                    f"with_rolling_memory, {label}, recall_tokens={fit:,} (memory message <= 2,000)",
                    store_recall(fit, store_url=url),
                )
            )
    return chosen


def _stores(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in STORES]
    if unknown or not names:
        msg = f"--stores takes names among {', '.join(STORES)}, comma-separated; got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument(
        "--stores",
        type=_stores,
        help="compare the store-backed recall on these backends (sqlite,postgresql,redis) only",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="also write results/recall_eval.md (results/recall_backends.md with --stores)",
    )
    args = parser.parse_args(argv)
    path = locomo_path()
    conversations = read_locomo(path)[: args.conversations]
    strategies = backend_strategies(args.stores) if args.stores else installed_strategies()
    start = time.perf_counter()
    report = run_eval(conversations, strategies=strategies, source=path.name)
    table = format_table(report)
    elapsed = time.perf_counter() - start
    print(table)
    print(f"({elapsed:.0f} s)", file=sys.stderr)
    if args.write:
        if args.stores:
            command = " ".join(
                ["python -m benchmarks.recall_eval", *(argv if argv is not None else sys.argv[1:])]
            )
            title = "# Recall on LoCoMo per backend: what with_rolling_memory sends, answer in context"
            where = ", ".join(
                f"{label} at {urlsplit(url).hostname}:{urlsplit(url).port}"
                for name, (label, url) in SERVERS.items()
                if name in args.stores
            )
            note = (
                "Each conversation is loaded into the backend under a fresh prefix and its client "
                f"forgotten after its questions{f' ({where})' if where else ''}. ms/question is the "
                "whole `with_rolling_memory` call, store round trips included.\n\n"
            )
            (RESULTS / "recall_backends.md").write_text(
                f"{title}\n\n`{command}`\n\n{note}{table}\n", encoding="utf-8"
            )
        else:
            command = "python -m benchmarks.recall_eval --write"
            (RESULTS / "recall_eval.md").write_text(
                f"# Recall on LoCoMo: answer in context per strategy\n\n`{command}`\n\n{table}\n",
                encoding="utf-8",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
