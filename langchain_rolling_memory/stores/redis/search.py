"""Search on plain Redis (no RediSearch module): an inverted index per session, its scripts
and the ranking.

Each session has its inverted index (`layout.py`: ``s:{sid}:terms``), written by the append
script with the messages (their terms counted here, in Python, by `terms_line`) and erased
and expiring with them. A search is two scripts. The first reads, for the scope's sessions,
the postings of the query's terms only, with the owner check inside it: the named session's
only if its owner is the searching client (none: only if it is nobody's), or each session in
the client's set that the client owns now (an id it no longer owns is dropped from the set
there, and from `updated` if its session expired), and the client's facts (at most
`max_facts`, read whole); each session comes with its erase generation. Python ranks them
(`rank`: the floats and ties of `lexical_search.bm25_scores`, with light stemming, over the
scope's statistics alone, so a score never depends on another client's text). The second fetches the hits'
messages and dates, each only if its session still has that owner and that generation: a
session erased and re-created, by anyone, between the two scripts gives nothing.

A client's search (no session named) does not visit each of its sessions: it reads the
client's statistics (`layout.py`: ``c:{cid}:terms``), which the scripts that write and erase
its sessions keep in the same script (its messages and their summed lengths, each session's
share, and per term the sessions that hold it), and visits only the sessions its terms' lists
name, each with the owner, generation and message count checked against its share, and from
each only the terms whose lists name it: the ranking's statistics are those of all the
client's sessions, as before. Anything that does not
add up (a session its statistics do not count, a share another generation's, a session set of
another size: what an older release or a hand leaves) sends the search to every session and
has the statistics built again (`BUILD_CLIENT`), as are those of a client written before they
existed; a client whose sessions expire (`ttl=`) never keeps them, as an expiry runs no script.

A session whose index does not hold all its messages under its generation (written before
the index existed, or appended to by an older release) is reported by the first script and
indexed from its search entries (`idx`) before the search runs again (`source_args`,
`build_args`). No connection, no driver.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from langchain_rolling_memory.core.lexical_search import (
    bm25_terms,
    index_text,
    payload_index_text,
)
from langchain_rolling_memory.core.records import Fact
from langchain_rolling_memory.errors import StoreError
from langchain_rolling_memory.stores.contract import SearchRow
from langchain_rolling_memory.stores.redis.layout import LUA

REINDEX_TRIES = 3
"""Times a search indexes the sessions its first script found unindexed and asks again; a
session still unindexed after that (an older release appending to it all along) is left out."""

# ARGV: prefix cid ('' none) sid ('' for the client's sessions) term...
# -> {found, {stale sid...}, {fact id, fact json, ...}}; found: one line per indexed session,
# "sid<TAB>generation<TAB>#docs<TAB>#len<TAB>postings of each term, tab-separated" (one
# string: a reply of a few elements is read fast, hundreds of sessions or not)
SEARCH_SCOPE = (
    LUA
    + """
local p, cid, sid = ARGV[1], ARGV[2], ARGV[3]
local fields, nterms = {'#docs', '#len', '#gen'}, #ARGV - 3
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
for i = 4, #ARGV do fields[#fields + 1] = '#b '..ARGV[i] end
-- A term's postings: its sealed runs '<term> 1'..'<term> k' (the append's), then its newest.
local function postings(key, t, newest, sealed)
  local k = tonumber(sealed or '0')
  if k == 0 then return newest or '' end
  local names = {}
  for b = 1, k do names[b] = ARGV[3 + t]..' '..b end
  return table.concat(redis.call('HMGET', key, unpack(names)))..(newest or '')
end
local found, stale, mode = {}, {}, ''
-- The client's search: from its statistics (`c:{cid}:terms`, `layout.py`) and the sessions
-- its query terms' lists name, each read as `take` does; false (nothing kept, or anything
-- that does not add up: they are built again, `BUILD_CLIENT`) for a visit of every session.
local function from_statistics()
  if cid == '' or sid ~= '' then return false end
  local ct, listed = ckey(p, cid, 'terms'), ckey(p, cid, 'sessions')
  local names = {'#v', '#ttl', '#docs', '#len', '#members'}
  for t = 1, nterms do names[5 + t] = ARGV[3 + t] end
  for t = 1, nterms do names[5 + nterms + t] = '#b '..ARGV[3 + t] end
  local head = redis.call('HMGET', ct, unpack(names))
  if head[2] then return false end
  -- A term's list: its sealed runs, then its newest (`add_terms`).
  for t = 1, nterms do head[5 + t] = postings(ct, t, head[5 + t], head[5 + nterms + t]) end
  mode = 'build'
  if not head[1] then return false end
  if tonumber(head[5]) ~= redis.call('SCARD', listed) or redis.call('PTTL', listed) >= 0 then
    drop_statistics(ct)
    return false
  end
  -- Each session to visit, with the terms whose lists name it: only those are read from its
  -- index (a session holding a term is always on the term's list while the statistics are kept).
  local visit, seen = {}, {}
  for t = 1, nterms do
    for s in string.gmatch(head[5 + t] or '', '%S+') do
      local terms = seen[s]
      if not terms then terms = {}; seen[s] = terms; visit[#visit + 1] = s end
      if terms[#terms] ~= t then terms[#terms + 1] = t end
    end
  end
  local shares = {}
  for i = 1, #visit, 1000 do
    local names = {}
    for j = i, math.min(i + 999, #visit) do names[#names + 1] = '@'..visit[j] end
    for _, share in ipairs(redis.call('HMGET', ct, unpack(names))) do shares[#shares + 1] = share end
  end
  local lines, holds = {}, {}
  for t = 1, nterms do holds[t] = {} end
  for i, s in ipairs(visit) do
    local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'client_id', 'generation')
    if row[1] and row[2] == cid then
      local count = redis.call('LLEN', skey(p, s, 'msgs'))
      local share = shares[i]
      if not share then
        if count > 0 then drop_statistics(ct); return false end
      else
        local gen, docs, len = string.match(share, '^(%S*) (%d+) (%d+)$')
        local key, terms = skey(p, s, 'terms'), seen[s]
        local names = {'#docs', '#len', '#gen'}
        for j, t in ipairs(terms) do names[3 + j] = ARGV[3 + t]; names[3 + #terms + j] = '#b '..ARGV[3 + t] end
        local got = redis.call('HMGET', key, unpack(names))
        if gen ~= (row[3] or '') or count ~= tonumber(docs) or got[1] ~= docs or got[2] ~= len
          or (got[3] or '') ~= gen then
          drop_statistics(ct)
          return false
        end
        local line = {s, gen, docs..'\t'..len}
        for t = 1, nterms do line[3 + t] = '' end
        for j, t in ipairs(terms) do
          local list = postings(key, t, got[3 + j], got[3 + #terms + j])
          line[3 + t] = list
          if list ~= '' then holds[t][#holds[t] + 1] = s end
        end
        lines[#lines + 1] = table.concat(line, '\t')
      end
    end
  end
  -- A list naming a session that no longer holds its term (erased, or of another generation)
  -- is written without it.
  for t = 1, nterms do
    local _, named = string.gsub(head[5 + t], '%S+', '')
    if #holds[t] < named then
      local term, sealed = ARGV[3 + t], tonumber(head[5 + nterms + t] or '0')
      local gone = {term, '#b '..term}
      for b = 1, sealed do gone[#gone + 1] = term..' '..b end
      redis.call('HDEL', ct, unpack(gone))
      if #holds[t] > 0 then redis.call('HSET', ct, term, ' '..table.concat(holds[t], ' ')..' ') end
    end
  end
  found, mode = lines, head[3]..'\t'..head[4]
  return true
end
local function take(s)
  local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'client_id', 'generation')
  if not row[1] or (row[2] or '') ~= cid then return false end
  local count = redis.call('LLEN', skey(p, s, 'msgs'))
  if count > 0 then
    local key = skey(p, s, 'terms')
    local got = redis.call('HMGET', key, unpack(fields))
    if tonumber(got[1] or '0') ~= count or (got[3] or '') ~= (row[3] or '') then
      stale[#stale + 1] = s
    else
      local line = {s, row[3] or '', got[1]..'\\t'..got[2]}
      for t = 1, nterms do line[#line + 1] = postings(key, t, got[3 + t], got[3 + nterms + t]) end
      found[#found + 1] = table.concat(line, '\\t')
    end
  end
  return true
end
if not from_statistics() then each_scope_session(p, cid, sid, take) end
local facts = {}
if cid ~= '' then facts = redis.call('HGETALL', ckey(p, cid, 'facts')) end
return {table.concat(found, '\\n'), stale, facts, mode}
"""
)

# ARGV: prefix cid ('' none) hits: "<sid>\t<generation>\t<seq>\n" per hit -> one entry per hit,
# NUL-separated: "<date> <message item>" (date '-': none), or '' when its session no longer has
# that owner and generation (a message is JSON, `serde.dumps_message`: never a raw NUL); each
# session checked once however many of its messages are hits
SEARCH_FETCH = (
    LUA
    + """
local p, cid = ARGV[1], ARGV[2]
local out, sessions = {}, {}
for s, gen, seq in string.gmatch(ARGV[3], '([^\\t\\n]+)\\t([^\\t\\n]*)\\t(%d+)\\n') do
  local seen = sessions[s]
  if not seen then
    local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'client_id', 'generation')
    seen = {ok = false}
    if row[1] and (row[2] or '') == cid then
      local msgs, idx = skey(p, s, 'msgs'), skey(p, s, 'idx')
      seen = {ok = true, gen = row[3] or '', msgs = msgs, idx = idx,
              dated = redis.call('LLEN', idx) == redis.call('LLEN', msgs)}
    end
    sessions[s] = seen
  end
  local item = ''
  if seen.ok and seen.gen == gen then
    local at = tonumber(seq) - 1
    local date = '-'
    if seen.dated then date = string.match(redis.call('LINDEX', seen.idx, at) or '-', '^%S*') end
    local message = redis.call('LINDEX', seen.msgs, at)
    if message then item = date..' '..message end
  end
  out[#out + 1] = item
end
return table.concat(out, '\\0')
"""
)

# ARGV: prefix sid -> {} (no session), or {generation, message count, 'idx' or 'msgs', item...}:
# the search entries when there is one per message, else the messages themselves
TERMS_SOURCE = (
    LUA
    + """
local p, sid = ARGV[1], ARGV[2]
local row = redis.call('HMGET', skey(p, sid, 'info'), 'created_at', 'generation')
if not row[1] then return {} end
local msgs, idx = skey(p, sid, 'msgs'), skey(p, sid, 'idx')
local count = redis.call('LLEN', msgs)
local kind, list = 'msgs', msgs
if redis.call('LLEN', idx) == count then kind, list = 'idx', idx end
local out = redis.call('LRANGE', list, 0, count - 1)
table.insert(out, 1, kind)
table.insert(out, 1, count)
table.insert(out, 1, row[2] or '')
return out
"""
)

# ARGV: prefix sid generation count length (term postings)... -> 1, or 0 (nothing written)
# when the session is gone, of another generation or holds another number of messages
TERMS_BUILD = (
    LUA
    + """
local p, sid, gen, count = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local info, terms = skey(p, sid, 'info'), skey(p, sid, 'terms')
local row = redis.call('HMGET', info, 'created_at', 'generation')
if not row[1] or (row[2] or '') ~= gen then return 0 end
if redis.call('LLEN', skey(p, sid, 'msgs')) ~= tonumber(count) then return 0 end
redis.call('DEL', terms)
redis.call('HSET', terms, '#docs', count, '#len', ARGV[5], '#gen', gen)
for i = 6, #ARGV, 1000 do redis.call('HSET', terms, unpack(ARGV, i, math.min(i + 999, #ARGV))) end
local ms = span(info, 0)
if ms > 0 then redis.call('PEXPIRE', terms, ms) end
-- Its owner's statistics count the index it had: they are built again.
local owner = redis.call('HGET', info, 'client_id')
if owner then drop_statistics(ckey(p, owner, 'terms')) end
return 1
"""
)

# ARGV: prefix cid -> 1 when the client's search statistics were written (`layout.py`), else
# 0: one of its listed sessions is not its own, expires, or has an index that does not hold
# its messages (the next search sees to it), or the client's sessions expire (`#ttl`: they
# are never kept). Reads every term of every session of the client: run once per client
# whose sessions were written before the statistics existed (or by an older release).
BUILD_CLIENT = (
    LUA
    + """
local p, cid = ARGV[1], ARGV[2]
local ct, listed = ckey(p, cid, 'terms'), ckey(p, cid, 'sessions')
if redis.call('HEXISTS', ct, '#ttl') == 1 then return 0 end
local function expiring()
  redis.call('DEL', ct)
  redis.call('HSET', ct, '#ttl', 1)
  local left = redis.call('PTTL', listed)
  if left > 0 then redis.call('PEXPIRE', ct, left) end
  return 0
end
if redis.call('PTTL', listed) >= 0 then return expiring() end
local members = redis.call('SMEMBERS', listed)
if #members == 0 then
  redis.call('DEL', ct)
  return 0
end
local docs, len, shares, lists, order = 0, 0, {}, {}, {}
for _, s in ipairs(members) do
  local info = skey(p, s, 'info')
  local row = redis.call('HMGET', info, 'created_at', 'client_id', 'generation')
  if not row[1] or row[2] ~= cid then return 0 end
  if redis.call('PTTL', info) >= 0 then return expiring() end
  local count = redis.call('LLEN', skey(p, s, 'msgs'))
  if count > 0 then
    local key, gen = skey(p, s, 'terms'), row[3] or ''
    local st = redis.call('HMGET', key, '#docs', '#len', '#gen')
    if tonumber(st[1] or '0') ~= count or (st[3] or '') ~= gen then return 0 end
    docs, len = docs + count, len + tonumber(st[2])
    shares[#shares + 1] = '@'..s
    shares[#shares + 1] = gen..' '..st[1]..' '..st[2]
    for _, f in ipairs(redis.call('HKEYS', key)) do
      if string.sub(f, 1, 1) ~= '#' and not string.find(f, ' ', 1, true) then
        local holders = lists[f]
        if not holders then holders = {}; lists[f] = holders; order[#order + 1] = f end
        holders[#holders + 1] = s
      end
    end
  end
end
redis.call('DEL', ct)
redis.call('HSET', ct, '#docs', docs, '#len', len, '#members', #members)
for i = 1, #shares, 1000 do redis.call('HSET', ct, unpack(shares, i, math.min(i + 999, #shares))) end
local batch = {}
for _, term in ipairs(order) do
  batch[#batch + 1] = term
  batch[#batch + 1] = ' '..table.concat(lists[term], ' ')..' '
  if #batch >= 1000 then redis.call('HSET', ct, unpack(batch)); batch = {} end
end
if #batch > 0 then redis.call('HSET', ct, unpack(batch)) end
redis.call('HSET', ct, '#v', 1)
return 1
"""
)

SCRIPTS = {
    "search_scope": SEARCH_SCOPE,
    "search_fetch": SEARCH_FETCH,
    "terms_source": TERMS_SOURCE,
    "terms_build": TERMS_BUILD,
    "client_build": BUILD_CLIENT,
}


def stems(terms: Iterable[str]) -> list[str]:
    """The distinct index terms of a query's terms (light stemming), in order."""
    return list(dict.fromkeys(bm25_terms(terms, stem=True)))


def _counted(indexed: str) -> tuple[int, Counter[str]]:
    """A folded text's length in terms and each term's frequency, as `Bm25Index(stem=True)`."""
    words = bm25_terms(indexed.split(), stem=True)
    return len(words), Counter(words)


def terms_line(indexed: str) -> str:
    """The append script's line for one message of this indexed text (`index_text`):
    ``"<length> <term> <tf> <term> <tf>..."``."""
    length, counts = _counted(indexed)
    return f"{length}" + "".join(f" {term} {tf}" for term, tf in counts.items())


class Found(NamedTuple):
    """What the scope script read: each session's (id, generation, #docs, #len, postings per
    term), the sessions it found unindexed, and the live facts; read from the client's
    statistics, the messages and lengths of all its sessions (`totals`) and only the sessions
    that hold a term; else `build`: the client's statistics are to be built (`BUILD_CLIENT`)."""

    sessions: list[tuple[str, str, int, int, list[str]]]
    stale: list[str]
    facts: list[Fact]
    totals: tuple[int, int] | None = None
    build: bool = False


def search_args(
    prefix: str, client_id: str | None, session_id: str | None, terms: Sequence[str]
) -> list[Any]:
    return [prefix, client_id or "", session_id or "", *terms]


def live_facts(values: Iterable[Any], now: float) -> list[Fact]:
    """The facts of these JSON values (a facts hash's) that are not expired at `now`, oldest
    first (by created_at, then id); a fact written before schema 5 has no `expires_at`."""
    facts = [Fact(**json.loads(v)) for v in values]
    live = [f for f in facts if f.expires_at is None or f.expires_at > now]
    return sorted(live, key=lambda f: (f.created_at, f.id))


def found_of(reply: Sequence[Any], now: float) -> Found:
    """What the scope script read, its facts expired at the store's clock `now` left out (so
    they are neither found nor counted in the ranking's statistics)."""
    sessions = []
    for line in str(reply[0]).split("\n") if reply[0] else ():
        sid, gen, docs, length, *postings = line.split("\t")
        sessions.append((sid, gen, int(docs), int(length), postings))
    sessions.sort()
    mode = str(reply[3])
    docs, _, length = mode.partition("\t")
    totals = (int(docs), int(length)) if length else None
    stale = [str(sid) for sid in reply[1]]
    return Found(sessions, stale, live_facts(list(reply[2])[1::2], now), totals, mode == "build")


def client_build_args(prefix: str, client_id: str | None, found: Found) -> list[Any] | None:
    """ARGV of the script that builds the client's search statistics, when the scope script
    asked for them and found no session unindexed (None: nothing to build)."""
    return [prefix, client_id] if found.build and not found.stale and client_id else None


def source_args(prefix: str, session_id: str) -> list[Any]:
    """ARGV of the script that reads what an unindexed session's index is built from."""
    return [prefix, session_id]


def build_args(prefix: str, session_id: str, source: Sequence[Any]) -> list[Any] | None:
    """ARGV of the script that writes a session's whole index, from what `TERMS_SOURCE`
    read (None: the session is gone)."""
    if not source:
        return None
    generation, count, kind, items = str(source[0]), int(source[1]), str(source[2]), source[3:]
    postings: dict[str, list[str]] = {}
    total = 0
    for seq, item in enumerate(items, 1):
        text = str(item).partition(" ")[2]
        length, counts = _counted(text if kind == "idx" else payload_index_text(text))
        total += length
        for term, tf in counts.items():
            postings.setdefault(term, []).append(f"{seq}:{tf}:{length} ")
    fields = [x for term, entries in postings.items() for x in (term, "".join(entries))]
    return [prefix, session_id, generation, count, total, *fields]


Ranked = tuple[float, str | None, int | None, Fact | None]


def bm25_weight(idf: float, tf: int, length: int, mean: float, k1: float = 1.2, b: float = 0.75) -> float:
    """A term's BM25 weight in one document: `lexical_search.bm25_scores`'s expression, operation
    for operation, so the floats are the same (`tests/test_redis_search_index.py` compares them)."""
    norm = k1 * (1 - b + b * length / mean)
    return idf * tf * (k1 + 1) / (tf + norm)


def rank(terms: Sequence[str], found: Found, limit: int) -> list[Ranked]:
    """BM25 of the scope's messages holding any of `terms` (`stems` of the query) and its
    facts, over the scope's statistics; ``(score, sid, seq, fact)``, best first. Ties keep
    the order `Bm25Index` would have added them in: sessions by id, messages by seq, then
    facts oldest first.

    The floats are `lexical_search.bm25_scores`'s, computed without building its mappings (most
    of a search's time in Python, issue 23): a term's weight in a message depends on the term,
    its frequency and the message's length only, so it is computed once per (tf, length) the
    term's postings hold (`bm25_weight`) and each message's
    weights are summed in the query's order, as there. Only the candidates scoring at least
    the `limit`-th best score are ordered by the ties' keys. A message is counted once per
    term and its length is the one its postings give (the scripts write them so: one line per
    message, `terms_line`)."""
    lists: list[list[tuple[str, list[str]]]] = [[] for _ in terms]
    df = [0] * len(terms)
    n = total = 0
    for sid, _, docs, length, raw in found.sessions:
        n, total = n + docs, total + length
        for t, postings in enumerate(raw):
            if postings:
                tokens = postings.split()
                lists[t].append((sid, tokens))
                df[t] += len(tokens)
    if found.totals is not None:  # every session of the client, not only those read
        n, total = found.totals
    fact_tf: list[list[tuple[str, int, int]]] = [[] for _ in terms]
    by_id: dict[str, tuple[int, Fact]] = {}
    for position, fact in enumerate(found.facts):
        size, counts = _counted(index_text(fact.text))
        n, total = n + 1, total + size
        by_id[fact.id] = (position, fact)
        for t, term in enumerate(terms):
            if term in counts:
                fact_tf[t].append((fact.id, counts[term], size))
                df[t] += 1
    mean = total / n if n else 0.0
    mean = mean or 1.0
    scores: dict[Any, float] = {}
    get = scores.get
    for t in range(len(terms)):
        if not df[t]:
            continue
        idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
        weights: dict[str, float] = {}
        for sid, tokens in lists[t]:
            for token in tokens:
                seq, _, tf_length = token.partition(":")
                weight = weights.get(tf_length)
                if weight is None:
                    freq, _, dl = tf_length.partition(":")
                    weight = weights[tf_length] = bm25_weight(idf, int(freq), int(dl), mean)
                doc = (sid, seq)
                scores[doc] = get(doc, 0.0) + weight
        for fact_id, tf, size in fact_tf[t]:
            scores[fact_id] = get(fact_id, 0.0) + bm25_weight(idf, tf, size, mean)
    if len(scores) > limit:
        least = heapq.nlargest(limit, scores.values())[-1]
        chosen = [item for item in scores.items() if item[1] >= least]
    else:
        chosen = list(scores.items())

    def order(item: tuple[Any, float]) -> tuple[float, int, str, int]:
        doc = item[0]
        if isinstance(doc, tuple):
            return (-item[1], 0, doc[0], int(doc[1]))
        return (-item[1], 1, "", by_id[doc][0])

    chosen.sort(key=order)
    out: list[Ranked] = []
    for doc, score in chosen[:limit]:
        if isinstance(doc, tuple):
            out.append((score, doc[0], int(doc[1]), None))
        else:
            out.append((score, None, None, by_id[doc][1]))
    return out


def fetch_args(prefix: str, client_id: str | None, found: Found, ranked: list[Ranked]) -> list[Any] | None:
    """ARGV of the fetch script for `ranked`'s message hits (None: there is none)."""
    generations = {sid: gen for sid, gen, *_ in found.sessions}
    hits = "".join(f"{sid}\t{generations[str(sid)]}\t{seq}\n" for _, sid, seq, fact in ranked if fact is None)
    return [prefix, client_id or "", hits] if hits else None


def search_rows(ranked: list[Ranked], fetched: str) -> list[SearchRow]:
    """`SearchRow`s of `rank`'s output and the fetch's reply for its message hits (an entry per
    hit, NUL-separated, in order; a hit the fetch refused, an empty entry, is dropped)."""
    out: list[SearchRow] = []
    items = iter(fetched.split("\0"))
    for score, sid, seq, fact in ranked:
        if fact is not None:
            out.append((score, None, None, None, None, fact))
            continue
        got = next(items, None)
        if got is None:
            msg = "the Redis search fetch answered fewer entries than it was asked for"
            raise StoreError(msg)
        if got:
            date, _, item = got.partition(" ")
            out.append((score, sid, seq, item.partition(" ")[2], stored_date(date), None))
    return out


def stored_date(text: str) -> float | None:
    """A message's date as its search entry starts: "-" is none (a message stored before
    schema 2); anything else is the repr of a float."""
    try:
        return None if text == "-" else float(text)
    except ValueError:
        return None
