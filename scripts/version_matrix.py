"""Version matrix: the test suite on the lowest and the newest allowed dependencies, oldest and newest Python.

For each Python (default: the oldest and the newest interpreter found under pyenv that
``requires-python`` allows) and each resolution (uv's ``lowest-direct``: every direct dependency at
its lower bound; ``highest``: the newest releases), this makes a venv under a scratch folder,
installs this checkout with the ``dev`` extra from PyPI through ``uv``, runs pytest and prints a
table: python x resolution x pass/fail counts x versions of the key dependencies.

Usage (slow: two installs and two full suite runs per Python; send the output to a file)::

    python scripts/version_matrix.py                        # whole suite
    python scripts/version_matrix.py --pytest-args "tests/test_history.py -x"   # a subset
    python scripts/version_matrix.py --python 3.12 --resolution highest

Needs ``uv`` (``pip install uv``) on PATH or beside this interpreter. The PostgreSQL and Redis tests
run when those servers are up (see tests/conftest.py), else they skip.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESOLUTIONS = ("lowest-direct", "highest")
KEY_DEPS = (
    "langchain-core",
    "langchain",
    "langgraph",
    "langchain-openai",
    "langchain-google-genai",
    "psycopg",
    "redis",
    "rich",
    "pytest",
)
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


@dataclass
class Row:
    python: str
    resolution: str
    install: str  # "ok" or the first line of the install error
    counts: dict[str, int]
    versions: dict[str, str]
    seconds: float


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        sys.exit("version_matrix: uv is not installed (pip install uv)")
    return found


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _pythons(asked: list[str]) -> list[Path]:
    """The interpreters to test: the ones asked for, else the oldest and newest pyenv ones allowed."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    floor = _version_tuple(spec.split(">=")[1].split(",")[0])
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = {
        _version_tuple(d.name): d / "bin" / "python"
        for d in (root.iterdir() if root.is_dir() else [])
        if re.fullmatch(r"\d+\.\d+\.\d+", d.name) and (d / "bin" / "python").exists()
    }
    allowed = {v: p for v, p in found.items() if v[:2] >= floor[:2]}
    if asked:
        chosen = [
            p for v, p in sorted(allowed.items()) if any(".".join(map(str, v)).startswith(a) for a in asked)
        ]
        return chosen or [Path(a) for a in asked]
    if not allowed:
        return [Path(sys.executable)]
    ordered = [p for _, p in sorted(allowed.items())]
    return [ordered[0], ordered[-1]] if len(ordered) > 1 else ordered


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n{done.stdout}\n{done.stderr}\n")
    return done


# The package with every extra, and the dev group of the pyproject.toml in the working directory (ROOT).
_DEV = ["-e", f"{ROOT}[all,notebooks]", "--group", "dev"]


def _one(python: Path, resolution: str, scratch: Path, pytest_args: list[str]) -> Row:
    import time

    version = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    venv = scratch / f"py{version}-{resolution}"
    log = scratch / f"py{version}-{resolution}.log"
    log.write_text("", encoding="utf-8")
    uv = _uv()
    started = time.monotonic()
    _run(
        [uv, "venv", "--quiet", "--seed", "--python", str(python), str(venv)], log
    )  # --seed: pip, which a test uses
    vpy = str(venv / "bin" / "python")
    installed = _run(
        [uv, "pip", "install", "--python", vpy, "--resolution", resolution, *_DEV],
        log,
    )
    if installed.returncode != 0:
        reason = next((ln for ln in installed.stderr.splitlines() if ln.strip()), "install failed")
        return Row(version, resolution, reason.strip()[:120], {}, {}, time.monotonic() - started)
    probe = (
        "import importlib.metadata as m, json\n"
        f"names = {list(KEY_DEPS)!r}\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = '-'\n"
        "print(json.dumps(out))\n"
    )
    import json

    versions = json.loads(_run([vpy, "-c", probe], log).stdout)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    tests = _run([vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args], log, env)
    tail = tests.stdout.strip().splitlines()[-1:] or [""]
    counts = {
        kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in _COUNT.findall(tail[0])
    }
    return Row(version, resolution, "ok", counts, versions, time.monotonic() - started)


def _table(rows: list[Row]) -> str:
    deps = [d for d in KEY_DEPS if any(d in r.versions for r in rows)]
    head = ["python", "resolution", "passed", "failed", "errors", "skipped", *deps]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.install != "ok":
            cells = [r.python, r.resolution, f"install failed: {r.install}", "", "", "", *[""] * len(deps)]
        else:
            cells = [
                r.python,
                r.resolution,
                *(str(r.counts.get(k, 0)) for k in ("passed", "failed", "error", "skipped")),
                *(r.versions.get(d, "-") for d in deps),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", default=[], help="version prefix or path; repeatable")
    parser.add_argument("--resolution", action="append", choices=RESOLUTIONS, default=[])
    parser.add_argument("--pytest-args", default="", help="passed to pytest (default: the whole suite)")
    parser.add_argument("--scratch", type=Path, default=None, help="where the venvs and logs go")
    args = parser.parse_args(argv)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="rolling-memory-matrix-"))
    scratch.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for python in _pythons(args.python):
        for resolution in args.resolution or RESOLUTIONS:
            row = _one(python, resolution, scratch, args.pytest_args.split())
            rows.append(row)
            print(
                f"{row.python} {row.resolution}: {row.install} {row.counts} ({row.seconds:.0f} s)", flush=True
            )
    print(f"\nlogs: {scratch}\n")
    print(_table(rows))
    return (
        0
        if all(r.install == "ok" and not r.counts.get("failed") and not r.counts.get("error") for r in rows)
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
