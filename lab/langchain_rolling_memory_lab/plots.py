"""Matplotlib figures of a replay (cumulative tokens, request sizes); no simulation here.

matplotlib is the ``plot`` extra; it is imported when a figure is drawn, with the Agg
backend when a file is written so that no display is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_rolling_memory.errors import require
from langchain_rolling_memory_lab.replay import ReplayReport


def plot_replay(report: ReplayReport, *, path: str | Path | None = None, title: str = "") -> Any:
    """Draw cumulative tokens (sent + memory) and request sizes per strategy.

    Args:
        report: what `replay` returned.
        path: write the figure there (PNG, SVG... by extension) and close it.
        title: figure title (e.g. the file name).

    Returns:
        The matplotlib `Figure` (already closed if `path` was given).
    """
    require("matplotlib", "plot", feature="plotting a replay")
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for result in report.results:
        xs = range(1, len(result.cumulative) + 1)
        left.plot(xs, result.cumulative, label=result.strategy.label)
        even = report.break_even(result.strategy.name) if result.strategy.kind == "summary" else None
        if even is not None and "full" in {r.strategy.name for r in report.results}:
            left.axvline(even, linestyle=":", linewidth=1, color=left.lines[-1].get_color())
        sizes = result.request_sizes
        right.plot([i + 1 for i, _ in sizes], [n for _, n in sizes], label=result.strategy.label)
    left.set(xlabel="messages replayed", ylabel="cumulative tokens (sent + memory)", title="cumulative cost")
    right.set(xlabel="message index", ylabel="tokens in the request", title="size of each request")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
