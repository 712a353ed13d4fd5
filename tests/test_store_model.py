"""Model-based test of the store contract (issue 20): the reference model against every backend.

Hypothesis' stateful testing drives two store objects on the same data (for memory:// the same
object) with interleaved calls of two clients and of runs naming no client, on two session ids
that get erased and re-created, often by another client. Every call's answer is compared with
`store_reference.Reference`, and after every step every view of every client (read, read_turn,
search, sessions, facts, export: `store_model_views.py`) is checked: no client sees another's
text, nothing erased (or withdrawn by an append's rewind) is readable or searchable, nothing acknowledged is lost, a summary
install or fact write planned before an erase is refused (False, `StaleWriteError`) and writes
nothing, and a client's search scores move only when its own data does (defect 5). Facts may
be written with a ttl: once the clock passes it, no view may show them (issue 24), and
`purge` deletes them.

The clock is the model's (each store's `_now`), so lease expiry and purge are exact. A
compaction is claim + read_turn, then (any steps later) install with the lease and the
generation + release, as the engine does. A lease is claimed only on a session that has a
row: whether a claim creates one is not part of the contract. The suite runs a small budget
(`SUITE`); `benchmarks/store_model_long.py` runs the same machine longer.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from conftest import STORE_FACTORIES, _probe
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from hypothesis.stateful import run_state_machine_as_test as run_machine
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import reopen, wipe
from store_model_views import CLIENTS, EMBEDDINGS, MODEL, NAMED, SESSIONS, ViewChecks
from store_reference import ANON, OPERATOR, VOCAB, Mark, Reference, Violation, tag

from langchain_rolling_memory.core.dense import pack
from langchain_rolling_memory.core.records import SessionMark
from langchain_rolling_memory.engine.dense import embedded_text
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore
from langchain_rolling_memory.stores.contract import Unembedded, VectorWrite

WORKERS = ("w1", "w2")
VIA = st.integers(0, 1)  # which of the two store objects makes the call
SIDS = st.sampled_from(SESSIONS)
WORDS = st.sampled_from(VOCAB)
READERS = st.sampled_from((*CLIENTS, OPERATOR))
PICK = st.integers(0, 15)
MAYBE = st.none() | PICK  # a mark to plan from (an index into `marks`), or None

SUITE = settings(
    max_examples=15,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
"""The CI budget: a few seconds per backend."""


_F = TypeVar("_F", bound=Callable[..., Any])


def checked(step: _F) -> _F:
    """A step of the machine, which in keep-going mode counts its failures and goes on."""

    @functools.wraps(step)
    def run(self: StoreMachine, *args: Any, **kwargs: Any) -> Any:
        with self.recording(step.__name__):
            return step(self, *args, **kwargs)

    return run  # type: ignore[return-value]


def open_pair(backend: str, tmp: Path) -> tuple[RollingStore, RollingStore]:
    """A fresh store of `backend` (its own prefix) and a second object on the same data."""
    first = STORE_FACTORIES[backend](tmp)
    try:
        return first, first if backend == "memory" else reopen(first)
    except BaseException:
        first.close()
        wipe(first)
        raise


class StoreMachine(ViewChecks, RuleBasedStateMachine):
    """Random calls through two store objects, each answer checked against the model."""

    backend: ClassVar[str] = "memory"
    steps: ClassVar[int] = 0  # steps checked, over every run (the benchmark's count)
    seen: ClassVar[Counter[str]] = Counter()
    found: ClassVar[Counter[tuple[str, str]]] = Counter()
    first_failure: ClassVar[dict[tuple[str, str], str]] = {}

    def __init__(self) -> None:
        super().__init__()
        self.ref = Reference()
        self.tmp = Path(tempfile.mkdtemp(prefix="lrm-model-"))
        try:
            self.stores = open_pair(self.backend, self.tmp)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        for store in self.stores:
            store._now = lambda: self.ref.now  # type: ignore[method-assign]
        self.scores = {}
        self.marks = []
        self.compactions: list[tuple[str, Mark, int, int]] = []  # worker, mark, version, last seq
        self.listings: list[list[Unembedded]] = []  # messages listed for embedding, not yet written
        self.sweeps = 0

    def teardown(self) -> None:
        try:
            for store in reversed(self.stores):
                store.close()
        finally:
            wipe(self.stores[0])
            shutil.rmtree(self.tmp, ignore_errors=True)

    @invariant()
    def every_view_matches_the_model(self) -> None:
        type(self).steps += 1
        self.sweeps += 1
        self.check_every_view(self.stores[self.sweeps % 2])

    # ------------------------------------------------------------------ sessions

    @initialize(first=st.sampled_from(CLIENTS), second=st.sampled_from(CLIENTS))
    @checked
    def start(self, first: str | None, second: str | None) -> None:
        self.append(0, first, "s1", ["apple"])
        self.append(1, second, "s2", ["river"])

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=SIDS, words=st.lists(WORDS, min_size=1, max_size=2))
    @checked
    def append(self, via: int, client: str | None, sid: str, words: list[str]) -> None:
        texts = [self.ref.new_text(tag(client), w, "message", sid) for w in words]
        messages = [(HumanMessage if i % 2 == 0 else AIMessage)(t) for i, t in enumerate(texts)]
        expected = self.ref.append(client, sid, texts)
        what = f"append({sid!r}, client_id={client!r})"
        store = self.stores[via]
        seqs = self.call(what, expected, "ownership", store.append, sid, messages, client_id=client)
        if seqs is not None and seqs != expected:
            raise Violation("model", f"{what} returned seqs {seqs}, expected {expected}")

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=SIDS, word=WORDS)
    @checked
    def append_and_summary(self, via: int, client: str | None, sid: str, word: str) -> None:
        """A turn's write: the append and the summary read with it (one round trip)."""
        text = self.ref.new_text(tag(client), word, "message", sid)
        expected = self.ref.append(client, sid, [text])
        what = f"append_and_summary({sid!r}, client_id={client!r})"
        store = self.stores[via]
        done = self.call(
            what, expected, "ownership", store.append_and_summary, sid, [HumanMessage(text)], client_id=client
        )
        if done is None:
            return
        seqs, record = done
        if seqs != expected:
            raise Violation("model", f"{what} returned seqs {seqs}, expected {expected}")
        session = self.ref.sessions[sid]
        want = session.summary.text if session.summary else None
        if (record.text if record else None) != want:
            raise Violation("model", f"{what}: summary {record!r}, expected {want!r}")

    @rule(
        via=VIA,
        client=st.sampled_from(CLIENTS),
        sid=SIDS,
        back=st.integers(0, 4),
        words=st.lists(WORDS, max_size=2),
    )
    @checked
    def rewind(self, via: int, client: str | None, sid: str, back: int, words: list[str]) -> None:
        """A checkpointed graph's write after a fork or a `RemoveMessage`: the rows past `back`
        withdrawn (nothing withdrawn may be found again by any view), then the append."""
        texts = [self.ref.new_text(tag(client), w, "message", sid) for w in words]
        messages = [(HumanMessage if i % 2 == 0 else AIMessage)(t) for i, t in enumerate(texts)]
        expected = self.ref.rewind(client, sid, back, texts)
        what = f"append({sid!r}, client_id={client!r}, rewind={back})"
        store = self.stores[via]
        seqs = self.call(
            what, expected, "ownership", store.append, sid, messages, client_id=client, rewind=back
        )
        if seqs is not None and seqs != expected:
            raise Violation("model", f"{what} returned seqs {seqs}, expected {expected}")

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=SIDS, word=WORDS)
    @checked
    def set_state(self, via: int, client: str | None, sid: str, word: str) -> None:
        text = self.ref.new_text(tag(client), word, "state", sid)
        expected = self.ref.set_state(client, sid, text)
        what = f"set_state({sid!r}, client_id={client!r})"
        store = self.stores[via]
        self.call(what, expected, "ownership", store.set_state, sid, {"note": text}, client_id=client)

    @rule(
        via=VIA,
        client=st.sampled_from(CLIENTS),
        sid=SIDS,
        word=WORDS,
        drop=st.booleans(),
        meanwhile=st.sampled_from((None, "clear_session", "forget", "set_state", "erase_and_recreate")),
        other=st.sampled_from(CLIENTS),
    )
    @checked
    def update_state(
        self,
        via: int,
        client: str | None,
        sid: str,
        word: str,
        drop: bool,
        meanwhile: str | None,
        other: str | None,
    ) -> None:
        """`update_state`, with another step (`meanwhile`, through the other store object)
        landing after its read of the state and before its write: an erase, another write,
        or a session erased and re-created. The update must then be applied to what is there
        after that step (its keys only, after an erase), never to what it read."""
        text = self.ref.new_text(tag(client), word, "state", sid)
        updates: dict[str, str | None] = {f"k_{word}": text, **({"note": None} if drop else {})}
        what = f"update_state({sid!r}, client_id={client!r}, meanwhile={meanwhile!r})"
        store = self.stores[via]
        if not self.ref._visible(client, sid):  # refused by its first read: nothing lands
            self.call(what, OwnershipError, "ownership", store.update_state, sid, updates, client_id=client)
            return
        backend = store._sync
        real = backend.get_state

        def read_then(session_id: str, reader: Any = None) -> str | None:
            raw = real(session_id, reader)
            del backend.get_state  # once
            if meanwhile == "clear_session":
                self.clear_session(1 - via, OPERATOR, sid)
            elif meanwhile == "forget":
                self.forget(1 - via, other or "alice")
            elif meanwhile == "set_state":
                self.set_state(1 - via, other, sid, word)
            elif meanwhile == "erase_and_recreate":
                self.erase_and_recreate(sid, other)
            return raw

        backend.get_state = read_then  # type: ignore[method-assign]
        try:
            got: Any = store.update_state(sid, updates, client_id=client)
        except OwnershipError:
            got = OwnershipError
        finally:
            backend.__dict__.pop("get_state", None)
        expected = self.ref.update_state(client, sid, updates)
        self.seen[f"update_state: {meanwhile} -> {'refused' if got is OwnershipError else 'written'}"] += 1
        if got != expected:
            broken = "erased" if isinstance(got, dict) and "note" in got else "model"
            raise Violation(broken, f"{what} returned {got!r}, expected {expected!r}")

    @rule(via=VIA, reader=READERS, sid=SIDS)
    @checked
    def clear_session(self, via: int, reader: Any, sid: str) -> None:
        expected = self.ref.clear(reader, sid)
        what = f"clear_session({sid!r}, client_id={reader!r})"
        self.call(what, expected, "ownership", self.stores[via].clear_session, sid, client_id=reader)

    # Hypothesis draws the rule with the fewest arguments most: let it be the attack of issue
    # 20, a session erased and re-created (maybe by another client) through the other object.
    @rule(sid=SIDS, client=st.sampled_from(CLIENTS))
    @checked
    def erase_and_recreate(self, sid: str, client: str | None) -> None:
        self.clear_session(0, OPERATOR, sid)
        self.append(1, client, sid, ["stone"])

    @rule(via=VIA, client=st.sampled_from(NAMED))
    @checked
    def forget(self, via: int, client: str) -> None:
        self.ref.forget(client)
        self.stores[via].forget(client)

    @rule(via=VIA, seconds=st.sampled_from((5, 1, 30)), older_than=st.sampled_from((None, 25.5, 4.5, 1000.5)))
    @checked
    def time_passes(self, via: int, seconds: int, older_than: float | None) -> None:
        """The clock moves (leases expire), then maybe a purge."""
        self.ref.advance(seconds)
        if older_than is not None:
            expected = self.ref.purge(older_than)
            got = self.stores[via].purge(older_than=older_than)
            if got != expected:
                raise Violation("model", f"purge(older_than={older_than}) erased {got}, expected {expected}")

    # ------------------------------------------------------------------ reads

    @rule(via=VIA, reader=READERS, sid=SIDS, limit=st.sampled_from((1, 2, 50)))
    @checked
    def read_turn(self, via: int, reader: Any, sid: str, limit: int) -> None:
        self.check_turn(self.stores[via], reader, sid, limit)

    @rule(via=VIA, reader=st.sampled_from(CLIENTS), sid=SIDS, limit=st.sampled_from((1, 2, 50)))
    @checked
    def read_memory(self, via: int, reader: str | None, sid: str, limit: int) -> None:
        self.check_memory(self.stores[via], reader, sid, limit)

    @rule(via=VIA, client=st.sampled_from(NAMED))
    @checked
    def list_client(self, via: int, client: str) -> None:
        self.check_lists(self.stores[via], client)

    @rule(via=VIA, reader=READERS, sid=SIDS)
    @checked
    def get_state(self, via: int, reader: Any, sid: str) -> None:
        self.check_state(self.stores[via], reader, sid)

    @rule(
        via=VIA,
        client=st.sampled_from(CLIENTS),
        sid=st.sampled_from((*SESSIONS, None)),
        word=st.sampled_from((*VOCAB, *NAMED, ANON)),
    )
    @checked
    def search(self, via: int, client: str | None, sid: str | None, word: str) -> None:
        self.check_search(self.stores[via], client, sid if sid or client else "s1", word)

    # ------------------------------------------------------------------ dense vectors

    @rule(via=VIA, client=st.sampled_from(CLIENTS), sid=st.sampled_from((*SESSIONS, None)))
    @checked
    def list_unembedded(self, via: int, client: str | None, sid: str | None) -> None:
        """The catch-up's listing (a session, a client's, or all), written some steps later."""
        self.listings.append(self.stores[via].unembedded(MODEL, client_id=client, session_id=sid, limit=50))

    @precondition(lambda self: self.listings)
    @rule(via=VIA, pick=PICK)
    @checked
    def put_listed(self, via: int, pick: int) -> None:
        listed = self.listings.pop(pick % len(self.listings))
        writes = []
        for item in listed:
            text = embedded_text(item.payload)
            vector = pack(EMBEDDINGS.embed_query(text)) if text else b""
            writes.append(VectorWrite(item.session_id, item.seq, item.generation, vector))
        self.stores[via].put_vectors(MODEL, writes)

    # ------------------------------------------------------------------ compactions

    @precondition(lambda self: self.ref.sessions)
    @rule(
        via=VIA,
        sid=SIDS,
        worker=st.sampled_from(WORKERS),
        ttl=st.sampled_from((3.5, 40.5)),
        wait=st.sampled_from((0, 5)),
    )
    @checked
    def begin_compaction(self, via: int, sid: str, worker: str, ttl: float, wait: int) -> None:
        """Claim the lease and read the turn to fold, as a compactor does; `wait` seconds pass
        first, so that a lease of 3.5 s taken before has expired."""
        self.ref.advance(wait)
        if sid not in self.ref.sessions:
            return  # whether a claim creates a session row is not part of the contract
        held = self.ref.sessions[sid].lease
        expected = self.ref.claim(sid, worker, ttl)
        self.seen[
            f"claim: {'held' if not expected else 'expired lease' if held and held[0] != worker else 'free'}"
        ] += 1
        got = self.stores[via].claim(sid, worker, ttl)
        if got != expected:
            raise Violation("lease", f"claim({sid!r}, {worker!r}) returned {got}, expected {expected}")
        planned = self.check_turn(self.stores[via], OPERATOR, sid, 50) if got else None
        if planned is not None:
            self.compactions.append((worker, *planned))

    @precondition(lambda self: self.compactions)
    @rule(via=VIA, pick=PICK, lease=st.booleans())
    @checked
    def finish_compaction(self, via: int, pick: int, lease: bool) -> None:
        """Install the summary with the generation read (and the lease), then release."""
        worker, mark, version, last = self.compactions.pop(pick % len(self.compactions))
        self.install(via, mark.session_id, worker if lease else None, version, last, mark)
        self.ref.release(mark.session_id, worker)
        self.stores[via].release(mark.session_id, worker)

    @precondition(lambda self: self.marks)
    @rule(via=VIA, pick=PICK)
    @checked
    def install_from_read(self, via: int, pick: int) -> None:
        """An install with an earlier read's generation, no lease, the current version: only
        the generation decides (a read before an erase, even of a re-created session)."""
        mark = self.marks[pick % len(self.marks)]
        session = self.ref.sessions.get(mark.session_id)
        version = session.summary.version if session and session.summary else 0
        self.install(via, mark.session_id, None, version, 0, mark)

    @rule(
        via=VIA,
        sid=SIDS,
        worker=st.sampled_from((None, *WORKERS)),
        offset=st.sampled_from((0, 0, -1, 1)),
        covered=st.integers(0, 3),
    )
    @checked
    def install_summary(self, via: int, sid: str, worker: str | None, offset: int, covered: int) -> None:
        """An install planned from no read: only the row, the version and the lease decide."""
        session = self.ref.sessions.get(sid)
        version = max(0, (session.summary.version if session and session.summary else 0) + offset)
        self.install(via, sid, worker, version, min(covered, len(session.texts) if session else 0), None)

    def install(
        self, via: int, sid: str, worker: str | None, version: int, covered: int, mark: Mark | None
    ) -> None:
        session = self.ref.sessions.get(sid)
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

    # ------------------------------------------------------------------ facts

    def planned(self, pick: int | None, client: str, other: bool) -> tuple[Mark | None, str]:
        """The mark a fact write plans from (None: none) and who writes: `client`, or with a
        mark its session's owner (`other`: the other client)."""
        if pick is None or not self.marks:
            return None, client
        mark = self.marks[pick % len(self.marks)]
        owner = mark.author if mark.author in NAMED else client
        return mark, NAMED[1 - NAMED.index(owner)] if other else owner

    @rule(
        via=VIA,
        client=st.sampled_from(NAMED),
        word=WORDS,
        key=st.sampled_from((None, None, "k1")),
        pick=MAYBE,
        other=st.booleans(),
        ttl=st.sampled_from((None, None, 3.0, 20.0)),
    )
    @checked
    def add_fact(
        self,
        via: int,
        client: str,
        word: str,
        key: str | None,
        pick: int | None,
        other: bool,
        ttl: float | None,
    ) -> None:
        mark, client = self.planned(pick, client, other)
        text = self.ref.new_text(client, word, "fact", client)
        expected = self.ref.add_fact(client, text, key, mark, ttl)
        what = f"add_fact({client!r}, key={key!r}, planned_from={mark!r}, ttl={ttl!r})"
        store = self.stores[via]
        fact = self.call(
            what,
            expected,
            "stale-fact",
            store.add_fact,
            client,
            text,
            key=key,
            planned_from=_mark(mark),
            ttl=ttl,
        )
        if expected is StaleWriteError:
            return
        if fact is None or fact.text != text or fact.client_id != client or expected not in (None, fact.id):
            raise Violation("model", f"{what} returned {fact!r}, expected {text!r} (replacing {expected!r})")
        if expected is None:
            if fact.id in self.ref.fact_ids():
                raise Violation("model", f"{what}: a new fact has the id of another: {fact!r}")
            self.ref.learn_fact(client, fact.id, text, key, ttl)

    def fact_id(self, fact: int, client: str) -> str:
        """Mostly one of `client`'s facts; else another's, or none."""
        expired = sorted(f for facts in self.ref.expired.values() for f in facts)
        ids = sorted(self.ref.facts[client]) * 2 + [*self.ref.fact_ids(), *expired, "nofact"]
        return ids[fact % len(ids)]

    @rule(
        via=VIA,
        client=st.sampled_from(NAMED),
        fact=st.integers(0, 7),
        word=WORDS,
        pick=MAYBE,
        other=st.booleans(),
    )
    @checked
    def update_fact(self, via: int, client: str, fact: int, word: str, pick: int | None, other: bool) -> None:
        mark, client = self.planned(pick, client, other)
        fact_id = self.fact_id(fact, client)
        text = self.ref.new_text(client, word, "fact", client)
        owner = self.ref.fact_owner(fact_id)
        expected = self.ref.update_fact(client, fact_id, text, mark)
        what = f"update_fact({client!r}, a fact of {owner!r}, planned_from={mark!r})"
        store = self.stores[via]
        got = self.call(
            what, expected, "stale-fact", store.update_fact, client, fact_id, text, planned_from=_mark(mark)
        )
        if expected is not StaleWriteError and ((got is not None) != expected or (got and got.text != text)):
            broken = "ownership" if owner not in (None, client) else "model"
            raise Violation(broken, f"{what} returned {got!r}, expected {'a fact' if expected else None}")

    @rule(via=VIA, client=st.sampled_from(NAMED), fact=st.integers(0, 7))
    @checked
    def delete_fact(self, via: int, client: str, fact: int) -> None:
        fact_id = self.fact_id(fact, client)
        owner = self.ref.fact_owner(fact_id)
        expected = self.ref.delete_fact(client, fact_id)
        got = self.stores[via].delete_fact(client, fact_id)
        if got != expected:
            broken = "ownership" if owner not in (None, client) else "model"
            raise Violation(
                broken, f"delete_fact({client!r}, a fact of {owner!r}) returned {got}, expected {expected}"
            )


def _mark(mark: Mark | None) -> SessionMark | None:
    return None if mark is None else SessionMark(mark.session_id, mark.generation)


def machine_for(backend: str) -> type[StoreMachine]:
    """The machine on `backend` (a name of `conftest.STORE_FACTORIES`)."""
    return type(f"{backend.title()}StoreMachine", (StoreMachine,), {"backend": backend})


@pytest.mark.parametrize("backend", sorted(STORE_FACTORIES))
def test_every_backend_matches_the_reference_model(backend: str) -> None:
    if backend in ("postgres", "redis"):
        _probe(backend)
    run_machine(machine_for(backend), settings=SUITE)
