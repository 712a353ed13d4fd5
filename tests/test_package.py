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


@pytest.mark.slow
def test_wheel_and_sdist_build_install_and_import(tmp_path: Path) -> None:
    pytest.importorskip("build")
    pytest.importorskip("hatchling")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheels = list((tmp_path / "dist").glob("*.whl"))
    sdists = list((tmp_path / "dist").glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    # The sdist ships its tests, so it ships what they read: the notebooks, the benchmarks, the examples.
    with tarfile.open(sdists[0]) as sdist:
        shipped = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for path in [
        *ROOT.glob("notebooks/*.ipynb"),
        ROOT / "benchmarks" / "agent_middleware.py",
        ROOT / "examples" / "langgraph_app.py",
    ]:
        assert path.relative_to(ROOT).as_posix() in shipped, f"the sdist lacks {path.relative_to(ROOT)}"
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "langchain_rolling_memory/py.typed" in names
    assert any(n.endswith("entry_points.txt") for n in names)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheels[0]),
        ],
        check=True,
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(target)!r}); import langchain_rolling_memory as m; "
            "print(m.__file__, m.__version__)",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert str(target) in out
    assert "0.0.0" not in out


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
