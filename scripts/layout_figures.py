"""The package's structure in figures, for one checkout: modules per layer, import depth, imports
that go against the layer rules, import cycles, and the modules a compaction and a recall run
through.

Run it on two checkouts to compare a restructuring (the layers are today's, from
`tests/test_layout.py`; an older flat tree's modules are placed in them through the table of
moves in `_compat.py`):

    python scripts/layout_figures.py --root /path/to/old/checkout --root .

The traced figures import the checkout's package in a subprocess (``PYTHONPATH=<root>``) and
record which of its modules have a function called while a rolling-summary history folds and
while `with_rolling_memory` recalls.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

NAME = "langchain_rolling_memory"
HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from langchain_rolling_memory._compat import _RELATIVE  # noqa: E402
from tests.test_layout import ROOT_LAYER, RULES  # noqa: E402


def _layer_of(module: str) -> str:
    """Today's layer of `module` (an old dotted path is moved first)."""
    rel = module.removeprefix(f"{NAME}.")
    if module == NAME:
        return ROOT_LAYER
    rel = _RELATIVE.get(rel, rel)
    first = rel.split(".")[0]
    if first in {"errors", "_compat"}:
        return first
    if first in RULES:
        return first
    return "engine" if first == "engine" else first


def _modules(root: Path) -> dict[str, Path]:
    package = root / NAME
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(NAME):
                targets.add(node.module)
                targets.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith(NAME))
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def _depth(graph: dict[str, set[str]], modules: dict[str, Path]) -> int:
    """Longest chain of imports between modules that are not package ``__init__`` files."""
    plain = {m for m, p in modules.items() if p.name != "__init__.py"}
    memo: dict[str, int] = {}

    def longest(node: str, trail: frozenset[str]) -> int:
        if node in memo:
            return memo[node]
        nexts = [n for n in graph[node] if n in plain and n not in trail]
        best = 1 + max((longest(n, trail | {n}) for n in nexts), default=0)
        memo[node] = best
        return best

    return max(longest(m, frozenset({m})) for m in plain)


def _cycles(graph: dict[str, set[str]], modules: dict[str, Path]) -> int:
    """Modules (not package ``__init__``) that reach themselves again through their imports."""
    plain = {m for m, p in modules.items() if p.name != "__init__.py"}
    count = 0
    for start in plain:
        seen: set[str] = set()
        stack = [n for n in graph[start] if n in plain]
        while stack:
            node = stack.pop()
            if node == start:
                count += 1
                break
            if node not in seen:
                seen.add(node)
                stack.extend(n for n in graph[node] if n in plain)
    return count


def _upward(graph: dict[str, set[str]]) -> int:
    wrong = 0
    for module, targets in graph.items():
        layer = _layer_of(module)
        allowed = RULES.get(layer, set())
        for target in targets:
            other = _layer_of(target)
            if other != layer and other not in allowed and not target.endswith("._compat"):
                wrong += 1
    return wrong


TRACE = r"""
import json, sys
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
import langchain_rolling_memory as lrm

PKG = "langchain_rolling_memory"
def run(label, fn):
    seen = set()
    def prof(frame, event, arg):
        if event == "call":
            mod = frame.f_globals.get("__name__", "")
            if (mod == PKG or mod.startswith(PKG + ".")) and ".lab" not in mod:
                seen.add(mod)
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return sorted(seen)

store = lrm.open_store("memory://")
def compaction():
    history = lrm.RollingSummaryChatMessageHistory(
        "s1", store=store, summarizer=lambda previous, msgs: "a summary of the talk", max_turns=4, keep_last=2)
    history.add_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c"), AIMessage("d"), HumanMessage("e")])
    assert history.summary
compacted = run("compaction", compaction)

store2 = lrm.open_store("memory://")
store2.append("old", [HumanMessage("My cat is called Oscar"), AIMessage("Nice name")], client_id="c1")
model = GenericFakeChatModel(messages=iter([AIMessage("ok")] * 3))
chat = lrm.with_rolling_memory(model, store=store2, summarizer=lambda p, m: "s", recall_tokens=200)
def recall():
    chat.invoke([HumanMessage("what is my cat called?")],
                config={"configurable": {"client_id": "c1", "session_id": "new"}})
recalled = run("recall", recall)
print(json.dumps({"compaction": compacted, "recall": recalled}))
"""


def _traced(root: Path) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", TRACE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def figures(root: Path) -> dict[str, object]:
    modules = _modules(root)
    graph = _graph(modules)
    per_layer = Counter(_layer_of(m) for m in modules)
    package = root / NAME
    flat = sum(1 for p in modules.values() if p.parent == package and p.name != "__init__.py")
    traced = _traced(root)
    return {
        "modules": len(modules),
        "top-level modules": flat,
        "per layer": dict(sorted(per_layer.items())),
        "import depth": _depth(graph, modules),
        "imports against the layers": _upward(graph),
        "modules in a cycle": _cycles(graph, modules),
        "modules a compaction runs": len(traced["compaction"]),
        "modules a recall turn runs": len(traced["recall"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", action="append", type=Path, required=True, help="a checkout (repeatable)")
    args = parser.parse_args()
    results = {str(root): figures(root.resolve()) for root in args.root}
    keys = list(next(iter(results.values())))
    print("| figure | " + " | ".join(results) + " |")
    print("| --- |" + " ---: |" * len(results))
    for key in keys:
        cells = [json.dumps(r[key]) if isinstance(r[key], dict) else str(r[key]) for r in results.values()]
        print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
