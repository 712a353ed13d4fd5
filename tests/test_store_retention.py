"""Facts expire (issue 24, item 4: the lesson's "durée de conservation"), on every backend.

A fact given a retention (`ttl=` seconds or `expires_at=` a date, or the store's `fact_ttl`)
is invisible from its expiry on: not listed, not searched, not in the prompt's facts block, not
exported; `purge` deletes its rows. The clock is the store's (`_now`), injected here.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.messages import HumanMessage
from store_kit import leftovers, raw_contents

from langchain_rolling_memory import load_memory, open_store
from langchain_rolling_memory.errors import ConfigurationError, FactError
from langchain_rolling_memory.stores import RollingStore

T0 = 1_700_000_000.0


def _at(store: RollingStore, monkeypatch: pytest.MonkeyPatch, t: float) -> None:
    monkeypatch.setattr(store, "_now", lambda: T0 + t)


def _texts(store: RollingStore, client: str = "ana") -> list[str]:
    """The client's fact texts, sorted (facts written in the same second have no set order)."""
    return sorted(f.text for f in store.facts(client))


def _fact_hits(store: RollingStore, query: str, client: str = "ana") -> list[str]:
    return [h.fact.text for h in store.search(query, client_id=client) if h.fact is not None]


class TestExpiry:
    def test_an_expired_fact_is_not_listed_searched_or_sent(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        opera = store.add_fact("ana", "Ana likes opera tickets", ttl=100)
        store.add_fact("ana", "Ana likes jazz tickets")
        assert opera is not None and opera.expires_at == T0 + 100
        _at(store, monkeypatch, 99)
        assert _texts(store) == ["Ana likes jazz tickets", "Ana likes opera tickets"]
        assert _fact_hits(store, "opera") == ["Ana likes opera tickets"]
        _at(store, monkeypatch, 100)  # expired at its expiry, not after
        assert _texts(store) == ["Ana likes jazz tickets"]
        assert _fact_hits(store, "opera") == []
        assert _fact_hits(store, "tickets") == ["Ana likes jazz tickets"]
        block = load_memory(store, "ana").facts
        assert "jazz" in block and "opera" not in block

    async def test_the_async_reads_hide_it_too(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        await store.aadd_fact("ana", "Ana likes opera tickets", ttl=100)
        _at(store, monkeypatch, 150)
        assert await store.afacts("ana") == []
        assert await store.asearch("opera", client_id="ana") == []

    def test_expires_at_takes_a_date(self, store: RollingStore, monkeypatch: pytest.MonkeyPatch) -> None:
        _at(store, monkeypatch, 0)
        when = datetime.fromtimestamp(T0 + 3600, tz=timezone.utc)
        fact = store.add_fact("ana", "Trial ends soon", expires_at=when)
        assert fact is not None and fact.expires_at == T0 + 3600
        naive = when.replace(tzinfo=None) + timedelta(hours=1)  # read as UTC
        later = store.add_fact("ana", "Promo code valid", expires_at=naive)
        assert later is not None and later.expires_at == T0 + 7200
        assert store.add_fact("ana", "Seconds work too", expires_at=T0 + 10) is not None
        _at(store, monkeypatch, 3600)
        assert _texts(store) == ["Promo code valid"]

    def test_an_expired_fact_no_longer_counts_nor_blocks_its_text(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store.max_facts = 1
        _at(store, monkeypatch, 0)
        old = store.add_fact("ana", "Lives in Lyon", ttl=10)
        _at(store, monkeypatch, 20)
        again = store.add_fact("ana", "Lives in Lyon")  # a new fact, not the expired one
        assert old is not None and again is not None
        assert again.id != old.id and again.expires_at is None
        assert _texts(store) == ["Lives in Lyon"]
        assert store.update_fact("ana", old.id, "Lives in Paris") is None


class TestPurgeAndExport:
    def test_purge_deletes_the_rows_of_expired_facts(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        store.add_fact("ana", "Ana likes zarzuela", ttl=100)
        store.add_fact("bob", "Bob likes xylophones", ttl=1000)
        store.add_fact("ana", "Ana likes jazz")
        assert leftovers(store, "zarzuela")
        _at(store, monkeypatch, 100)
        assert leftovers(store, "zarzuela")  # invisible, not yet deleted
        assert store.purge() == 1  # no `older_than`: sessions stay, expired facts go
        assert leftovers(store, "zarzuela") == []
        assert leftovers(store, "xylophones")
        assert _texts(store) == ["Ana likes jazz"]
        assert [m.message.content for m in store.read("s1")] == ["hello"]
        assert store.purge() == 0
        _at(store, monkeypatch, 2000)
        assert store.purge(older_than=3600) == 1  # bob's fact; the session is not that old
        assert leftovers(store, "xylophones") == []
        assert store.facts("bob") == []

    async def test_apurge_deletes_them_with_the_old_sessions(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        await store.aadd_fact("ana", "Ana likes zarzuela", ttl=100)
        _at(store, monkeypatch, 500)
        assert await store.apurge(older_than=200) == 2  # the session and the fact
        assert leftovers(store, "zarzuela", "s1") == []

    async def test_the_export_shows_each_facts_expiry_and_what_is_kept_until_purge(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        store.add_fact("ana", "Ana likes opera", ttl=100)
        store.add_fact("ana", "Ana likes jazz", ttl=1000)
        store.add_fact("ana", "Ana likes folk")
        _at(store, monkeypatch, 500)
        # Everything stored about the client: an expired fact is still held until `purge`, so
        # the export shows it (with its past expiry) though no read of the memory does.
        for export in (store.export("ana"), await store.aexport("ana")):
            facts = json.loads(json.dumps(export))["facts"]
            assert sorted((f["text"], f["expires_at"]) for f in facts) == [
                ("Ana likes folk", None),
                ("Ana likes jazz", T0 + 1000),
                ("Ana likes opera", T0 + 100),
            ]
        store.purge()
        assert sorted(f["text"] for f in store.export("ana")["facts"]) == ["Ana likes folk", "Ana likes jazz"]

    def test_scores_ignore_an_expired_fact(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        store.append(
            "s1", [HumanMessage("tickets for the opera"), HumanMessage("jazz night")], client_id="ana"
        )
        store.add_fact("ana", "Ana collects opera tickets", ttl=100)
        store.add_fact("ana", "Ana hates jazz tickets")
        _at(store, monkeypatch, 100)
        before = [(h.key, round(h.score, 9)) for h in store.search("opera tickets", client_id="ana")]
        store.purge()
        assert [(h.key, round(h.score, 9)) for h in store.search("opera tickets", client_id="ana")] == before


class TestDefaultAndRenewal:
    def test_the_store_default_applies_to_a_fact_given_none(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store.fact_ttl = 50
        _at(store, monkeypatch, 0)
        fact = store.add_fact("ana", "Ana likes opera")
        kept = store.add_fact("ana", "Ana likes jazz", ttl=500)
        assert fact is not None and fact.expires_at == T0 + 50
        assert kept is not None and kept.expires_at == T0 + 500
        _at(store, monkeypatch, 60)
        assert _texts(store) == ["Ana likes jazz"]

    def test_a_key_update_renews_the_expiry(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        store.add_fact("ana", "Team: red", key="team", ttl=100)
        _at(store, monkeypatch, 80)
        renewed = store.add_fact("ana", "Team: blue", key="team", ttl=100)
        assert renewed is not None and renewed.expires_at == T0 + 180
        _at(store, monkeypatch, 150)
        assert _texts(store) == ["Team: blue"]
        # No ttl named and no store default: the fact keeps its expiry (never made permanent).
        kept = store.add_fact("ana", "Team: green", key="team")
        assert kept is not None and kept.expires_at == T0 + 180
        # With a store default, a restated fact's retention counts from the restating.
        store.fact_ttl = 100
        again = store.update_fact("ana", kept.id, "Team: green and white")
        assert again is not None and again.expires_at == T0 + 250
        longer = store.update_fact("ana", kept.id, "Team: white", expires_at=T0 + 10_000)
        assert longer is not None and longer.expires_at == T0 + 10_000
        _at(store, monkeypatch, 9_999)
        assert _texts(store) == ["Team: white"]

    async def test_an_exact_duplicate_with_a_ttl_renews_it(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        first = await store.aadd_fact("ana", "Ana likes opera", ttl=100)
        same = await store.aadd_fact("ana", "Ana likes opera")  # names no ttl: nothing written
        assert first is not None and same is not None and same.expires_at == T0 + 100
        longer = await store.aadd_fact("ana", "ana likes OPERA", ttl=1000)
        assert longer is not None and longer.id == first.id and longer.expires_at == T0 + 1000
        updated = await store.aupdate_fact("ana", first.id, "Ana loves opera", ttl=50)
        assert updated is not None and updated.expires_at == T0 + 50


BAD_TTLS = [0, -1, math.nan, math.inf, True, "60", 1e300]


class TestValidation:
    @pytest.mark.parametrize("bad", BAD_TTLS, ids=repr)
    def test_a_bad_ttl_is_refused_and_nothing_written(self, store: RollingStore, bad: object) -> None:
        store.add_fact("ana", "Ana likes jazz")
        before = raw_contents(store)
        with pytest.raises(FactError, match=r"ttl must be .*got"):
            store.add_fact("ana", "Ana likes opera", ttl=bad)  # type: ignore[arg-type]
        with pytest.raises(FactError, match=r"ttl must be"):
            store.add_fact("ana", "Ana likes jazz", ttl=bad)  # type: ignore[arg-type]
        assert raw_contents(store) == before

    def test_a_past_or_doubled_expiry_is_refused_and_nothing_written(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _at(store, monkeypatch, 0)
        fact = store.add_fact("ana", "Ana likes jazz")
        assert fact is not None
        before = raw_contents(store)
        with pytest.raises(FactError, match=r"expires_at must be after now.*got"):
            store.add_fact("ana", "Ana likes opera", expires_at=T0 - 1)
        with pytest.raises(FactError, match=r"expires_at must be after now"):
            store.update_fact("ana", fact.id, "Ana likes opera", expires_at=T0)
        with pytest.raises(FactError, match=r"not both"):
            store.add_fact("ana", "Ana likes opera", ttl=10, expires_at=T0 + 10)
        with pytest.raises(FactError, match=r"expires_at must be"):
            store.add_fact("ana", "Ana likes opera", expires_at="tomorrow")  # type: ignore[arg-type]
        with pytest.raises(FactError, match=r"milliseconds"):
            store.add_fact("ana", "Ana likes opera", expires_at=T0 * 1000)
        assert raw_contents(store) == before

    def test_a_bad_store_default_is_refused(self) -> None:
        for bad in (0, -5, math.nan, "1d"):
            with pytest.raises(ConfigurationError, match=r"fact_ttl must be .*got"):
                open_store("memory://", fact_ttl=bad)
        with pytest.raises(ConfigurationError, match=r"fact_ttl must be"):
            open_store("memory://?fact_ttl=soon")


class TestOpening:
    def test_fact_ttl_is_a_constructor_option_and_a_url_parameter(self, tmp_path: object) -> None:
        assert open_store("memory://", fact_ttl=60).fact_ttl == 60
        assert open_store("memory://?fact_ttl=86400").fact_ttl == 86400
        assert open_store("memory://").fact_ttl is None
        with open_store(f"sqlite:///{tmp_path}/m.db?fact_ttl=30&prefix=app_") as store:
            assert store.fact_ttl == 30
            assert store.prefix == "app_"  # type: ignore[attr-defined]

    def test_a_server_url_keeps_fact_ttl_from_its_driver(self, store: RollingStore) -> None:
        from store_kit import store_url

        url = store_url(store)
        with open_store(url + "&fact_ttl=120") as again:
            assert again.fact_ttl == 120
            assert again.add_fact("ana", "Ana likes opera") is not None


def _to_schema_4(store: RollingStore) -> None:
    """Take a closed store's data back to schema 4: no expiry column, facts' JSON without it."""
    from contextlib import closing

    from store_kit import POSTGRES_URL, REDIS_URL, backend_name, set_schema_version

    prefix = store.prefix  # type: ignore[attr-defined]
    name = backend_name(store)
    if name == "sqlite":
        import sqlite3

        from test_sqlite_lazy_index import to_schema_4

        with closing(sqlite3.connect(store.path)) as conn, conn:  # type: ignore[attr-defined]
            to_schema_4(conn, prefix)
    elif name == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP INDEX {prefix}facts_expiry")
            conn.execute(f"ALTER TABLE {prefix}facts DROP COLUMN expires_at")
    else:
        import redis

        with redis.Redis.from_url(REDIS_URL, decode_responses=True) as r:
            for key in r.scan_iter(match=f"{prefix}c:*:facts"):
                for fact_id, value in r.hgetall(key).items():
                    old = json.loads(value)
                    del old["expires_at"]
                    r.hset(key, fact_id, json.dumps(old))
    set_schema_version(store, 4)


class TestMigration:
    def test_a_schema_4_store_keeps_its_facts_for_good_and_expires_new_ones(
        self, store: RollingStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from store_kit import backend_name, reopen

        from langchain_rolling_memory.stores.contract import SCHEMA_VERSION

        if backend_name(store) == "memory":
            pytest.skip("the in-memory store has no stored schema to migrate")
        store.append("s1", [HumanMessage("hello")], client_id="ana")
        old = store.add_fact("ana", "Ana likes opera", key="music")
        store.close()
        _to_schema_4(store)
        again = reopen(store)
        try:
            assert SCHEMA_VERSION >= 5  # from 4, through 5 (retention) and any later step
            _at(again, monkeypatch, 10**9)  # much later: a fact written before never expires
            (kept,) = again.facts("ana")
            assert old is not None and kept.id == old.id and kept.expires_at is None
            again.add_fact("ana", "Ana likes zarzuela", ttl=60)
            renewed = again.add_fact("ana", "Ana likes jazz", key="music", ttl=120)
            assert renewed is not None and renewed.id == old.id
            _at(again, monkeypatch, 10**9 + 60)
            assert _texts(again) == ["Ana likes jazz"]
            assert again.purge() == 1
            assert leftovers(again, "zarzuela") == []
            _at(again, monkeypatch, 10**9 + 120)
            assert again.purge() == 1
            assert again.facts("ana") == [] and leftovers(again, "jazz", "opera") == []
        finally:
            again.close()


class TestToolAndExtractor:
    """The tool and the extractor write facts with a retention chosen in code."""

    def test_the_remember_tool_saves_facts_with_its_ttl(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from langchain_rolling_memory import remember_tool

        store = open_store("memory://")
        _at(store, monkeypatch, 0)
        tool = remember_tool(store, "ana", ttl=60)
        assert tool.invoke({"text": "Ana is in Lyon this week", "key": "where"}) == "Saved."
        (fact,) = store.facts("ana")
        assert fact.expires_at == T0 + 60 and fact.source == "tool"
        _at(store, monkeypatch, 60)
        assert store.facts("ana") == []
        with pytest.raises(ConfigurationError, match="ttl must be"):
            remember_tool(store, "ana", ttl=-1)

    async def test_the_extractor_adds_and_updates_facts_with_its_ttl(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        from langchain_rolling_memory import FactExtractor

        replies = iter(
            [
                AIMessage('{"add": [{"text": "Ana is in Lyon", "key": "where"}]}'),
                AIMessage('{"update": [{"id": "f1", "text": "Ana is in Paris"}]}'),
            ]
        )
        store = open_store("memory://", fact_ttl=10_000)
        extractor = FactExtractor(GenericFakeChatModel(messages=replies), fact_ttl=100).bind(store)
        assert extractor.fact_ttl == 100
        _at(store, monkeypatch, 0)
        added = extractor.extract(None, "ana", [HumanMessage("I am in Lyon")]).added
        assert [f.expires_at for f in added] == [T0 + 100]
        _at(store, monkeypatch, 50)
        updated = (await extractor.aextract(None, "ana", [HumanMessage("now Paris")])).updated
        assert [(f.text, f.expires_at) for f in updated] == [("Ana is in Paris", T0 + 150)]
        with pytest.raises(ConfigurationError, match="fact_ttl must be"):
            FactExtractor(GenericFakeChatModel(messages=iter([])), fact_ttl=0)


def test_forget_leaves_nothing_of_a_client_with_expiring_facts(
    store: RollingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(store, monkeypatch, 0)
    store.add_fact("client-forgotten", "likes zarzuela", ttl=100)
    store.add_fact("client-kept", "likes jazz", ttl=100)
    store.forget("client-forgotten")
    assert leftovers(store, "client-forgotten", "zarzuela") == []
    _at(store, monkeypatch, 100)
    assert store.purge() == 1
    assert leftovers(store, "client-kept", "jazz") == []
