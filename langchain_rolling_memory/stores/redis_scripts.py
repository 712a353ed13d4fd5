"""The key layout, the Lua scripts and the decoding of their replies (plain Redis: no modules).

No connection and no driver import: shared, with the argument builders and reply decoders
below, by the sync twin in `redis_sync.py` and the async one in `redis_aio.py`. Every primitive that reads-then-writes is one Lua script, so Redis runs it
atomically; reads that need two values (summary and tail) are one script too, so a turn
is one round trip.

Keys, for prefix ``p`` (default ``lrm:``)::

    p schema                 schema version
    p updated                zset session_id -> updated_at (purge)
    p s:<sid>:info           hash client_id, created_at, updated_at, state
    p s:<sid>:msgs           list of "<tokens or -> <message json>"; index i is seq i+1
    p s:<sid>:sum            hash text, covered_seq, version, meta, updated_at
    p s:<sid>:lease          hash owner, expires_at
    p s:<sid>:batches        list of "<batch> <first seq> <count>" (recent appends, for retries)
    p s:<sid>:idx            list of "<created_at or -> <search.index_text>"; index i is seq i+1
    p c:<cid>:sessions       set of session ids
    p c:<cid>:facts          hash fact id -> fact json

Ids may contain ``:``, but a suffix never does, so no two ids map to one key.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_rolling_memory.errors import ConfigurationError, OwnershipError, StoreError
from langchain_rolling_memory.records import Fact, Row, SessionInfo, SummaryRecord
from langchain_rolling_memory.stores.backend import AppendBatch, Reader, SummaryWrite

__all__ = [
    "SCRIPTS",
    "SESSION_FIELDS",
    "SESSION_SUFFIXES",
    "SUMMARY_FIELDS",
    "Keys",
    "append_args",
    "cas_args",
    "check_prefix",
    "checked",
    "claim_args",
    "delete_args",
    "deleted",
    "encode_row",
    "fact_json",
    "facts_of",
    "failure",
    "idx_of",
    "rank",
    "read_args",
    "rows_of",
    "search_rows",
    "seqs_of",
    "session_of",
    "state_args",
    "summary_of",
]

_PREFIX = re.compile(r"[A-Za-z0-9_:.\-]{0,64}")
SESSION_SUFFIXES = ("info", "msgs", "sum", "lease", "batches")
SUMMARY_FIELDS = ("text", "covered_seq", "version", "meta", "updated_at")
SESSION_FIELDS = ("client_id", "created_at", "updated_at")
RECENT_BATCHES = 64


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        msg = f"key_prefix must match [A-Za-z0-9_:.-]{{0,64}}, got {prefix!r}"
        raise ConfigurationError(msg)
    return prefix


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.schema = f"{prefix}schema"
        self.updated = f"{prefix}updated"

    def session(self, sid: str) -> list[str]:
        """info, msgs, sum, lease, batches."""
        return [f"{self.prefix}s:{sid}:{suffix}" for suffix in SESSION_SUFFIXES]

    def client_sessions(self, cid: str | None) -> str:
        # With no client, scripts get a key they never touch (no client id is empty).
        return f"{self.prefix}c:{cid or ''}:sessions"

    def facts(self, cid: str) -> str:
        return f"{self.prefix}c:{cid}:facts"

    def info(self, sid: str) -> str:
        return self.session(sid)[0]

    def msgs(self, sid: str) -> str:
        return self.session(sid)[1]

    def summary(self, sid: str) -> str:
        return self.session(sid)[2]

    def lease(self, sid: str) -> str:
        return self.session(sid)[3]

    def idx(self, sid: str) -> str:
        """The session's search entries (schema 2), one per message."""
        return f"{self.prefix}s:{sid}:idx"

    def append(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the append script."""
        return [*self.session(sid), self.client_sessions(cid), self.updated, self.idx(sid)]

    def read(self, sid: str, checked: bool) -> list[str]:
        """KEYS of the read script (with the info key when the owner is checked)."""
        return [self.msgs(sid), self.info(sid)] if checked else [self.msgs(sid)]

    def summary_and_tail(self, sid: str, checked: bool = False) -> list[str]:
        """KEYS of the summary-and-tail script (with the info key when the owner is checked)."""
        return [self.summary(sid), self.msgs(sid), *([self.info(sid)] if checked else [])]

    def cas(self, sid: str) -> list[str]:
        """KEYS of the compare-and-swap script."""
        info, msgs, summary, lease, batches = self.session(sid)
        return [summary, info, msgs, batches, self.idx(sid), lease]

    def state(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the set-state script."""
        info, msgs, summary, _lease, batches = self.session(sid)
        return [info, msgs, summary, batches, self.client_sessions(cid), self.updated, self.idx(sid)]

    def client(self, cid: str) -> list[str]:
        """KEYS of the forget script."""
        return [self.client_sessions(cid), self.facts(cid)]


# Shared Lua helpers, prepended to the scripts that need them.
_LIB = """
local function session_keys(p, sid)
  return {p..'s:'..sid..':info', p..'s:'..sid..':msgs', p..'s:'..sid..':sum',
          p..'s:'..sid..':lease', p..'s:'..sid..':batches', p..'s:'..sid..':idx'}
end
local function drop_session(p, sid)
  local keys = session_keys(p, sid)
  local owner = redis.call('HGET', keys[1], 'client_id')
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', p..'updated', sid)
  if owner then redis.call('SREM', p..'c:'..owner..':sessions', sid) end
end
local function touch(keys, ttl)
  if ttl > 0 then
    for i = 1, #keys do redis.call('PEXPIRE', keys[i], ttl) end
  end
end
-- The session's owner check and bookkeeping; false if a client owns it and cid ('' for none)
-- is not that client.
local function own(info, csessions, updated, sid, cid, now)
  local owner = redis.call('HGET', info, 'client_id')
  if owner and owner ~= cid then return false end
  redis.call('HSETNX', info, 'created_at', now)
  redis.call('HSET', info, 'updated_at', now)
  if cid ~= '' and not owner then
    redis.call('HSET', info, 'client_id', cid)
    redis.call('SADD', csessions, sid)
  end
  redis.call('ZADD', updated, now, sid)
  return true
end
-- Rows after `after` (seq = index + 1): the last `limit` if newest, else the first; -1: all.
local function rows(msgs, after, limit, newest)
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
  table.insert(out, 1, first + 1)
  return out
end
"""

# KEYS: info msgs sum lease batches csessions updated idx
# ARGV: sid cid now ttl_ms check batch payload... entry... (as many entries as payloads)
APPEND = (
    _LIB
    + """
local sid, cid, now, ttl, check, batch = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local owner = redis.call('HGET', KEYS[1], 'client_id')
if owner and owner ~= cid then return {-1, 0} end
if check == '1' then
  for _, entry in ipairs(redis.call('LRANGE', KEYS[5], 0, -1)) do
    local b, first, n = string.match(entry, '^(%S+) (%d+) (%d+)$')
    if b == batch then return {tonumber(first), tonumber(n)} end
  end
end
own(KEYS[1], KEYS[6], KEYS[7], sid, cid, now)
local n = (#ARGV - 6) / 2
local total = 0
for i = 7, 6 + n, 1000 do
  total = redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, 6 + n)))
end
for i = 7 + n, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[8], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local first = total - n + 1
redis.call('LPUSH', KEYS[5], batch..' '..first..' '..n)
redis.call('LTRIM', KEYS[5], 0, """
    + str(RECENT_BATCHES - 1)
    + """)
touch({KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[8]}, ttl)
return {first, n}
"""
)

# The session reads take the session's info key last when the read is checked (a `Reader`):
# the owner ('' for none) then comes first in the reply, read in the same atomic script.
_OWNER = "if KEYS[{n}] then table.insert(out, 1, redis.call('HGET', KEYS[{n}], 'client_id') or '') end\n"

# KEYS: msgs [info]; ARGV: after limit newest -> {[owner,] first seq, rows...}
READ = (
    _LIB
    + "local out = rows(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))\n"
    + _OWNER.format(n=2)
    + "return out"
)

# KEYS: sum msgs [info]; ARGV: limit -> {[owner,] text, covered, version, meta, updated, first seq, rows...}
SUMMARY_AND_TAIL = (
    _LIB
    + """
local s = redis.call('HMGET', KEYS[1], 'text', 'covered_seq', 'version', 'meta', 'updated_at')
local covered = tonumber(s[2] or '0')
local out = rows(KEYS[2], covered, tonumber(ARGV[1]), 1)
for i = 5, 1, -1 do table.insert(out, 1, s[i] or '') end
"""
    + _OWNER.format(n=3)
    + "return out"
)

# KEYS: sum info msgs batches idx lease; ARGV: expected text covered meta now ttl_ms lease_owner
# (lease_owner '': no lease check; else the lease, which every erase deletes, must name it)
CAS_SUMMARY = (
    _LIB
    + """
if ARGV[7] ~= '' and redis.call('HGET', KEYS[6], 'owner') ~= ARGV[7] then return 0 end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'text', ARGV[2], 'covered_seq', ARGV[3], 'version', version + 1,
           'meta', ARGV[4], 'updated_at', ARGV[5])
touch({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]}, tonumber(ARGV[6]))
return 1
"""
)

# KEYS: lease; ARGV: owner expires_at now pexpire_ms
CLAIM = """
local cur = redis.call('HMGET', KEYS[1], 'owner', 'expires_at')
if cur[1] and cur[1] ~= ARGV[1] and tonumber(cur[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires_at', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: lease; ARGV: owner
RELEASE = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# KEYS: info msgs sum batches csessions updated idx; ARGV: sid cid now state ttl_ms
SET_STATE = (
    _LIB
    + """
if not own(KEYS[1], KEYS[5], KEYS[6], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4])
touch({KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7]}, tonumber(ARGV[5]))
return 1
"""
)

# KEYS: csessions; ARGV: prefix -> live session ids (stale members, expired by TTL, removed)
LIST_SESSIONS = """
local live = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1]..'s:'..sid..':info') == 1 then
    table.insert(live, sid)
  else
    redis.call('SREM', KEYS[1], sid)
  end
end
return live
"""

# ARGV: prefix sid [cid check] -> 1, or 0 (nothing erased) when checked: the session is another
# client's than cid ('' for none), or has no info hash yet
DELETE_SESSION = (
    _LIB
    + """
if ARGV[4] == '1' then
  local owner = redis.call('HGET', ARGV[1]..'s:'..ARGV[2]..':info', 'client_id')
  if owner and owner ~= ARGV[3] then return 0 end
  if redis.call('EXISTS', ARGV[1]..'s:'..ARGV[2]..':info') == 0 then return 1 end
end
drop_session(ARGV[1], ARGV[2])
return 1
"""
)

# KEYS: csessions facts; ARGV: prefix
DELETE_CLIENT = (
    _LIB
    + """
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do drop_session(ARGV[1], sid) end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""
)

# KEYS: updated; ARGV: prefix cutoff batch -> number of sessions deleted (at most `batch`)
PURGE = (
    _LIB
    + """
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '('..ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local gone = 0
for _, sid in ipairs(old) do
  if redis.call('EXISTS', ARGV[1]..'s:'..sid..':info') == 1 then gone = gone + 1 end
  drop_session(ARGV[1], sid)
end
return {#old, gone}
"""
)

# name -> Lua source; registered once per client.
SCRIPTS = {
    "append": APPEND,
    "read": READ,
    "summary_and_tail": SUMMARY_AND_TAIL,
    "cas": CAS_SUMMARY,
    "claim": CLAIM,
    "release": RELEASE,
    "set_state": SET_STATE,
    "list_sessions": LIST_SESSIONS,
    "delete_session": DELETE_SESSION,
    "delete_client": DELETE_CLIENT,
    "purge": PURGE,
}


def checked(reply: Sequence[Any], session_id: str, reader: Reader | None) -> Sequence[Any]:
    """A session read's reply without its leading owner, once `reader` passed the check (a
    reply read with no reader has no owner and is returned as it is)."""
    if reader is None:
        return reply
    reader.check(session_id, str(reply[0]) or None)
    return reply[1:]


def delete_args(prefix: str, session_id: str, reader: Reader | None) -> list[Any]:
    """ARGV of the delete-session script (with the owner check when there is a `reader`)."""
    if reader is None:
        return [prefix, session_id, "", "0"]
    return [prefix, session_id, reader.client_id or "", "1"]


def deleted(reply: Any, session_id: str, reader: Reader | None) -> None:
    """Raise `OwnershipError` if the delete-session script refused (its reply is 0)."""
    if int(reply) == 0:
        raise OwnershipError.for_session(session_id, reader.client_id if reader else None)


def encode_row(payload: str, tokens: int | None) -> str:
    return f"{'-' if tokens is None else tokens} {payload}"


def rows_of(reply: Sequence[Any]) -> list[Row]:
    """``[first seq, item...]`` from the scripts -> rows."""
    first = int(reply[0])
    out: list[Row] = []
    for offset, item in enumerate(reply[1:]):
        tokens, _, payload = str(item).partition(" ")
        out.append((first + offset, payload, _stored_tokens(tokens)))
    return out


def _stored_tokens(text: str) -> int | None:
    # "-" is no count; so is a count an older release stored unchecked ("2.75"): the
    # reader counts that message again instead of failing every read of the session.
    return int(text) if text.isascii() and text.isdigit() else None


def summary_of(text: Any, covered: Any, version: Any, meta: Any, updated: Any) -> SummaryRecord | None:
    if not version:
        return None
    return SummaryRecord(str(text), int(covered), int(version), json.loads(meta), float(updated))


def append_args(batch: AppendBatch, ttl_ms: int) -> tuple[list[Any], list[Any]]:
    """ARGV of the append script: first try, and retry (which looks for the batch first)."""
    marker = uuid.uuid4().hex
    payloads = [encode_row(payload, tokens) for payload, tokens in batch.rows]
    payloads += [idx_entry(entry.created_at, entry.text) for entry in batch.entries()]
    head = [batch.session_id, batch.client_id or "", repr(batch.now), ttl_ms]
    return [*head, 0, marker, *payloads], [*head, 1, marker, *payloads]


def idx_entry(created_at: float | None, text: str) -> str:
    return f"{'-' if created_at is None else repr(created_at)} {text}"


def idx_of(item: Any) -> tuple[float | None, str]:
    """``(created_at, indexed text)`` of one entry of a session's idx list."""
    at, _, text = str(item).partition(" ")
    return (None if at == "-" else float(at)), text


def seqs_of(reply: Sequence[Any], session_id: str, client_id: str | None) -> list[int]:
    """The seqs of an append script's ``{first, n}``; ``first < 0``: another client owns it."""
    first, n = int(reply[0]), int(reply[1])
    if first < 0:
        raise OwnershipError.for_session(session_id, client_id)
    return list(range(first, first + n))


def read_args(after_seq: int, limit: int | None, newest: bool) -> list[Any]:
    return [after_seq, -1 if limit is None else limit, 1 if newest else 0]


def claim_args(owner: str, ttl: float, now: float) -> list[Any]:
    # The hash carries the expiry the rule reads; the key's own expiry only cleans up.
    return [owner, repr(now + ttl), repr(now), max(1, math.ceil(ttl * 1000)) + 60_000]


def state_args(session_id: str, client_id: str | None, state: str, now: float, ttl_ms: int) -> list[Any]:
    return [session_id, client_id or "", repr(now), state, ttl_ms]


def cas_args(write: SummaryWrite, ttl_ms: int) -> list[Any]:
    """ARGV of the cas script; an empty owner means no lease check."""
    head = [write.expected_version, write.text, write.covered_seq, write.meta_json]
    return [*head, repr(write.now), ttl_ms, write.lease_owner or ""]


def session_of(session_id: str, values: Sequence[Any]) -> SessionInfo | None:
    """`SessionInfo` from the info hash's `SESSION_FIELDS` (None: no such session)."""
    client, created, updated = values
    if created is None:
        return None
    return SessionInfo(session_id, client, float(created), float(updated))


def facts_of(raw: dict[str, str]) -> list[Fact]:
    """The facts hash, oldest first (by created_at, then id)."""
    facts = [Fact(**json.loads(v)) for v in raw.values()]
    return sorted(facts, key=lambda f: (f.created_at, f.id))


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


def rank(
    terms: Sequence[str],
    sessions: Sequence[str],
    entries: Sequence[Sequence[Any]],
    facts: list[Fact],
    limit: int,
) -> list[tuple[float, str | None, int | None, float | None, Fact | None]]:
    """The fallback search of a server without the search module: BM25 (light stemming) over
    the scope's idx entries and facts, read whole; ``(score, sid, seq, created_at, fact)``."""
    from langchain_rolling_memory.search import Bm25Index, index_text

    index = Bm25Index(stem=True)
    dates: dict[tuple[str, int], float | None] = {}
    for sid, items in zip(sessions, entries, strict=True):
        for offset, item in enumerate(items):
            at, text = idx_of(item)
            dates[(sid, offset + 1)] = at
            index.add((sid, offset + 1), text)
    by_id = {fact.id: fact for fact in facts}
    for fact in facts:
        index.add(fact.id, index_text(fact.text))
    out: list[tuple[float, str | None, int | None, float | None, Fact | None]] = []
    for doc, score in index.search(terms, limit=limit):
        if isinstance(doc, tuple):
            out.append((score, doc[0], doc[1], dates[doc], None))
        else:
            out.append((score, None, None, None, by_id[str(doc)]))
    return out


def search_rows(
    ranked: list[tuple[float, str | None, int | None, float | None, Fact | None]], payloads: Sequence[Any]
) -> list[Any]:
    """`SearchRow`s of `rank`'s output and the message items fetched for its message hits, in
    order (an item erased meanwhile, None, drops its hit)."""
    out: list[Any] = []
    items = iter(payloads)
    for score, sid, seq, at, fact in ranked:
        if fact is not None:
            out.append((score, None, None, None, None, fact))
            continue
        item = next(items)
        if item is not None:
            out.append((score, sid, seq, str(item).partition(" ")[2], at, None))
    return out


def fact_json(fact: Fact) -> str:
    return json.dumps(fact.to_dict(), ensure_ascii=False)
