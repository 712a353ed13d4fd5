"""The scripted two-session demo: a new employee's onboarding, run through a real chain.

Owns the script, the chain (an ordinary prompt | model chain wrapped by
`with_rolling_memory`: a rolling-summary history plus the client's facts) and the per-turn
figures. It prints nothing:
`rolling-memory demo` and the notebooks render the `DemoTurn` records it yields.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig, RunnableLambda

from langchain_rolling_memory.adapters.history_runnable import RollingMemoryRunnable
from langchain_rolling_memory.adapters.runnable import with_rolling_memory
from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.engine.fact_extractor import FactExtractor
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.summarizers.base import SummarizerLike
from langchain_rolling_memory.summarizers.estimated import EstimatedCostSummarizer
from langchain_rolling_memory_lab.offline import OfflineChatModel, keyless_extractor, keyless_summarizer

SYSTEM_PROMPT = "You are the onboarding assistant of Acme Corp. Answer in two sentences at most."

SCRIPT: tuple[tuple[str, ...], ...] = (
    (
        "Hi! I'm Sam Rivera, I start today as a data analyst in the Payments team. "
        "Where do I pick up my badge?",
        "Thanks. How do I get access to the analytics warehouse?",
        "When will my laptop be ready?",
        "Good to know. I have a severe peanut allergy. Should I tell the canteen?",
        "What is the expense policy for my home office setup?",
        "How many days of holiday do I get this year?",
        "Who do I ask about the on-call rotation?",
        "Is there a mandatory security training?",
        "Where can I park my bike?",
        "Last thing: my manager just told me I'm moving to the Logistics team next week instead of Payments.",
    ),
    (
        "Hi again! I'm ordering lunch for my new team's welcome event. "
        "Which team am I in now, and what should the caterer know?",
        "Great. Who should I add to the lunch invitation?",
    ),
)
"""Session 1 then session 2, user messages only. The team change is session 1's last
message: kept verbatim, never summarized, so only the facts carry it into session 2."""

HANDBOOK: dict[str, str] = {
    "badge": "Badges are handed out at the 1st-floor reception from 9:00; bring an ID. "
    "Your badge also opens the bike garage and the lockers.",
    "warehouse": "Request the 'analyst' role in the Access portal and your manager approves it, "
    "usually within a day. Read-only access to the sandbox comes with your account.",
    "laptop": "IT prepares laptops within two working days of your start date. "
    "Until then you can borrow one from the IT desk on the 2nd floor.",
    "canteen": "Yes: tell the chef, the canteen labels the 14 allergens and cooks on request. "
    "Add it to your profile in the Catering app too.",
    "expense": "Home office equipment is reimbursed up to 500 EUR per year. "
    "Submit the receipts in the Expenses app within 30 days.",
    "holiday": "Full-time employees get 25 days a year, prorated in the first year. "
    "Book them in the HR tool at least two weeks ahead.",
    "on-call": "Your team lead owns the rota. New joiners shadow for a month before going on call.",
    "security": "Yes: the security training takes 45 minutes and is due in your first two weeks. "
    "You will find it in the Learning portal.",
    "park": "Bikes go in the basement garage, open 7:00 to 21:00. There are showers next to it.",
    "moving": "Noted: your access follows the team change once your manager files it in the HR tool. "
    "Your new team lead will plan your first week.",
    "lunch": "Order through the Catering app at least 48 hours ahead. List every dietary need "
    "and allergy so the caterer can label the dishes.",
    "invitation": "Invite your team's mailing list; the Team page lists who is in it.",
}


@dataclass
class DemoTurn:
    """One turn of the demo, with what was sent and what memory did."""

    session: int
    turn: int
    session_id: str
    question: str
    answer: str
    rolling_tokens: int
    """Tokens of the request actually sent (system + facts + summary + recent turns)."""
    full_tokens: int
    """Tokens the same request would have with every earlier message of this client."""
    summary: str
    summary_changed: bool
    facts_in_prompt: list[str]
    facts_learned: list[tuple[str | None, str, str | None]] = field(default_factory=list)
    """``(key, text, replaced text or None)`` stored after this turn."""
    compactions: int = 0
    """Summaries installed in this session so far."""
    summarizer_tokens: int = 0
    """Tokens the summarizer was billed in this session so far (0 for the keyless one)."""
    estimated_summarizer_tokens: int = 0
    """For the keyless summarizer: what an LLM summarizer would have been billed so far
    (whole run); see `summarizers.estimated.EstimatedCostSummarizer`."""
    prompt: list[BaseMessage] = field(default_factory=list)


def offline_model() -> OfflineChatModel:
    """The demo's keyless chat model: handbook answers plus the facts it finds in its prompt."""
    return OfflineChatModel(handbook=dict(HANDBOOK))


def _chain(
    store: RollingStore,
    model: BaseChatModel,
    summarizer: SummarizerLike,
    prompts: list[list[BaseMessage]],
    **limits: Any,
) -> RollingMemoryRunnable[dict[str, Any], BaseMessage]:
    """An ordinary prompt | model chain, wrapped by `with_rolling_memory`; it records each prompt."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM_PROMPT), MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def record(value: PromptValue) -> PromptValue:
        prompts.append(value.to_messages())
        return value

    chain = prompt | RunnableLambda(record) | model
    return with_rolling_memory(
        chain,
        store=store,
        summarizer=summarizer,
        input_messages_key="question",
        history_messages_key="history",
        timeout=None,
        **limits,
    )


def run_demo(
    store: RollingStore,
    *,
    model: BaseChatModel | None = None,
    summarizer: SummarizerLike | None = None,
    extractor: FactExtractor | None = None,
    client_id: str | None = None,
    max_turns: int = 4,
    keep_last: int = 2,
    max_words: int = 60,
) -> Iterator[DemoTurn]:
    """Run the script turn by turn, yielding what each turn sent and learned.

    Args:
        store: where the sessions and facts go (the CLI uses the embedded SQLite file).
        model: the chat model (default: `offline_model()`, no key).
        summarizer: the summarizer (default: the keyless one).
        extractor: writes the facts each user message states (default: the real
            `FactExtractor` on the keyless `KeylessFactModel`); run after every turn, so
            the last message of a session, which no summary folds, is covered too.
        client_id: the employee (default: a fresh ``demo-<hex>`` id, so runs never mix).
        max_turns, keep_last: the rolling summary's count policy (small, to show it fold).
        max_words: the summary's word cap.

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> turns = list(run_demo(open_store("memory://")))
        >>> "Logistics" in " ".join(turns[-2].facts_in_prompt)
        True
    """
    client = client_id or f"demo-{uuid.uuid4().hex[:8]}"
    prompts: list[list[BaseMessage]] = []
    estimate = EstimatedCostSummarizer(
        keyless_summarizer(max_words=max_words), max_words=max_words, record_only=True
    )
    chat = _chain(
        store,
        model or offline_model(),
        summarizer if summarizer is not None else estimate,
        prompts,
        max_turns=max_turns,
        keep_last=keep_last,
        max_words=max_words,
    )
    facts_from = extractor or keyless_extractor()
    earlier: list[BaseMessage] = []  # every message of this client so far: the full-history baseline
    for number, questions in enumerate(SCRIPT, start=1):
        session_id = f"{client}-s{number}"
        version = 0
        for turn, question in enumerate(questions, start=1):
            config: RunnableConfig = {"configurable": {"session_id": session_id, "client_id": client}}
            reply = chat.invoke({"question": question}, config=config)
            sent = prompts[-1]
            full = [SystemMessage(SYSTEM_PROMPT), *earlier, HumanMessage(question)]
            earlier.extend([HumanMessage(question), reply])
            record = store.summary(session_id)
            usage = SummaryUsage.from_record(record)
            learned = _learn(store, client, [HumanMessage(question)], facts_from)
            yield DemoTurn(
                session=number,
                turn=turn,
                session_id=session_id,
                question=question,
                answer=reply.text,
                rolling_tokens=count_tokens(sent),
                full_tokens=count_tokens(full),
                summary=record.text if record else "",
                summary_changed=(record.version if record else 0) != version,
                facts_in_prompt=OfflineChatModel.facts_in(sent),
                facts_learned=learned,
                compactions=usage.compactions,
                summarizer_tokens=usage.summarizer_tokens,
                estimated_summarizer_tokens=estimate.estimated_tokens,
                prompt=sent,
            )
            version = record.version if record else 0


def _learn(
    store: RollingStore, client: str, messages: list[BaseMessage], extractor: FactExtractor
) -> list[tuple[str | None, str, str | None]]:
    """Run the extractor; report each new fact and each changed one with its old text."""
    before = {f.id: f.text for f in store.facts(client)}
    extractor.extract(store, client, messages)
    return [(f.key, f.text, before.get(f.id)) for f in store.facts(client) if before.get(f.id) != f.text]
