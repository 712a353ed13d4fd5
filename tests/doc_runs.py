"""Running a Markdown page's examples as a reader would: in order, in one folder.

Shared by the README's test (`test_readme.py`) and the docs pages' (`test_docs_examples.py`).
Every ```python block runs in a fresh interpreter (the tests'), with the working directory set
to the page's folder and no provider key in the environment, so blocks that reuse a file
(``sqlite:///memory.db``), a client or a session meet what the earlier blocks left there. The
offline commands of a page's CLI block (the first ```text block that shows ``rolling-memory
demo``) run the same way, after its Python blocks, in the same folder.

A block that cannot run offline says so just above its fence, with its reason::

    <!-- skip: needs an OpenAI key -->

It is then a skipped step, shown with that reason; the pages' tests count the skips.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"(?:<!--\s*skip:(?P<reason>[^\n]*?)-->[ \t]*\n)?```python\n(?P<code>.*?)```", re.DOTALL)
_TEXT = re.compile(r"```text\n(.*?)```", re.DOTALL)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)$", re.MULTILINE)
# The commands of a CLI section that run offline here, in the page's order (a real provider,
# a file the reader brings and --help are left out).
CLI_WANTED = ("rolling-memory demo", "rolling-memory facts list", "rolling-memory inspect")
# What a fence may be labelled: python runs; text is output, shell commands or pseudo-code.
FENCE_LANGUAGES = {"python", "text"}

STEP_TIMEOUT = 240
"""Seconds one block or command may take; under the suite's per-test timeout (300 s), so a block
that hangs fails alone, with its output, and load slows each test, not one test that runs all."""


@dataclass(frozen=True)
class Block:
    """One ```python block: its code and, when it is marked not to run here, why."""

    code: str
    skip: str | None


def blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, in order, each with its skip reason (None: it runs)."""
    found = []
    for match in _BLOCK.finditer(page.read_text(encoding="utf-8")):
        reason = match.group("reason")
        found.append(Block(match.group("code"), None if reason is None else reason.strip()))
    return found


def fences(page: Path) -> list[tuple[str, str]]:
    """Every opening fence of the page, as (indent, info string): what a runner could miss."""
    text = page.read_text(encoding="utf-8")
    opened, found = False, []
    for match in _FENCE.finditer(text):
        if not opened:
            found.append((match.group("indent"), match.group("info").strip()))
        opened = not opened
    return found


def cli_commands(page: Path) -> list[str]:
    """The offline commands of the page's first text block that shows `rolling-memory demo`."""
    for block in _TEXT.findall(page.read_text(encoding="utf-8")):
        lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
        if any(line.startswith("rolling-memory demo") for line in lines):
            return [
                line
                for line in lines
                if line.startswith(CLI_WANTED) and "--provider" not in line and "--help" not in line
            ]
    return []


def environment(folder: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("ROLLING_MEMORY_")
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "lab"), os.environ.get("PYTHONPATH", "")) if p
    )
    env["ROLLING_MEMORY_HOME"] = str(folder)  # the CLI's default store: this folder, not the user's
    env["PYTHONWARNINGS"] = "default"  # show every warning once, as a newcomer's terminal does
    env["COLUMNS"] = "240"  # wide enough that no table cell wraps
    env["MPLBACKEND"] = "Agg"
    return env


def argv(command: str) -> list[str]:
    """The page's command line; through this interpreter when the console script is not installed."""
    words = shlex.split(command)
    script = Path(sys.executable).with_name(words[0])
    if script.exists():
        return [str(script), *words[1:]]
    found = shutil.which(words[0])
    return (
        [found, *words[1:]]
        if found
        else [sys.executable, "-m", "langchain_rolling_memory_lab.cli", *words[1:]]
    )


@dataclass(frozen=True)
class Step:
    """One block or command of one run of one page: its key in the outcomes, what it executes,
    and why it does not run here (None: it runs)."""

    page: str
    run: int
    key: str
    argv: tuple[str, ...]
    skip: str | None = None

    @property
    def name(self) -> str:
        what = self.key if self.key.startswith("python ") else f"`{self.key}`"
        return f"{self.page}, run {self.run + 1}, {what.replace('python ', 'python block ')}"

    @property
    def id(self) -> str:
        return f"{self.page}-run{self.run + 1}-" + self.key.split(" --")[0].replace(" ", "-")


def steps(page: Path, runs: int, *, name: str | None = None) -> list[Step]:
    """Every Python block, then the CLI commands, in the page's order; the whole sequence `runs` times."""
    one_run: list[tuple[str, tuple[str, ...], str | None]] = [
        (f"python {i}", (sys.executable, "-c", block.code), block.skip)
        for i, block in enumerate(blocks(page))
    ]
    one_run += [(command, tuple(argv(command)), None) for command in cli_commands(page)]
    label = name or page.name
    return [Step(label, run, key, command, skip) for run in range(runs) for key, command, skip in one_run]


class Outcome:
    def __init__(self, name: str, returncode: int | None, stdout: str, stderr: str, seconds: float) -> None:
        self.name, self.returncode, self.stdout, self.stderr = name, returncode, stdout, stderr
        self.seconds = seconds

    def explain(self) -> str:
        status = f"exited {self.returncode}" if self.returncode is not None else "timed out"
        return (
            f"{self.name} {status} after {self.seconds:.1f} s\n--- stdout\n{self.stdout[-3000:]}"
            f"\n--- stderr\n{self.stderr[-3000:]}"
        )


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


class PageRuns:
    """One page's steps run so far, in one folder, strictly in order: a test that needs a later
    step first runs the earlier ones it was not given (a test selected alone still sees what the
    blocks before it left in the folder). Each step has its own `STEP_TIMEOUT`; a skipped step
    runs nothing."""

    def __init__(self, folder: Path, page_steps: list[Step]) -> None:
        self.folder, self.env, self.steps = folder, environment(folder), page_steps
        self.done: list[Outcome] = []

    def _execute(self, step: Step) -> Outcome:
        if step.skip is not None:
            return Outcome(step.name, 0, "", f"skipped: {step.skip}", 0.0)
        started = time.monotonic()
        try:
            done = subprocess.run(
                step.argv,
                cwd=self.folder,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=STEP_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            return Outcome(step.name, None, _text(exc.stdout), _text(exc.stderr), time.monotonic() - started)
        return Outcome(step.name, done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def outcome(self, run: int, key: str) -> Outcome:
        wanted = next(i for i, s in enumerate(self.steps) if (s.run, s.key) == (run, key))
        while len(self.done) <= wanted:
            step, started = self.steps[len(self.done)], time.monotonic()
            try:
                self.done.append(self._execute(step))
            except BaseException:  # the test's own timeout: this step failed, the next ones still run
                self.done.append(Outcome(step.name, None, "", "interrupted", time.monotonic() - started))
                raise
        return self.done[wanted]


def check_the_cli_examples_find_what_the_demo_made(runs: PageRuns, commands: list[str], run: int) -> None:
    """`facts list` shows what the demo learned, `inspect` the demo's first session, whole."""
    outcomes = {command: runs.outcome(run, command) for command in commands}
    for command in commands:
        assert outcomes[command].returncode == 0, outcomes[command].explain()
    demo = next(c for c in commands if c.startswith("rolling-memory demo"))
    facts = next(c for c in commands if c.startswith("rolling-memory facts list"))
    inspect = next(c for c in commands if c.startswith("rolling-memory inspect"))
    assert commands.index(demo) < commands.index(facts) < commands.index(inspect)
    # The demo's employee says she has a peanut allergy and moves to Logistics: facts it learned.
    assert "peanut allergy" in outcomes[facts].stdout, outcomes[facts].explain()
    assert "Logistics" in outcomes[facts].stdout, outcomes[facts].explain()
    assert "no facts" not in outcomes[facts].stdout
    # The session the page inspects is the demo's first one, whole (--reset: the same on run 2).
    shown = outcomes[inspect].stdout
    assert "20 messages" in shown and "summary v" in shown and "Logistics" in shown, outcomes[
        inspect
    ].explain()
