"""Erasing a user everywhere the memory wrote, in one call: `forget_user` (sync/async twins).

Owns the order of an erasure across our store, LangGraph's `BaseStore` and a checkpointer:
the client's threads are read from our store first (a session is a thread), our store's
`forget` runs next (so a turn racing the erasure finds nothing to seed a thread from), then
the checkpoints and the graph store's items are deleted, and `forget` runs again last (for
what a racing turn appended meanwhile). What `forget` erases, and how no byte of
it is left, is each backend's; this module imports no langgraph (what it is handed has the
methods it calls).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_rolling_memory.core.ids import validate_id
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory.stores.urls import rolling_store

_PAGE = 100


@dataclass(frozen=True)
class Erased:
    """What `forget_user` deleted besides our store (for an audit log).

    Attributes:
        client_id: the client erased.
        threads: the threads whose checkpoints were deleted (none without a checkpointer).
        items: the items deleted from the graph's `BaseStore` (facts included when it is a
            `RollingFactsStore`).
    """

    client_id: str
    threads: tuple[str, ...]
    items: int


def _threads(sessions: Iterable[str], thread_ids: Iterable[str]) -> tuple[str, ...]:
    if isinstance(thread_ids, str):
        msg = f"thread_ids must be a list of thread ids, got the string {thread_ids!r}; pass [{thread_ids!r}]"
        raise TypeError(msg)
    return tuple(dict.fromkeys([*sessions, *(validate_id(t, kind="thread_id") for t in thread_ids)]))


def _prefixes(
    client_id: str, graph_store: Any, namespaces: Sequence[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """The namespace prefixes erased: those given, the client's own (``(client_id,)``), and
    its facts namespace in a `RollingFactsStore`. A namespace label cannot hold a dot, so a
    client id with one has no namespace of its own."""
    found = [tuple(n) for n in namespaces]
    if "." not in client_id:
        found.append((client_id,))
        facts_namespace = getattr(graph_store, "facts_namespace", None)
        if callable(facts_namespace):
            found.append(tuple(facts_namespace(client_id)))
    return list(dict.fromkeys(found))


def _fresh(items: Iterable[Any], gone: set[tuple[tuple[str, ...], str]]) -> list[tuple[tuple[str, ...], str]]:
    return [k for k in dict.fromkeys((tuple(i.namespace), i.key) for i in items) if k not in gone]


def _deletes(found: Sequence[tuple[tuple[str, ...], str]]) -> list[Any]:
    from langgraph.store.base import PutOp  # a graph store was handed in: langgraph is there

    return [PutOp(namespace, key, None) for namespace, key in found]


def forget_user(
    client_id: str,
    *,
    store: RollingStore,
    graph_store: Any = None,
    checkpointer: Any = None,
    thread_ids: Iterable[str] = (),
    namespaces: Sequence[tuple[str, ...]] = (),
) -> Erased:
    """Erase the client from our store, the graph's `BaseStore` and the checkpointer.

    1. The threads: the client's sessions in `store` (a session is the thread it ran in) and
       `thread_ids` (threads whose session id was another); each is deleted from
       `checkpointer` (``delete_thread``).
    2. The `graph_store` items under ``(client_id,)``, under its facts namespace when it is a
       `RollingFactsStore`, and under each of `namespaces` (e.g. ``("memories", client_id)``).
    3. `store.forget(client_id)`: facts, sessions, transcripts, summaries, index entries.

    `forget` runs before the threads are deleted and again after: a turn that lands between
    finds a deleted thread to be new and would seed it from our store's transcript, so the
    transcript is gone first. The threads are listed before the first `forget`, which erases
    that list too: a call that fails after it is finished by calling it again with the
    client's thread ids as `thread_ids`.

    Args:
        client_id: the client (LangGraph's ``user_id``).
        store: the `RollingStore` of the memory.
        graph_store: the graph's `BaseStore` (a `RollingFactsStore`, `PostgresStore`...), or None.
        checkpointer: the graph's checkpointer (`InMemorySaver`, `PostgresSaver`...), or None.
        thread_ids: more threads of the client to delete from the checkpointer.
        namespaces: more namespace prefixes of the client's items in `graph_store`.

    Returns:
        what was deleted besides our store (`Erased`).

    Example:
        >>> from langchain_rolling_memory import open_store
        >>> store = open_store("memory://")
        >>> _ = store.add_fact("ana", "Vegetarian")
        >>> forget_user("ana", store=store), store.facts("ana")
        (Erased(client_id='ana', threads=(), items=0), [])
    """
    client = validate_id(client_id, kind="client_id")
    store = rolling_store(store, owner="forget_user")
    threads = _threads(store.sessions(client), thread_ids)
    store.forget(client)
    if checkpointer is not None:
        for thread in threads:
            checkpointer.delete_thread(thread)
    items = 0
    if graph_store is not None:
        for prefix in _prefixes(client, graph_store, namespaces):
            gone: set[tuple[tuple[str, ...], str]] = set()
            # Deleted page by page until a search finds nothing it has not deleted yet.
            while found := _fresh(graph_store.search(prefix, limit=_PAGE), gone):
                graph_store.batch(_deletes(found))
                gone.update(found)
            items += len(gone)
    store.forget(client)
    return Erased(client, threads if checkpointer is not None else (), items)


async def aforget_user(
    client_id: str,
    *,
    store: RollingStore,
    graph_store: Any = None,
    checkpointer: Any = None,
    thread_ids: Iterable[str] = (),
    namespaces: Sequence[tuple[str, ...]] = (),
) -> Erased:
    """Async twin of `forget_user` (``adelete_thread``, ``asearch``/``abatch``, ``aforget``)."""
    client = validate_id(client_id, kind="client_id")
    store = rolling_store(store, owner="aforget_user")
    threads = _threads(await store.asessions(client), thread_ids)
    await store.aforget(client)
    if checkpointer is not None:
        for thread in threads:
            await checkpointer.adelete_thread(thread)
    items = 0
    if graph_store is not None:
        for prefix in _prefixes(client, graph_store, namespaces):
            gone: set[tuple[tuple[str, ...], str]] = set()
            while found := _fresh(await graph_store.asearch(prefix, limit=_PAGE), gone):
                await graph_store.abatch(_deletes(found))
                gone.update(found)
            items += len(gone)
    await store.aforget(client)
    return Erased(client, threads if checkpointer is not None else (), items)
