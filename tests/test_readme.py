"""The README's examples run as a reader would run them: in order, in one folder, twice.

Every ```python block runs in a fresh interpreter (this test's), with the working directory set to
one shared folder and no provider key in the environment, so blocks that reuse a file
(``sqlite:///memory.db``), a client or a session meet what the earlier blocks left there. The whole
sequence then runs a second time in the same folder: an example must still pass when it is run
again. The CLI section's commands run the same way, after the Python blocks, in the same folder:
what ``rolling-memory demo`` made is what ``facts list`` and ``inspect`` must find.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
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


class Outcome:
    def __init__(self, name: str, done: subprocess.CompletedProcess[str]) -> None:
        self.name, self.returncode, self.stdout, self.stderr = name, done.returncode, done.stdout, done.stderr

    def explain(self) -> str:
        return f"{self.name} exited {self.returncode}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


@pytest.fixture(scope="module")
def readme_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Outcome]]:
    """Run every block, then the CLI commands, in one folder; the whole sequence twice."""
    folder = tmp_path_factory.mktemp("readme")
    env = _env(folder)
    runs: list[dict[str, Outcome]] = []
    for run in range(RUNS):
        outcomes: dict[str, Outcome] = {}
        for index, code in enumerate(_blocks()):
            name = f"run {run + 1}, python block {index}"
            done = subprocess.run(
                [sys.executable, "-c", code],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
                check=False,
            )
            outcomes[f"python {index}"] = Outcome(name, done)
        for command in _cli_commands():
            done = subprocess.run(
                _argv(command), cwd=folder, env=env, capture_output=True, text=True, timeout=240, check=False
            )
            outcomes[command] = Outcome(f"run {run + 1}, `{command}`", done)
        runs.append(outcomes)
    return runs


def test_readme_has_python_examples_and_the_cli_commands() -> None:
    assert len(_blocks()) >= 5, "the README should show runnable ```python examples"
    commands = _cli_commands()
    for wanted in CLI_WANTED:
        assert any(c.startswith(wanted) for c in commands), f"no `{wanted}` example in the CLI section"


@pytest.mark.parametrize("run", range(RUNS), ids=lambda r: f"run{r + 1}")
@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_example_runs_in_order_in_one_folder(
    readme_runs: list[dict[str, Outcome]], run: int, index: int
) -> None:
    outcome = readme_runs[run][f"python {index}"]
    assert outcome.returncode == 0, outcome.explain()


def test_the_first_example_shows_no_deprecation_warning(readme_runs: list[dict[str, Outcome]]) -> None:
    first = readme_runs[0]["python 0"]
    assert first.returncode == 0, first.explain()
    assert "DeprecationWarning" not in first.stderr, first.explain()


@pytest.mark.parametrize("run", range(RUNS), ids=lambda r: f"run{r + 1}")
def test_the_cli_examples_find_what_the_demo_made(readme_runs: list[dict[str, Outcome]], run: int) -> None:
    outcomes = readme_runs[run]
    commands = _cli_commands()
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
