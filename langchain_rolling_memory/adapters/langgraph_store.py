"""The client's facts as items of LangGraph's `BaseStore`: `RollingFactsStore`.

Owns mapping one namespace per client (``(client_id, "facts")`` by default) onto the store's
fact API, so that ``runtime.store``, ``get_store()`` and langmem's memory tools read and write
the very facts the memory puts in the prompt: an item is a fact, its key the fact's key (its
id for a fact written without one), its value ``{"content": text}`` (plus ``"pinned": True``).
Every other namespace goes to the wrapped `inner` store untouched. The fact rules (limits,
duplicates, the app's filter), the facts' place in the prompt and their erasure stay the
store's; erasing a user across the graph is `erasure.forget_user`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, cast

from langchain_rolling_memory.errors import ConfigurationError, FactError, require

require("langgraph", "agents", feature="RollingFactsStore")

from langgraph.store.base import (  # noqa: E402 - after the extra check
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from langchain_rolling_memory.core.ids import validate_id  # noqa: E402
from langchain_rolling_memory.core.lexical_search import relevance  # noqa: E402
from langchain_rolling_memory.core.records import Fact  # noqa: E402
from langchain_rolling_memory.stores.api import RollingStore  # noqa: E402
from langchain_rolling_memory.stores.urls import rolling_store  # noqa: E402

CLIENT = "{client_id}"
"""The label of a namespace template that stands for the client."""

FACTS_NAMESPACE = (CLIENT, "facts")
"""Where a client's facts are, by default: ``("ana", "facts")`` for client ``ana``."""

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def _template(namespace: object) -> tuple[str, ...]:
    labels = tuple(namespace) if isinstance(namespace, (tuple, list)) else ()
    fixed = [label for label in labels if label != CLIENT]
    if (
        labels.count(CLIENT) != 1
        or not all(isinstance(label, str) and label and "." not in label for label in fixed)
        or labels[0] == "langgraph"
    ):
        msg = (
            f"namespace must be a tuple of labels with exactly one {CLIENT!r} (the others non-empty, "
            f"without '.', the first not 'langgraph'), got {namespace!r}; e.g. ('memories', {CLIENT!r})"
        )
        raise ConfigurationError(msg)
    return labels


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def fact_value(fact: Fact) -> dict[str, Any]:
    """The item value of a fact: ``{"content": text}``, plus ``"pinned": True`` when pinned."""
    return {"content": fact.text, "pinned": True} if fact.pinned else {"content": fact.text}


def _fact_of(value: object, namespace: tuple[str, ...]) -> tuple[str, bool]:
    """The text and pin of a value put into a facts namespace; `FactError` for another shape."""
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("content"), str)
        and isinstance(value.get("pinned", False), bool)
        and set(value) <= {"content", "pinned"}
    ):
        return value["content"], value.get("pinned", False)
    msg = (
        f"an item of {namespace!r} is a fact: its value is {{'content': str}} (and 'pinned': bool), "
        f"got {value!r:.100}; put other items in a namespace of their own (they go to inner=)"
    )
    raise FactError(msg)


def _find(facts: Sequence[Fact], key: str) -> Fact | None:
    """The fact an item key names: its key, else (a fact written without one) its id."""
    keyed = next((f for f in facts if f.key == key), None)
    return keyed or next((f for f in facts if f.key is None and f.id == key), None)


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    for key, condition in (wanted or {}).items():
        have = value.get(key)
        tests = condition.items() if isinstance(condition, Mapping) else [("$eq", condition)]
        for name, argument in tests:
            if name not in _COMPARE:
                msg = f"filter operators are {sorted(_COMPARE)}, got {name!r} on field {key!r}"
                raise ConfigurationError(msg)
            try:
                if not _COMPARE[name](have, argument):
                    return False
            except TypeError:  # an order between a str and None, say: no match
                return False
    return True


class RollingFactsStore(BaseStore):
    """A LangGraph `BaseStore` whose facts namespaces are the clients' facts in `store`.

    Compile the graph (or `create_agent`) with ``store=RollingFactsStore(store, inner=...)``:
    a node's ``get_store()``, a tool's ``runtime.store`` and langmem's memory tools then read
    the facts the memory extracted or was told to remember, and a fact they put there is in the
    next prompt (`RollingMemoryMiddleware`, `with_rolling_memory`), checked by the same fact
    rules. A search answers with the facts of one client only: a prefix that does not name
    the client (``()``, or ``("memories",)`` for ``("memories", "{client_id}")``) finds the
    inner store's items alone, and ``list_namespaces`` lists the inner store's.

    Args:
        store: the `RollingStore` whose facts these are.
        inner: where every other namespace lives (LangGraph's `InMemoryStore`,
            `PostgresStore`...); None: only facts namespaces are accepted.
        namespace: where a client's facts are, with one ``"{client_id}"`` label.

    An item's value is ``{"content": text}`` (``"pinned": True`` pins the fact; a pinned fact
    stays pinned). A text the client already has is not stored twice (it stays under its
    fact's key), a text the store's ``fact_filter`` refuses is not stored, and facts do not
    expire (``ttl=`` is refused on them).

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> facts = RollingFactsStore(store)
        >>> facts.put(("ana", "facts"), "diet", {"content": "Vegetarian"})
        >>> [f.text for f in store.facts("ana")], facts.get(("ana", "facts"), "diet").value
        (['Vegetarian'], {'content': 'Vegetarian'})
    """

    def __init__(
        self,
        store: RollingStore,
        *,
        inner: BaseStore | None = None,
        namespace: tuple[str, ...] = FACTS_NAMESPACE,
    ) -> None:
        super().__init__()
        self.store = rolling_store(store, owner="RollingFactsStore")
        if inner is not None and not isinstance(inner, BaseStore):
            msg = f"inner must be a LangGraph BaseStore (InMemoryStore, PostgresStore...), got {type(inner).__name__}"
            raise ConfigurationError(msg)
        self.inner = inner
        self.namespace = _template(namespace)
        self._at = self.namespace.index(CLIENT)
        # TTL and its defaults are the inner store's; facts refuse a ttl of their own.
        self.supports_ttl = bool(inner is not None and inner.supports_ttl)
        self.ttl_config = inner.ttl_config if inner is not None else None

    # ------------------------------------------------------------------ namespaces

    def facts_namespace(self, client_id: str) -> tuple[str, ...]:
        """The namespace of the client's facts."""
        validate_id(client_id, kind="client_id")
        return tuple(client_id if label == CLIENT else label for label in self.namespace)

    def _client(self, namespace: tuple[str, ...]) -> str | None:
        """The client whose facts `namespace` is, or None (another namespace)."""
        if len(namespace) != len(self.namespace):
            return None
        return self._client_of_prefix(namespace)

    def _client_of_prefix(self, prefix: tuple[str, ...]) -> str | None:
        """The client whose facts a search under `prefix` finds (the prefix names the client)."""
        if not self._at < len(prefix) <= len(self.namespace):
            return None
        if any(p != t for p, t in zip(prefix, self.namespace, strict=False) if t != CLIENT):
            return None
        return validate_id(prefix[self._at], kind="client_id")

    def _no_inner(self, op: Op) -> Result:
        if isinstance(op, (SearchOp, ListNamespacesOp)):
            return []
        where = op.namespace if isinstance(op, (GetOp, PutOp)) else op
        msg = (
            f"RollingFactsStore holds only facts namespaces like {self.namespace!r}, got {where!r}; "
            "pass inner=InMemoryStore() (or PostgresStore) to keep other items"
        )
        raise ConfigurationError(msg)

    # ------------------------------------------------------------------ items of the facts (pure)

    def _item(self, fact: Fact, client_id: str) -> Item:
        return Item(
            value=fact_value(fact),
            key=fact.key or fact.id,
            namespace=self.facts_namespace(client_id),
            created_at=_when(fact.created_at),
            updated_at=_when(fact.updated_at),
        )

    def _found(self, facts: Sequence[Fact], client_id: str, op: SearchOp) -> list[SearchItem]:
        """The client's facts a search finds, all of them: best first with a query (lexical
        relevance, as the store's search ranks), else the last updated first."""
        facts = [f for f in facts if _matches(fact_value(f), op.filter)]
        scores: dict[Any, float] = relevance({f.id: f.text for f in facts}, op.query) if op.query else {}
        order = sorted(facts, key=lambda f: (-scores.get(f.id, 0.0), -f.updated_at, f.id))
        namespace = self.facts_namespace(client_id)
        return [
            SearchItem(
                namespace,
                f.key or f.id,
                fact_value(f),
                _when(f.created_at),
                _when(f.updated_at),
                scores.get(f.id) if op.query else None,
            )
            for f in order
        ]

    def _get(self, facts: Sequence[Fact], client_id: str, op: GetOp) -> Item | None:
        fact = _find(facts, op.key)
        return None if fact is None else self._item(fact, client_id)

    def _split(self, op: SearchOp) -> tuple[str | None, SearchOp | None]:
        """Whose facts a search finds, and the search asked of the inner store (all the rows
        up to the page's end, since the page is cut from facts and inner items together)."""
        client = self._client_of_prefix(op.namespace_prefix)
        if self.inner is None:
            return client, None
        if client is None:
            return None, op
        return client, op._replace(limit=op.offset + op.limit, offset=0)

    @staticmethod
    def _page(facts: list[SearchItem], inner: Any, op: SearchOp) -> list[SearchItem]:
        return [*facts, *(inner or [])][op.offset : op.offset + op.limit]

    def _check_put(self, op: PutOp) -> tuple[str, bool] | None:
        if op.ttl is not None:
            msg = f"facts do not expire: ttl must be None on {op.namespace!r}, got ttl={op.ttl!r}"
            raise ConfigurationError(msg)
        return None if op.value is None else _fact_of(op.value, op.namespace)

    # ------------------------------------------------------------------ sync

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order: facts on the store, the rest in one batch of the inner store."""
        routed = _Routed.of(self, ops)
        for i, client, op in routed.ours:
            if isinstance(op, GetOp):
                routed.results[i] = self._get(self.store.facts(client), client, op)
            else:
                self._put(client, op)
        inner = self._inner_batch(routed.passed)
        return routed.finish(self, inner, {c: self.store.facts(c) for c in routed.searched_clients()})

    def _inner_batch(self, passed: list[tuple[int, Op]]) -> dict[int, Result]:
        if not passed:
            return {}
        if self.inner is None:
            return {i: self._no_inner(op) for i, op in passed}
        return dict(zip([i for i, _ in passed], self.inner.batch([op for _, op in passed]), strict=True))

    def _put(self, client: str, op: PutOp) -> None:
        checked = self._check_put(op)
        fact = _find(self.store.facts(client), op.key)
        if checked is None:
            if fact is not None:
                self.store.delete_fact(client, fact.id)
            return
        text, pinned = checked
        # A fact written without a key is addressed by its id: its text is replaced.
        if (
            fact is not None
            and fact.key is None
            and self.store.update_fact(client, fact.id, text) is not None
        ):
            if pinned:
                self.store.add_fact(client, text, pinned=True)  # pins the fact of that text
            return
        self.store.add_fact(client, text, key=op.key, pinned=pinned)

    # ------------------------------------------------------------------ async

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of `batch` (the store's async methods, the inner store's `abatch`)."""
        routed = _Routed.of(self, ops)
        for i, client, op in routed.ours:
            if isinstance(op, GetOp):
                routed.results[i] = self._get(await self.store.afacts(client), client, op)
            else:
                await self._aput(client, op)
        inner = await self._ainner_batch(routed.passed)
        return routed.finish(self, inner, {c: await self.store.afacts(c) for c in routed.searched_clients()})

    async def _ainner_batch(self, passed: list[tuple[int, Op]]) -> dict[int, Result]:
        if not passed:
            return {}
        if self.inner is None:
            return {i: self._no_inner(op) for i, op in passed}
        done = await self.inner.abatch([op for _, op in passed])
        return dict(zip([i for i, _ in passed], done, strict=True))

    async def _aput(self, client: str, op: PutOp) -> None:
        checked = self._check_put(op)
        fact = _find(await self.store.afacts(client), op.key)
        if checked is None:
            if fact is not None:
                await self.store.adelete_fact(client, fact.id)
            return
        text, pinned = checked
        if (
            fact is not None
            and fact.key is None
            and await self.store.aupdate_fact(client, fact.id, text) is not None
        ):
            if pinned:
                await self.store.aadd_fact(client, text, pinned=True)
            return
        await self.store.aadd_fact(client, text, key=op.key, pinned=pinned)

    def __repr__(self) -> str:
        inner = type(self.inner).__name__ if self.inner is not None else None
        return f"RollingFactsStore(store={type(self.store).__name__}, inner={inner}, namespace={self.namespace!r})"


@dataclass
class _Routed:
    """A batch split by where each operation goes: the client's facts (`ours`), the inner store
    (`passed`, including the inner half of a search that also reaches facts), or both (`searches`)."""

    results: list[Result]
    passed: list[tuple[int, Op]] = field(default_factory=list)
    searches: dict[int, tuple[str | None, SearchOp]] = field(default_factory=dict)
    ours: list[tuple[int, str, GetOp | PutOp]] = field(default_factory=list)

    @classmethod
    def of(cls, graph_store: RollingFactsStore, ops: Iterable[Op]) -> _Routed:
        ops = list(ops)
        routed = cls([None] * len(ops))
        for i, op in enumerate(ops):
            if isinstance(op, SearchOp):
                client, inner_op = graph_store._split(op)
                routed.searches[i] = (client, op)
                if inner_op is not None:
                    routed.passed.append((i, inner_op))
                continue
            client = graph_store._client(op.namespace) if isinstance(op, (GetOp, PutOp)) else None
            if client is None:
                routed.passed.append((i, op))
            else:
                routed.ours.append((i, client, cast("GetOp | PutOp", op)))
        return routed

    def searched_clients(self) -> list[str]:
        return list(dict.fromkeys(c for c, _ in self.searches.values() if c is not None))

    def finish(
        self, graph_store: RollingFactsStore, inner: dict[int, Result], facts: dict[str, list[Fact]]
    ) -> list[Result]:
        """The results in the order of the operations; searches read the facts after the puts."""
        for i, (client, op) in self.searches.items():
            if client is None:
                self.results[i] = inner.get(i, [])
            else:
                found = graph_store._found(facts[client], client, op)
                self.results[i] = graph_store._page(found, inner.get(i), op)
        for i, _ in self.passed:
            if i not in self.searches:
                self.results[i] = inner[i]
        return self.results
