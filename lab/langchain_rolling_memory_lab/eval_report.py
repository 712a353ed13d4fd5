"""The results of the LoCoMo evaluation: tallies, the report, its Markdown table and its plot.

Owns what `eval.run_eval` returns (`EvalReport`: per strategy, overall and per category, the
answer-in-context rate, memory tokens mean and p95, milliseconds per question) and how it is
shown: `format_table` (plain text, Markdown) and `plot_eval` (matplotlib, the ``plot`` extra,
imported only when a figure is drawn). It does not read conversations, choose memory or score.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_rolling_memory.errors import require
from langchain_rolling_memory_lab.eval_strategies import Strategy
from langchain_rolling_memory_lab.locomo import CATEGORIES, HELD_OUT, SPLITS


@dataclass
class Tally:
    """Questions, how many were covered, and the tokens and seconds of each."""

    covered: int = 0
    total: int = 0
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, hit: bool, tokens: int, seconds: float) -> None:
        self.covered += hit
        self.total += 1
        self.tokens.append(tokens)
        self.seconds.append(seconds)

    def merged(self, other: Tally) -> Tally:
        """This tally and `other` as one."""
        return Tally(
            self.covered + other.covered,
            self.total + other.total,
            self.tokens + other.tokens,
            self.seconds + other.seconds,
        )

    def row(self) -> dict[str, float | int]:
        ordered = sorted(self.tokens)
        p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else 0
        return {
            "questions": self.total,
            "answer_in_context": round(self.covered / self.total, 4) if self.total else 0.0,
            "tokens_mean": round(statistics.fmean(self.tokens), 1) if self.tokens else 0.0,
            "tokens_p95": p95,
            "ms_per_question": round(1000 * statistics.fmean(self.seconds), 3) if self.seconds else 0.0,
        }


@dataclass
class EvalReport:
    """Per strategy, overall and per category, and per split (`eval.split_of`) and category:
    answer-in-context rate, tokens, time; `rule` names the answer-in-context rule."""

    source: str
    conversations: int
    strategies: list[Strategy]
    overall: dict[str, Tally]
    by_category: dict[str, dict[int, Tally]]
    splits: dict[str, dict[str, dict[int, Tally]]] = field(default_factory=dict)
    rule: str = "project"

    def split_tally(self, strategy: str, split: str) -> Tally:
        """All the questions of one split under one strategy, as one tally."""
        total = Tally()
        for tally in self.splits.get(strategy, {}).get(split, {}).values():
            total = total.merged(tally)
        return total

    def split_rows(self, strategy: str) -> dict[str, dict[str, Any]]:
        """Per split with questions: its questions, answer in context, and per category."""
        out: dict[str, dict[str, Any]] = {}
        for split, tallies in self.splits.get(strategy, {}).items():
            total = self.split_tally(strategy, split)
            if total.total:
                out[split] = {
                    "questions": total.total,
                    "answer_in_context": total.row()["answer_in_context"],
                    "categories": {
                        CATEGORIES[c]: tallies[c].row()["answer_in_context"] for c in sorted(tallies)
                    },
                }
        return out

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "strategy": s.name,
                "label": s.label,
                **self.overall[s.name].row(),
                "categories": {
                    CATEGORIES[c]: self.by_category[s.name][c].row()["answer_in_context"]
                    for c in sorted(self.by_category[s.name])
                },
                "splits": self.split_rows(s.name),
            }
            for s in self.strategies
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "conversations": self.conversations,
            "rule": self.rule,
            "strategies": self.rows(),
        }


def _percent(tally: Tally | None) -> str:
    return f"{100 * tally.covered / tally.total:.1f}%" if tally and tally.total else "-"


def format_table(report: EvalReport) -> str:
    """The report as plain-text tables (Markdown), one row per strategy: every conversation,
    then each split (dev, held-out) that has questions, per category."""
    categories = sorted({c for tallies in report.by_category.values() for c in tallies})
    head = ["strategy", "answer in context", *[f"{CATEGORIES[c]} ({c})" for c in categories]]
    head += ["tokens mean", "tokens p95", "ms/question"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for s in report.strategies:
        row = report.overall[s.name].row()
        cells = [s.label, f"{100 * float(row['answer_in_context']):.1f}%"]
        cells += [_percent(report.by_category[s.name].get(c)) for c in categories]
        cells += [
            f"{float(row['tokens_mean']):,.0f}",
            f"{int(row['tokens_p95']):,}",
            f"{float(row['ms_per_question']):.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    questions = report.overall[report.strategies[0].name].total if report.strategies else 0
    rule = "strict rule" if report.rule == "strict" else "the project's rule"
    lines.append(
        f"\n{report.conversations} conversations, {questions} questions (categories 1-4), "
        f"{report.source}, {rule}"
    )
    lines += _split_table(report, categories)
    return "\n".join(lines)


def _split_table(report: EvalReport, categories: list[int]) -> list[str]:
    """Answer in context per split and category (the splits with questions; none: no lines)."""
    splits = [
        split for split in SPLITS if any(report.split_tally(s.name, split).total for s in report.strategies)
    ]
    if not splits:
        return []
    head = ["strategy"]
    for split in splits:
        head += [split, *[f"{split} {CATEGORIES[c]}" for c in categories]]
    lines = ["", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for s in report.strategies:
        cells = [s.label]
        for split in splits:
            cells.append(_percent(report.split_tally(s.name, split)))
            tallies = report.splits[s.name][split]
            cells += [_percent(tallies.get(c)) for c in categories]
        lines.append("| " + " | ".join(cells) + " |")
    counts = ", ".join(
        f"{split} {report.split_tally(report.strategies[0].name, split).total} questions" for split in splits
    )
    lines.append(f"\nsplits: {counts} (held out: LoCoMo conversations {', '.join(HELD_OUT)}, never tuned on)")
    return lines


def plot_eval(report: EvalReport, *, path: str | Path) -> None:
    """Answer in context against mean memory tokens, one point per strategy (the ``plot`` extra)."""
    require("matplotlib", "plot", feature="the eval plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in report.strategies:
        row = report.overall[s.name].row()
        ax.scatter(float(row["tokens_mean"]), 100 * float(row["answer_in_context"]))
        ax.annotate(s.label, (float(row["tokens_mean"]), 100 * float(row["answer_in_context"])), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("memory tokens per question (mean, log scale)")
    ax.set_ylabel("answer in context (%)")
    ax.set_title(f"LoCoMo, categories 1-4 ({report.conversations} conversations)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
