"""Odd bytes and odd arguments: one behaviour on every backend (stored exactly, or refused at
the API with a ValueError before anything is written)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from store_kit import raw_contents

from langchain_rolling_memory.errors import FactError, InvalidIdError, InvalidTextError
from langchain_rolling_memory.stores import RollingStore

NUL = "\x00"
SURROGATE = "\ud800"

# Every character class that must round-trip exactly: NUL and the other C0 controls, DEL and
# C1 controls, a BOM, bidi marks and overrides, zero-width joiners, emoji with modifiers,
# non-BMP characters, combining marks and the JSON/SQL/Lua specials.
ODD_TEXTS = {
    "nul": f"before{NUL}after{NUL}",
    "c0_controls": "".join(chr(c) for c in range(32)),
    "del_and_c1": "\x7f\x80\x85\x9f",
    "bom_and_specials": "\ufeff\ufffe\uffff end",
    "bidi": "\u200fRTL \u202eevil\u202c \u2066iso\u2069 \u061c",
    "zero_width": "a\u200bb\u200cc\u200dd\u2060e",
    "emoji": "👩🏽‍💻🏳️‍🌈 🇫🇷 😀",
    "astral": "𝕳𝖊𝖑𝖑𝖔 𐍈 \U0010fffd",
    "combining": "e\u0301 a\u0308\u0308\u0308",
    "escapes": "\"quote' back\\slash %s %(x)s ${x} {0} -- ; /* */ \\u0000 [[lua]]",
}


@pytest.mark.parametrize("text", list(ODD_TEXTS.values()), ids=list(ODD_TEXTS))
async def test_any_message_content_is_read_back_exactly(store: RollingStore, text: str) -> None:
    messages: list[BaseMessage] = [
        HumanMessage(text, name="n", additional_kwargs={"k": text}),
        AIMessage(
            text, tool_calls=[{"name": "tool", "args": {"q": text, text: 1}, "id": "c1", "type": "tool_call"}]
        ),
        ToolMessage(text, tool_call_id="c1"),
        HumanMessage(content=[{"type": "text", "text": text}]),
    ]
    store.append("s1", messages, client_id="c1")
    await store.aappend("s1", messages, client_id="c1")
    assert store.transcript("s1") == messages + messages
    assert [m.message for m in await store.aread("s1", after_seq=4)] == messages
    _, tail = store.summary_and_tail("s1", limit=2)
    assert [m.message for m in tail] == messages[2:]


@pytest.mark.parametrize("text", list(ODD_TEXTS.values()), ids=list(ODD_TEXTS))
async def test_any_state_is_read_back_exactly(store: RollingStore, text: str) -> None:
    state = {text: text, "nested": [text, {"k": text}]}
    store.set_state("s1", state, client_id="c1")
    assert store.get_state("s1") == state
    await store.aset_state("s2", state)
    assert await store.aget_state("s2") == state


@pytest.mark.parametrize(
    "text", [t for k, t in ODD_TEXTS.items() if k not in ("nul", "c0_controls")], ids=lambda t: repr(t[:6])
)
async def test_summary_and_fact_text_without_nul_is_read_back_exactly(store: RollingStore, text: str) -> None:
    store.append("s1", [HumanMessage("hi")])
    assert store.install_summary("s1", text, covered_seq=1, expected_version=0, meta={"m": text})
    record = store.summary("s1")
    assert record is not None and (record.text, record.meta) == (text, {"m": text})
    # Facts are normalized (runs of whitespace become one space), then stored exactly.
    fact = store.add_fact("c1", f"likes {text}")
    assert fact is not None
    assert [f.text for f in await store.afacts("c1")] == [fact.text]
    assert fact.text == " ".join(f"likes {text}".split())


def test_control_characters_other_than_nul_are_stored_in_summaries_and_facts(store: RollingStore) -> None:
    controls = "".join(chr(c) for c in range(1, 32) if not chr(c).isspace())
    store.append("s1", [HumanMessage("hi")])
    assert store.install_summary("s1", f"a{controls}b\n\tc", covered_seq=1, expected_version=0)
    assert store.summary("s1").text == f"a{controls}b\n\tc"  # type: ignore[union-attr]
    assert store.add_fact("c1", f"x{controls}y").text == f"x{controls}y"  # type: ignore[union-attr]


def _seed(store: RollingStore) -> None:
    store.append("s1", [HumanMessage("first")], client_id="c1")
    store.set_state("s1", {"cart": 1}, client_id="c1")
    store.install_summary("s1", "old summary", covered_seq=1, expected_version=0)
    store.add_fact("c1", "Lives in Paris", key="city")


# (name, call, expected error): each call must raise before any write.
REFUSALS: list[tuple[str, Callable[[RollingStore, str], Any], type[Exception]]] = [
    (
        "message_content",
        lambda s, x: s.append("s1", [HumanMessage(f"a{x}b")], client_id="c1"),
        InvalidTextError,
    ),
    (
        "second_message_of_a_batch",
        lambda s, x: s.append("s1", [HumanMessage("ok"), AIMessage(f"a{x}")], client_id="c1"),
        InvalidTextError,
    ),
    (
        "tool_call_args",
        lambda s, x: s.append(
            "s1",
            [AIMessage("", tool_calls=[{"name": "t", "args": {"q": x}, "id": "1", "type": "tool_call"}])],
        ),
        InvalidTextError,
    ),
    ("message_name", lambda s, x: s.append("s2", [HumanMessage("a", name=x)]), InvalidTextError),
    ("state_value", lambda s, x: s.set_state("s1", {"k": x}, client_id="c1"), InvalidTextError),
    ("state_key", lambda s, x: s.set_state("s2", {x: 1}), InvalidTextError),
    (
        "summary",
        lambda s, x: s.install_summary("s1", f"sum{x}", covered_seq=1, expected_version=1),
        InvalidTextError,
    ),
    (
        "new_summary",
        lambda s, x: s.install_summary("s2", f"sum{x}", covered_seq=0, expected_version=0),
        InvalidTextError,
    ),
    ("fact", lambda s, x: s.add_fact("c1", f"likes {x} tea"), FactError),
    ("fact_of_new_client", lambda s, x: s.add_fact("c2", f"likes {x} tea"), FactError),
    ("keyed_fact_update", lambda s, x: s.add_fact("c1", f"Lives in {x}", key="city"), FactError),
    ("fact_key", lambda s, x: s.add_fact("c1", "a fact", key=f"k{x}"), InvalidIdError),
    ("session_id", lambda s, x: s.append(f"s{x}", [HumanMessage("a")]), InvalidIdError),
    ("client_id", lambda s, x: s.append("s3", [HumanMessage("a")], client_id=f"c{x}"), InvalidIdError),
    ("lease_owner", lambda s, x: s.claim("s1", f"w{x}", 10.0), InvalidTextError),
]


def _update_fact(store: RollingStore, x: str) -> Any:
    fact = store.facts("c1")[0]
    return store.update_fact("c1", fact.id, f"Lives in {x}")


REFUSALS.append(("fact_update", _update_fact, FactError))


# JSON escapes NUL, so messages and state hold it exactly (tested above): NUL is refused only
# where text is stored raw (summary, fact, lease owner) or is an id.
CASES = [
    pytest.param(odd, name, call, error, id=f"{name}-{odd_id}")
    for odd, odd_id in [(SURROGATE, "high_surrogate"), ("\udfff", "low_surrogate"), (NUL, "nul")]
    for name, call, error in REFUSALS
    if not (
        odd == NUL and error is InvalidTextError and name not in ("summary", "new_summary", "lease_owner")
    )
]


@pytest.mark.parametrize(("odd", "name", "call", "error"), CASES)
def test_unstorable_text_is_refused_with_a_value_error_and_writes_nothing(
    store: RollingStore, odd: str, name: str, call: Callable[[RollingStore, str], Any], error: type[Exception]
) -> None:
    _seed(store)
    before = raw_contents(store)
    with pytest.raises(error) as caught:
        call(store, odd)
    assert isinstance(caught.value, ValueError)
    if error is not InvalidIdError:
        assert ("NUL" if odd == NUL else "surrogate") in str(caught.value)
    assert raw_contents(store) == before


async def test_async_twins_refuse_the_same_text(store: RollingStore) -> None:
    _seed(store)
    before = raw_contents(store)
    with pytest.raises(InvalidTextError, match=r"message 1 of 2.*surrogate"):
        await store.aappend("s1", [HumanMessage("ok"), HumanMessage(SURROGATE)])
    with pytest.raises(InvalidTextError, match=r"summary text.*NUL"):
        await store.ainstall_summary("s1", "a\x00b", covered_seq=1, expected_version=1)
    with pytest.raises(InvalidTextError, match="state"):
        await store.aset_state("s1", {"k": SURROGATE})
    with pytest.raises(FactError, match="NUL"):
        await store.aadd_fact("c1", "a\x00b")
    assert raw_contents(store) == before


def test_a_refused_summary_leaves_the_session_usable(store: RollingStore) -> None:
    _seed(store)
    with pytest.raises(InvalidTextError):
        store.install_summary("s1", "new\x00summary", covered_seq=1, expected_version=1)
    assert store.install_summary("s1", "new summary", covered_seq=1, expected_version=1)
    store.append("s1", [HumanMessage("next")], client_id="c1")
    assert [m.message.content for m in store.read("s1")] == ["first", "next"]


# ------------------------------------------------------------------ arguments


BAD_COUNTS = [-3, -1, True, 1.5, "2", None]


@pytest.mark.parametrize("after_seq", BAD_COUNTS, ids=repr)
async def test_after_seq_must_be_a_non_negative_int_on_every_backend(
    store: RollingStore, after_seq: Any
) -> None:
    store.append("s1", [HumanMessage(f"m{i}") for i in range(5)])
    with pytest.raises(ValueError, match="after_seq must be an int >= 0"):
        store.read("s1", after_seq=after_seq)
    with pytest.raises(ValueError, match="after_seq must be an int >= 0"):
        await store.aread("s1", after_seq=after_seq)


@pytest.mark.parametrize("limit", [-1, True, 2.0, "3"], ids=repr)
async def test_limit_is_checked_alike_on_every_backend(store: RollingStore, limit: Any) -> None:
    store.append("s1", [HumanMessage("a")])
    with pytest.raises(ValueError, match="limit"):
        store.read("s1", limit=limit)
    with pytest.raises(ValueError, match="limit"):
        await store.aread("s1", limit=limit)
    with pytest.raises(ValueError, match="limit"):
        store.summary_and_tail("s1", limit=limit)
    with pytest.raises(ValueError, match="limit"):
        await store.asummary_and_tail("s1", limit=limit)


def test_the_same_read_gives_the_same_rows_on_every_backend(store: RollingStore) -> None:
    store.append("s1", [HumanMessage(f"m{i}") for i in range(1, 6)])
    seqs = [
        [m.seq for m in store.read("s1", after_seq=a, limit=lim, newest=n)]
        for a, lim, n in [
            (0, None, True),
            (2, None, True),
            (5, None, True),
            (9, None, True),
            (0, 0, True),
            (0, 2, True),
            (0, 2, False),
            (3, 9, False),
            (1, 2, True),
        ]
    ]
    assert seqs == [[1, 2, 3, 4, 5], [3, 4, 5], [], [], [], [4, 5], [1, 2], [4, 5], [4, 5]]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"covered_seq": -1, "expected_version": 0}, "covered_seq"),
        ({"covered_seq": 1, "expected_version": -1}, "expected_version"),
        ({"covered_seq": True, "expected_version": 0}, "covered_seq"),
    ],
    ids=["negative_covered", "negative_version", "bool_covered"],
)
def test_summary_numbers_are_checked_before_writing(store: RollingStore, kwargs: Any, name: str) -> None:
    _seed(store)
    before = raw_contents(store)
    with pytest.raises(ValueError, match=name):
        store.install_summary("s1", "text", **kwargs)
    with pytest.raises(TypeError, match="summary text must be a string"):
        store.install_summary("s1", b"bytes", covered_seq=1, expected_version=1)  # type: ignore[arg-type]
    assert raw_contents(store) == before


@pytest.mark.parametrize(
    ("owner", "ttl"), [("", 10.0), (None, 10.0), ("w", 0), ("w", -1.0), ("w", float("nan"))]
)
def test_lease_arguments_are_checked_before_writing(store: RollingStore, owner: Any, ttl: Any) -> None:
    _seed(store)
    before = raw_contents(store)
    with pytest.raises(ValueError, match="lease"):
        store.claim("s1", owner, ttl)
    assert raw_contents(store) == before


@pytest.mark.parametrize("fact_id", ["", "a\x00b", SURROGATE, "../x", 7], ids=repr)
async def test_fact_ids_are_checked_before_reaching_the_backend(store: RollingStore, fact_id: Any) -> None:
    _seed(store)
    before = raw_contents(store)
    with pytest.raises(InvalidIdError, match="fact_id"):
        store.delete_fact("c1", fact_id)
    with pytest.raises(InvalidIdError, match="fact_id"):
        await store.aupdate_fact("c1", fact_id, "text")
    assert raw_contents(store) == before


def test_a_summary_with_odd_bytes_from_the_model_never_wedges_a_session(store: RollingStore) -> None:
    from langchain_rolling_memory import Compactor
    from langchain_rolling_memory.core.cuts import FoldPolicy
    from langchain_rolling_memory.summarizers import as_summarizer

    calls: list[int] = []

    def odd_model(previous: str, messages: list[BaseMessage]) -> str:
        calls.append(len(messages))
        return f"The client{NUL} lives in Lyon {SURROGATE}and pays on Fridays."

    compactor = Compactor(store, as_summarizer(odd_model), FoldPolicy(max_turns=4, keep_last=2), timeout=None)
    store.append("s", [HumanMessage(f"message {NUL} {i}") for i in range(5)])
    assert compactor.compact("s") is not None  # installed at the first call, not retried forever
    record = store.summary("s")
    assert record is not None and NUL not in record.text and "Lyon" in record.text
    assert calls == [3]
