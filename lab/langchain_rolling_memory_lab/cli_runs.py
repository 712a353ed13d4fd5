"""The `rolling-memory` commands that run conversations: ``demo``, ``replay`` and ``eval``.

Owns their command bodies and what only they need: the replay's progress bar and the eval's
answer model and judge. The work itself is in `demo`, `replay`, `eval` and `judge`; it does
not parse arguments or turn errors into one line (that is `cli`), touch a client's stored
facts (that is `cli_data`), or choose the store and provider models (that is `cli_base`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_rolling_memory.errors import ConfigurationError, require
from langchain_rolling_memory_lab.cli_base import (
    default_store_url,
    new_console,
    open_from_args,
    provider_models,
    renderers,
    shown_url,
)
from langchain_rolling_memory_lab.cli_errors import FirstCallGuard

if TYPE_CHECKING:
    from langchain_rolling_memory_lab.judge import AnswerGrader

# ---------------------------------------------------------------------------------- demo


def cmd_demo(args: argparse.Namespace) -> int:
    """Run a scripted two-session conversation (a new employee) through rolling memory.

    Offline by default: the embedded SQLite store, the keyless summarizer and a keyless
    chat model that answers only from its prompt. Shows, turn by turn, the tokens sent with
    rolling memory against the full history, each summary as it changes, the facts learned,
    and the facts injected into session 2's prompt. --provider uses a real model (its key
    must be set).
    """
    from langchain_rolling_memory.engine.fact_extractor import FactExtractor
    from langchain_rolling_memory_lab.demo import run_demo

    model = summarizer = extractor = None
    if args.provider != "offline":
        model, summarizer = provider_models(args.provider)
        summarizer = FirstCallGuard(summarizer)
        extractor = FactExtractor(model)
    console = new_console()
    url = args.store or default_store_url()
    store = open_from_args(args)
    try:
        if args.reset and args.client:
            store.forget(args.client)
        turns = run_demo(
            store,
            model=model,
            summarizer=summarizer,
            extractor=extractor,
            client_id=args.client,
            max_turns=args.max_turns,
            keep_last=args.keep_last,
        )
        renderers().render_demo(console, turns, store_url=shown_url(url), provider=args.provider)
    finally:
        store.close()
    return 0


# ---------------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay a conversation file under several memory strategies and compare their tokens.

    FILE is JSONL ({"role": ..., "content": ...} per line, optional "session" and "client"),
    JSON (a list of such objects) or LoCoMo (a conversation .json or locomo10.zip). Each
    strategy (full buffer, window, rolling summary, rolling summary + facts) uses the same
    summarizer; the table gives the input tokens sent, memory calls and their tokens, the
    prompt-cacheable share and the break-even message count; then, per compaction, how many of
    the folded messages' named details (names, numbers, dates, codes) the new summary kept, and
    their mean. --plot draws cumulative tokens.
    """
    from langchain_rolling_memory_lab.conversations import ConversationMessage, load_conversation
    from langchain_rolling_memory_lab.replay import default_strategies, replay

    conversation = load_conversation(args.file, conversation=args.conversation)
    if args.one_session:
        conversation = [
            ConversationMessage(m.role, m.content, "session-1", m.client, m.where) for m in conversation
        ]
    summarizer = FirstCallGuard(provider_models(args.summarizer)[1]) if args.summarizer != "keyless" else None
    strategies = default_strategies(window=args.window, max_turns=args.max_turns, keep_last=args.keep_last)
    console = new_console()
    if args.plot:
        require("matplotlib", "plot", feature="replay --plot")
    with _progress(len(conversation)) as advance:
        report = replay(conversation, strategies=strategies, summarizer=summarizer, on_progress=advance)
    if args.json:
        print(
            json.dumps(
                {
                    "messages": report.messages,
                    "sessions": report.sessions,
                    "strategies": report.rows(),
                    "compactions": {
                        r.strategy.name: report.compaction_rows(r.strategy.name)
                        for r in report.results
                        if r.strategy.kind == "summary"
                    },
                },
                indent=2,
            )
        )
    else:
        renderers().render_replay(console, report, source=str(args.file), summarizer=args.summarizer)
    if args.plot:
        from langchain_rolling_memory_lab.plots import plot_replay

        plot_replay(report, path=args.plot, title=Path(args.file).name)
        (console if not args.json else new_console(stderr=True)).print(f"plot written to {args.plot}")
    return 0


class _progress:
    """A rich progress bar on stderr for long files (nothing for short ones or non-terminals)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Callable[[int, int], None]:
        console = new_console(stderr=True)
        if self.total >= 100 and console.is_terminal:
            from rich.progress import Progress

            self.bar = Progress(console=console, transient=True)
            self.bar.start()
            task = self.bar.add_task("replaying", total=self.total)
            return lambda done, total: self.bar.update(task, completed=done)
        return lambda done, total: None

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------------------------- eval


def cmd_eval(args: argparse.Namespace) -> int:
    """Score memory strategies on LoCoMo: is the gold answer in what the model would be sent?

    FILE is the LoCoMo release (locomo10.zip) or a LoCoMo .json. For every question of
    categories 1-4, each strategy (whole transcript, last 2,000 tokens, rolling summary,
    recall at 500/1,000/2,000 tokens, summary + recall) gives the memory the model would be
    sent; the table shows how often every content word of the gold answer is in it, per
    category, with memory tokens (mean, p95) and search time per question, then the same per
    split: LoCoMo's conversations 47-50 are held out (never tuned on), the others are dev;
    --split runs one of them only. --strict scores by the strict rule (a plain English
    stop-word list, no accent folding). Offline, no key.

    With a key, --answer-model openai|gemini has that model answer each question from each
    strategy's memory, and --judge has a judge model (the same one unless --judge-provider
    or --judge-model says otherwise) grade every answer against the gold one, CORRECT or
    WRONG, as in the mem0 paper: J is the share judged correct, per strategy and category,
    with the input and output tokens of answers and judge. --questions N draws N questions for a cheap run. Keys come
    from OPENAI_API_KEY or GOOGLE_API_KEY; $ROLLING_MEMORY_BASE_URL points at another endpoint.
    """
    from langchain_rolling_memory_lab.eval import run_eval, sample_questions
    from langchain_rolling_memory_lab.eval_report import format_table
    from langchain_rolling_memory_lab.eval_strategies import DEFAULT_STRATEGIES, STRATEGIES
    from langchain_rolling_memory_lab.locomo import CATEGORIES, read_locomo, split_of

    if args.plot:
        require("matplotlib", "plot", feature="eval --plot")
    if args.judge and not args.answer_model:
        msg = "--judge grades the answers of --answer-model; add --answer-model openai or gemini"
        raise ConfigurationError(msg)
    names = args.strategies.split(",") if args.strategies else list(DEFAULT_STRATEGIES)
    grader = _grader(args) if args.answer_model else None
    conversations = read_locomo(args.file)
    if args.conversations:
        conversations = conversations[: args.conversations]
    if args.split != "all":
        conversations = [c for c in conversations if split_of(c.name) == args.split]
        if not conversations:
            msg = f"{args.file}: no conversation of the {args.split} split; pass --split all"
            raise ConfigurationError(msg)
    if args.questions is not None:
        conversations = sample_questions(conversations, args.questions)
    report = run_eval(
        conversations, strategies=names, source=Path(args.file).name, strict=args.strict, on_answer=grader
    )
    if args.json:
        data = report.to_json()
        if grader is not None:
            data["answers"] = grader.to_json(CATEGORIES)
        print(json.dumps(data, indent=2))
    else:
        print(format_table(report))
        if grader is not None:
            from langchain_rolling_memory_lab.judge import format_judged

            labels = {name: STRATEGIES[name].label for name in names}
            print("\n" + format_judged(grader, labels, CATEGORIES))
    if args.plot:
        from langchain_rolling_memory_lab.eval_report import plot_eval

        plot_eval(report, path=args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _grader(args: argparse.Namespace) -> AnswerGrader:
    """The answer model and, with --judge, the judge model; keys checked before any work."""
    from langchain_rolling_memory_lab.judge import PROVIDERS, AnswerGrader, provider_chat

    answer_model = args.model or PROVIDERS[args.answer_model][3]
    grader = AnswerGrader(
        provider_chat(args.answer_model, answer_model), answer_name=f"{args.answer_model} {answer_model}"
    )
    if args.judge:
        provider = args.judge_provider or args.answer_model
        same = provider == args.answer_model
        judge_model = args.judge_model or (answer_model if same else PROVIDERS[provider][3])
        grader.judge = provider_chat(
            provider, judge_model, flag="--judge-provider" if not same else "--judge"
        )
        grader.judge_name = f"{provider} {judge_model}"
    return grader
