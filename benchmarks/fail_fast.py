"""How long a store that cannot connect takes to say so, and what it says.

Opens `open_store(url)` on unreachable or refused servers (refused port, missing database,
unknown role, wrong password) in a fresh process each, with a hard limit, and prints a table
of seconds to the error and its first line. Run it on two checkouts to compare:

    python -m benchmarks.fail_fast
    PYTHONPATH=/path/to/old/checkout python -m benchmarks.fail_fast --limit 90
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CASES = (
    ("postgres, refused port", "postgresql://postgres@127.0.0.1:1/test"),
    ("postgres, missing database", "postgresql://postgres@127.0.0.1:5432/no_such_db_lrm"),
    ("postgres, unknown role", "postgresql://no_such_role_lrm@127.0.0.1:5432/test"),
    ("redis, refused port", "redis://127.0.0.1:1/0"),
    ("redis, wrong password", "redis://nobody:wrong@127.0.0.1:6379/0"),
)

_PROBE = """
import sys
from langchain_rolling_memory import open_store
try:
    open_store(sys.argv[1]).close()
except Exception as exc:
    print(type(exc).__name__ + ": " + " ".join(str(exc).split()))
else:
    print("opened (no error)")
"""


def _one(url: str, limit: float) -> tuple[float, str, int]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, url], capture_output=True, text=True, timeout=limit, check=False
        )
    except subprocess.TimeoutExpired:
        return limit, f"no answer within {limit:.0f} s", 0
    elapsed = time.perf_counter() - start
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return elapsed, (done.stdout.strip() or (lines[-1] if lines else "?"))[:200], len(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=90.0, help="seconds before a case is cut")
    args = parser.parse_args(argv)
    print("| case | seconds to the error | stderr lines | what it says |")
    print("| --- | ---: | ---: | --- |")
    for name, url in CASES:
        seconds, said, noise = _one(url, args.limit)
        print(f"| {name} | {seconds:.1f} | {noise} | {said} |")


if __name__ == "__main__":
    main()
