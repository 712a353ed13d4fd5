"""The model-based test of the store contract (issue 20), run long: steps and violations per backend.

Runs the state machine of ``tests/test_store_model.py`` (the reference model of
``tests/store_reference.py`` against two store objects on the same data, two clients and runs
naming no client, two session ids erased and re-created) with many more examples and steps
than the suite's budget, on this machine's servers.

By default in keep-going mode: a broken invariant is counted, by invariant and by the step or
check that saw it, and the run goes on (the model stays the contract's answer, so one broken
write can be counted again by later checks), so one table shows every invariant a backend
breaks. ``--strict`` runs as the suite does instead: it stops at the first failure of each
backend and prints the shrunk failing example.

Prints, per backend, the examples and steps run, the seconds, and each (invariant, where)
with its count, then what the runs exercised (refusals the model expected, installs refused
and why, score comparisons), and writes the tables as Markdown with ``--out``.

    python -m benchmarks.store_model_long --examples 200 --steps 50
    python -m benchmarks.store_model_long --backends sqlite --strict
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
BACKENDS = ("memory", "sqlite", "postgres", "redis")
BATCH = 20


def _machine_module() -> Any:
    sys.path.insert(0, str(TESTS))
    import test_store_model

    return test_store_model


def run_backend(backend: str, examples: int, steps: int, *, strict: bool) -> dict[str, Any]:
    """Run the machine on `backend`; what it ran and found."""
    from hypothesis import Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    model = _machine_module()
    machine = model.machine_for(backend)
    machine.keep_going = not strict
    machine.found.clear()
    machine.first_failure.clear()
    machine.seen.clear()
    phases = [Phase.explicit, Phase.generate, *([Phase.shrink] if strict else [])]
    start = time.perf_counter()
    error = ""
    try:
        if backend in ("postgres", "redis"):
            model._probe(backend)
        # Batches of fresh runs: one Hypothesis run's examples are alike (it mutates its own).
        for batch in range(0, examples, BATCH):
            size = min(BATCH, examples - batch)
            budget = settings(model.SUITE, max_examples=size, stateful_step_count=steps, phases=phases)
            run_state_machine_as_test(machine, settings=budget)
    except BaseException as exc:  # a failure in strict mode, a setup crash, a server not running
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if strict:
            print(f"--- {backend}: {exc}", file=sys.stderr)
    return {
        "backend": backend,
        "steps": machine.steps,
        "seconds": time.perf_counter() - start,
        "found": Counter(machine.found),
        "first": dict(machine.first_failure),
        "seen": Counter(machine.seen),
        "error": error,
    }


def tables(results: list[dict[str, Any]]) -> str:
    from benchmarks._shared import markdown_table

    summary = [
        (
            r["backend"],
            r["steps"],
            f"{r['seconds']:.1f}",
            sum(r["found"].values()),
            len({inv for inv, _ in r["found"]}),
            _cell(r["error"], 120) or "-",
        )
        for r in results
    ]
    text = markdown_table(
        ("backend", "steps", "seconds", "violations", "invariants broken", "stopped by"), summary, "lrrrrl"
    )
    rows = [
        (r["backend"], invariant, where, count, _cell(r["first"][(invariant, where)]))
        for r in results
        for (invariant, where), count in sorted(r["found"].items(), key=lambda item: (-item[1], item[0]))
    ]
    if rows:
        text += "\n\nViolations by invariant and by the step or check that saw it, with the first one:\n\n"
        text += markdown_table(("backend", "invariant", "where", "count", "first"), rows, "lllrl")
    names = sorted({name for r in results for name in r["seen"]})
    exercised = [(name, *(r["seen"].get(name, 0) for r in results)) for name in names]
    text += "\n\nWhat the runs exercised (answers the model expected, counted on each backend):\n\n"
    return text + markdown_table(("", *(r["backend"] for r in results)), exercised)


def _cell(text: str, width: int = 240) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--examples", type=int, default=200, help="runs per backend (default 200)")
    parser.add_argument("--steps", type=int, default=50, help="most steps per run (default 50)")
    parser.add_argument("--strict", action="store_true", help="stop at the first failure, shrunk")
    parser.add_argument("--out", type=Path, help="write the tables as Markdown here")
    args = parser.parse_args(argv)
    results = [run_backend(b, args.examples, args.steps, strict=args.strict) for b in args.backends]
    text = tables(results)
    print(text)
    if args.out:
        command = " ".join(["python -m benchmarks.store_model_long", *(argv or sys.argv[1:])])
        args.out.write_text(f"# Model-based test of the store contract, long run\n\n`{command}`\n\n{text}\n")
    return 1 if any(r["found"] or r["error"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
