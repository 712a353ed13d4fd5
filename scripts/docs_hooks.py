"""MkDocs hook: the benchmarks' own pages, as they are, in the docs site.

``benchmarks/README.md`` (what each script measures and how to run it) becomes the site's
``benchmarks/index.md`` and every file of ``benchmarks/results/`` (tables and plots) is served
under ``benchmarks/results/``, read from where the scripts write them: the site shows the figures
of the last run, never a copy that could drift. Their relative links (``results/x.md``) keep
working because the layout is the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_pages() -> dict[str, Path]:
    """Site path -> the file it is read from."""
    pages = {"benchmarks/index.md": BENCHMARKS / "README.md"}
    for path in sorted((BENCHMARKS / "results").iterdir()):
        if path.suffix in {".md", ".png", ".svg"}:
            pages[f"benchmarks/results/{path.name}"] = path
    return pages


def on_files(files: Files, config: MkDocsConfig, **kwargs: Any) -> Files:
    for uri, path in benchmark_pages().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
