"""Erasing and listing on Redis: the scripts of `clear_session`, `forget`, `purge` (old
sessions, expired facts) and a client's session list, each with the owner checked inside it.

A client's session set may still hold an id whose session expired (`ttl=`) or was erased and
re-created by another client: the listing drops such ids, `forget` erases only the sessions
the client owns at that instant and, of an expired one, what its expiry left (its lease, its
id in `updated`). The key layout is `layout.py`'s; no connection, no driver.
"""

from __future__ import annotations

import math
from typing import Any

from langchain_rolling_memory.errors import OwnershipError
from langchain_rolling_memory.stores.contract import Reader
from langchain_rolling_memory.stores.redis.layout import LUA, Keys

# KEYS: csessions; ARGV: prefix cid -> the sessions the client owns now; ids in the set that
# are not (expired, or erased and re-created by another client) are dropped from it
LIST_SESSIONS = (
    LUA
    + """
local live = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('HGET', skey(ARGV[1], sid, 'info'), 'client_id') == ARGV[2] then
    table.insert(live, sid)
  else
    unlist(ARGV[1], KEYS[1], sid)
  end
end
return live
"""
)

# ARGV: prefix sid [cid check] -> 1, or 0 (nothing erased) when checked: the session is another
# client's than cid ('' for none), or has no info hash yet
DELETE_SESSION = (
    LUA
    + """
if ARGV[4] == '1' then
  local owner = redis.call('HGET', skey(ARGV[1], ARGV[2], 'info'), 'client_id')
  if owner and owner ~= ARGV[3] then return 0 end
  if redis.call('EXISTS', skey(ARGV[1], ARGV[2], 'info')) == 0 then return 1 end
end
drop_session(ARGV[1], ARGV[2], true)
return 1
"""
)

# KEYS: csessions facts expiring; ARGV: prefix cid. Erases the sessions the client owns now; of
# a listed session that expired, what its expiry left (its lease, its id in `updated`); a listed
# id that another client owns now is left alone; the client's facts and its place in `expiring`.
DELETE_CLIENT = (
    LUA
    + """
local p, cid = ARGV[1], ARGV[2]
redis.call('DEL', ckey(p, cid, 'terms'))
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local info = skey(p, sid, 'info')
  local owner = redis.call('HGET', info, 'client_id')
  if owner == cid then
    drop_session(p, sid, false)
  elseif redis.call('EXISTS', info) == 0 then
    redis.call('DEL', unpack(session_keys(p, sid)))
    redis.call('ZREM', p..'updated', sid)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], ckey(p, cid, 'terms'))
redis.call('ZREM', KEYS[3], cid)
return 1
"""
)

# KEYS: updated; ARGV: prefix cutoff batch -> number of sessions deleted (at most `batch`)
PURGE = (
    LUA
    + """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '('..ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local gone = 0
for _, sid in ipairs(old) do
  if redis.call('EXISTS', skey(ARGV[1], sid, 'info')) == 1 then gone = gone + 1 end
  drop_session(ARGV[1], sid, false)
end
return {#old, gone}
"""
)

# KEYS: expiring; ARGV: prefix now batch -> {clients visited (at most `batch`), facts deleted}.
# Visits the clients whose score is due, deletes their facts expired at `now` (JSON decoded
# here: a fact without `expires_at` never expires) and gives each client the earliest expiry
# left (or takes it out): a score left early by a renewal or a delete costs one visit.
PURGE_FACTS = (
    LUA
    + """
local p, now = ARGV[1], tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local gone = 0
for _, cid in ipairs(due) do
  local facts = ckey(p, cid, 'facts')
  local raw = redis.call('HGETALL', facts)
  local next_at = false
  for i = 1, #raw, 2 do
    local at = cjson.decode(raw[i + 1])['expires_at']
    if type(at) == 'number' then
      if at <= now then
        redis.call('HDEL', facts, raw[i])
        gone = gone + 1
      elseif not next_at or at < next_at then
        next_at = at
      end
    end
  end
  if next_at then
    redis.call('ZADD', KEYS[1], string.format('%.17g', next_at), cid)
  else
    redis.call('ZREM', KEYS[1], cid)
  end
end
return {#due, gone}
"""
)

SCRIPTS = {
    "list_sessions": LIST_SESSIONS,
    "delete_session": DELETE_SESSION,
    "delete_client": DELETE_CLIENT,
    "purge": PURGE,
    "purge_facts": PURGE_FACTS,
}

PURGE_BATCH = 500
"""Sessions, or clients with expired facts, erased per purge script: one script never blocks
the server for long."""


def purges(keys: Keys, cutoff: float, now: float) -> list[tuple[str, str, float]]:
    """The purge scripts to run in turn, each ``(name, its key, its time)``: the sessions not
    written since `cutoff` (none when it is ``-inf``), then the facts expired at `now`."""
    old = [("purge", keys.updated, cutoff)] if cutoff > -math.inf else []
    return [*old, ("purge_facts", keys.expiring, now)]


def delete_args(prefix: str, session_id: str, reader: Reader | None) -> list[Any]:
    """ARGV of the delete-session script (with the owner check when there is a `reader`)."""
    if reader is None:
        return [prefix, session_id, "", "0"]
    return [prefix, session_id, reader.client_id or "", "1"]


def deleted(reply: Any, session_id: str, reader: Reader | None) -> None:
    """Raise `OwnershipError` if the delete-session script refused (its reply is 0)."""
    if int(reply) == 0:
        raise OwnershipError.for_session(session_id, reader.client_id if reader else None)
