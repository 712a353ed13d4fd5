"""The LoCoMo memory evaluation: whether the gold answer is in what each memory strategy puts in
front of the model. Reads the release at run time; calls no model and writes no store.

"Answer in context" (the rule, also in the README): a question counts as covered when every
content word of its gold answer - folded to lower case without accents, split on anything that
is not a letter or a digit, English and French stop words and lone letters dropped, numbers
kept (`lexical_search.content_words`) - is a word of the text the model would be sent as memory.
The strict rule (``strict=True``, ``rolling-memory eval --strict``) is the same without the
project's own choices: lower case only (no accent folding), and only a plain English stop-word
list (`lexical_search.ENGLISH_STOP_WORDS`: no French stop words, no chat fillers such as
"yeah" or "going"). Categories 1-4 of LoCoMo are scored (5, adversarial, has no gold answer).
Memory tokens are LangChain's `count_tokens_approximately` of the memory messages; search time
is the strategy's own work per question (search and rendering; the summary is built once per
conversation, not timed).

The split (`locomo.split_of`): LoCoMo's conversations 47, 48, 49 and 50 (the release's last four in
file order) are held out, every other conversation is dev. It is fixed here, before any
figure: a parameter is chosen on the dev figures only, and the held-out ones are reported
beside them, never tuned on. Every report shows both.

Owns the rule (`answer_in_context`), the run (`run_eval`: every question under every strategy,
tallied) and the question draw (`sample_questions`). The pieces it runs live beside it and are
importable from here too: the reader (`locomo.read_locomo` and the `Eval*` records), the
strategies (`eval_strategies`, `eval_store`), the report, table and plot (`eval_report`).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.lexical_search import ENGLISH_STOP_WORDS, content_words, tokens
from langchain_rolling_memory.errors import ConfigurationError
from langchain_rolling_memory_lab.eval_report import EvalReport, Tally
from langchain_rolling_memory_lab.eval_strategies import DEFAULT_STRATEGIES, STRATEGIES, Strategy
from langchain_rolling_memory_lab.locomo import (
    SPLITS,
    EvalConversation,
    EvalQuestion,
    split_of,
)

_WORD = re.compile(r"[^\W_]+")


def strict_tokens(text: str) -> list[str]:
    """Every word of `text` in lower case, accents kept: the strict rule's unit."""
    return _WORD.findall(text.casefold())


def strict_content_words(text: str) -> list[str]:
    """`strict_tokens` without `ENGLISH_STOP_WORDS` and lone letters (numbers kept)."""
    return [w for w in strict_tokens(text) if w not in ENGLISH_STOP_WORDS and (len(w) > 1 or w.isdigit())]


def answer_in_context(answer: str, context: str | set[str], *, strict: bool = False) -> bool:
    """Whether every content word of `answer` is a word of `context` (see the module docstring);
    with `strict`, by the strict rule (a set `context` must then hold `strict_tokens`).

    An answer with no content word (only stop words) counts as covered.

    Example:
        >>> answer_in_context("7 May 2023", "On 7 may, 2023 she went")
        True
        >>> answer_in_context("Psychology, counseling", "psychology")
        False
        >>> answer_in_context("Café", "cafe"), answer_in_context("Café", "cafe", strict=True)
        (True, False)
    """
    if strict:
        words = context if isinstance(context, set) else set(strict_tokens(context))
        return all(w in words for w in strict_content_words(answer))
    words = context if isinstance(context, set) else set(tokens(context))
    return all(w in words for w in content_words(answer))


def run_eval(
    conversations: Sequence[EvalConversation],
    *,
    strategies: Sequence[str | Strategy] = DEFAULT_STRATEGIES,
    source: str = "",
    strict: bool = False,
    on_progress: Callable[[str, str], None] | None = None,
    on_answer: Callable[[str, EvalQuestion, list[BaseMessage]], None] | None = None,
) -> EvalReport:
    """Score every question of every conversation under each strategy.

    `strategies` are names of `STRATEGIES` or `Strategy` objects, used as they are (a
    store-backed recall on a server, say); their names must differ. A responder that has a
    ``close`` method is closed once its conversation's questions are asked.

    `strict` scores by the strict rule (see the module docstring). Each question is tallied
    overall and in its conversation's split (`split_of`), per category.

    `on_answer` sees each (strategy name, question, memory) once it is scored: the keyed path
    (`judge.AnswerGrader`) asks a real model there, outside the timed search.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langchain_rolling_memory_lab.locomo import EvalTurn
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
    splits: dict[str, dict[str, dict[int, Tally]]] = {s.name: {n: {} for n in SPLITS} for s in chosen}
    split_words = strict_tokens if strict else tokens
    for conversation in conversations:
        split = split_of(conversation.name)
        for strategy in chosen:
            if on_progress is not None:
                on_progress(conversation.name, strategy.name)
            respond = strategy.prepare(conversation)
            try:
                for question in conversation.questions:
                    start = time.perf_counter()
                    memory = respond(question.question)
                    seconds = time.perf_counter() - start
                    words = set(split_words("\n".join(m.text for m in memory)))
                    covered = answer_in_context(question.answer, words, strict=strict)
                    used = count_tokens(memory) if memory else 0
                    overall[strategy.name].add(covered, used, seconds)
                    for tallies in (by_category[strategy.name], splits[strategy.name][split]):
                        tallies.setdefault(question.category, Tally()).add(covered, used, seconds)
                    if on_answer is not None:
                        on_answer(strategy.name, question, memory)
            finally:
                # A store-backed responder owns a store (a server's, perhaps): not left to the collector.
                close = getattr(respond, "close", None)
                if callable(close):
                    close()
    rule = "strict" if strict else "project"
    return EvalReport(source, len(conversations), chosen, overall, by_category, splits, rule)


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
