"""The Lua scripts of the Redis backend, their arguments and the decoding of their replies.

No connection and no driver import: shared by the sync twin in `sync.py` and the async
one in `aio.py`; the key layout (and its migrations) is in `layout.py`, the search
scripts in `search.py`. Every primitive that reads-then-writes is one Lua script, so
Redis runs it atomically, with its invariants (`stores/contract.py`) checked inside it: the owner, the
session row's erase generation (``generation`` in the info hash, set when the hash is created;
a hash written before generations has none and reads as ''), the lease. Reads that need two
values (summary and tail) are one script too, so a turn is one round trip. An append with a
rewind is the append's script with the withdrawal before the new rows (`REWIND`): the owner
check, the withdrawal and the append are one script, and an append without one runs `APPEND`
as before.

With a ttl, a session's keys expire together (every write refreshes them) and its client's
session set expires with the client's newest session; the ids an expiry leaves in `updated`
are dropped by the next writes (`sweep`), and `forget` drops them at once.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

import langchain_rolling_memory.stores.redis.erase as redis_erase
import langchain_rolling_memory.stores.redis.search as redis_search
import langchain_rolling_memory.stores.redis.vectors as redis_vectors
from langchain_rolling_memory.core.records import Fact, Row, SessionInfo, SessionMark, SummaryRecord
from langchain_rolling_memory.errors import OwnershipError, StaleWriteError, StoreError
from langchain_rolling_memory.stores.contract import (
    ANY_STATE,
    AppendBatch,
    ExpectedState,
    MemoryRows,
    Reader,
    SummaryWrite,
    TurnRows,
)
from langchain_rolling_memory.stores.redis.layout import LUA, Keys

SUMMARY_FIELDS = ("text", "covered_seq", "version", "meta", "updated_at")
NO_SUMMARY = [None] * len(SUMMARY_FIELDS)
"""What a summary read returns for a session whose info hash is gone."""
SESSION_FIELDS = ("client_id", "created_at", "updated_at")
MARK_FIELDS = ("created_at", "client_id", "generation")
RECENT_BATCHES = 64


# Shared Lua helpers, prepended to the scripts that need them.
_LIB = (
    LUA
    + """
-- The session's owner check and bookkeeping; false if a client owns it and cid ('' for none)
-- is not that client. A new row gets the erase generation `gen`.
local function own(p, info, csessions, updated, sid, cid, now, gen, ttl)
  local owner = redis.call('HGET', info, 'client_id')
  if owner and owner ~= cid then return false end
  if redis.call('HSETNX', info, 'created_at', now) == 1 then
    redis.call('HSET', info, 'generation', gen)
    clear_leftovers(p, sid)
    -- A share its client's statistics still hold for that id (its keys deleted by hand).
    if cid ~= '' and redis.call('HEXISTS', ckey(p, cid, 'terms'), '@'..sid) == 1 then
      drop_statistics(ckey(p, cid, 'terms'))
    end
  end
  redis.call('HSET', info, 'updated_at', now)
  if cid ~= '' then
    local fresh = redis.call('EXISTS', csessions) == 0
    -- A session of nobody's that has messages joins the client's statistics at its next build.
    local adopted = not owner and redis.call('LLEN', skey(p, sid, 'msgs')) > 0
    if not owner then redis.call('HSET', info, 'client_id', cid) end
    local added = redis.call('SADD', csessions, sid)
    keep_client(csessions, info, ttl, fresh)
    -- The client's search statistics: started with its first session (one that already has
    -- sessions gets them built at its next search), counting the sessions of its set.
    local ct = ckey(p, cid, 'terms')
    expiring_client(p, cid, info, ttl)
    if fresh and redis.call('EXISTS', ct) == 0 then
      redis.call('HSET', ct, '#v', 1, '#docs', 0, '#len', 0, '#members', 1)
    elseif added == 1 and redis.call('HEXISTS', ct, '#v') == 1 then
      redis.call('HINCRBY', ct, '#members', 1)
    end
    if adopted then drop_statistics(ct) end
  end
  sweep(p, updated)
  redis.call('ZADD', updated, now, sid)
  return true
end
-- Rows after `after` (seq = index + 1): the last `limit` if newest, else the first; -1: all;
-- {first seq, item..., date...}: each item's date is the first word of its search entry
-- (idx, one per message: '<created_at or -> <text>'), '-' for all if the list does not match.
local function rows(msgs, idx, after, limit, newest)
  local total = redis.call('LLEN', msgs)
  local first, last = after, total - 1
  if limit >= 0 then
    if newest == 1 then
      if total - limit > first then first = total - limit end
    else
      if first + limit - 1 < last then last = first + limit - 1 end
    end
  end
  if first > last then return {first + 1} end
  -- Negative indexes make Redis walk from the tail, so a turn's read is cheap however long the list.
  local out = redis.call('LRANGE', msgs, first - total, last - total)
  local n = #out
  if redis.call('LLEN', idx) == total then
    local entries = redis.call('LRANGE', idx, first - total, last - total)
    for i = 1, n do out[n + i] = string.match(entries[i], '^%S*') end
  else
    for i = 1, n do out[n + i] = '-' end
  end
  table.insert(out, 1, first + 1)
  return out
end
-- The inverted index of the batch's `n` messages, seqs first..: lines[from + j] is message
-- first + j's '<length> <term> <tf> <term> <tf>...' (`search.terms_line`). Written only onto
-- an index that holds the messages before them under this generation (else it is rebuilt at
-- the next search). A new index gets its statistics first: a small hash is a list that a
-- search scans from its start.
local function add_terms(p, cid, sid, terms, info, first, lines, from, n)
  local gen = redis.call('HGET', info, 'generation') or ''
  local st = redis.call('HMGET', terms, '#docs', '#gen')
  local ct = ckey(p, cid, 'terms')
  local kept = cid ~= '' and redis.call('HEXISTS', ct, '#v') == 1
  if tonumber(st[1] or '0') ~= first - 1 or (st[2] or gen) ~= gen then
    -- The session's index is rebuilt at the next search, and its client's statistics then.
    if kept then drop_statistics(ct) end
    return
  end
  if first == 1 then redis.call('HSET', terms, '#docs', 0, '#len', 0, '#gen', gen) end
  local add, order, total = {}, {}, 0
  for j = 0, n - 1 do
    local len, rest = string.match(lines[from + j], '^(%d+)(.*)$')
    total = total + tonumber(len)
    for term, tf in string.gmatch(rest, ' (%S+) (%d+)') do
      local entry = (first + j)..':'..tf..':'..len..' '
      if add[term] then add[term] = add[term]..entry else add[term] = entry; order[#order + 1] = term end
    end
  end
  for _, term in ipairs(order) do
    -- A term's newest postings stay under a few KB: a full run is sealed as field
    -- '<term> <k>' ('#b <term>' counts them), so an append costs the same at 100 or 100,000
    -- messages (a term in every message would otherwise be copied whole at each append).
    local current = redis.call('HGET', terms, term)
    if not current then
      current = ''
      -- A term new to the session: the session joins the term's list in the client's statistics.
      -- Sealed past a few KB as the postings are (a term of every session), so this copies a
      -- few KB however many sessions the client has.
      if kept then
        local listed = redis.call('HGET', ct, term) or ' '
        if #listed >= 4096 then
          local k = redis.call('HINCRBY', ct, '#b '..term, 1)
          redis.call('HSET', ct, term..' '..k, listed)
          listed = ' '
        end
        redis.call('HSET', ct, term, listed..sid..' ')
      end
    end
    if #current >= 4096 then
      local k = redis.call('HINCRBY', terms, '#b '..term, 1)
      redis.call('HSET', terms, term..' '..k, current)
      current = ''
    end
    redis.call('HSET', terms, term, current..add[term])
  end
  redis.call('HSET', terms, '#gen', gen)
  local docs = redis.call('HINCRBY', terms, '#docs', n)
  local len = redis.call('HINCRBY', terms, '#len', total)
  if kept then
    uncount(ct, sid, nil)
    redis.call('HSET', ct, '@'..sid, gen..' '..docs..' '..len)
    redis.call('HINCRBY', ct, '#docs', docs)
    redis.call('HINCRBY', ct, '#len', len)
  end
end
"""
)

# The rows past a seq withdrawn (an append's rewind, `stores/contract.py`), in the append's
# script: `withdraw` below.
_WITHDRAW = """
-- A list cut to its first `keep` items (LTRIM 0 -1 would keep them all).
local function cut(key, keep)
  if keep == 0 then redis.call('DEL', key) else redis.call('LTRIM', key, 0, keep - 1) end
end
-- Term `t`'s postings in the session's index `terms` cut to the seqs up to `keep`: walked back
-- from its newest run ('<t>', `newest`) through its sealed ones ('<t> k'..'<t> 1', `k` of them),
-- in seq order; each withdrawn posting's message length goes into `gone` (by seq). The run
-- holding the cut becomes the newest, the runs after it go. True: no posting of `t` is left.
local function cut_term(terms, t, newest, k, keep, gone)
  local i, text, changed = k + 1, newest or '', false
  while true do
    local last = string.match(text, '(%d+):%d+:%d+ $')
    if last and tonumber(last) <= keep then break end
    changed = true
    local left = {}
    for entry, seq, len in string.gmatch(text, '((%d+):%d+:(%d+) )') do
      if tonumber(seq) <= keep then left[#left + 1] = entry else gone[seq] = tonumber(len) end
    end
    text = table.concat(left)
    if text ~= '' or i == 1 then break end
    i = i - 1
    text = redis.call('HGET', terms, t..' '..i) or ''
  end
  if not changed then return false end
  local dead = {'#b '..t}
  for b = i, k do dead[#dead + 1] = t..' '..b end
  redis.call('HDEL', terms, unpack(dead))
  if i == 1 and text == '' then
    redis.call('HDEL', terms, t)
    return true
  end
  if i > 1 then redis.call('HSET', terms, '#b '..t, i - 1) end
  redis.call('HSET', terms, t, text)
  return false
end
-- The session's rows past max(`after`, its summary's covered_seq) withdrawn, after `own`
-- (the owner is `cid`, '' for nobody): messages, search entries, their postings and the
-- statistics counting them (the session's `#docs`, `#len`; its client's totals and share, and
-- its id out of the lists of the terms it no longer holds), vectors, and the batch records cut
-- to the rows they keep (a retry finds its batch and never appends it again). When a row goes
-- the session gets the erase generation `gen`. An index or statistics that did not match the
-- messages are dropped instead (the next search builds them again).
local function withdraw(p, cid, sid, info, msgs, summary, batches, idx, terms, vec, after, gen)
  local keep = math.max(after, tonumber(redis.call('HGET', summary, 'covered_seq') or '0'))
  local total = redis.call('LLEN', msgs)
  if total <= keep then return end
  local old = redis.call('HGET', info, 'generation') or ''
  redis.call('HSET', info, 'generation', gen)
  cut(msgs, keep)
  cut(idx, keep)
  local st = redis.call('HMGET', terms, '#docs', '#len', '#gen')
  local exact = tonumber(st[1] or '0') == total and (st[3] or old) == old
  local ct, kept = ckey(p, cid, 'terms'), false
  if cid ~= '' and redis.call('HEXISTS', ct, '#v') == 1 then
    kept = redis.call('HGET', ct, '@'..sid) == old..' '..total..' '..(st[2] or '0') and exact
    if not kept then drop_statistics(ct) end
  end
  if keep == 0 or not exact then
    if kept then uncount(ct, sid, terms) end
    redis.call('DEL', terms)
  else
    local names, gone, left = {}, {}, {}
    for _, f in ipairs(redis.call('HKEYS', terms)) do
      if string.sub(f, 1, 1) ~= '#' and not string.find(f, ' ', 1, true) then names[#names + 1] = f end
    end
    for i = 1, #names, 500 do
      local chunk = {}
      for j = i, math.min(i + 499, #names) do
        chunk[#chunk + 1] = names[j]
        chunk[#chunk + 1] = '#b '..names[j]
      end
      local got = redis.call('HMGET', terms, unpack(chunk))
      for j = 1, #chunk, 2 do
        if cut_term(terms, chunk[j], got[j], tonumber(got[j + 1] or '0'), keep, gone) then
          left[#left + 1] = chunk[j]
        end
      end
    end
    local len = 0
    for _, n in pairs(gone) do len = len + n end
    local docs, length = keep, tonumber(st[2] or '0') - len
    redis.call('HSET', terms, '#docs', docs, '#len', length, '#gen', gen)
    if kept then
      local needle = ' '..sid..' '
      for _, t in ipairs(left) do unlist_term(ct, needle, t) end
      redis.call('HSET', ct, '@'..sid, gen..' '..docs..' '..length)
      redis.call('HINCRBY', ct, '#docs', docs - total)
      redis.call('HINCRBY', ct, '#len', 0 - len)
    end
  end
  if keep == 0 then
    redis.call('DEL', vec)
  else
    local dead = {}
    for _, f in ipairs(redis.call('HKEYS', vec)) do
      if tonumber(string.match(f, '^(%d+) ') or '0') > keep then dead[#dead + 1] = f end
    end
    for i = 1, #dead, 1000 do redis.call('HDEL', vec, unpack(dead, i, math.min(i + 999, #dead))) end
  end
  local records = redis.call('LRANGE', batches, 0, -1)
  for i, entry in ipairs(records) do
    local b, first, n = string.match(entry, '^(%S+) (%d+) (%d+)$')
    if b and tonumber(first) + tonumber(n) - 1 > keep then
      local kept_rows = math.max(0, keep - tonumber(first) + 1)
      redis.call('LSET', batches, i - 1, b..' '..first..' '..kept_rows)
    end
  end
end
"""

# The append (and the append with rewind): `@H@` is the number of ARGV before the payloads,
# `@WITHDRAW@` what runs between `own` and the new rows, `@TOTAL@` the list's length before
# them (an append always has rows: its 0 is never read).
_APPEND_BODY = """
local p, sid, cid, now, ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local check, batch = ARGV[6], ARGV[7]
local owner = redis.call('HGET', KEYS[1], 'client_id')
if owner and owner ~= cid then return {-1, 0} end
if check == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  for _, entry in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do
    local b, first, n = string.match(entry, '^(%S+) (%d+) (%d+)$')
    if b == batch then return {tonumber(first), tonumber(n)} end
  end
end
own(p, KEYS[1], KEYS[6], KEYS[7], sid, cid, now, ARGV[8], ttl)
@WITHDRAW@
local n = (#ARGV - @H@) / 3
local total = @TOTAL@
for i = @H@ + 1, @H@ + n, 1000 do
  total = redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, @H@ + n)))
end
for i = @H@ + 1 + n, @H@ + 2 * n, 1000 do
  redis.call('RPUSH', KEYS[8], unpack(ARGV, i, math.min(i + 999, @H@ + 2 * n)))
end
local first = total - n + 1
add_terms(p, cid, sid, KEYS[9], KEYS[1], first, ARGV, @H@ + 1 + 2 * n, n)
redis.call('LPUSH', KEYS[5], batch..' '..first..' '..n)
redis.call('LTRIM', KEYS[5], 0, @RECENT@)
touch(KEYS[1], {KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[8], KEYS[9]}, ttl)
return {first, n}
"""


def _append_script(head: int, lib: str, withdraw: str, total: str) -> str:
    body = _APPEND_BODY.replace("@H@", str(head)).replace("@RECENT@", str(RECENT_BATCHES - 1))
    return _LIB + lib + body.replace("@WITHDRAW@", withdraw).replace("@TOTAL@", total)


# KEYS: info msgs sum lease batches csessions updated idx terms
# ARGV: prefix sid cid now ttl_ms check batch generation payload... entry... terms... (one entry
# and one terms line per payload)
APPEND = _append_script(8, "", "", "0")

# KEYS: the append's, then vec; ARGV: the append's with the rewind seq after the generation
# (the new generation of a session a row is withdrawn from, as of a new one: never both).
# `rows` may be empty: a withdrawal alone, which creates, claims or is refused as an append.
REWIND = _append_script(
    9,
    _WITHDRAW,
    "withdraw(p, cid, sid, KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[8], KEYS[9], KEYS[10], "
    + "tonumber(ARGV[9]), ARGV[8])",
    "redis.call('LLEN', KEYS[2])",
)

# The session reads return nothing of a session whose info hash is gone (a key of that id
# left without one is never shown); checked (a `Reader`), the owner ('' for none) comes first
# in the reply, read in the same atomic script.

# KEYS: msgs idx info; ARGV: after limit newest checked -> {[owner,] first seq, rows..., dates...}
READ = (
    _LIB
    + """
local out = {tonumber(ARGV[1]) + 1}
if redis.call('EXISTS', KEYS[3]) == 1 then
  out = rows(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
end
if ARGV[4] == '1' then table.insert(out, 1, redis.call('HGET', KEYS[3], 'client_id') or '') end
return out
"""
)

# The first row after each point of a batch (recall's answers), one script: a point whose
# session's info hash is gone, or (checked, ARGV[2] '1') whose owner does not let the reader
# (ARGV[3], '' for none; ARGV[4] '1': that client's only) read it, gives false, so its text
# never leaves the server. The keys are built from the prefix, as the search's.
# ARGV: prefix checked reader exact, then sid seq per point -> per point {seq, item, date} or false
MESSAGES_AFTER = (
    _LIB
    + """
local p, checked, cid, exact = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local out = {}
for i = 5, #ARGV, 2 do
  local row = redis.call('HMGET', skey(p, ARGV[i], 'info'), 'created_at', 'client_id')
  local owner, found = row[2] or '', false
  if row[1] and (checked ~= '1' or owner == cid or (owner == '' and exact ~= '1')) then
    local r = rows(skey(p, ARGV[i], 'msgs'), skey(p, ARGV[i], 'idx'), tonumber(ARGV[i + 1]), 1, 0)
    if #r > 1 then found = r end
  end
  out[#out + 1] = found
end
return out
"""
)

# The summary and the newest `limit` rows after it, with the session row's generation and owner:
# {generation (nil: no row), owner, text, covered, version, meta, updated, first seq, rows...,
#  dates...}
_TURN = """
local function turn(sum, msgs, info, idx, limit)
  local row = redis.call('HMGET', info, 'created_at', 'client_id', 'generation')
  if not row[1] then return {false, '', '', '', '', '', '', 1} end
  local s = redis.call('HMGET', sum, 'text', 'covered_seq', 'version', 'meta', 'updated_at')
  local covered = tonumber(s[2] or '0')
  local out = rows(msgs, idx, covered, limit, 1)
  for i = 5, 1, -1 do table.insert(out, 1, s[i] or '') end
  table.insert(out, 1, row[2] or '')
  table.insert(out, 1, row[3] or '')
  return out
end
"""

# KEYS: sum msgs info idx; ARGV: limit -> `turn`'s reply
SUMMARY_AND_TAIL = _LIB + _TURN + "return turn(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]))\n"

# What a turn reads, one script: `turn`'s reply after the client's fact JSONs (none unless
# ARGV[2] is '1') and the session's state (nil: none). Checked (ARGV[3] '1'), a session its
# owner does not let the reader (ARGV[4], '' for none; ARGV[5] '1': that client's only) see
# sends its owner alone: its text never leaves the server.
# KEYS: sum msgs info idx facts; ARGV: limit with_facts checked reader exact
# -> {{fact...}, state, turn...}
READ_MEMORY = (
    _LIB
    + _TURN
    + """
local owner = redis.call('HGET', KEYS[3], 'client_id')
if ARGV[3] == '1' and owner ~= ARGV[4] and (owner or ARGV[5] == '1') then
  return {{}, false, false, owner, '', '', '', '', '', 1}
end
local out = turn(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]))
local facts = {}
if ARGV[2] == '1' then facts = redis.call('HVALS', KEYS[5]) end
local state = false
if out[1] then state = redis.call('HGET', KEYS[3], 'state') end
table.insert(out, 1, state)
table.insert(out, 1, facts)
return out
"""
)

# KEYS: sum info msgs batches idx lease terms
# ARGV: expected text covered meta now ttl_ms lease_owner generation check_generation prefix
# Installs only on an existing row (never creates one), of that generation when checked
# ('1'), under the lease of lease_owner when one is named (every erase deletes the lease).
CAS_SUMMARY = (
    _LIB
    + """
local row = redis.call('HMGET', KEYS[2], 'created_at', 'client_id', 'generation')
if not row[1] then return 0 end
if ARGV[9] == '1' and (row[3] or '') ~= ARGV[8] then return 0 end
if ARGV[7] ~= '' and redis.call('HGET', KEYS[6], 'owner') ~= ARGV[7] then return 0 end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'text', ARGV[2], 'covered_seq', ARGV[3], 'version', version + 1,
           'meta', ARGV[4], 'updated_at', ARGV[5])
local ttl = tonumber(ARGV[6])
touch(KEYS[2], {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7]}, ttl)
if row[2] then
  keep_client(ckey(ARGV[10], row[2], 'sessions'), KEYS[2], ttl, false)
  expiring_client(ARGV[10], row[2], KEYS[2], ttl)
end
return 1
"""
)

# KEYS: lease info; ARGV: owner expires_at now pexpire_ms. The key's expiry only cleans up (the
# rule reads the hash's), and never outlives a session that expires (`ttl=`): an install needs
# the session row, and an expired session leaves no lease behind.
CLAIM = """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'expires_at')
if cur[1] and cur[1] ~= ARGV[1] and tonumber(cur[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires_at', ARGV[2])
local ms, left = tonumber(ARGV[4]), redis.call('PTTL', KEYS[2])
if left > 0 and left < ms then ms = left end
redis.call('PEXPIRE', KEYS[1], ms)
return 1
"""

# KEYS: lease; ARGV: owner
RELEASE = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# KEYS: info msgs sum batches csessions updated idx terms; ARGV: sid cid now state ttl_ms generation
# prefix check expected -> 1 written, 0 refused (owner), 2 not written: checked ('1') and the
# session's state is not `expected` ('' no state: never a state's JSON text). The comparison is
# made on the stored text, before `own` writes anything.
SET_STATE = (
    _LIB
    + """
local ttl = tonumber(ARGV[5])
if ARGV[8] == '1' then
  local row = redis.call('HMGET', KEYS[1], 'client_id', 'state')
  if row[1] and row[1] ~= ARGV[2] then return 0 end
  if (row[2] or '') ~= ARGV[9] then return 2 end
end
if not own(ARGV[7], KEYS[1], KEYS[5], KEYS[6], ARGV[1], ARGV[2], ARGV[3], ARGV[6], ttl) then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4])
touch(KEYS[1], {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], KEYS[8]}, ttl)
return 1
"""
)

# KEYS: facts info expiring; ARGV: fact_id fact_json cid generation check expires_at ('' none)
# -> 1, or 0 (nothing written) when checked ('1') and the session row is gone, not cid's, or
# of another generation. A fact that expires puts its client in `expiring`, at its expiry if
# that is earlier than the client's score there.
PUT_FACT = """
if ARGV[5] == '1' then
  local row = redis.call('HMGET', KEYS[2], 'created_at', 'client_id', 'generation')
  if not row[1] or row[2] ~= ARGV[3] or (row[3] or '') ~= ARGV[4] then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[6] ~= '' then
  local due = redis.call('ZSCORE', KEYS[3], ARGV[3])
  if not due or tonumber(due) > tonumber(ARGV[6]) then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[3]) end
end
return 1
"""

# name -> Lua source; registered once per client.
SCRIPTS = {
    "append": APPEND,
    "rewind": REWIND,
    "read": READ,
    "messages_after": MESSAGES_AFTER,
    "summary_and_tail": SUMMARY_AND_TAIL,
    "read_memory": READ_MEMORY,
    "cas": CAS_SUMMARY,
    "claim": CLAIM,
    "release": RELEASE,
    "set_state": SET_STATE,
    "put_fact": PUT_FACT,
    **redis_erase.SCRIPTS,
    **redis_search.SCRIPTS,
    **redis_vectors.SCRIPTS,
}


def checked(reply: Sequence[Any], session_id: str, reader: Reader | None) -> Sequence[Any]:
    """A session read's reply without its leading owner, once `reader` passed the check (a
    reply read with no reader has no owner and is returned as it is)."""
    if reader is None:
        return reply
    reader.check(session_id, str(reply[0]) or None)
    return reply[1:]


def encode_row(payload: str, tokens: int | None) -> str:
    return f"{'-' if tokens is None else tokens} {payload}"


def rows_of(reply: Sequence[Any]) -> list[Row]:
    """``[first seq, item..., date...]`` from the scripts -> rows."""
    first, n = int(reply[0]), (len(reply) - 1) // 2
    out: list[Row] = []
    for offset, (item, at) in enumerate(zip(reply[1 : 1 + n], reply[1 + n :], strict=True)):
        tokens, _, payload = str(item).partition(" ")
        out.append((first + offset, payload, _stored_tokens(tokens), redis_search.stored_date(str(at))))
    return out


def _stored_tokens(text: str) -> int | None:
    # "-" is no count; so is a count an older release stored unchecked ("2.75"): the
    # reader counts that message again instead of failing every read of the session.
    return int(text) if text.isascii() and text.isdigit() else None


def summary_of(text: Any, covered: Any, version: Any, meta: Any, updated: Any) -> SummaryRecord | None:
    if not version:
        return None
    return SummaryRecord(str(text), int(covered), int(version), json.loads(meta), float(updated))


def turn_of(reply: Sequence[Any], session_id: str, reader: Reader | None) -> TurnRows:
    """The summary-and-tail script's reply, once `reader` (if any) passed the owner check."""
    generation, owner = reply[0], reply[1]
    if reader is not None:
        reader.check(session_id, str(owner) or None)
    return TurnRows(
        summary_of(*reply[2:7]), rows_of(reply[7:]), None if generation is None else str(generation)
    )


def memory_args(limit: int, reader: Reader | None, facts_of: str | None) -> list[Any]:
    """ARGV of the read-memory script."""
    checked = "0" if reader is None else "1"
    who = "" if reader is None or reader.client_id is None else reader.client_id
    exact = "1" if reader is not None and reader.exact else "0"
    return [limit, "0" if facts_of is None else "1", checked, who, exact]


def memory_of(reply: Sequence[Any], session_id: str, reader: Reader | None, now: float) -> MemoryRows:
    """The read-memory script's reply, once `reader` (if any) passed the owner check; the facts
    expired at the store's clock `now` left out."""
    turn = turn_of(reply[2:], session_id, reader)
    state = None if reply[1] is None else str(reply[1])
    return MemoryRows(turn, state, redis_search.live_facts(reply[0], now))


ScriptCall = tuple[str, list[str], list[Any]]
"""A script's name, KEYS and ARGV."""


def append_call(prefix: str, keys: Keys, batch: AppendBatch, ttl_ms: int) -> tuple[ScriptCall, list[Any]]:
    """The append script for `batch` (with a rewind, the one that withdraws first), and its
    retry ARGV (the same batch id: it looks for the batch first)."""
    args, again = append_args(prefix, batch, ttl_ms)
    sid, cid = batch.session_id, batch.client_id
    if batch.rewind is None:
        return ("append", keys.append(sid, cid), args), again
    return ("rewind", keys.rewind(sid, cid), args), again


def append_and_summary_calls(
    prefix: str, keys: Keys, batch: AppendBatch, ttl_ms: int
) -> tuple[list[ScriptCall], list[Any]]:
    """The append (`append_call`) and the summary read (summary-and-tail with no tail) sent in
    one pipeline, and the append's retry ARGV."""
    append, again = append_call(prefix, keys, batch, ttl_ms)
    return [append, ("summary_and_tail", keys.summary_and_tail(batch.session_id), [0])], again


def unloaded(replies: list[Any], redis: Any) -> list[int]:
    """The indexes of a pipeline's replies that are NOSCRIPT (the script did not run: run it
    again on its own); any other error is raised."""
    missing = []
    for i, reply in enumerate(replies):
        if isinstance(reply, redis.exceptions.NoScriptError):
            missing.append(i)
        elif isinstance(reply, Exception):
            raise reply
    return missing


def appended_and_summary(
    appended: Sequence[Any], summary: Sequence[Any], batch: AppendBatch, reader: Reader | None
) -> tuple[list[int], SummaryRecord | None]:
    """The seqs of the append (its refusal first) and the summary read after it."""
    seqs = seqs_of(appended, batch.session_id, batch.client_id)
    return seqs, turn_of(summary, batch.session_id, reader).record


def append_args(prefix: str, batch: AppendBatch, ttl_ms: int) -> tuple[list[Any], list[Any]]:
    """ARGV of the append script (with a rewind, of the rewind script): first try, and retry
    (which looks for the batch first)."""
    from langchain_rolling_memory.stores.contract import new_generation

    marker = uuid.uuid4().hex
    entries = batch.entries()
    payloads = [encode_row(payload, tokens) for payload, tokens in batch.rows]
    payloads += [idx_entry(entry.created_at, entry.text) for entry in entries]
    payloads += [redis_search.terms_line(entry.text) for entry in entries]
    head = [prefix, batch.session_id, batch.client_id or "", repr(batch.now), ttl_ms]
    tail = [marker, new_generation(), *([] if batch.rewind is None else [batch.rewind]), *payloads]
    return [*head, 0, *tail], [*head, 1, *tail]


def idx_entry(created_at: float | None, text: str) -> str:
    return f"{'-' if created_at is None else repr(created_at)} {text}"


def seqs_of(reply: Sequence[Any], session_id: str, client_id: str | None) -> list[int]:
    """The seqs of an append script's ``{first, n}``; ``first < 0``: another client owns it."""
    first, n = int(reply[0]), int(reply[1])
    if first < 0:
        raise OwnershipError.for_session(session_id, client_id)
    return list(range(first, first + n))


def read_args(after_seq: int, limit: int | None, newest: bool, checked: bool) -> list[Any]:
    return [after_seq, -1 if limit is None else limit, 1 if newest else 0, 1 if checked else 0]


def after_args(prefix: str, points: Sequence[tuple[str, int]], reader: Reader | None) -> list[Any]:
    """ARGV of the messages-after script."""
    head: list[Any] = [prefix, "0" if reader is None else "1"]
    head += ["", "0"] if reader is None else [reader.client_id or "", "1" if reader.exact else "0"]
    return head + [x for point in points for x in point]


def after_of(reply: Sequence[Any]) -> list[Row | None]:
    """The messages-after script's reply -> the row after each point (None: none)."""
    return [rows_of(found)[0] if found else None for found in reply]


def claim_args(owner: str, ttl: float, now: float) -> list[Any]:
    # The hash carries the expiry the rule reads; the key's own expiry only cleans up.
    return [owner, repr(now + ttl), repr(now), max(1, math.ceil(ttl * 1000)) + 60_000]


def state_args(
    prefix: str,
    session_id: str,
    client_id: str | None,
    state: str,
    now: float,
    ttl_ms: int,
    expected: ExpectedState = ANY_STATE,
) -> list[Any]:
    from langchain_rolling_memory.stores.contract import new_generation

    head = [session_id, client_id or "", repr(now), state, ttl_ms, new_generation(), prefix]
    if expected is ANY_STATE:
        return [*head, "0", ""]
    return [*head, "1", expected or ""]


def state_written(reply: Any, session_id: str, client_id: str | None) -> bool:
    """The set-state script's answer: True written, False not (the state was not the one
    expected); `OwnershipError` when the owner refused it."""
    if int(reply) == 0:
        raise OwnershipError.for_session(session_id, client_id)
    return int(reply) == 1


def cas_args(prefix: str, write: SummaryWrite, ttl_ms: int) -> list[Any]:
    """ARGV of the cas script; an empty owner means no lease check, a generation of None none."""
    head = [write.expected_version, write.text, write.covered_seq, write.meta_json]
    checked = "0" if write.generation is None else "1"
    tail = [write.lease_owner or "", write.generation or "", checked, prefix]
    return [*head, repr(write.now), ttl_ms, *tail]


def session_of(session_id: str, values: Sequence[Any]) -> SessionInfo | None:
    """`SessionInfo` from the info hash's `SESSION_FIELDS` (None: no such session)."""
    client, created, updated = values
    if created is None:
        return None
    return SessionInfo(session_id, client, float(created), float(updated))


def facts_of(raw: dict[str, str], now: float) -> list[Fact]:
    """The live facts of the facts hash (read by one command: one instant), oldest first (by
    created_at, then id); a fact expired at the store's clock `now` is left out."""
    return redis_search.live_facts(raw.values(), now)


def failure(redis: Any, op: str, exc: BaseException, retried: bool) -> StoreError:
    """The `StoreError` for a failed `op`; `redis` is the driver module, for its error types."""
    after = " twice (the call was retried once on a fresh connection)" if retried else ""
    unsure = retried or isinstance(exc, redis.TimeoutError)
    hint = (
        "; the batch may or may not be stored: read the session's tail before appending it again"
        if op == "append" and unsure
        else ""
    )
    return StoreError(f"Redis {op} failed{after}: {type(exc).__name__}: {exc}{hint}")


def fact_json(fact: Fact) -> str:
    return json.dumps(fact.to_dict(), ensure_ascii=False)


def fact_args(fact: Fact, client_id: str, mark: SessionMark | None) -> list[Any]:
    """ARGV of the put-fact script (with the session check when there is a `mark`)."""
    due = "" if fact.expires_at is None else repr(fact.expires_at)
    if mark is None:
        return [fact.id, fact_json(fact), client_id, "", "0", due]
    return [fact.id, fact_json(fact), client_id, mark.generation, "1", due]


def check_mark(values: Sequence[Any], client_id: str, mark: SessionMark) -> None:
    """Raise `StaleWriteError` unless the session's `MARK_FIELDS` still match `mark`: its row
    exists, is `client_id`'s and has the mark's generation."""
    created, owner, generation = values
    if created is None or owner != client_id or (generation or "") != mark.generation:
        raise StaleWriteError.for_session(mark.session_id, "fact write")


def check_put(reply: Any, mark: SessionMark | None) -> None:
    """Raise `StaleWriteError` if the put-fact script refused the write (its reply is 0)."""
    if mark is not None and not int(reply):
        raise StaleWriteError.for_session(mark.session_id, "fact write")
