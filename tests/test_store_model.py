"""Model-based test of the store contract (issue 20): the reference model against every backend.

Hypothesis' stateful testing drives two store objects on the same data (for memory:// the same
object) with interleaved calls of two clients and of runs naming no client, on two session ids
that get erased and re-created by another client. Every call's answer is compared with
`store_reference.Reference`, and after every step every view (read, get_state, search,
sessions, facts, export) of every client is checked: no client sees another's text, nothing
erased is readable or searchable, nothing acknowledged is lost, a summary install or fact
write planned before an erase is refused, and a client's search scores move only when its own
data does (defect 5). The clock is the model's (each store's `_now`), so lease expiry and purge
are exact. A claim is made only on a session that has a row: whether a claim creates one is
not part of the contract. `benchmarks/store_model_long.py` runs the same machine longer.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import STORE_FACTORIES, _probe
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import reopen, wipe
from store_reference import ANON, OPERATOR, VOCAB, Mark, Reference, Violation, tag

from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.records import SessionMark
from langchain_rolling_memory.search import query_terms
from langchain_rolling_memory.stores import RollingStore

NAMED = ("alice", "bob")
CLIENTS = (*NAMED, None)
SESSIONS = ("s1", "s2")
WORKERS = ("w1", "w2")
EVERYTHING = " ".join((*VOCAB, *NAMED, ANON))  # a query that matches every text
LIMIT = 1000

VIA = st.integers(0, 1)
SIDS = st.sampled_from(SESSIONS)
WORDS = st.sampled_from(VOCAB)
READERS = st.sampled_from((*CLIENTS, OPERATOR))
PICK = st.integers(0, 15)

SUITE = settings(
    max_examples=12,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
"""The CI budget: a few seconds per backend."""


def open_pair(backend: str, tmp: Path) -> tuple[RollingStore, RollingStore]:
    """A fresh store of `backend` (its own prefix) and a second object on the same data."""
    first = STORE_FACTORIES[backend](tmp)
    try:
        return first, first if backend == "memory" else reopen(first)
    except BaseException:
        first.close()
        wipe(first)
        raise


class StoreMachine(RuleBasedStateMachine):
    """Random calls through two store objects, each answer checked against the model."""

    backend: ClassVar[str] = "memory"
    steps: ClassVar[int] = 0  # steps checked, over every run (the benchmark's count)
    #: what the runs exercised (refusals the model expected, score comparisons), over every run
    seen: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.ref = Reference()
        self.tmp = Path(tempfile.mkdtemp(prefix="lrm-model-"))
        self.stores = open_pair(self.backend, self.tmp)
        for store in self.stores:
            store._now = lambda: self.ref.now  # type: ignore[method-assign]
        self.scores: dict[tuple[Any, ...], tuple[int, dict[str, float]]] = {}
        self.sweeps = 0
        self.marks: list[Mark] = []  # every session generation a turn read saw, stale ones too

    def teardown(self) -> None:
        try:
            for store in reversed(self.stores):
                store.close()
        finally:
            wipe(self.stores[0])
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ checking helpers

    def call(
        self, what: str, expected: Any, unrefused: str, fn: Callable[..., Any], *args: Any, **kw: Any
    ) -> Any:
        """`fn(...)`, which must raise `expected` if it is an exception class (the broken
        invariant is then `unrefused`), else return; what it returned, or None if refused."""
        refusal = expected if isinstance(expected, type) and issubclass(expected, Exception) else None
        try:
            value = fn(*args, **kw)
        except (OwnershipError, StaleWriteError) as exc:
            if refusal is not None and isinstance(exc, refusal):
                self.seen[f"{what.split('(')[0]}: {refusal.__name__}"] += 1
                return None
            raise Violation("refused", f"{what}: raised {exc!r}; the model expected {expected!r}") from exc
        if refusal is not None:
            raise Violation(unrefused, f"{what}: returned {value!r}; the model expected {refusal.__name__}")
        return value

    def texts(self, what: str, viewer: Any, got: list[str], want: list[str], *, ordered: bool = True) -> None:
        """`got` must be `want`; what is wrong with it first: leak, erased, lost, then order."""
        for text in got:
            why = self.ref.foreign(viewer, text)
            if why is not None:
                raise Violation(why, f"{what} as {viewer!r} returned {text!r}; expected {want!r}")
        missing = [t for t in want if t not in got]
        if missing:
            raise Violation("lost", f"{what} as {viewer!r} lacks {missing!r}: got {got!r}")
        if (got if ordered else sorted(got)) != (want if ordered else sorted(want)):
            raise Violation("model", f"{what} as {viewer!r}: got {got!r}, expected {want!r}")

    # ------------------------------------------------------------------ writes

    @initialize(first=st.sampled_from(CLIENTS), second=st.sampled_from(CLIENTS))
    def start(self, first: str | None, second: str | None) -> None:
        self.append(0, first, "s1", ["apple"])
        self.append(1, second, "s2", ["river"])

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=SIDS, words=st.lists(WORDS, min_size=1, max_size=2))
    def append(self, via: int, client: str | None, sid: str, words: list[str]) -> None:
        texts = [self.ref.new_text(tag(client), w, "message", sid) for w in words]
        messages = [(HumanMessage if i % 2 == 0 else AIMessage)(t) for i, t in enumerate(texts)]
        expected = self.ref.append(client, sid, texts)
        what = f"append({sid!r}, client_id={client!r})"
        seqs = self.call(
            what, expected, "ownership", self.stores[via].append, sid, messages, client_id=client
        )
        if seqs is not None and seqs != expected:
            raise Violation("model", f"{what} returned seqs {seqs}, expected {expected}")

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=SIDS, word=WORDS)
    def set_state(self, via: int, client: str | None, sid: str, word: str) -> None:
        text = self.ref.new_text(tag(client), word, "state", sid)
        expected = self.ref.set_state(client, sid, text)
        what = f"set_state({sid!r}, client_id={client!r})"
        self.call(
            what, expected, "ownership", self.stores[via].set_state, sid, {"note": text}, client_id=client
        )

    @rule(via=VIA, reader=READERS, sid=SIDS)
    def clear_session(self, via: int, reader: Any, sid: str) -> None:
        expected = self.ref.clear(reader, sid)
        what = f"clear_session({sid!r}, client_id={reader!r})"
        self.call(what, expected, "ownership", self.stores[via].clear_session, sid, client_id=reader)

    # Hypothesis favours the rule with the fewest arguments: let it be the attack of issue 20,
    # a session erased and re-created, maybe by another client, through the other store object.
    @rule(sid=SIDS, client=st.sampled_from(CLIENTS))
    def erase_and_recreate(self, sid: str, client: str | None) -> None:
        self.clear_session(0, OPERATOR, sid)
        self.append(1, client, sid, ["stone"])

    @rule(via=VIA, client=st.sampled_from(NAMED))
    def forget(self, via: int, client: str) -> None:
        self.ref.forget(client)
        self.stores[via].forget(client)

    @rule(via=VIA, seconds=st.sampled_from((1, 5, 30)), older_than=st.sampled_from((None, 4.5, 25.5, 1000.5)))
    def time_passes(self, via: int, seconds: int, older_than: float | None) -> None:
        """The clock moves (leases expire), then maybe a purge."""
        self.ref.now += seconds
        if older_than is None:
            return
        expected = self.ref.purge(older_than)
        got = self.stores[via].purge(older_than=older_than)
        if got != expected:
            raise Violation(
                "model", f"purge(older_than={older_than}) erased {got} sessions, expected {expected}"
            )

    # ------------------------------------------------------------------ leases and summaries

    @precondition(lambda self: self.ref.sessions)
    @rule(via=VIA, sid=SIDS, worker=st.sampled_from(WORKERS), ttl=st.sampled_from((3.5, 40.5)))
    def claim(self, via: int, sid: str, worker: str, ttl: float) -> None:
        if sid not in self.ref.sessions:
            return  # whether a claim creates a session row is not part of the contract
        expected = self.ref.claim(sid, worker, ttl)
        got = self.stores[via].claim(sid, worker, ttl)
        if got != expected:
            raise Violation("lease", f"claim({sid!r}, {worker!r}) returned {got}, expected {expected}")

    @precondition(lambda self: self.ref.sessions)
    @rule(via=VIA, sid=SIDS, worker=st.sampled_from(WORKERS))
    def release(self, via: int, sid: str, worker: str) -> None:
        self.ref.release(sid, worker)
        self.stores[via].release(sid, worker)

    def _install(
        self, via: int, sid: str, worker: str | None, offset: int, covered: int, mark: Mark | None
    ) -> None:
        session = self.ref.sessions.get(sid)
        version = max(0, (session.summary.version if session and session.summary else 0) + offset)
        covered = min(covered, len(session.texts) if session else 0)
        author = mark.author if mark else tag(session.owner if session else None)
        text = self.ref.new_text(author, "summary", "summary", sid)
        expected, why = self.ref.install(sid, text, covered, version, worker, mark)
        self.seen[f"install_summary: {why}{' (planned)' if mark else ''}"] += 1
        got = self.stores[via].install_summary(
            sid,
            text,
            covered_seq=covered,
            expected_version=version,
            lease_owner=worker,
            generation=mark.generation if mark else None,
        )
        if got != expected:
            broken = "stale-install" if why in ("no-row", "generation", "lease") else "model"
            raise Violation(broken, f"install_summary on {sid!r} returned {got}, expected {expected} ({why})")

    @rule(
        via=VIA,
        sid=SIDS,
        worker=st.sampled_from((None, *WORKERS)),
        offset=st.sampled_from((0, 0, -1, 1)),
        covered=st.integers(0, 3),
    )
    def install_summary(self, via: int, sid: str, worker: str | None, offset: int, covered: int) -> None:
        self._install(via, sid, worker, offset, covered, None)

    def mark(self, pick: int) -> Mark:
        return self.marks[pick % len(self.marks)]

    @precondition(lambda self: self.marks)
    @rule(via=VIA, pick=PICK, worker=st.sampled_from((None, *WORKERS)), covered=st.integers(0, 3))
    def install_planned_summary(self, via: int, pick: int, worker: str | None, covered: int) -> None:
        mark = self.mark(pick)
        self._install(via, mark.session_id, worker, 0, covered, mark)

    # ------------------------------------------------------------------ facts

    def _add_fact(self, via: int, client: str, word: str, key: str | None, mark: Mark | None) -> None:
        text = self.ref.new_text(client, word, "fact", client)
        expected = self.ref.add_fact(client, text, key, mark)
        planned = SessionMark(mark.session_id, mark.generation) if mark else None
        what = f"add_fact({client!r}, key={key!r}, planned_from={mark!r})"
        store = self.stores[via]
        fact = self.call(
            what, expected, "stale-fact", store.add_fact, client, text, key=key, planned_from=planned
        )
        if expected is StaleWriteError:
            return
        if fact is None or fact.text != text or fact.client_id != client or expected not in (None, fact.id):
            raise Violation("model", f"{what} returned {fact!r}, expected {text!r} (replacing {expected!r})")
        if expected is None:
            if fact.id in self.ref.fact_ids():
                raise Violation("model", f"{what}: new fact got the id of an existing one: {fact!r}")
            self.ref.learn_fact(client, fact.id, text, key)

    @rule(via=VIA, client=st.sampled_from(NAMED), word=WORDS, key=st.sampled_from((None, None, "k1")))
    def add_fact(self, via: int, client: str, word: str, key: str | None) -> None:
        self._add_fact(via, client, word, key, None)

    def planner(self, mark: Mark, other: bool) -> str:
        """Who writes from `mark`: its session's owner (a client), or the other client."""
        owner = mark.author if mark.author in NAMED else NAMED[0]
        return NAMED[1 - NAMED.index(owner)] if other else owner

    @precondition(lambda self: self.marks)
    @rule(via=VIA, word=WORDS, pick=PICK, other=st.booleans())
    def add_planned_fact(self, via: int, word: str, pick: int, other: bool) -> None:
        mark = self.mark(pick)
        self._add_fact(via, self.planner(mark, other), word, None, mark)

    def _fact_id(self, pick: int, client: str) -> str:
        """Mostly one of `client`'s facts; else another's, or none."""
        own = sorted(self.ref.facts[client])
        ids = own * 2 + [*self.ref.fact_ids(), "nofact"]
        return ids[pick % len(ids)]

    def _update_fact(self, via: int, client: str, pick: int, word: str, mark: Mark | None) -> None:
        fact_id = self._fact_id(pick, client)
        text = self.ref.new_text(client, word, "fact", client)
        owner = self.ref.fact_owner(fact_id)
        expected = self.ref.update_fact(client, fact_id, text, mark)
        planned = SessionMark(mark.session_id, mark.generation) if mark else None
        what = f"update_fact({client!r}, fact of {owner!r}, planned_from={mark!r})"
        store = self.stores[via]
        fact = self.call(
            what, expected, "stale-fact", store.update_fact, client, fact_id, text, planned_from=planned
        )
        if expected is StaleWriteError:
            return
        if (fact is not None) != expected or (fact is not None and fact.text != text):
            broken = "ownership" if owner not in (None, client) else "model"
            raise Violation(broken, f"{what} returned {fact!r}, expected {'a fact' if expected else None}")

    @rule(via=VIA, client=st.sampled_from(NAMED), pick=st.integers(0, 7), word=WORDS)
    def update_fact(self, via: int, client: str, pick: int, word: str) -> None:
        self._update_fact(via, client, pick, word, None)

    @precondition(lambda self: self.marks)
    @rule(via=VIA, pick=st.integers(0, 7), word=WORDS, mark=PICK, other=st.booleans())
    def update_planned_fact(self, via: int, pick: int, word: str, mark: int, other: bool) -> None:
        planned = self.mark(mark)
        self._update_fact(via, self.planner(planned, other), pick, word, planned)

    @rule(via=VIA, client=st.sampled_from(NAMED), pick=st.integers(0, 7))
    def delete_fact(self, via: int, client: str, pick: int) -> None:
        fact_id = self._fact_id(pick, client)
        owner = self.ref.fact_owner(fact_id)
        expected = self.ref.delete_fact(client, fact_id)
        got = self.stores[via].delete_fact(client, fact_id)
        if got != expected:
            broken = "ownership" if owner not in (None, client) else "model"
            raise Violation(
                broken, f"delete_fact({client!r}, fact of {owner!r}) returned {got}, expected {expected}"
            )

    # ------------------------------------------------------------------ reads

    @rule(via=VIA, reader=READERS, sid=SIDS, limit=st.sampled_from((1, 2, 50)))
    def read_turn(self, via: int, reader: Any, sid: str, limit: int) -> None:
        self.check_turn(self.stores[via], reader, sid, limit)

    def check_turn(self, store: RollingStore, reader: Any, sid: str, limit: int) -> None:
        """`read_turn` against the model; the generation it returns joins `marks`."""
        expected = self.ref.read_turn(reader, sid, limit)
        what = f"read_turn({sid!r}, limit={limit})"
        turn = self.call(what, expected, "leak", store.read_turn, sid, limit=limit, client_id=reader)
        if turn is None:
            return
        summary, tail, session = expected
        got = turn.record.text if turn.record else None
        if got is not None and self.ref.foreign(reader, got):
            raise Violation(self.ref.foreign(reader, got) or "", f"{what} as {reader!r}: summary {got!r}")
        if got != summary:
            raise Violation(
                "lost" if got is None else "model", f"{what}: summary {got!r}, expected {summary!r}"
            )
        self.texts(what, reader, [str(m.message.content) for m in turn.messages], tail)
        broken = self.ref.observe_generation(sid, turn.generation)
        if broken:
            raise Violation(broken, f"{what}: generation {turn.generation!r} for model epoch {session}")
        mark = None if session is None else Mark(sid, turn.generation, session.epoch, tag(session.owner))
        if mark is not None and mark not in self.marks:
            self.marks.append(mark)

    @rule(via=VIA, reader=READERS, sid=SIDS)
    def get_state(self, via: int, reader: Any, sid: str) -> None:
        expected = self.ref.get_state(reader, sid)
        what = f"get_state({sid!r})"
        state = self.call(what, expected, "leak", self.stores[via].get_state, sid, client_id=reader)
        if state is not None:
            self.texts(what, reader, list(state.values()), list(expected.values()))  # type: ignore[union-attr]

    @rule(
        via=VIA,
        client=st.sampled_from(CLIENTS),
        sid=st.sampled_from((*SESSIONS, None)),
        word=st.sampled_from((*VOCAB, *NAMED, ANON)),
    )
    def search(self, via: int, client: str | None, sid: str | None, word: str) -> None:
        self.check_search(self.stores[via], client, sid if sid or client else "s1", word)

    def check_search(self, store: RollingStore, client: str | None, sid: str | None, query: str) -> None:
        terms = set(query_terms(query))
        expected = self.ref.search(client, sid, terms)
        what = f"search({query!r}, client_id={client!r}, session_id={sid!r})"
        hits = self.call(
            what, expected, "leak", store.search, query, client_id=client, session_id=sid, limit=LIMIT
        )
        if hits is None:
            return
        got = [hit.text for hit in hits]
        for text in got:
            why = self.ref.foreign(client, text)
            if why is not None:
                raise Violation(why, f"{what} found {text!r}")
        if len(set(got)) != len(got):
            raise Violation("model", f"{what} returned a hit twice: {got!r}")
        if set(got) != expected:
            missing = sorted(expected - set(got))  # type: ignore[operator]
            raise Violation(
                "search-missing" if missing else "model", f"{what}: got {got!r}, missing {missing!r}"
            )
        # Defect 5: while the searcher's own data is unchanged, another's writes move no score.
        version = self.ref.versions[client]
        scores = {hit.text: hit.score for hit in hits}
        before = self.scores.get((client, sid, query))
        if before is not None and before[0] == version:
            moved = {
                t: (before[1][t], s)
                for t, s in scores.items()
                if not math.isclose(before[1][t], s, rel_tol=1e-6)
            }
            self.seen["search: scores compared"] += 1
            if moved:
                raise Violation("score", f"{what}: scores moved on another client's write: {moved!r}")
        self.scores[(client, sid, query)] = (version, scores)

    # ------------------------------------------------------------------ after every step

    @invariant()
    def every_view_matches_the_model(self) -> None:
        type(self).steps += 1
        store = self.stores[self.sweeps % 2]
        self.sweeps += 1
        for viewer in CLIENTS:
            for sid in SESSIONS:
                expected = self.ref.read(viewer, sid)
                rows = self.call(f"read({sid!r})", expected, "leak", store.read, sid, client_id=viewer)
                if rows is not None:
                    self.texts(f"read({sid!r})", viewer, [str(m.message.content) for m in rows], expected)  # type: ignore[arg-type]
        for sid in SESSIONS:
            self.check_search(store, None, sid, EVERYTHING)
            session = self.ref.sessions.get(sid)
            self.check_turn(store, session.owner if session else None, sid, 50)
        for client in NAMED:
            self.check_client(store, client)

    def check_client(self, store: RollingStore, client: str) -> None:
        listed = store.sessions(client)
        for sid in listed:
            session = self.ref.sessions.get(sid)
            if session is None or session.owner != client:
                broken = "erased" if session is None else "leak"
                raise Violation(broken, f"sessions({client!r}) lists {sid!r}: {listed!r}")
        if listed != self.ref.sessions_of(client):
            raise Violation(
                "lost", f"sessions({client!r}) = {listed!r}, expected {self.ref.sessions_of(client)!r}"
            )
        want_facts = list(self.ref.facts[client].values())
        self.texts(
            f"facts({client!r})", client, [f.text for f in store.facts(client)], want_facts, ordered=False
        )
        self.check_search(store, client, None, EVERYTHING)
        exported = store.export(client)
        facts = [f["text"] for f in exported["facts"]]
        self.texts(f"export({client!r}) facts", client, facts, want_facts, ordered=False)
        for item in exported["sessions"]:
            sid = item["session_id"]
            session = self.ref.sessions.get(sid)
            if session is None or session.owner != client:
                raise Violation("erased" if session is None else "leak", f"export({client!r}) holds {sid!r}")
            got = [m["message"]["data"]["content"] for m in item["transcript"]]
            self.texts(f"export({client!r}) of {sid!r}", client, got, session.texts)
            summary = item["summary"]["text"] if item["summary"] else None
            extra = [t for t in (summary, *item["state"].values()) if t is not None]
            want = [session.summary.text] if session.summary else []
            self.texts(
                f"export({client!r}) of {sid!r}: summary, state",
                client,
                extra,
                want + list((session.state or {}).values()),
            )
        ids = [s["session_id"] for s in exported["sessions"]]
        if ids != self.ref.sessions_of(client):
            raise Violation(
                "lost", f"export({client!r}) has sessions {ids!r}, expected {self.ref.sessions_of(client)!r}"
            )


def machine_for(backend: str) -> type[StoreMachine]:
    return type(f"{backend.title()}StoreMachine", (StoreMachine,), {"backend": backend})


@pytest.mark.parametrize("backend", sorted(STORE_FACTORIES))
def test_every_backend_matches_the_reference_model(backend: str) -> None:
    if backend in ("postgres", "redis"):
        _probe(backend)
    run_state_machine_as_test(machine_for(backend), settings=SUITE)
