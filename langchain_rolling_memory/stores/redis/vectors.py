"""Dense vectors on a plain Redis server (no search module): a hash per session, scored in Lua.

Each session's vectors are the hash ``p s:{<sid>}:vec`` (field ``"<seq> <model>"``, value the
packed float32 bytes of `core.dense.pack`), one of the session's keys: every erase script
deletes it with them (`layout.LUA`'s `session_keys`), an append's rewind the fields of the seqs
it withdraws (`scripts.REWIND`), a new session's first write deletes one left over, and a write
gives it the session's expiry. Three scripts, each with the owner or
generation check inside it, so the isolation holds without a look-up before:

* the listing of messages without a vector of a model (a session, a client's sessions, or
  every session in ``updated``), each with its session's generation;
* the write, which stores each vector only while its session has the listed generation and
  holds the message;
* the search, which scores the scope's vectors with the query inside the script (unpacked by
  Lua's ``struct``, a dot product each: both are unit length) and returns the best `limit`
  messages with their dates. Scoring in the script rather than in Python keeps the vectors on
  the server (a client's vectors are megabytes; the hits are a few lines); it costs the
  server about a dimension's multiplications per vector of the scope, a brute force that
  blocks Redis while it runs, as every script does.

With a store ``ttl=``, the hash gets the session's remaining expiry when a vector is written,
and each later write of the session (append, state, summary: `layout.LUA`'s ``touch``) gives it
the session's new one, as every key of the session: vectors written while the session had no
expiry never outlive it once a store with ``ttl=`` writes it.

A client reads replies as text (``decode_responses=True``): the vectors go in as arguments and
never come back. No connection, no driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_rolling_memory.stores.contract import SearchRow, Unembedded, VectorWrite
from langchain_rolling_memory.stores.redis.layout import LUA

# ARGV: prefix cid ('' none) sid ('' all) model limit -> {{sid, seq, generation, msgs item}...}
UNEMBEDDED = (
    LUA
    + """
local p, cid, sid, model, limit = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local out = {}
local function list(s)
  local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'generation', 'client_id')
  if not row[1] or (sid == '' and cid ~= '' and row[3] ~= cid) then return end
  local msgs, vec = skey(p, s, 'msgs'), skey(p, s, 'vec')
  for seq = 1, redis.call('LLEN', msgs) do
    if #out >= limit then return end
    if redis.call('HEXISTS', vec, seq .. ' ' .. model) == 0 then
      out[#out + 1] = {s, seq, row[2] or '', redis.call('LINDEX', msgs, seq - 1)}
    end
  end
end
local sessions
if sid ~= '' then
  sessions = {sid}
elseif cid ~= '' then
  sessions = redis.call('SMEMBERS', ckey(p, cid, 'sessions'))
else
  sessions = redis.call('ZRANGE', p..'updated', 0, -1)
end
table.sort(sessions)
for _, s in ipairs(sessions) do
  if #out >= limit then break end
  list(s)
end
return out
"""
)

# ARGV: prefix model then sid generation seq vector per item -> how many were stored
PUT_VECTORS = (
    LUA
    + """
local p, model = ARGV[1], ARGV[2]
local stored = 0
for i = 3, #ARGV, 4 do
  local sid, seq = ARGV[i], tonumber(ARGV[i + 2])
  local info = skey(p, sid, 'info')
  local row = redis.call('HMGET', info, 'created_at', 'generation')
  if row[1] and (row[2] or '') == ARGV[i + 1] and redis.call('LLEN', skey(p, sid, 'msgs')) >= seq then
    local vec = skey(p, sid, 'vec')
    redis.call('HSET', vec, seq .. ' ' .. model, ARGV[i + 3])
    touch(info, {vec}, 0)
    stored = stored + 1
  end
end
return stored
"""
)

# ARGV: prefix cid ('' none) sid ('' the client's sessions) model dims limit query
# -> {{score, sid, seq, msgs item, idx item}...}, best first
VECTOR_SEARCH = (
    LUA
    + """
local p, cid, sid, model = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local dims, limit, query = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local formats = {}
local function floats(blob, first, n)
  local fmt = formats[n]
  if not fmt then fmt = '<'..string.rep('f', n); formats[n] = fmt end
  return {struct.unpack(fmt, blob, 4 * (first - 1) + 1)}
end
local q = {}
for first = 1, dims, 200 do
  local n = math.min(200, dims - first + 1)
  local part = floats(query, first, n)
  for j = 1, n do q[first + j - 1] = part[j] end
end
local scored = {}
local function take(s)
  local row = redis.call('HMGET', skey(p, s, 'info'), 'created_at', 'client_id')
  if not row[1] or (row[2] or '') ~= cid then return false end
  local all = redis.call('HGETALL', skey(p, s, 'vec'))
  for i = 1, #all, 2 do
    local seq, name = string.match(all[i], '^(%d+) (.*)$')
    local blob = all[i + 1]
    if name == model and #blob == 4 * dims then
      local total = 0
      for first = 1, dims, 200 do
        local n = math.min(200, dims - first + 1)
        local part = floats(blob, first, n)
        for j = 1, n do total = total + part[j] * q[first + j - 1] end
      end
      scored[#scored + 1] = {total, s, tonumber(seq)}
    end
  end
  return true
end
each_scope_session(p, cid, sid, take)
table.sort(scored, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end)
local out = {}
for i = 1, math.min(limit, #scored) do
  local hit = scored[i]
  out[i] = {string.format('%.17g', hit[1]), hit[2], hit[3],
            redis.call('LINDEX', skey(p, hit[2], 'msgs'), hit[3] - 1),
            redis.call('LINDEX', skey(p, hit[2], 'idx'), hit[3] - 1)}
end
return out
"""
)

SCRIPTS = {"unembedded": UNEMBEDDED, "put_vectors": PUT_VECTORS, "vector_search": VECTOR_SEARCH}


def unembedded_args(
    prefix: str, model: str, client_id: str | None, session_id: str | None, limit: int
) -> list[Any]:
    return [prefix, client_id or "", session_id or "", model, limit]


def unembedded_of(reply: Sequence[Any]) -> list[Unembedded]:
    return [Unembedded(str(s), int(n), str(g), str(item).partition(" ")[2]) for s, n, g, item in reply]


def put_args(prefix: str, model: str, items: Sequence[VectorWrite]) -> list[Any]:
    args: list[Any] = [prefix, model]
    for item in items:
        args += [item.session_id, item.generation, item.seq, item.vector]
    return args


def search_args(
    prefix: str, model: str, vector: bytes, client_id: str | None, session_id: str | None, limit: int
) -> list[Any]:
    return [prefix, client_id or "", session_id or "", model, len(vector) // 4, limit, vector]


def search_rows_of(reply: Sequence[Any]) -> list[SearchRow]:
    rows: list[SearchRow] = []
    for score, sid, seq, item, idx in reply:
        if item is None:  # pragma: no cover - a vector is written only beside its message
            continue
        at, _, _ = str(idx or "-").partition(" ")
        rows.append(
            (
                float(score),
                str(sid),
                int(seq),
                str(item).partition(" ")[2],
                None if at == "-" else float(at),
                None,
            )
        )
    return rows
