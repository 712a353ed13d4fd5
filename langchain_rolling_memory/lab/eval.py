"""The LoCoMo memory evaluation: whether the gold answer is in what each memory strategy puts in
front of the model. Reads the release at run time; calls no model and writes no store.

"Answer in context" (the rule, also in the README): a question counts as covered when every
content word of its gold answer - folded to lower case without accents, split on anything that
is not a letter or a digit, English and French stop words and lone letters dropped, numbers
kept (`lexical_search.content_words`) - is a word of the text the model would be sent as memory.
Categories 1-4 of LoCoMo are scored (5, adversarial, has no gold answer). Memory tokens are
`count_tokens_approximately` of the memory messages; search time is the strategy's own work
per question (search and rendering; the summary is built once per conversation, not timed).

Owns the rule (`answer_in_context`), the run (`run_eval`: every question under every strategy,
tallied) and the question draw (`sample_questions`). The pieces it runs live beside it and are
importable from here too: the reader (`locomo.read_locomo` and the `Eval*` records), the
strategies (`eval_strategies`, `eval_store`), the report, table and plot (`eval_report`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.lexical_search import content_words, tokens
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory.lab.eval_report import EvalReport, Tally
from langchain_rolling_memory.lab.eval_strategies import DEFAULT_STRATEGIES, STRATEGIES, Strategy
from langchain_rolling_memory.lab.locomo import (
    EvalConversation,
    EvalQuestion,
)


def answer_in_context(answer: str, context: str | set[str]) -> bool:
    """Whether every content word of `answer` is a word of `context` (see the module docstring).

    An answer with no content word (only stop words) counts as covered.

    Example:
        >>> answer_in_context("7 May 2023", "On 7 may, 2023 she went")
        True
        >>> answer_in_context("Psychology, counseling", "psychology")
        False
    """
    words = context if isinstance(context, set) else set(tokens(context))
    return all(w in words for w in content_words(answer))


def run_eval(
    conversations: Sequence[EvalConversation],
    *,
    strategies: Sequence[str | Strategy] = DEFAULT_STRATEGIES,
    source: str = "",
    on_progress: Callable[[str, str], None] | None = None,
    on_answer: Callable[[str, EvalQuestion, list[BaseMessage]], None] | None = None,
) -> EvalReport:
    """Score every question of every conversation under each strategy.

    `strategies` are names of `STRATEGIES` or `Strategy` objects, used as they are (a
    store-backed recall on a server, say); their names must differ. A responder that has a
    ``close`` method is closed once its conversation's questions are asked.

    `on_answer` sees each (strategy name, question, memory) once it is scored: the keyed path
    (`judge.AnswerGrader`) asks a real model there, outside the timed search.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory.lab.locomo import EvalTurn
        >>> turns = [EvalTurn(1, 1, HumanMessage("I adopted a cat named Oscar"), 0.0)]
        >>> conv = EvalConversation("c", turns, [EvalQuestion("Cat's name?", "Oscar", 4)])
        >>> run_eval([conv], strategies=["recall-500"]).rows()[0]["answer_in_context"]
        1.0
    """
    unknown = [n for n in strategies if not isinstance(n, Strategy) and n not in STRATEGIES]
    if unknown or not strategies:
        msg = f"unknown strategies {unknown or '(none given)'}; choose among {sorted(STRATEGIES)}"
        raise ConfigurationError(msg)
    chosen = [s if isinstance(s, Strategy) else STRATEGIES[s] for s in strategies]
    names = [s.name for s in chosen]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        msg = f"strategies must have different names, got {twice} more than once; rename or drop the repeats"
        raise ConfigurationError(msg)
    overall = {s.name: Tally() for s in chosen}
    by_category: dict[str, dict[int, Tally]] = {s.name: {} for s in chosen}
    for conversation in conversations:
        for strategy in chosen:
            if on_progress is not None:
                on_progress(conversation.name, strategy.name)
            respond = strategy.prepare(conversation)
            try:
                for question in conversation.questions:
                    start = time.perf_counter()
                    memory = respond(question.question)
                    seconds = time.perf_counter() - start
                    words = set(tokens("\n".join(m.text for m in memory)))
                    covered = answer_in_context(question.answer, words)
                    used = count_tokens(memory) if memory else 0
                    overall[strategy.name].add(covered, used, seconds)
                    by_category[strategy.name].setdefault(question.category, Tally()).add(
                        covered, used, seconds
                    )
                    if on_answer is not None:
                        on_answer(strategy.name, question, memory)
            finally:
                # A store-backed responder owns a store (a server's, perhaps): not left to the collector.
                close = getattr(respond, "close", None)
                if callable(close):
                    close()
    return EvalReport(source, len(conversations), chosen, overall, by_category)


def sample_questions(
    conversations: Sequence[EvalConversation], count: int, *, seed: int = 0
) -> list[EvalConversation]:
    """The conversations with `count` of their questions drawn at random over all of them
    (the same draw for a seed), in their original order; the conversations left with none dropped."""
    if count < 1:
        msg = f"the number of questions must be at least 1, got {count!r}; pass --questions N with N >= 1"
        raise ConfigurationError(msg)
    every = [(i, j) for i, c in enumerate(conversations) for j in range(len(c.questions))]
    chosen = set(random.Random(seed).sample(every, min(count, len(every))))
    out = []
    for i, c in enumerate(conversations):
        kept = [q for j, q in enumerate(c.questions) if (i, j) in chosen]
        if kept:
            out.append(EvalConversation(c.name, c.turns, kept))
    return out
