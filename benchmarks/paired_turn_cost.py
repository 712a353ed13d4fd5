"""Our time per turn on two checkouts, paired: A B A B ..., each run in a fresh process.

Runs `benchmarks.store_turn_cost._ours` (a `RollingSummaryChatMessageHistory` turn on sessions
of 100, 1,000 and 10,000 messages) from checkout A, then from checkout B, `--runs` times per
backend, alternating so that load from other processes hits both alike. Each run prints the
median milliseconds per turn at each size; the table gives, per backend and size, the median of
the runs' medians with their [min-max], and B/A. For a restructuring that must not change the
figures, or a change whose cost must be shown:

    python -m benchmarks.paired_turn_cost --a /path/to/old/checkout --b . --runs 5

Each checkout must hold `benchmarks/store_turn_cost.py` with `_ours(url, turns)` (true since
the store benchmark exists) and is imported from its own folder (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._shared import markdown_table

POSTGRES_URL = os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0")

_RUN = """
import json, sys
from benchmarks.store_turn_cost import _ours
print(json.dumps(_ours(sys.argv[1], int(sys.argv[2]))))
"""


def _url(backend: str, folder: Path, tag: str) -> str:
    # Each checkout on its own tables or keys: an older one refuses a schema a newer one wrote.
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{folder / f'paired-{tag}.db'}"
    if backend == "postgresql":
        return f"{POSTGRES_URL}?prefix=paired{tag}_"
    return f"{REDIS_URL}?prefix=paired{tag}:"


def _one(checkout: Path, url: str, turns: int) -> dict[int, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, url, str(turns)],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
        env=env,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        msg = f"the run from {checkout} failed: {last}"
        raise SystemExit(msg)
    return {int(size): float(ms) for size, ms in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--a", type=Path, required=True, help="checkout A (e.g. the commit before)")
    parser.add_argument("--b", type=Path, default=Path(), help="checkout B (default: this one)")
    parser.add_argument("--runs", type=int, default=5, help="runs per checkout and backend")
    parser.add_argument("--turns", type=int, default=150, help="measured turns per size in a run")
    parser.add_argument("--backends", default="memory,sqlite,postgresql,redis")
    parser.add_argument("--out", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    a, b = args.a.resolve(), args.b.resolve()
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="lrm-paired-") as tmp:
        for backend in args.backends.split(","):
            got: dict[str, dict[int, list[float]]] = {"a": {}, "b": {}}
            for run in range(args.runs):
                for tag, checkout in (("a", a), ("b", b)):
                    for size, ms in _one(checkout, _url(backend, Path(tmp), tag), args.turns).items():
                        got[tag].setdefault(size, []).append(ms)
                print(f"{backend}: run {run + 1}/{args.runs} done", file=sys.stderr)
            for size in sorted(got["a"]):
                ratio = statistics.median(got["b"][size]) / statistics.median(got["a"][size])
                rows.append(
                    [backend, f"{size:,}", _cell(got["a"][size]), _cell(got["b"][size]), f"{ratio:.2f}x"]
                )
    table = markdown_table(
        ["backend", "messages", f"A: {a.name} (ms)", f"B: {b.name} (ms)", "B/A"], rows, "lrrrr"
    )
    print(table)
    if args.out:
        command = "python -m benchmarks.paired_turn_cost " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        args.out.write_text(
            f"# Our turn cost, two checkouts paired\n\n`{command}`\n\nMedian ms per turn: the median of "
            f"{args.runs} runs (each the median of {args.turns} turns per size) [min-max].\n\n{table}\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
