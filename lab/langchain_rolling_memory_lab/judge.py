"""The keyed path of the LoCoMo evaluation: a real model answers each question from a strategy's
memory, a judge model grades the answer against the gold one (the J score), and the token bill.

Owns the answer and judge prompts, the provider clients built for them (key and ``base_url``
from the environment, like `summarizers.providers`), the CORRECT/WRONG reading and the J and
token tallies per strategy and category. It does not choose memory (`eval_strategies` does)
and does not read files.

The judge follows the LLM-as-a-judge protocol of the mem0 paper: it sees the question, the
gold answer and the generated answer, is told to be generous on wording and date formats, and
answers CORRECT or WRONG; J is the share judged CORRECT. A reply that names neither is WRONG
and is counted apart (``unreadable``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_rolling_memory.errors import ConfigurationError, MissingCredentialsError, require
from langchain_rolling_memory.summarizers.failures import describe_error, is_permanent_error, status_of
from langchain_rolling_memory_lab.locomo import EvalQuestion

BASE_URL_ENV = "ROLLING_MEMORY_BASE_URL"

# provider -> (module, extra, key variables, default model)
PROVIDERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "openai": ("langchain_openai", "openai", ("OPENAI_API_KEY",), "gpt-4o-mini"),
    "gemini": ("langchain_google_genai", "google", ("GOOGLE_API_KEY", "GEMINI_API_KEY"), "gemini-2.5-flash"),
}

ANSWER_PROMPT = (
    "You answer questions about a long conversation between two people. Use only the memory "
    "given with the question: excerpts of the conversation, with the date of each session. "
    "Answer with a short phrase, a few words at most. For a question about when something "
    "happened, work out the date from the session dates (for example 'last week' in a session "
    "of 20 June 2023 is mid-June 2023). If the memory does not hold the answer, say so briefly."
)

JUDGE_PROMPT = (
    "You grade answers to questions about a conversation. You are given a question, the gold "
    "answer and a generated answer. Label the generated answer CORRECT if it refers to the same "
    "thing as the gold answer, even when it is worded differently, longer, or gives a date in "
    "another format or as a period that contains the gold date; label it WRONG if it misses or "
    "contradicts the gold answer, or says the answer is unknown. Reply with one JSON object and "
    'nothing else: {"label": "CORRECT"} or {"label": "WRONG"}.'
)

_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")
_AUTH_STATUS = frozenset({401, 403})


# ------------------------------------------------------------------------------ the clients


def provider_chat(provider: str, model: str | None = None, *, flag: str = "--answer-model") -> BaseChatModel:
    """A chat model of `provider` for the eval, at temperature 0; one line if its key is missing.

    The key comes from the provider's usual variable (``OPENAI_API_KEY``; ``GOOGLE_API_KEY`` or
    ``GEMINI_API_KEY``), the endpoint from ``$ROLLING_MEMORY_BASE_URL`` when it is set (a proxy,
    or a local server in the tests). An authentication error is never retried by the client.

    Example:
        >>> provider_chat("claude")
        Traceback (most recent call last):
        ...
        langchain_rolling_memory.errors.ConfigurationError: --answer-model must be one of ['gemini', 'openai'], got 'claude'; pick one of them
    """
    if provider not in PROVIDERS:
        msg = f"{flag} must be one of {sorted(PROVIDERS)}, got {provider!r}; pick one of them"
        raise ConfigurationError(msg)
    module, extra, keys, default = PROVIDERS[provider]
    key = next((os.environ[k] for k in keys if os.environ.get(k)), None)
    if key is None:
        msg = (
            f"{flag} {provider} needs {' or '.join(keys)} in the environment; set it, "
            f"or leave out {flag} to score answer-in-context only, with no key"
        )
        raise MissingCredentialsError(msg)
    require(module, extra, feature=f"eval {flag} {provider}")
    options: dict[str, Any] = {"model": model or default, "api_key": key, "temperature": 0.0, "timeout": 60.0}
    if os.environ.get(BASE_URL_ENV):
        options["base_url"] = os.environ[BASE_URL_ENV]
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        # The OpenAI client retries rate limits and 5xx itself, never a 401.
        return ChatOpenAI(max_retries=2, **options)
    from langchain_google_genai import ChatGoogleGenerativeAI

    # The Google client counts attempts, not retries; it does not repeat a 401 either.
    return ChatGoogleGenerativeAI(max_retries=3, **options)


# ------------------------------------------------------------------------------ the prompts


def _memory_text(memory: Sequence[BaseMessage]) -> str:
    # One text block, whatever the strategy: a provider drops or reorders system messages that
    # are not first (Gemini), and the mem0 protocol hands memories to the model as text.
    lines = []
    for message in memory:
        speaker = message.name or ("" if isinstance(message, SystemMessage) else message.type)
        lines.append(f"{speaker}: {message.text}" if speaker else message.text)
    return "\n".join(lines) if lines else "(no memory)"


def answer_messages(memory: Sequence[BaseMessage], question: str) -> list[BaseMessage]:
    """The answer request: the instructions, then the memory and the question in one message."""
    return [
        SystemMessage(ANSWER_PROMPT),
        HumanMessage(f"Memory:\n{_memory_text(memory)}\n\nQuestion: {question}\nAnswer:"),
    ]


def judge_messages(question: str, gold: str, answer: str) -> list[BaseMessage]:
    """The judge request: the instructions, then the question, the gold and the generated answer."""
    return [
        SystemMessage(JUDGE_PROMPT),
        HumanMessage(f"Question: {question}\nGold answer: {gold}\nGenerated answer: {answer}"),
    ]


def read_label(reply: str) -> bool | None:
    """True for CORRECT, False for WRONG, None when the reply names neither.

    Example:
        >>> read_label('{"label": "CORRECT"}'), read_label("WRONG."), read_label("maybe")
        (True, False, None)
    """
    try:
        data = json.loads(reply.strip().removeprefix("```json").strip("`\n "))
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("label"), str):
        label = str(data["label"]).strip().upper()
        if label in ("CORRECT", "WRONG"):
            return label == "CORRECT"
    found = _LABEL.findall(reply.upper())
    return found[-1] == "CORRECT" if found else None


# ------------------------------------------------------------------------------ the tallies


@dataclass
class Bill:
    """Tokens a role (answers or judge) cost, from the replies' ``usage_metadata``."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, reply: AIMessage) -> None:
        usage = reply.usage_metadata
        self.calls += 1
        if usage is not None:
            self.input_tokens += usage["input_tokens"]
            self.output_tokens += usage["output_tokens"]

    def to_json(self) -> dict[str, int]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass
class _Judged:
    correct: int = 0
    total: int = 0

    def share(self) -> float:
        return round(self.correct / self.total, 4) if self.total else 0.0


@dataclass
class _StrategyResult:
    answers: Bill = field(default_factory=Bill)
    judge: Bill = field(default_factory=Bill)
    overall: _Judged = field(default_factory=_Judged)
    by_category: dict[int, _Judged] = field(default_factory=dict)
    unreadable: int = 0


@dataclass
class AnswerGrader:
    """`run_eval`'s ``on_answer`` hook: answers each question from its memory, then grades it.

    With no `judge`, the answers are only collected and billed. `samples` keeps the first few
    exchanges per strategy for a person to read.
    """

    answer_model: BaseChatModel
    judge: BaseChatModel | None = None
    answer_name: str = ""
    judge_name: str = ""
    results: dict[str, _StrategyResult] = field(default_factory=dict)
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    keep_samples: int = 3

    def __call__(self, strategy: str, question: EvalQuestion, memory: Sequence[BaseMessage]) -> None:
        result = self.results.setdefault(strategy, _StrategyResult())
        reply = self._ask(self.answer_model, answer_messages(memory, question.question), self.answer_name)
        result.answers.add(reply)
        sample: dict[str, Any] = {
            "question": question.question,
            "gold": question.answer,
            "answer": reply.text,
        }
        if self.judge is not None:
            verdict = self._ask(
                self.judge, judge_messages(question.question, question.answer, reply.text), self.judge_name
            )
            result.judge.add(verdict)
            label = read_label(verdict.text)
            result.unreadable += label is None
            correct = bool(label)
            for tally in (result.overall, result.by_category.setdefault(question.category, _Judged())):
                tally.correct += correct
                tally.total += 1
            sample["correct"] = correct
        kept = self.samples.setdefault(strategy, [])
        if len(kept) < self.keep_samples:
            kept.append(sample)

    @staticmethod
    def _ask(model: BaseChatModel, messages: list[BaseMessage], name: str) -> AIMessage:
        try:
            reply = model.invoke(messages)
        except Exception as exc:
            status = status_of(exc) if is_permanent_error(exc) else None
            if status not in _AUTH_STATUS:
                raise
            # A refused key fails every later call the same way: stop at the first one.
            msg = (
                f"{name or 'the model'} refused the API key ({describe_error(exc, hint=False)}); "
                "check the key in the environment and that it may use this model"
            )
            raise MissingCredentialsError(msg) from None
        assert isinstance(reply, AIMessage)  # a chat model's invoke returns its AIMessage
        return reply

    def bill(self) -> dict[str, Bill]:
        """The whole run's tokens, per role."""
        total = {"answers": Bill(), "judge": Bill()}
        for result in self.results.values():
            for role, part in (("answers", result.answers), ("judge", result.judge)):
                total[role].calls += part.calls
                total[role].input_tokens += part.input_tokens
                total[role].output_tokens += part.output_tokens
        return total

    def to_json(self, categories: dict[int, str]) -> dict[str, Any]:
        return {
            "answer_model": self.answer_name,
            "judge_model": self.judge_name if self.judge is not None else None,
            "strategies": [
                {
                    "strategy": name,
                    "questions": result.answers.calls,
                    "j": result.overall.share() if self.judge is not None else None,
                    "categories": {
                        categories[c]: result.by_category[c].share() for c in sorted(result.by_category)
                    },
                    "unreadable": result.unreadable,
                    "answers": result.answers.to_json(),
                    "judge": result.judge.to_json(),
                    "samples": self.samples.get(name, []),
                }
                for name, result in self.results.items()
            ],
            "bill": {role: bill.to_json() for role, bill in self.bill().items()},
        }


def format_judged(grader: AnswerGrader, labels: dict[str, str], categories: dict[int, str]) -> str:
    """J per strategy and category with the tokens of answers and judge, as a Markdown table."""
    judged = grader.judge is not None
    present = sorted({c for r in grader.results.values() for c in r.by_category})
    head = ["strategy", "J", *[f"{categories[c]} ({c})" for c in present]] if judged else ["strategy"]
    head += ["answers", "answer tokens in / out", "judge tokens in / out"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, result in grader.results.items():
        cells = [labels.get(name, name)]
        if judged:
            cells.append(f"{100 * result.overall.share():.1f}%")
            for c in present:
                tally = result.by_category.get(c)
                cells.append(f"{100 * tally.share():.1f}%" if tally else "-")
        cells += [
            str(result.answers.calls),
            f"{result.answers.input_tokens:,} / {result.answers.output_tokens:,}",
            f"{result.judge.input_tokens:,} / {result.judge.output_tokens:,}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    bill = grader.bill()
    lines.append(
        f"\nanswers by {grader.answer_name}: {bill['answers'].input_tokens:,} input + "
        f"{bill['answers'].output_tokens:,} output tokens in {bill['answers'].calls} calls"
    )
    if judged:
        unreadable = sum(r.unreadable for r in grader.results.values())
        lines.append(
            f"judge {grader.judge_name}: {bill['judge'].input_tokens:,} input + "
            f"{bill['judge'].output_tokens:,} output tokens in {bill['judge'].calls} calls"
            + (f"; {unreadable} replies named neither label (counted WRONG)" if unreadable else "")
        )
    return "\n".join(lines)
