"""Packaging: public names, typing marker, extras errors, and a wheel/sdist that install and import."""

from __future__ import annotations

import importlib
import subprocess
import sys
import zipfile
from pathlib import Path

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
        "langchain_rolling_memory.policy",
        "langchain_rolling_memory.prompts",
        "langchain_rolling_memory.engine",
        "langchain_rolling_memory.history",
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
