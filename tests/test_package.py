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


LAB = ROOT / "lab"
"""The second distribution, langchain-rolling-memory-lab: the command, demo, eval (issue 25)."""
LAB_CODE = re.compile(
    r"(^|/)(lab|cli(_\w+)?|demo|replay|eval\w*|judge|locomo|bench\w*|plots?|offline)(/|\.py$)"
)
"""A path in a wheel that is evaluation, benchmark or command-line code."""


def _build(project: Path, dist: Path) -> tuple[Path, Path]:
    """python -m build (sdist + wheel) of `project` into `dist`: the wheel and the sdist."""
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(project)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return wheel, sdist


def _metadata(wheel: zipfile.ZipFile) -> str:
    return wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()


def _base_requirements(metadata: str) -> list[str]:
    return [r for r in re.findall(r"^Requires-Dist: (.+)$", metadata, re.M) if "extra ==" not in r]


@pytest.mark.slow
def test_the_built_wheels_and_sdists_pass_twine_and_the_wheels_run_in_a_fresh_venv(tmp_path: Path) -> None:
    """Both distributions built (sdist + wheel) and twine-checked; the library's wheel holds no
    evaluation, benchmark or CLI code and, installed with its own dependencies only into a fresh
    venv, runs the quickstart there; the lab's wheel installed beside it gives the command."""
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    pytest.importorskip("twine")
    library, sdist = _build(ROOT, tmp_path / "dist")
    lab, lab_sdist = _build(LAB, tmp_path / "lab-dist")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, [library, sdist, lab, lab_sdist])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The sdist ships its tests, so it ships what they read: the notebooks, the benchmarks, the
    # examples, the lab.
    with tarfile.open(sdist) as archive:
        shipped = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for path in [
        *ROOT.glob("notebooks/*.ipynb"),
        ROOT / "benchmarks" / "agent_middleware.py",
        ROOT / "examples" / "langgraph_app.py",
        ROOT / "CHANGELOG.md",
        LAB / "pyproject.toml",
        LAB / "langchain_rolling_memory_lab" / "cli.py",
    ]:
        assert path.relative_to(ROOT).as_posix() in shipped, f"the sdist lacks {path.relative_to(ROOT)}"
    wheel = zipfile.ZipFile(library)
    names = wheel.namelist()
    assert "langchain_rolling_memory/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/", "notebooks/"))]
    assert not [n for n in names if LAB_CODE.search(n)], "the library's wheel ships lab code"
    metadata = _metadata(wheel)
    # The base requirements are langchain-core alone; dev and bench are groups, never published extras.
    assert _base_requirements(metadata) == ["langchain-core<2,>=1.0"]
    extras = set(re.findall(r"^Provides-Extra: (.+)$", metadata, re.M))
    assert extras.isdisjoint({"dev", "bench", "test", "lint", "build"}) and {"cli", "plot", "all"} <= extras
    urls = dict(re.findall(r"^Project-URL: ([^,]+), (.+)$", metadata, re.M))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert "Entry-Point" not in metadata and not [n for n in names if n.endswith("entry_points.txt")]
    lab_wheel = zipfile.ZipFile(lab)
    lab_names = lab_wheel.namelist()
    assert "langchain_rolling_memory_lab/eval.py" in lab_names
    assert not [n for n in lab_names if n.startswith("langchain_rolling_memory/")]
    version = _pyproject()["version"]
    assert sorted(_base_requirements(_metadata(lab_wheel))) == [
        f"langchain-rolling-memory=={version}",
        "rich>=13",
    ]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"

    def pip(*args: str) -> str:  # this interpreter's pip, on the fresh venv (no ensurepip there)
        return subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv),
            check=False,
            capture_output=True,
            text=True,
            cwd=tmp_path / "run",
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )

    pip("install", "--quiet", str(library))
    installed = pip("list", "--format=freeze")
    assert not re.search(
        r"^(langchain|langgraph|langchain-openai|psycopg|redis|rich|matplotlib|langchain-rolling-memory-lab)==",
        installed,
        re.M,
    )
    (tmp_path / "run").mkdir()
    out = run(str(python), "-c", SMOKE)
    assert out.returncode == 0, out.stderr
    assert str(venv) in out.stdout and "0.0.0" not in out.stdout
    assert not (venv / "bin" / "rolling-memory").exists()
    old_path = run(str(python), "-c", "import langchain_rolling_memory.lab")
    assert "pip install 'langchain-rolling-memory[cli]'" in old_path.stderr.strip().splitlines()[-1]

    pip("install", "--quiet", str(lab))  # beside the library already there
    assert f"langchain-rolling-memory=={version}" in pip("list", "--format=freeze")
    helped = run(str(venv / "bin" / "rolling-memory"), "--help")
    assert helped.returncode == 0, helped.stderr
    assert "demo" in helped.stdout and "eval" in helped.stdout


def test_the_changelog_has_the_version_and_the_project_links_it() -> None:
    project = _pyproject()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "[Keep a Changelog]" in changelog
    assert re.search(
        rf"^## \[{re.escape(project['version'])}\] - (Unreleased|\d{{4}}-\d\d-\d\d)$", changelog, re.M
    )
    assert project["urls"]["Changelog"].endswith("/CHANGELOG.md")


def _pyproject(folder: Path = ROOT) -> dict[str, Any]:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]  # type: ignore[no-any-return]


def _installed_by(extra: str) -> list[str]:
    """The requirements `pip install 'langchain-rolling-memory[extra]'` brings, the lab's followed."""
    lab = _pyproject(LAB)
    found = []
    for requirement in _pyproject()["optional-dependencies"][extra]:
        if requirement.startswith(lab["name"]):
            found += lab["dependencies"]
            lab_extras = re.match(r"[\w-]+\[([\w,]+)\]", requirement)
            for name in lab_extras.group(1).split(",") if lab_extras else []:
                found += lab["optional-dependencies"][name]
        found.append(requirement)
    return found


def test_the_lab_and_the_library_pin_each_other_at_one_version() -> None:
    library, lab = _pyproject(), _pyproject(LAB)
    assert lab["version"] == library["version"]
    assert f"{library['name']}=={library['version']}" in lab["dependencies"]
    assert library["optional-dependencies"]["cli"] == [f"{lab['name']}=={lab['version']}"]
    assert library["optional-dependencies"]["plot"] == [f"{lab['name']}[plot]=={lab['version']}"]
    assert "scripts" not in library and lab["scripts"] == {
        "rolling-memory": "langchain_rolling_memory_lab.cli:main"
    }
    assert lab["requires-python"] == library["requires-python"]


def _minor(spec: str) -> tuple[int, int]:
    major, minor = re.search(r">=\s*(\d+)\.(\d+)", spec).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_every_extra_the_code_names_exists_and_holds_the_module() -> None:
    extras = _pyproject()["optional-dependencies"]
    named = set()
    for path in [*(ROOT / "langchain_rolling_memory").rglob("*.py"), *LAB.rglob("*.py")]:
        named |= set(re.findall(r'require\("(\w+)", "(\w+)"', path.read_text(encoding="utf-8")))
    assert {("matplotlib", "plot"), ("rich", "cli")} <= named
    for module, extra in named:
        assert extra in extras, f"the code names the extra [{extra}], which pyproject.toml lacks"
        wanted = module.replace("_", "-").split(".")[0]
        assert any(req.replace("_", "-").startswith(wanted) for req in _installed_by(extra)), (module, extra)
    # The command needs rich alone; matplotlib (and numpy, pillow...) only for --plot.
    assert not [req for req in _installed_by("cli") if req.startswith("matplotlib")]


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
    for requirement in (r for extra in project["optional-dependencies"] for r in _installed_by(extra)):
        name = re.split(r"[\[<>=;! ]", requirement, maxsplit=1)[0]
        if name.startswith("langchain-rolling-memory"):
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
        "from langchain_rolling_memory_lab.cli import main\n"
        "talk = pathlib.Path('talk.jsonl')\n"
        'talk.write_text(\'{"role": "user", "content": "hi"}\\n\')\n'
        "sys.exit(main(['replay', str(talk), '--plot', 'out.png']))\n",
        "from langchain_rolling_memory_lab.eval_report import plot_eval\nplot_eval(None, path='out.png')\n",
    ],
    ids=["replay --plot", "eval plot"],
)
def test_a_plot_without_matplotlib_names_the_plot_extra(code: str, tmp_path: Path) -> None:
    blocker = "import pathlib, sys\nsys.modules['matplotlib'] = None  # as if not installed\n"
    done = subprocess.run(
        [sys.executable, "-c", blocker + code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(LAB)])},
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
