"""Packaging: public names, typing marker, extras errors, and a wheel/sdist that install and import."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import langchain_rolling_memory
from langchain_rolling_memory.errors import MissingExtraError, require

ROOT = Path(__file__).resolve().parents[1]


def test_all_lists_exactly_the_public_names() -> None:
    exported = langchain_rolling_memory.__all__
    assert len(set(exported)) == len(exported), "duplicates in __all__"
    for name in exported:  # every exported name resolves (lazy ones through __getattr__)
        assert getattr(langchain_rolling_memory, name) is not None
    public = {
        name
        for name, value in vars(langchain_rolling_memory).items()
        if not name.startswith("_") and not isinstance(value, type(sys)) and name != "annotations"
    }
    assert public <= set(exported), f"public but not exported: {sorted(public - set(exported))}"


def test_package_is_typed() -> None:
    assert (Path(langchain_rolling_memory.__file__).parent / "py.typed").exists()


def test_a_missing_extra_names_what_to_install() -> None:
    with pytest.raises(MissingExtraError, match=r"pip install 'langchain-rolling-memory\[nosuch\]'"):
        require("module_that_does_not_exist_123", "nosuch", feature="The test feature")
    assert issubclass(MissingExtraError, ImportError)


@pytest.mark.parametrize(
    "module",
    [
        "langchain_rolling_memory.core.cuts",
        "langchain_rolling_memory.core.prompts",
        "langchain_rolling_memory.engine.compaction",
        "langchain_rolling_memory.adapters.chat_histories",
        "langchain_rolling_memory.stores",
    ],
)
def test_core_modules_import_with_langchain_core_only(module: str) -> None:
    code = (
        "import sys\n"
        "blocked = ('langchain_openai', 'langchain_google_genai', 'psycopg', 'redis', 'langchain.agents')\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith(blocked):\n"
        "            raise ImportError(f'blocked {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        f"import {module}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert importlib.import_module(module)


SMOKE = """
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

import langchain_rolling_memory as m
from langchain_rolling_memory import extractive_summarizer, open_store, with_rolling_memory

model = GenericFakeChatModel(messages=iter([AIMessage(f"answer {i}") for i in range(20)]))
store = open_store("sqlite:///memory.db")
chat = with_rolling_memory(model, store=store, summarizer=extractive_summarizer(), max_turns=4, keep_last=2)
config = {"configurable": {"client_id": "bob", "session_id": "bob-1"}}
for i in range(8):
    chat.invoke(f"question {i}", config=config)
assert len(store.transcript("bob-1")) == 16 and store.summary("bob-1").text
print(m.__file__, m.__version__)
"""
"""The quickstart a wheel user runs with the base dependencies alone (langchain-core)."""


@pytest.mark.slow
def test_the_built_wheel_and_sdist_pass_twine_and_the_wheel_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    """python -m build (sdist + wheel), twine check, then the wheel installed with its own
    dependencies only into a fresh venv runs the quickstart there."""
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    pytest.importorskip("twine")
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheels, sdists = list(dist.glob("*.whl")), list(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, [*wheels, *sdists])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The sdist ships its tests, so it ships what they read: the notebooks, the benchmarks, the examples.
    with tarfile.open(sdists[0]) as sdist:
        shipped = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for path in [
        *ROOT.glob("notebooks/*.ipynb"),
        ROOT / "benchmarks" / "agent_middleware.py",
        ROOT / "examples" / "langgraph_app.py",
        ROOT / "CHANGELOG.md",
    ]:
        assert path.relative_to(ROOT).as_posix() in shipped, f"the sdist lacks {path.relative_to(ROOT)}"
    wheel = zipfile.ZipFile(wheels[0])
    names = wheel.namelist()
    assert "langchain_rolling_memory/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/", "notebooks/"))]
    metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    # The base requirements are langchain-core alone; dev and bench are groups, never published extras.
    assert [r for r in re.findall(r"^Requires-Dist: (.+)$", metadata, re.M) if "extra ==" not in r] == [
        "langchain-core<2,>=1.0"
    ]
    extras = set(re.findall(r"^Provides-Extra: (.+)$", metadata, re.M))
    assert extras.isdisjoint({"dev", "bench", "test", "lint", "build"}) and {"cli", "plot", "all"} <= extras
    urls = dict(re.findall(r"^Project-URL: ([^,]+), (.+)$", metadata, re.M))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(  # this interpreter's pip, installing into the fresh venv (no ensurepip there)
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheels[0])],
        check=True,
    )
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not re.search(
        r"^(langchain|langgraph|langchain-openai|psycopg|redis|rich|matplotlib)==", installed, re.M
    )
    (tmp_path / "run").mkdir()
    out = subprocess.run(
        [str(python), "-c", SMOKE],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path / "run",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert out.returncode == 0, out.stderr
    assert str(venv) in out.stdout and "0.0.0" not in out.stdout


def test_the_changelog_has_the_version_and_the_project_links_it() -> None:
    project = _pyproject()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "[Keep a Changelog]" in changelog
    assert re.search(
        rf"^## \[{re.escape(project['version'])}\] - (Unreleased|\d{{4}}-\d\d-\d\d)$", changelog, re.M
    )
    assert project["urls"]["Changelog"].endswith("/CHANGELOG.md")


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]  # type: ignore[no-any-return]


def _minor(spec: str) -> tuple[int, int]:
    major, minor = re.search(r">=\s*(\d+)\.(\d+)", spec).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_every_extra_the_code_names_exists_and_holds_the_module() -> None:
    extras = _pyproject()["optional-dependencies"]
    named = set()
    for path in (ROOT / "langchain_rolling_memory").rglob("*.py"):
        named |= set(re.findall(r'require\("(\w+)", "(\w+)"', path.read_text(encoding="utf-8")))
    assert ("matplotlib", "plot") in named
    for module, extra in named:
        assert extra in extras, f"the code names the extra [{extra}], which pyproject.toml lacks"
        wanted = module.replace("_", "-").split(".")[0]
        assert any(req.replace("_", "-").startswith(wanted) for req in extras[extra]), (module, extra)
    # The command needs rich alone; matplotlib (and numpy, pillow...) only for --plot.
    assert not [req for req in extras["cli"] if req.startswith("matplotlib")]


def test_the_python_versions_listed_are_the_ones_every_extra_installs_on() -> None:
    """requires-python and the classifiers name no Python that an extra's dependencies refuse."""
    project = _pyproject()
    floor = _minor(project["requires-python"])
    listed = sorted(
        tuple(int(p) for p in c.rsplit(" ", 1)[1].split("."))
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert listed[0] == floor, f"classifiers start at {listed[0]}, requires-python at {floor}"
    for requirement in (r for reqs in project["optional-dependencies"].values() for r in reqs):
        name = re.split(r"[\[<>=;! ]", requirement, maxsplit=1)[0]
        if name == "langchain-rolling-memory":
            continue
        try:
            needs = importlib.metadata.metadata(name).get("Requires-Python")
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here: the version matrix (scripts/version_matrix.py) covers it
        if needs and ">=" in needs:
            assert _minor(needs) <= floor, (
                f"{name} needs Python {needs}, the package says {project['requires-python']}"
            )


@pytest.mark.parametrize(
    "code",
    [
        "from langchain_rolling_memory.lab.cli import main\n"
        "talk = pathlib.Path('talk.jsonl')\n"
        'talk.write_text(\'{"role": "user", "content": "hi"}\\n\')\n'
        "sys.exit(main(['replay', str(talk), '--plot', 'out.png']))\n",
        "from langchain_rolling_memory.lab.eval_report import plot_eval\nplot_eval(None, path='out.png')\n",
    ],
    ids=["replay --plot", "eval plot"],
)
def test_a_plot_without_matplotlib_names_the_plot_extra(code: str, tmp_path: Path) -> None:
    blocker = "import pathlib, sys\nsys.modules['matplotlib'] = None  # as if not installed\n"
    done = subprocess.run(
        [sys.executable, "-c", blocker + code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "pip install 'langchain-rolling-memory[plot]'" in done.stderr, done.stderr
    assert not (tmp_path / "out.png").exists()


PUBLIC_MODULES = {
    "langchain_rolling_memory",
    "langchain_rolling_memory.errors",
    "langchain_rolling_memory.stores",
    "langchain_rolling_memory.stores.memory",
    "langchain_rolling_memory.stores.sqlite",
    "langchain_rolling_memory.stores.postgres",
    "langchain_rolling_memory.stores.redis",
    "langchain_rolling_memory.summarizers",
    "langchain_rolling_memory.testing",
}
"""The modules users import from; every other module is internal and declares no `__all__`."""


def test_only_the_public_modules_declare_all() -> None:
    package = Path(langchain_rolling_memory.__file__).parent
    declaring = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if re.search(r"^__all__\b", path.read_text(encoding="utf-8"), re.M):
            declaring.add(name)
    assert declaring == PUBLIC_MODULES, (
        f"internal but declaring __all__: {sorted(declaring - PUBLIC_MODULES)}; "
        f"public without __all__: {sorted(PUBLIC_MODULES - declaring)}"
    )
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        assert all(getattr(module, exported, None) is not None for exported in module.__all__), name
