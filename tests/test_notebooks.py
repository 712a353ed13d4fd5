"""The notebooks run top to bottom offline (fake models, no key) and are committed with outputs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KEYS = ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY")


def test_the_notebooks_are_there() -> None:
    names = [p.stem for p in NOTEBOOKS]
    wanted_names = (
        "quickstart",
        "swapping_summarizers",
        "strategy_comparison",
        "rag_with_memory",
        "lecons_en_francais",
    )
    for wanted in wanted_names:
        assert any(wanted in name for name in names), f"no {wanted} notebook in {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_with_its_outputs(path: Path) -> None:
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    assert cells
    assert all(c["execution_count"] is not None for c in cells), "run the notebook, then save it"
    assert sum(len(c["outputs"]) for c in cells) >= len(cells) // 2
    assert not [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]


@pytest.fixture
def kernel_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec on this interpreter, so the notebooks run in the test's own environment."""
    pytest.importorskip("ipykernel")
    spec = tmp_path / "kernels" / "rolling-memory-tests"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "rolling-memory tests", "language": "python"}),
        encoding="utf-8",
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    # The kernel imports this checkout, whatever copy of the package is installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return "rolling-memory-tests"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_offline(path: Path, kernel_name: str) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(str(path), as_version=4)  # nbformat 5.10.0 (the lower bound) takes no Path
    client = nbclient.NotebookClient(
        notebook, timeout=240, kernel_name=kernel_name, resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = "".join(
        o.get("text", "")
        for c in notebook.cells
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    assert text.strip(), "the notebook printed nothing"


def test_the_french_notebook_shows_the_memory_in_french_only() -> None:
    """Issue 24: the lessons' walk-through in French; every memory text it prints is French."""
    from tests.test_french_end_to_end import english_in

    path = ROOT / "notebooks" / "05_lecons_en_francais.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    printed = "".join(
        "".join(o.get("text", ""))
        for c in cells
        if c["cell_type"] == "code"
        for o in c["outputs"]
        if o["output_type"] == "stream"
    )
    for french in (
        "Tu tiens le résumé courant",
        "Ce que l'on sait du client",
        "les quatre points",
        "Utilisateur : ",
    ):
        assert french in printed
    assert english_in(printed) == []
