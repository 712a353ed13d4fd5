"""Search on plain Redis (no RediSearch module): the two scripts of a search and the ranking.

A search is two scripts. The first reads the scope's search entries with the owner check
inside it: the named session's only if its owner is the searching client (none: only if it
is nobody's), or each session in the client's set that the client owns now (an id it no
longer owns is dropped from the set there, and from `updated` if its session expired), and
the client's facts; each session comes with its erase generation. Python ranks them (`rank`:
BM25 over the scope's entries alone, so a score never depends on another client's text).
The second fetches the hits' messages, each only if its session still has that owner and
that generation: a session erased and re-created, by anyone, between the two scripts gives
nothing. No connection, no driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from langchain_rolling_memory.core.records import Fact
from langchain_rolling_memory.stores.contract import SearchRow
from langchain_rolling_memory.stores.redis.layout import LUA

# ARGV: prefix cid ('' none) sid ('' for the client's sessions)
# -> {{{sid, generation, {entry...}}...}, {fact id, fact json, ...}}
SEARCH_SCOPE = (
    LUA
    + """
local p, cid, sid = ARGV[1], ARGV[2], ARGV[3]
local found = {}
local function take(s)
  local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'client_id', 'generation')
  if not row[1] or (row[2] or '') ~= cid then return false end
  found[#found + 1] = {s, row[3] or '', redis.call('LRANGE', skey(p, s, 'idx'), 0, -1)}
  return true
end
each_scope_session(p, cid, sid, take)
local facts = {}
if cid ~= '' then facts = redis.call('HGETALL', ckey(p, cid, 'facts')) end
return {found, facts}
"""
)

# ARGV: prefix cid ('' none) then sid generation seq per hit -> the message item of each hit,
# or nil when its session no longer has that owner and generation
SEARCH_FETCH = (
    LUA
    + """
local p, cid = ARGV[1], ARGV[2]
local out = {}
for i = 3, #ARGV, 3 do
  local row = redis.call('HMGET', skey(p, ARGV[i], 'info'), 'created_at', 'client_id', 'generation')
  local item = false
  if row[1] and (row[2] or '') == cid and (row[3] or '') == ARGV[i + 1] then
    item = redis.call('LINDEX', skey(p, ARGV[i], 'msgs'), tonumber(ARGV[i + 2]) - 1)
  end
  out[#out + 1] = item
end
return out
"""
)

SCRIPTS = {"search_scope": SEARCH_SCOPE, "search_fetch": SEARCH_FETCH}


class Found(NamedTuple):
    """What the scope script read: each session's (id, generation, entries), and the facts."""

    sessions: list[tuple[str, str, list[Any]]]
    facts: list[Fact]


def search_args(prefix: str, client_id: str | None, session_id: str | None) -> list[Any]:
    return [prefix, client_id or "", session_id or ""]


def live_facts(values: Iterable[Any], now: float) -> list[Fact]:
    """The facts of these JSON values (a facts hash's) that are not expired at `now`, oldest
    first (by created_at, then id); a fact written before schema 5 has no `expires_at`."""
    facts = [Fact(**json.loads(v)) for v in values]
    live = [f for f in facts if f.expires_at is None or f.expires_at > now]
    return sorted(live, key=lambda f: (f.created_at, f.id))


def found_of(reply: Sequence[Any], now: float) -> Found:
    """What the scope script read, its facts expired at the store's clock `now` left out (so
    they are neither found nor counted in the ranking's statistics)."""
    sessions = sorted((str(sid), str(gen), list(entries)) for sid, gen, entries in reply[0])
    return Found(sessions, live_facts(list(reply[1])[1::2], now))


def idx_of(item: Any) -> tuple[float | None, str]:
    """``(created_at, indexed text)`` of one entry of a session's idx list."""
    at, _, text = str(item).partition(" ")
    return (None if at == "-" else float(at)), text


Ranked = tuple[float, str | None, int | None, float | None, Fact | None]


def rank(terms: Sequence[str], found: Found, limit: int) -> list[Ranked]:
    """BM25 (light stemming) over the scope's idx entries and facts, read whole;
    ``(score, sid, seq, created_at, fact)``, best first."""
    from langchain_rolling_memory.core.lexical_search import Bm25Index, index_text

    index = Bm25Index(stem=True)
    dates: dict[tuple[str, int], float | None] = {}
    for sid, _, items in found.sessions:
        for offset, item in enumerate(items):
            at, text = idx_of(item)
            dates[(sid, offset + 1)] = at
            index.add((sid, offset + 1), text)
    by_id = {fact.id: fact for fact in found.facts}
    for fact in found.facts:
        index.add(fact.id, index_text(fact.text))
    out: list[Ranked] = []
    for doc, score in index.search(terms, limit=limit):
        if isinstance(doc, tuple):
            out.append((score, doc[0], doc[1], dates[doc], None))
        else:
            out.append((score, None, None, None, by_id[str(doc)]))
    return out


def fetch_args(prefix: str, client_id: str | None, found: Found, ranked: list[Ranked]) -> list[Any] | None:
    """ARGV of the fetch script for `ranked`'s message hits (None: there is none)."""
    generations = {sid: gen for sid, gen, _ in found.sessions}
    args: list[Any] = [prefix, client_id or ""]
    for _, sid, seq, _, fact in ranked:
        if fact is None:
            args += [sid, generations[str(sid)], seq]
    return args if len(args) > 2 else None


def search_rows(ranked: list[Ranked], payloads: Sequence[Any]) -> list[SearchRow]:
    """`SearchRow`s of `rank`'s output and the items fetched for its message hits, in order
    (an item the fetch refused, None, drops its hit)."""
    out: list[SearchRow] = []
    items = iter(payloads)
    for score, sid, seq, at, fact in ranked:
        if fact is not None:
            out.append((score, None, None, None, None, fact))
            continue
        item = next(items)
        if item is not None:
            out.append((score, sid, seq, str(item).partition(" ")[2], at, None))
    return out
