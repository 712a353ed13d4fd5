"""What only the server backends have: URLs and prefixes, missing extras, Redis expiry."""

from __future__ import annotations

import sys
import time

import pytest
import redis
from langchain_core.messages import AIMessage, HumanMessage
from store_kit import POSTGRES_URL, REDIS_URL, leftovers

from langchain_rolling_memory.errors import ConfigurationError, MissingExtraError, StoreError
from langchain_rolling_memory.stores import RollingStore, open_store


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("postgresql://postgres@127.0.0.1:5432/test", "psycopg", "postgres"),
        ("redis://127.0.0.1:6379/0", "redis", "redis"),
    ],
)
def test_a_missing_driver_names_the_extra_to_install(
    url: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=rf"langchain-rolling-memory\[{extra}\]"):
        open_store(url)


def test_the_prefix_parameter_sets_the_table_prefix_and_is_not_passed_to_libpq(
    pg_store: tuple[RollingStore, str],
) -> None:
    store = open_store(f"{POSTGRES_URL}?prefix=lrm_urltest_&application_name=x")
    try:
        assert store.prefix == "lrm_urltest_"  # type: ignore[attr-defined]
        assert "prefix" not in store.backend.link.conninfo  # type: ignore[attr-defined]
        assert "application_name=x" in store.backend.link.conninfo  # type: ignore[attr-defined]
    finally:
        store.close()
        from store_kit import wipe

        wipe(store)


def test_the_prefix_parameter_sets_the_key_prefix(redis_store: tuple[RollingStore, str]) -> None:
    store = open_store(f"{REDIS_URL}?prefix=lrm-urltest:")
    try:
        assert store.prefix == "lrm-urltest:"  # type: ignore[attr-defined]
        assert "prefix" not in store.backend.clients.url  # type: ignore[attr-defined]
    finally:
        store.close()
        from store_kit import wipe

        wipe(store)


@pytest.mark.parametrize(
    "url",
    ["postgresql://postgres@127.0.0.1:5432/test?prefix=Bad-Prefix", "redis://127.0.0.1:6379/0?prefix=a b"],
)
def test_an_unsafe_prefix_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        open_store(url)


@pytest.mark.parametrize(
    ("url", "where", "reason"),
    [
        pytest.param(
            "redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0", "Connection refused", id="refused-port"
        ),
        pytest.param(
            "redis://nobody:wrong-secret@127.0.0.1:6379/0",
            "redis://nobody@127.0.0.1:6379/0",
            "invalid username-password pair",
            id="wrong-password",
        ),
    ],
)
def test_a_redis_server_that_cannot_be_reached_fails_once_in_one_line(
    url: str, where: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(StoreError) as raised:
        open_store(url)
    message = str(raised.value)
    assert message.startswith(f"cannot connect to Redis at {where}: ")
    assert reason in message and "check the URL" in message
    assert "\n" not in message and "wrong-secret" not in message
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]  # not retried


class TestRedisExpiry:
    def _store(self, redis_store: tuple[RollingStore, str], ttl: float) -> RollingStore:
        from langchain_rolling_memory.stores.redis import RedisRollingStore

        base = redis_store[0]
        return RedisRollingStore(REDIS_URL, key_prefix=base.prefix, ttl=ttl)  # type: ignore[attr-defined]

    def test_every_write_refreshes_the_expiry_of_the_session(
        self, redis_store: tuple[RollingStore, str]
    ) -> None:
        store = self._store(redis_store, ttl=3600)
        try:
            store.append("s1", [HumanMessage("hi")], client_id="c1")
            store.install_summary("s1", "sum", covered_seq=1, expected_version=0)
            store.set_state("s1", {"a": 1}, client_id="c1")
            keys = [k for k in store.keys.session("s1") if not k.endswith(":lease")]  # type: ignore[attr-defined]
            with redis.Redis.from_url(REDIS_URL) as r:
                for key in keys:
                    r.pexpire(key, 50_000)
                store.append("s1", [AIMessage("hello")], client_id="c1")
                ttls = [r.pttl(key) for key in keys]
            assert all(3_000_000 < t <= 3_600_000 for t in ttls), ttls
            assert store.facts("c1") == []
        finally:
            store.close()

    def test_an_expired_session_is_gone_everywhere(self, redis_store: tuple[RollingStore, str]) -> None:
        store = self._store(redis_store, ttl=0.3)
        try:
            store.append("sess-expiring", [HumanMessage("hi")], client_id="client-expiring")
            store.add_fact("client-expiring", "facts do not expire")
            time.sleep(0.6)
            assert store.read("sess-expiring") == []
            assert store.session_info("sess-expiring") is None
            assert store.sessions("client-expiring") == []
            assert [f.text for f in store.facts("client-expiring")] == ["facts do not expire"]
            assert store.purge(older_than=0) == 0
            assert [line for line in leftovers(store, "sess-expiring") if "facts" not in line] == []
        finally:
            store.close()

    def test_ttl_must_be_positive(self, redis_store: tuple[RollingStore, str]) -> None:
        with pytest.raises(ConfigurationError, match="ttl"):
            self._store(redis_store, ttl=0)


def _plan_nodes(plan: dict[str, object]) -> list[dict[str, object]]:
    nodes = [plan]
    for child in plan.get("Plans", []):  # type: ignore[attr-defined]
        nodes += _plan_nodes(child)
    return nodes


def test_a_turns_read_scans_only_the_unsummarized_tail_in_postgres(
    pg_store: tuple[RollingStore, str],
) -> None:
    import psycopg

    store, _ = pg_store
    for _ in range(4):
        store.append("long", [HumanMessage("x" * 50)] * 500)
    store.install_summary("long", "sum", covered_seq=1900, expected_version=0)
    queries = store.q  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"ANALYZE {store.prefix}messages")  # type: ignore[attr-defined]
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + queries.summary_and_tail, {"sid": "long", "limit": 13}
        ).fetchone()
    assert row is not None
    nodes = _plan_nodes(row[0][0]["Plan"])
    scans = [n for n in nodes if n.get("Relation Name") == f"{store.prefix}messages"]  # type: ignore[attr-defined]
    assert scans, nodes
    assert all(n["Node Type"] != "Seq Scan" for n in scans)
    assert all(int(n.get("Rows Removed by Filter", 0)) == 0 for n in scans)  # type: ignore[call-overload]
    # 100 unsummarized messages, 13 wanted: the scan stops at 13 (newest first), at any length.
    assert sum(int(n["Actual Rows"]) for n in scans) <= 13  # type: ignore[call-overload]


async def test_an_english_search_config_stems_and_drops_its_stop_words(
    pg_store: tuple[RollingStore, str],
) -> None:
    from conftest import disposing, unique_prefix

    from langchain_rolling_memory.stores.postgres import PostgresRollingStore

    store = PostgresRollingStore.from_url(POSTGRES_URL, table_prefix=unique_prefix(), search_config="english")
    async with disposing(store):
        store.append(
            "s1",
            [HumanMessage("We booked two rooms in Lyon"), AIMessage("The booking is confirmed")],
            client_id="ana",
        )
        store.append("s2", [HumanMessage("Nothing about hotels here")], client_id="ana")
        # 'bookings' and 'booked' share the stem 'book'; 'own' is a stop word of the english
        # configuration (not of ours): its term matches nothing and raises nothing.
        hits = store.search("own bookings", client_id="ana")
        assert {h.key for h in hits} == {("message", "s1", 1), ("message", "s1", 2)}
        assert store.search("own", client_id="ana") == []
        assert await store.asearch("own bookings", client_id="ana", session_id="s1") != []


def _pending_and_options(prefix: str) -> dict[str, tuple[int, list[str]]]:
    """Per search index: the pages its pending list held (merged by the call) and its options."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        out = {}
        for index in ("messages_tsv", "facts_tsv"):
            pages = conn.execute("SELECT gin_clean_pending_list(%s::regclass)", (f"{prefix}{index}",))
            options = conn.execute(
                "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (f"{prefix}{index}",)
            )
            out[index] = (int(pages.fetchone()[0]), list(options.fetchone()[0] or []))  # type: ignore[index]
        return out


def test_a_postgres_store_of_schema_6_gets_search_indexes_without_a_pending_list(
    pg_store: tuple[RollingStore, str],
) -> None:
    # The search scans the index once per query term: each scan would read the whole pending
    # list, so an append writes into the index itself, and a store's pending rows go in.
    import psycopg
    from store_kit import reopen, set_schema_version

    store, _ = pg_store
    prefix = store.prefix  # type: ignore[attr-defined]
    off = ["fastupdate=off"]
    assert _pending_and_options(prefix) == {"messages_tsv": (0, off), "facts_tsv": (0, off)}
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:  # as schema 6 left them
        for index in ("messages_tsv", "facts_tsv"):
            conn.execute(f"ALTER INDEX {prefix}{index} RESET (fastupdate)")
    store.append("s1", [HumanMessage("Lyon"), AIMessage("Paris")], client_id="ana")
    store.add_fact("ana", "Ana lives in Lyon")
    store.close()
    set_schema_version(store, 6)
    again = reopen(store)
    try:
        assert _pending_and_options(prefix) == {"messages_tsv": (0, off), "facts_tsv": (0, off)}
        assert {h.key for h in again.search("lyon", client_id="ana") if h.kind == "message"} == {
            ("message", "s1", 1)
        }
        assert [h.fact.text for h in again.search("lyon", client_id="ana") if h.fact] == ["Ana lives in Lyon"]
        again.append("s1", [HumanMessage("Lyon again")], client_id="ana")
        assert _pending_and_options(prefix)["messages_tsv"] == (0, off)
    finally:
        again.close()


def test_a_small_client_of_a_large_table_is_ranked_as_before_the_table_was_analysed(
    pg_store: tuple[RollingStore, str],
) -> None:
    # The search scans the index once per term while the scope holds a tenth of the table's
    # rows or more (by the planner's estimate, none before ANALYZE); a smaller scope's rows are
    # found first and tested against each term: the two ways rank alike, scores included.
    import psycopg

    store, _ = pg_store
    prefix = store.prefix  # type: ignore[attr-defined]
    store.append(
        "a1", [HumanMessage("We booked the Paris trip"), AIMessage("Paris in May, by train")], client_id="ana"
    )
    store.append("a2", [HumanMessage("The train to Lyon was late"), AIMessage("Lyon")], client_id="ana")
    store.add_fact("ana", "Ana takes the train to Paris")
    for k in range(30):
        store.append(f"b{k}", [HumanMessage(f"Bob's Paris trip by train, day {k}")], client_id="bob")
    questions = ("paris train trip", "lyon", "may trip")

    def ranked() -> list[object]:
        return [
            [(h.key, h.score) for h in store.search(q, client_id=c, limit=3)]
            for q in questions
            for c in ("ana", "bob")
        ] + [[(h.key, h.score) for h in store.search("train paris", client_id="ana", session_id="a1")]]

    before = ranked()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"ANALYZE {prefix}messages")
        [(rows,)] = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (f"{prefix}messages",)
        )
        assert rows == 34  # ana's 4 messages are less than a tenth of them
    assert ranked() == before
    assert before[0][0][0] == ("message", "a1", 1) and len(before[0]) == 3


async def test_a_postgres_store_of_schema_3_gets_erase_generations_and_loses_orphan_summaries(
    pg_store: tuple[RollingStore, str],
) -> None:
    import psycopg
    from store_kit import reopen, set_schema_version

    from langchain_rolling_memory.core.records import SessionMark
    from langchain_rolling_memory.errors import StaleWriteError

    store, _ = pg_store
    prefix = store.prefix  # type: ignore[attr-defined]
    store.append("s1", [HumanMessage("hello"), AIMessage("hi")], client_id="ana")
    assert store.install_summary("s1", "greetings", covered_seq=1, expected_version=0)
    store.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:  # as schema 3 left it
        conn.execute(f"ALTER TABLE {prefix}sessions DROP COLUMN generation")
        # What an install after an erase left before schema 4 (issue 20, defect 2).
        conn.execute(f"INSERT INTO {prefix}summaries VALUES ('ghost', 'passport X099', 3, 1, '{{}}', 0)")
    set_schema_version(store, 3)
    again = reopen(store)
    try:
        turn = again.read_turn("s1", limit=5, client_id="ana")
        assert turn.generation == ""  # a row written before schema 4
        assert turn.record is not None and turn.record.text == "greetings"
        assert [m.seq for m in turn.messages] == [2]
        assert again.summary("ghost") is None
        assert again.add_fact("ana", "says hello", planned_from=SessionMark("s1", "")) is not None
        again.clear_session("s1")
        again.append("s1", [HumanMessage("new")], client_id="ana")
        fresh = again.read_turn("s1", limit=5).generation
        assert fresh not in (None, "")
        assert not again.install_summary("s1", "greetings", covered_seq=1, expected_version=0, generation="")
        with pytest.raises(StaleWriteError):
            await again.aadd_fact("ana", "says hello twice", planned_from=SessionMark("s1", ""))
    finally:
        await again.aclose()
