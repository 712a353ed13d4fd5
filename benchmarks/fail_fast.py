"""How long a store that cannot connect takes to say so, and how long a script takes to exit.

Opens `open_store(url)` on unreachable or refused servers (refused port, missing database,
unknown role, wrong password) in a fresh process each, with a hard limit, and prints a table
of seconds to the error and its first line.

Then times a whole script that does ``asyncio.run(...)`` around one ``await store.aappend(...)``
on a server store and never awaits ``store.aclose()``: seconds until the process has exited,
and its exit code (Python 3.13 made this hang with psycopg_pool's tasks; run the script with a
3.13 interpreter to see it). Run it on two checkouts to compare:

    python -m benchmarks.fail_fast
    PYTHONPATH=/path/to/old/checkout python -m benchmarks.fail_fast --limit 90
"""

from __future__ import annotations

import argparse
import os
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


EXIT_CASES = (
    ("postgres", os.environ.get("LRM_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"), "_"),
    ("redis", os.environ.get("LRM_REDIS_URL", "redis://127.0.0.1:6379/0"), ":"),
)

# One append in asyncio.run, no aclose(): the process must still end on its own.
_NO_ACLOSE = """
import asyncio, sys, uuid
from langchain_core.messages import HumanMessage
from langchain_rolling_memory import open_store

async def main():
    store = open_store(sys.argv[1])
    session = "exit-" + uuid.uuid4().hex
    await store.aappend(session, [HumanMessage("hello")])
    await store.aclear_session(session)

asyncio.run(main())
print("returned from asyncio.run")
"""


def _run(code: str, url: str, limit: float) -> tuple[float, subprocess.CompletedProcess[str] | None]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=limit, check=False
        )
    except subprocess.TimeoutExpired:
        return limit, None
    return time.perf_counter() - start, done


def _one(url: str, limit: float) -> tuple[float, str, int]:
    elapsed, done = _run(_PROBE, url, limit)
    if done is None:
        return limit, f"no answer within {limit:.0f} s", 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return elapsed, (done.stdout.strip() or (lines[-1] if lines else "?"))[:200], len(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=90.0, help="seconds before a case is cut")
    parser.add_argument(
        "--prefix", default="lrmexit", help="table/key prefix of the exit cases (another per checkout)"
    )
    args = parser.parse_args(argv)
    print("| case | seconds to the error | stderr lines | what it says |")
    print("| --- | ---: | ---: | --- |")
    for name, url in CASES:
        seconds, said, noise = _one(url, args.limit)
        print(f"| {name} | {seconds:.1f} | {noise} | {said} |")
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"\nA script that never awaits aclose(), Python {version}:\n")
    print("| store | seconds to exit | exit code | stderr lines |")
    print("| --- | ---: | --- | ---: |")
    for name, url, end in EXIT_CASES:
        # Its own tables or keys: an older checkout refuses the default ones a newer schema wrote.
        seconds, done = _run(_NO_ACLOSE, f"{url}?prefix={args.prefix}{end}", args.limit)
        if done is None:
            print(f"| {name} | > {args.limit:.0f} (killed) | none: still running | 0 |")
            continue
        noise = len([line for line in done.stderr.splitlines() if line.strip()])
        print(f"| {name} | {seconds:.1f} | {done.returncode} | {noise} |")


if __name__ == "__main__":
    main()
