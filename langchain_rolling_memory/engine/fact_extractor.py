"""The fact extractor: asks a chat model which client facts to add, update or delete.

Owns the extraction prompt, the request for `FactChanges` (through `with_structured_output`
where the model has it, JSON in the text otherwise), the validation of the reply (a malformed
reply changes nothing) and the application of the changes through the store's fact API. It runs
on demand or after each compaction (as the engine's `on_compaction` listener); it does not
decide when compactions happen and holds no storage of its own.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.json import parse_json_markdown
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_rolling_memory.core.fact_rules import ReplyPlan, check_reply
from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.core.prompts import default_prompt
from langchain_rolling_memory.core.quoting import quote_text
from langchain_rolling_memory.core.records import CompactionResult, Fact, SessionMark
from langchain_rolling_memory.core.retention import check_ttl
from langchain_rolling_memory.core.settings import CompactionCallback, CompactionListener
from langchain_rolling_memory.core.texts import ENGLISH, check_language, memory_texts
from langchain_rolling_memory.errors import (
    ConfigurationError,
    FactError,
    InvalidIdError,
    OwnershipError,
    StaleWriteError,
)
from langchain_rolling_memory.runtime.tracing import EXTRACT_FACTS, traced
from langchain_rolling_memory.stores.api import RollingStore

logger = logging.getLogger("langchain_rolling_memory")

DEFAULT_EXTRACTION_PROMPT = ENGLISH.extraction_system
"""The extractor's instructions in English (each language's are its catalogue's
`texts.MemoryTexts.extraction_system`)."""


class _NewFact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    key: str | None = None


class _ChangedFact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str


class FactChanges(BaseModel):
    """The extractor's reply, as validated: facts to add, update (by id) and delete (by id)."""

    model_config = ConfigDict(extra="forbid")
    add: list[_NewFact] = Field(default_factory=list)
    update: list[_ChangedFact] = Field(default_factory=list)
    delete: list[str] = Field(default_factory=list)


@dataclass
class ExtractionResult:
    """What one extraction changed; `error` says why nothing changed when the reply was refused."""

    added: list[Fact] = field(default_factory=list)
    updated: list[Fact] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


def _plan(changes: FactChanges, aliases: dict[str, Fact], store: RollingStore) -> ReplyPlan:
    """Check every change before any is applied: unknown ids, bad keys, empty or long texts."""
    return check_reply(
        aliases,
        deletes=changes.delete,
        updates=[(u.id, u.text) for u in changes.update],
        adds=[(a.text, a.key) for a in changes.add],
        max_chars=store.max_fact_chars,
        max_facts=store.max_facts,
    )


class FactExtractor:
    """Asks a chat model which facts to add, update or delete, and applies a valid answer.

    Args:
        model: any LangChain chat model; asked for `FactChanges` through
            `with_structured_output` when it supports it, for a JSON object in its text
            otherwise (no tool calling or structured-output support needed).
        store: the store to read and write facts in; needed for `on_compaction` (use `bind`),
            optional for `extract`, which also takes it as an argument.
        prompt: the system instructions (default: those of the language,
            `texts.MemoryTexts.extraction_system`).
        language: the language of the request (instructions, headers, speaker labels:
            ``"en"``, ``"fr"``); None (the default): that of the memory it is given to
            (`with_language`), English alone. Given explicitly, it is kept.
        fact_ttl: seconds the facts it adds or updates are kept (their retention, renewed at
            each update); None: the store's `fact_ttl`.

    A reply that is not valid JSON of the expected shape, names an unknown fact id, or holds
    an empty or too long fact changes nothing: the error is logged and returned.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_rolling_memory import open_store
        >>> reply = '{"add": [{"text": "Works in the Logistics team", "key": "team"}]}'
        >>> extractor = FactExtractor(GenericFakeChatModel(messages=iter([AIMessage(reply)])))
        >>> store = open_store("memory://")
        >>> result = extractor.extract(store, "client-1", [HumanMessage("I joined Logistics")])
        >>> [(f.key, f.text) for f in store.facts("client-1")]
        [('team', 'Works in the Logistics team')]
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        store: RollingStore | None = None,
        prompt: str | None = None,
        fact_ttl: float | None = None,
        language: str | None = None,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            msg = f"FactExtractor needs a LangChain chat model, got {type(model).__name__}"
            raise ConfigurationError(msg)
        self.model = model
        self.fact_ttl = (
            None if fact_ttl is None else check_ttl(fact_ttl, name="fact_ttl", error=ConfigurationError)
        )
        # Every call is named and tagged as the memory's (see `tracing`).
        self._call: Runnable[Any, Any] = traced(model, EXTRACT_FACTS)
        self.store = store
        self.language = check_language(language) if language is not None else "en"
        self.explicit_language = language is not None
        self.explicit_prompt = prompt or None
        self.prompt = prompt or memory_texts(self.language).extraction_system
        self._structured: Runnable[Any, Any] | None
        try:
            self._structured = traced(
                model.with_structured_output(FactChanges, include_raw=True), EXTRACT_FACTS
            )
        except NotImplementedError:
            self._structured = None  # the prompt asks for JSON, read from the text

    def bind(self, store: RollingStore) -> FactExtractor:
        """This extractor writing to `store` (itself if already bound to it)."""
        if self.store is store:
            return self
        if self.store is not None:
            msg = "this FactExtractor is bound to another store; build one per store"
            raise ConfigurationError(msg)
        bound = copy.copy(self)
        bound.store = store
        return bound

    def with_language(self, language: str) -> FactExtractor:
        """This extractor in a memory of `language`: itself if it was given a language (or
        already asks in `language`), else a copy asking in `language` (its instructions too,
        unless a prompt was given), sharing the model (see `summarizers.base.in_memory_language`).
        """
        check_language(language)
        if self.explicit_language or language == self.language:
            return self
        localized = copy.copy(self)
        localized.language = language
        localized.prompt = self.explicit_prompt or memory_texts(language).extraction_system
        return localized

    # ------------------------------------------------------------------ shared steps

    @staticmethod
    def _aliases(existing: Sequence[Fact]) -> dict[str, Fact]:
        # Short ids cost fewer tokens than uuids and a model copies them reliably.
        return {f"f{i}": fact for i, fact in enumerate(existing, start=1)}

    def request(self, existing: Sequence[Fact], messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The chat messages sent to the model, in the extractor's language."""
        texts = memory_texts(self.language)
        known = "\n".join(
            f"{alias} {'[' + quote_text(f.key) + '] ' if f.key else ''}{quote_text(f.text)}"
            for alias, f in self._aliases(existing).items()
        )
        transcript = default_prompt(self.language).transcript(messages)
        body = (
            f"{texts.extraction_known}\n"
            f"{known or texts.extraction_no_facts}\n\n"
            f"{texts.extraction_messages}\n<messages>\n{transcript}\n</messages>"
        )
        return [SystemMessage(self.prompt), HumanMessage(body)]

    def parse(self, reply: BaseMessage | str | dict[str, Any]) -> FactChanges:
        """The reply as `FactChanges`; raises `ValueError` if it is not valid.

        `reply` is the model's message or text (JSON, bare or in a code fence, read with
        `parse_json_markdown`), or what `with_structured_output(..., include_raw=True)` returns.
        """
        if isinstance(reply, dict):
            parsed = reply.get("parsed")
            if isinstance(parsed, FactChanges):
                return parsed
            reply = reply.get("raw", "")  # the provider's parser refused it: read the text ourselves
        text = reply.text if isinstance(reply, BaseMessage) else str(reply)
        try:
            # Strict JSON: a reply cut short changes nothing (no partial parsing).
            return FactChanges.model_validate(parse_json_markdown(text, parser=json.loads))
        except (json.JSONDecodeError, ValidationError) as exc:
            msg = f"the extractor reply is not a valid fact change object: {exc}"
            raise FactError(msg) from None

    def _ask(self, request: list[BaseMessage]) -> BaseMessage | dict[str, Any]:
        if self._structured is not None:
            return cast("dict[str, Any]", self._structured.invoke(request))
        return cast("BaseMessage", self._call.invoke(request))

    async def _aask(self, request: list[BaseMessage]) -> BaseMessage | dict[str, Any]:
        if self._structured is not None:
            return cast("dict[str, Any]", await self._structured.ainvoke(request))
        return cast("BaseMessage", await self._call.ainvoke(request))

    def _prepare(
        self, store: RollingStore, existing: list[Fact], reply: BaseMessage | dict[str, Any]
    ) -> tuple[ReplyPlan | None, str | None]:
        try:
            return _plan(self.parse(reply), self._aliases(existing), store), None
        except (ValueError, InvalidIdError) as exc:
            logger.warning("rolling memory: fact extraction refused, nothing changed: %s", exc)
            return None, str(exc)

    @staticmethod
    def _refused(result: ExtractionResult, exc: FactError | StaleWriteError) -> ExtractionResult:
        logger.warning("rolling memory: fact extraction stopped part way: %s", exc)
        result.error = str(exc)
        return result

    # ------------------------------------------------------------------ sync

    def extract(
        self,
        store: RollingStore | None,
        client_id: str,
        messages: Sequence[BaseMessage],
        *,
        planned_from: SessionMark | None = None,
    ) -> ExtractionResult:
        """Ask the model about `messages` and apply its answer to `client_id`'s facts.

        `planned_from` (the session the messages were read from, at its erase generation) makes
        every added or updated fact conditional on that session being unerased: an erase that
        lands during the model call stops the extraction, nothing of it written."""
        target = self._store(store)
        validate_id(client_id, kind="client_id")
        if not messages:
            return ExtractionResult()
        if planned_from is not None and not _still(target, client_id, planned_from):
            return self._refused(ExtractionResult(), _stale(planned_from))
        existing = target.facts(client_id)
        plan, error = self._prepare(target, existing, self._ask(self.request(existing, messages)))
        result = ExtractionResult(error=error)
        if plan is None:
            return result
        try:
            # A delete carries no mark in the store: the session is checked again just before.
            if plan.deletes and planned_from is not None and not _still(target, client_id, planned_from):
                raise _stale(planned_from)
            for fact_id in plan.deletes:
                if target.delete_fact(client_id, fact_id):
                    result.deleted.append(fact_id)
            for fact_id, text in plan.updates:
                updated = target.update_fact(
                    client_id, fact_id, text, planned_from=planned_from, ttl=self.fact_ttl
                )
                if updated is not None:
                    result.updated.append(updated)
            for text, key in plan.adds:
                added = target.add_fact(
                    client_id, text, key=key, source="extractor", planned_from=planned_from, ttl=self.fact_ttl
                )
                if added is not None:
                    result.added.append(added)
        except (FactError, StaleWriteError) as exc:
            return self._refused(result, exc)
        return result

    def on_compaction(self, result: CompactionResult) -> None:
        """Engine listener: extract facts from the messages a compaction just folded."""
        store = self._store(None)
        info = store.session_info(result.session_id)
        if info is not None and info.client_id is not None:
            self.extract(store, info.client_id, result.messages, planned_from=result.mark)

    # ------------------------------------------------------------------ async

    async def aextract(
        self,
        store: RollingStore | None,
        client_id: str,
        messages: Sequence[BaseMessage],
        *,
        planned_from: SessionMark | None = None,
    ) -> ExtractionResult:
        """Async twin of `extract`."""
        target = self._store(store)
        validate_id(client_id, kind="client_id")
        if not messages:
            return ExtractionResult()
        if planned_from is not None and not await _astill(target, client_id, planned_from):
            return self._refused(ExtractionResult(), _stale(planned_from))
        existing = await target.afacts(client_id)
        reply = await self._aask(self.request(existing, messages))
        plan, error = self._prepare(target, existing, reply)
        result = ExtractionResult(error=error)
        if plan is None:
            return result
        try:
            if (
                plan.deletes
                and planned_from is not None
                and not await _astill(target, client_id, planned_from)
            ):
                raise _stale(planned_from)
            for fact_id in plan.deletes:
                if await target.adelete_fact(client_id, fact_id):
                    result.deleted.append(fact_id)
            for fact_id, text in plan.updates:
                updated = await target.aupdate_fact(
                    client_id, fact_id, text, planned_from=planned_from, ttl=self.fact_ttl
                )
                if updated is not None:
                    result.updated.append(updated)
            for text, key in plan.adds:
                added = await target.aadd_fact(
                    client_id, text, key=key, source="extractor", planned_from=planned_from, ttl=self.fact_ttl
                )
                if added is not None:
                    result.added.append(added)
        except (FactError, StaleWriteError) as exc:
            return self._refused(result, exc)
        return result

    async def aon_compaction(self, result: CompactionResult) -> None:
        store = self._store(None)
        info = await store.asession_info(result.session_id)
        if info is not None and info.client_id is not None:
            await self.aextract(store, info.client_id, result.messages, planned_from=result.mark)

    def _store(self, store: RollingStore | None) -> RollingStore:
        target = store if store is not None else self.store
        if target is None:
            msg = "the FactExtractor has no store: pass store= or use extractor.bind(store)"
            raise ConfigurationError(msg)
        return target

    def __repr__(self) -> str:
        return f"FactExtractor({type(self.model).__name__})"


def extract_facts(
    model: BaseChatModel, store: RollingStore, client_id: str, messages: Sequence[BaseMessage]
) -> ExtractionResult:
    """On demand: ask `model` which of `client_id`'s facts `messages` add, change or remove."""
    return FactExtractor(model).extract(store, client_id, messages)


async def aextract_facts(
    model: BaseChatModel, store: RollingStore, client_id: str, messages: Sequence[BaseMessage]
) -> ExtractionResult:
    """Async twin of `extract_facts`."""
    return await FactExtractor(model).aextract(store, client_id, messages)


Listener = CompactionListener | CompactionCallback
"""What a compactor's ``on_compaction`` takes."""


def compaction_listener(
    extractor: FactExtractor | BaseChatModel | None,
    store: RollingStore,
    given: Listener | None,
    language: str = "en",
) -> Listener | None:
    """What an adapter's ``extractor=`` becomes: the compactor's `on_compaction` listener.

    A `FactExtractor` (or a chat model, to build one) is bound to `store`, in the memory's
    `language` unless it was given its own (`FactExtractor.with_language`); without one the
    caller's own ``on_compaction`` (`given`, possibly None) is kept.

    Raises:
        ConfigurationError: both an extractor and an ``on_compaction`` were given.
    """
    if extractor is None:
        return given
    if given is not None:
        msg = "pass either extractor= or on_compaction=, not both"
        raise ConfigurationError(msg)
    if not isinstance(extractor, FactExtractor):
        extractor = FactExtractor(extractor)
    return extractor.bind(store).with_language(language)


def _stale(mark: SessionMark) -> StaleWriteError:
    return StaleWriteError.for_session(mark.session_id, "fact extraction")


def _still(store: RollingStore, client_id: str, mark: SessionMark) -> bool:
    """Whether `mark`'s session is still `client_id`'s at the generation the messages were read
    at: checked before the model call (so another client's facts never enter the request) and
    before deletes; adds and updates are checked by the store in their write."""
    try:
        return store.read_turn(mark.session_id, limit=0, client_id=client_id).generation == mark.generation
    except OwnershipError:
        return False


async def _astill(store: RollingStore, client_id: str, mark: SessionMark) -> bool:
    try:
        turn = await store.aread_turn(mark.session_id, limit=0, client_id=client_id)
    except OwnershipError:
        return False
    return turn.generation == mark.generation
