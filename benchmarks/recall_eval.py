"""The LoCoMo recall evaluation as a benchmark: every strategy side by side, one Markdown table.

The same run as ``rolling-memory eval``, with the measuring variants (no neighbours, no
stemming) added; writes ``benchmarks/results/recall_eval.md`` with ``--write``.

    python -m benchmarks.recall_eval [--write] [--conversations N]
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks._shared import RESULTS, locomo_path
from langchain_rolling_memory.lab.eval import STRATEGIES, format_table, read_locomo, run_eval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--write", action="store_true", help="also write results/recall_eval.md")
    args = parser.parse_args(argv)
    path = locomo_path()
    conversations = read_locomo(path)[: args.conversations]
    start = time.perf_counter()
    report = run_eval(conversations, strategies=list(STRATEGIES), source=path.name)
    table = format_table(report)
    elapsed = time.perf_counter() - start
    print(table)
    print(f"({elapsed:.0f} s)", file=sys.stderr)
    if args.write:
        command = "python -m benchmarks.recall_eval --write"
        (RESULTS / "recall_eval.md").write_text(
            f"# Recall on LoCoMo: answer in context per strategy\n\n`{command}`\n\n{table}\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
