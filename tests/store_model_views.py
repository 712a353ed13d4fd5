"""What the model-based test checks: each view a store gives a client, against the reference.

Owns the comparisons of `test_store_model.py` (a call's answer or refusal, a list of texts, a
turn read, a search with its scores, a client's sessions, facts and export) and which
invariant a difference breaks, most serious first: another client's text ("leak"), erased
text ("erased"), acknowledged text missing ("lost", "search-missing"), then the rest
("model"). Every check raises `store_reference.Violation`; none writes.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from langchain_core.embeddings import DeterministicFakeEmbedding
from store_reference import ANON, VOCAB, Mark, Reference, Violation, tag

from langchain_rolling_memory.core.dense import dot, pack
from langchain_rolling_memory.core.lexical_search import query_terms
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError
from langchain_rolling_memory.stores import RollingStore

__all__ = ["CLIENTS", "NAMED", "SESSIONS", "ViewChecks"]

NAMED = ("alice", "bob")
CLIENTS = (*NAMED, None)  # None: a run naming no client
SESSIONS = ("s1", "s2")
EVERYTHING = " ".join((*VOCAB, *NAMED, ANON))  # a query that matches every text
LIMIT = 1000  # above what a run writes: a search returns every match
EMBEDDINGS = DeterministicFakeEmbedding(size=8)  # a vector per text, the same in every process
MODEL = "model-test"


class ViewChecks:
    """The checks, for a state machine that keeps the model and what it saw."""

    ref: Reference
    seen: ClassVar[Counter[str]]  # what the runs exercised: refusals the model expected, score comparisons
    scores: dict[tuple[Any, ...], tuple[int, dict[str, float]]]  # a search's scores, by scope version
    marks: list[Mark]  # every session generation a turn read saw, stale ones too
    sweeps: int  # how many times every view was checked
    keep_going: ClassVar[bool] = False  # the benchmark's mode: count each failure in `found`, go on
    found: ClassVar[Counter[tuple[str, str]]]  # (invariant, where) -> failures, in keep-going mode
    first_failure: ClassVar[dict[tuple[str, str], str]]  # (invariant, where) -> the first failure's message

    @contextlib.contextmanager
    def recording(self, where: str) -> Iterator[None]:
        """Run one check (or one step); with `keep_going`, a failure is counted, not raised."""
        if not self.keep_going:
            yield
            return
        try:
            yield
        except Exception as exc:
            key = (exc.invariant if isinstance(exc, Violation) else f"crash: {type(exc).__name__}", where)
            self.found[key] += 1
            self.first_failure.setdefault(key, " ".join(str(exc).split()))

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

    def texts(
        self, what: str, viewer: Any, got: list[str], want: list[str], *, ordered: bool = True, held: Any = ()
    ) -> None:
        """`got` must be `want`: leak and erased first, then lost, then the order. `held`: texts
        of `want` that no read may show but this view must (an expired fact, in the export)."""
        for text in got:
            why = None if text in held else self.ref.foreign(viewer, text)
            if why is not None:
                raise Violation(why, f"{what} as {viewer!r} returned {text!r}; expected {want!r}")
        missing = [t for t in want if t not in got]
        if missing:
            raise Violation("lost", f"{what} as {viewer!r} lacks {missing!r}: got {got!r}")
        if (got if ordered else sorted(got)) != (want if ordered else sorted(want)):
            raise Violation("model", f"{what} as {viewer!r}: got {got!r}, expected {want!r}")

    def check_read(self, store: RollingStore, viewer: Any, sid: str) -> None:
        expected = self.ref.read(viewer, sid)
        rows = self.call(f"read({sid!r})", expected, "leak", store.read, sid, client_id=viewer)
        if rows is not None and isinstance(expected, list):
            self.texts(f"read({sid!r})", viewer, [str(m.message.content) for m in rows], expected)

    def check_turn(
        self, store: RollingStore, reader: Any, sid: str, limit: int
    ) -> tuple[Mark, int, int] | None:
        """`read_turn` against the model; the generation it saw joins `marks`. Returns the mark,
        the summary version and the last seq read (what a compaction plans from), if any."""
        expected = self.ref.read_turn(reader, sid, limit)
        what = f"read_turn({sid!r}, limit={limit})"
        turn = self.call(what, expected, "leak", store.read_turn, sid, limit=limit, client_id=reader)
        if turn is None or isinstance(expected, type):
            return None
        summary, tail, session = expected
        got = turn.record.text if turn.record else None
        why = None if got is None else self.ref.foreign(reader, got)
        if why is not None or got != summary:
            broken = why or ("lost" if got is None else "model")
            raise Violation(broken, f"{what} as {reader!r}: summary {got!r}, expected {summary!r}")
        self.texts(what, reader, [str(m.message.content) for m in turn.messages], tail)
        wrong = self.ref.observe_generation(sid, turn.generation)
        if wrong:
            raise Violation(wrong, f"{what}: generation {turn.generation!r}, model session {session}")
        if session is None or turn.generation is None:
            return None
        mark = Mark(sid, turn.generation, session.epoch, tag(session.owner))
        if mark not in self.marks:
            self.marks.append(mark)
        last = turn.messages[-1].seq if turn.messages else (turn.record.covered_seq if turn.record else 0)
        return mark, (turn.record.version if turn.record else 0), last

    def check_memory(self, store: RollingStore, reader: str | None, sid: str, limit: int) -> None:
        """`read_memory` (one read of a turn: summary, tail, state, facts) against the model:
        `read_turn`'s, `get_state`'s and the reader's `facts()`, or refused with them."""
        expected = self.ref.read_turn(reader, sid, limit)
        what = f"read_memory({sid!r}, limit={limit})"
        read = self.call(what, expected, "leak", store.read_memory, sid, limit=limit, client_id=reader)
        if read is None or isinstance(expected, type):
            return
        summary, tail, session = expected
        got = [read.turn.record.text] if read.turn.record else []
        self.texts(f"{what} summary", reader, got, [summary] if summary is not None else [])
        self.texts(what, reader, [str(m.message.content) for m in read.turn.messages], tail)
        wrong = self.ref.observe_generation(sid, read.turn.generation)
        if wrong:
            raise Violation(wrong, f"{what}: generation {read.turn.generation!r}, model session {session}")
        state = self.ref.get_state(reader, sid)
        assert isinstance(state, dict)
        self.texts(f"{what} state", reader, list(read.state.values()), list(state.values()))
        facts = list(self.ref.facts[reader].values()) if reader is not None else []
        self.texts(f"{what} facts", reader, [f.text for f in read.facts], facts, ordered=False)

    def check_after(self, store: RollingStore, viewer: Any, sid: str) -> None:
        """`messages_after` (the answers recall shows after its questions) against the model:
        for a reader the model lets read the session, the message after each of its seqs (0
        first, then each stored one's: the next one, then none); for any other, nothing at all
        (never refused: recall leaves that answer out). Its scope is a search's: a client reads
        only its own sessions there, never one that is nobody's."""
        expected = self.ref.read(viewer, sid)
        session = self.ref.sessions.get(sid)
        if viewer is not None and session is not None and session.owner != viewer:
            expected = None
        what = f"messages_after({sid!r})"
        if isinstance(expected, list):
            rows = store.read(sid, client_id=viewer)
            points = [(sid, 0), *((sid, row.seq) for row in rows)]
            want: list[str | None] = [*expected, None]
        else:
            points = [(sid, seq) for seq in range(len(self.ref.sessions[sid].texts) + 1)]
            want = [None] * len(points)
        got = store.messages_after(points, client_id=viewer)
        shown = [str(m.message.content) for m in got if m is not None]
        self.texts(what, viewer, shown, [text for text in want if text is not None])
        if [m is None for m in got] != [text is None for text in want]:
            raise Violation("model", f"{what} as {viewer!r}: got {got!r}, expected {want!r}")

    def check_state(self, store: RollingStore, reader: Any, sid: str) -> None:
        expected = self.ref.get_state(reader, sid)
        state = self.call(f"get_state({sid!r})", expected, "leak", store.get_state, sid, client_id=reader)
        if state is not None and isinstance(expected, dict):
            self.texts(f"get_state({sid!r})", reader, list(state.values()), list(expected.values()))

    def check_search(self, store: RollingStore, client: str | None, sid: str | None, query: str) -> None:
        """The hits are the model's; with the searcher's data unchanged, so are the scores."""
        expected = self.ref.search(client, sid, set(query_terms(query)))
        what = f"search({query!r}, client_id={client!r}, session_id={sid!r})"
        hits = self.call(
            what, expected, "leak", store.search, query, client_id=client, session_id=sid, limit=LIMIT
        )
        if hits is None or not isinstance(expected, set):
            return
        got = [hit.text for hit in hits]
        for text in got:
            why = self.ref.foreign(client, text)
            if why is not None:
                raise Violation(why, f"{what} found {text!r}")
        if len(set(got)) != len(got) or set(got) != expected:
            missing = sorted(expected - set(got))
            broken = "search-missing" if missing else "model"
            raise Violation(broken, f"{what}: got {got!r}, missing {missing!r}")
        # Defect 5: while the searcher's own data is unchanged, another's writes move no score.
        version = self.ref.versions[client]
        scores = {hit.text: hit.score for hit in hits}
        before = self.scores.get((client, sid, query))
        if before is not None and before[0] == version:
            self.seen["search: scores compared"] += 1
            was = before[1]
            moved = {t: (was[t], s) for t, s in scores.items() if not math.isclose(was[t], s, rel_tol=1e-6)}
            if moved:
                raise Violation("score", f"{what}: scores moved while the searcher's data did not: {moved!r}")
        self.scores[(client, sid, query)] = (version, scores)

    def check_vectors(self, store: RollingStore, client: str | None, sid: str | None) -> None:
        """Every dense hit is a live message of the scope (never another's, never erased), and
        its score is its own text's: a vector listed before an erase never lands on the
        message of a session re-created under the same id."""
        expected = self.ref.search(client, sid, set(query_terms(EVERYTHING)))
        what = f"vector_search(client_id={client!r}, session_id={sid!r})"
        query = EMBEDDINGS.embed_query(EVERYTHING)
        hits = self.call(
            what,
            expected,
            "leak",
            store.vector_search,
            query,
            model=MODEL,
            client_id=client,
            session_id=sid,
            limit=LIMIT,
        )
        if hits is None or not isinstance(expected, set):
            return
        for hit in hits:
            why = self.ref.foreign(client, hit.text)
            if why is not None or hit.text not in expected:
                raise Violation(
                    why or "model", f"{what} found {hit.text!r}; expected among {sorted(expected)!r}"
                )
            own = dot(pack(EMBEDDINGS.embed_query(hit.text)), pack(query))
            if own is None or not math.isclose(hit.score, own, abs_tol=1e-5):
                raise Violation("leak", f"{what}: {hit.text!r} scored {hit.score}, its own vector {own}")
        self.seen["vector_search: hits checked"] += len(hits)

    def check_lists(self, store: RollingStore, client: str) -> None:
        """The client's `sessions()` and `facts()`."""
        listed = store.sessions(client)
        self.check_listed(f"sessions({client!r})", client, listed, self.ref.sessions_of(client))
        want_facts = list(self.ref.facts[client].values())
        got_facts = [f.text for f in store.facts(client)]
        self.texts(f"facts({client!r})", client, got_facts, want_facts, ordered=False)

    def check_export(self, store: RollingStore, client: str) -> None:
        """Everything `export` gives the client: its facts, and its sessions with their
        transcript, summary and state (it reads them with the primitives of `check_lists`)."""
        want = self.ref.sessions_of(client)
        # An expired fact is invisible to the memory but still stored until `purge`: exported.
        expired = list(self.ref.expired[client].values())
        want_facts = [*self.ref.facts[client].values(), *expired]
        exported = store.export(client)
        got_facts = [f["text"] for f in exported["facts"]]
        self.texts(f"export({client!r}) facts", client, got_facts, want_facts, ordered=False, held=expired)
        ids = [item["session_id"] for item in exported["sessions"]]
        for sid, item in zip(ids, exported["sessions"], strict=True):
            self.check_listed(f"export({client!r})", client, [sid], [sid])
            session = self.ref.sessions[sid]
            got = [m["message"]["data"]["content"] for m in item["transcript"]]
            self.texts(f"export({client!r}) of {sid!r}", client, got, session.texts)
            got = [item["summary"]["text"]] if item["summary"] else []
            got += item["state"].values()
            want_rest = [session.summary.text] if session.summary else []
            want_rest += (session.state or {}).values()
            self.texts(f"export({client!r}) summary and state of {sid!r}", client, got, want_rest)
        self.check_listed(f"export({client!r})", client, ids, want)

    def check_listed(self, what: str, client: str, listed: list[str], want: list[str]) -> None:
        for sid in listed:
            session = self.ref.sessions.get(sid)
            if session is None or session.owner != client:
                raise Violation("erased" if session is None else "leak", f"{what} lists {sid!r}: {listed!r}")
        if listed != want:
            raise Violation("lost", f"{what} lists {listed!r}, expected {want!r}")

    def check_every_view(self, store: RollingStore) -> None:
        """Every client's and every anonymous run's view, through `store`: each session read
        by its owner and by one other (in turn), its turn read, its search by a run naming no
        client, each client's search and export."""
        for number, sid in enumerate(SESSIONS):
            session = self.ref.sessions.get(sid)
            owner = session.owner if session else None
            others = [c for c in CLIENTS if c != owner]
            for viewer in (owner, others[(self.sweeps + number) % len(others)]):
                with self.recording("read"):
                    self.check_read(store, viewer, sid)
            with self.recording("read_turn"):
                self.check_turn(store, owner, sid, 50)
            for viewer in (owner, others[(self.sweeps + number + 1) % len(others)]):
                with self.recording("read_memory"):
                    self.check_memory(store, viewer, sid, 50)
            for viewer in (owner, others[(self.sweeps + number + 2) % len(others)]):
                with self.recording("messages_after"):
                    self.check_after(store, viewer, sid)
            with self.recording("search of a session"):
                self.check_search(store, None, sid, EVERYTHING)
            with self.recording("vector search of a session"):
                self.check_vectors(store, None, sid)
        for client in NAMED:
            with self.recording("search of a client"):
                self.check_search(store, client, None, EVERYTHING)
            with self.recording("vector search of a client"):
                self.check_vectors(store, client, None)
            with self.recording("export"):
                self.check_export(store, client)
