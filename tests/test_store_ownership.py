"""The owner check of the store itself (issue 12, defect 4), on every backend: a session owned
by a client is reachable only by naming that client, in the same atomic write, read or erase;
a run naming no client reaches anonymous sessions only; no client_id at all is the operator's
read (unchecked)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from store_kit import raw_contents

from langchain_rolling_memory.errors import InvalidIdError, OwnershipError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import OPERATOR


def _texts(n: int, start: int = 1) -> list[BaseMessage]:
    return [HumanMessage(f"m{i}") if i % 2 else AIMessage(f"m{i}") for i in range(start, start + n)]


def _contents(rows: Any) -> list[Any]:
    return [r.message.content for r in rows]


def test_a_write_naming_no_client_is_refused_on_an_owned_session(store: RollingStore) -> None:
    # No client named, no access: the store itself refuses, in its one atomic write.
    store.append("s1", _texts(2), client_id="c1")
    store.set_state("s1", {"cart": ["apple"]}, client_id="c1")
    store.append("anon", _texts(1))
    before = raw_contents(store)
    with pytest.raises(OwnershipError, match="no client_id was named"):
        store.append("s1", [HumanMessage("anonymous")])
    with pytest.raises(OwnershipError, match="s1"):
        store.set_state("s1", {"cart": []})
    assert raw_contents(store) == before
    assert _contents(store.read("s1")) == ["m1", "m2"]
    assert store.get_state("s1") == {"cart": ["apple"]}
    # Anonymous sessions stay usable anonymously.
    assert store.append("anon", [HumanMessage("again")]) == [2]
    store.set_state("anon", {"n": 1})
    assert store.get_state("anon") == {"n": 1}
    info = store.session_info("anon")
    assert info is not None and info.client_id is None


async def test_an_async_write_naming_no_client_is_refused_on_an_owned_session(store: RollingStore) -> None:
    await store.aappend("s1", _texts(2), client_id="c1")
    with pytest.raises(OwnershipError):
        await store.aappend("s1", [HumanMessage("anonymous")])
    with pytest.raises(OwnershipError):
        await store.aset_state("s1", {"cart": []})
    assert _contents(await store.aread("s1")) == ["m1", "m2"]
    assert await store.aget_state("s1") == {}


def test_a_read_naming_a_client_is_checked_against_the_owner_in_the_read(store: RollingStore) -> None:
    store.append("s1", _texts(3), client_id="c1")
    store.install_summary("s1", "sum", covered_seq=1, expected_version=0)
    store.set_state("s1", {"pin": 1234}, client_id="c1")
    store.append("anon", _texts(2))
    reads = {
        "read": lambda cid: store.read("s1", client_id=cid),
        "summary_and_tail": lambda cid: store.summary_and_tail("s1", limit=5, client_id=cid),
        "transcript": lambda cid: store.transcript("s1", client_id=cid),
        "last_seq": lambda cid: store.last_seq("s1", client_id=cid),
        "summary": lambda cid: store.summary("s1", client_id=cid),
        "usage": lambda cid: store.usage("s1", client_id=cid),
        "get_state": lambda cid: store.get_state("s1", client_id=cid),
    }
    for name, read in reads.items():
        for intruder in ("c2", None):  # another client, and a run that names none
            with pytest.raises(OwnershipError, match="s1"):  # noqa: PT012 - names the read that let it through
                read(intruder)
                pytest.fail(f"{name} let {intruder!r} read c1's session")
        # Its client reads what the operator (no client_id: unchecked) reads.
        assert read("c1") == read(OPERATOR), name
    assert _contents(store.read("s1", client_id="c1")) == ["m1", "m2", "m3"]
    assert _contents(store.read("s1")) == ["m1", "m2", "m3"]
    record, tail = store.summary_and_tail("s1", limit=1, client_id="c1")
    assert record is not None and record.text == "sum" and [r.seq for r in tail] == [3]
    assert store.last_seq("s1", client_id="c1") == 3
    assert store.get_state("s1", client_id="c1") == {"pin": 1234}
    # Anonymous sessions (and missing ones) read by anyone, named or not.
    for reader in (None, "c2"):
        assert _contents(store.read("anon", client_id=reader)) == ["m1", "m2"]
        assert store.summary_and_tail("anon", limit=5, client_id=reader)[0] is None
        assert store.last_seq("missing", client_id=reader) == 0
        assert store.get_state("missing", client_id=reader) == {}
    with pytest.raises(InvalidIdError):
        store.read("s1", client_id="bad id")


async def test_a_clear_naming_a_client_is_checked_against_the_owner(store: RollingStore) -> None:
    store.append("s1", _texts(2), client_id="c1")
    store.append("anon", _texts(1))
    before = raw_contents(store)
    for intruder in ("c2", None):
        with pytest.raises(OwnershipError, match="s1"):
            store.clear_session("s1", client_id=intruder)
        with pytest.raises(OwnershipError):
            await store.aclear_session("s1", client_id=intruder)
    assert raw_contents(store) == before
    store.clear_session("missing", client_id=None)  # nothing to clear, nothing refused
    store.clear_session("anon", client_id="c2")  # nobody's: anyone may clear it
    assert store.read("anon") == []
    await store.aclear_session("s1", client_id="c1")
    assert store.read("s1") == [] and store.session_info("s1") is None


async def test_an_async_read_naming_a_client_is_checked_against_the_owner(store: RollingStore) -> None:
    await store.aappend("s1", _texts(3), client_id="c1")
    await store.aset_state("s1", {"pin": 1234}, client_id="c1")
    reads = [
        lambda cid: store.aread("s1", client_id=cid),
        lambda cid: store.asummary_and_tail("s1", limit=5, client_id=cid),
        lambda cid: store.atranscript("s1", client_id=cid),
        lambda cid: store.alast_seq("s1", client_id=cid),
        lambda cid: store.asummary("s1", client_id=cid),
        lambda cid: store.aget_state("s1", client_id=cid),
    ]
    for read in reads:
        for intruder in ("c2", None):
            with pytest.raises(OwnershipError):
                await read(intruder)
        await read("c1")
    assert _contents(await store.aread("s1", client_id="c1", limit=2)) == ["m2", "m3"]
    assert (await store.asummary_and_tail("s1", limit=2, client_id="c1"))[1][0].seq == 2
    assert await store.alast_seq("s1", client_id="c1") == 3
    assert await store.aget_state("s1", client_id="c1") == {"pin": 1234}
