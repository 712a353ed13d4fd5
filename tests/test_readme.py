"""The README's examples run as a reader would run them: in order, in one folder, twice.

Every ```python block runs in a fresh interpreter (this test's), with the working directory set to
one shared folder and no provider key in the environment, so blocks that reuse a file
(``sqlite:///memory.db``), a client or a session meet what the earlier blocks left there. The whole
sequence then runs a second time in the same folder: an example must still pass when it is run
again. The CLI section's commands run the same way, after the Python blocks, in the same folder:
what ``rolling-memory demo`` made is what ``facts list`` and ``inspect`` must find.

Each block and command is its own test, with its own time budget (`STEP_TIMEOUT`, and the
suite's per-test timeout): under machine load a slow block fails alone, never the whole file.
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

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
ROOT = README.parent
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_TEXT = re.compile(r"```text\n(.*?)```", re.DOTALL)
RUNS = 2
# The commands of the CLI section that run offline here, in the README's order (a real provider,
# a file the reader brings and --help are left out).
CLI_WANTED = ("rolling-memory demo", "rolling-memory facts list", "rolling-memory inspect")


def _blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def _cli_commands() -> list[str]:
    """The offline commands of the first text block that shows `rolling-memory demo`."""
    for block in _TEXT.findall(README.read_text(encoding="utf-8")):
        lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
        if any(line.startswith("rolling-memory demo") for line in lines):
            return [
                line
                for line in lines
                if line.startswith(CLI_WANTED) and "--provider" not in line and "--help" not in line
            ]
    return []


def _env(folder: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("ROLLING_MEMORY_")
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["ROLLING_MEMORY_HOME"] = str(folder)  # the CLI's default store: this folder, not the user's
    env["PYTHONWARNINGS"] = "default"  # show every warning once, as a newcomer's terminal does
    env["COLUMNS"] = "240"  # wide enough that no table cell wraps
    env["MPLBACKEND"] = "Agg"
    return env


def _argv(command: str) -> list[str]:
    """The README's command line; through this interpreter when the console script is not installed."""
    words = shlex.split(command)
    script = Path(sys.executable).with_name(words[0])
    if script.exists():
        return [str(script), *words[1:]]
    found = shutil.which(words[0])
    return (
        [found, *words[1:]]
        if found
        else [sys.executable, "-m", "langchain_rolling_memory.lab.cli", *words[1:]]
    )


STEP_TIMEOUT = 240
"""Seconds one block or command may take; under the suite's per-test timeout (300 s), so a block
that hangs fails alone, with its output, and load slows each test, not one test that runs all."""


@dataclass(frozen=True)
class Step:
    """One block or command of one run: its key in a run's outcomes, and what it executes."""

    run: int
    key: str
    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        what = self.key if self.key.startswith("python ") else f"`{self.key}`"
        return f"run {self.run + 1}, {what.replace('python ', 'python block ')}"


def _steps() -> list[Step]:
    """Every Python block, then the CLI commands, in the README's order; the whole sequence twice."""
    one_run = [(f"python {i}", (sys.executable, "-c", code)) for i, code in enumerate(_blocks())]
    one_run += [(command, tuple(_argv(command))) for command in _cli_commands()]
    return [Step(run, key, argv) for run in range(RUNS) for key, argv in one_run]


STEPS = _steps()


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


class ReadmeRuns:
    """The steps run so far, in one folder, strictly in order: a test that needs a later step
    first runs the earlier ones it was not given (a test selected alone still sees what the
    blocks before it left in the folder). Each step has its own `STEP_TIMEOUT`."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.env = folder, _env(folder)
        self.done: list[Outcome] = []

    def _execute(self, step: Step) -> Outcome:
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
        wanted = next(i for i, s in enumerate(STEPS) if (s.run, s.key) == (run, key))
        while len(self.done) <= wanted:
            step, started = STEPS[len(self.done)], time.monotonic()
            try:
                self.done.append(self._execute(step))
            except BaseException:  # the test's own timeout: this step failed, the next ones still run
                self.done.append(Outcome(step.name, None, "", "interrupted", time.monotonic() - started))
                raise
        return self.done[wanted]


@pytest.fixture(scope="module")
def readme_runs(tmp_path_factory: pytest.TempPathFactory) -> ReadmeRuns:
    return ReadmeRuns(tmp_path_factory.mktemp("readme"))


def test_readme_has_python_examples_and_the_cli_commands() -> None:
    assert len(_blocks()) >= 5, "the README should show runnable ```python examples"
    commands = _cli_commands()
    for wanted in CLI_WANTED:
        assert any(c.startswith(wanted) for c in commands), f"no `{wanted}` example in the CLI section"


def _step_id(step: Step) -> str:
    return f"run{step.run + 1}-" + step.key.split(" --")[0].replace(" ", "-")


@pytest.mark.parametrize("step", STEPS, ids=_step_id)
def test_readme_example_runs_in_order_in_one_folder(readme_runs: ReadmeRuns, step: Step) -> None:
    """One test (and one time budget) per block or command, run in the README's order."""
    outcome = readme_runs.outcome(step.run, step.key)
    assert outcome.returncode == 0, outcome.explain()


def test_the_first_example_shows_no_deprecation_warning(readme_runs: ReadmeRuns) -> None:
    first = readme_runs.outcome(0, "python 0")
    assert first.returncode == 0, first.explain()
    assert "DeprecationWarning" not in first.stderr, first.explain()


@pytest.mark.parametrize("run", range(RUNS), ids=lambda r: f"run{r + 1}")
def test_the_cli_examples_find_what_the_demo_made(readme_runs: ReadmeRuns, run: int) -> None:
    commands = _cli_commands()
    outcomes = {command: readme_runs.outcome(run, command) for command in commands}
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
    # The session the README inspects is the demo's first one, whole (--reset: the same on run 2).
    shown = outcomes[inspect].stdout
    assert "20 messages" in shown and "summary v" in shown and "Logistics" in shown, outcomes[
        inspect
    ].explain()
