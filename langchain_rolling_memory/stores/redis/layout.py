"""The Redis key layout, in Python and in Lua, and its append-only migrations (sync and async).

Keys, for prefix ``p`` (default ``lrm:``)::

    p schema                 schema version
    p updated                zset session_id -> updated_at (purge)
    p s:{<sid>}:info         hash client_id, created_at, updated_at, state, generation
    p s:{<sid>}:msgs         list of "<tokens or -> <message json>"; index i is seq i+1
    p s:{<sid>}:sum          hash text, covered_seq, version, meta, updated_at
    p s:{<sid>}:lease        hash owner, expires_at
    p s:{<sid>}:batches      list of "<batch> <first seq> <count>" (recent appends, for retries;
                             a rewind cuts a count to the batch's rows it kept)
    p s:{<sid>}:idx          list of "<created_at or -> <search.index_text>"; index i is seq i+1
    p s:{<sid>}:terms        hash, the session's inverted index (issue 23): each term (stemmed,
                             as `Bm25Index(stem=True)` counts) -> its postings "<seq>:<tf>:<len> "
                             in seq order; ``#docs`` messages indexed, ``#len`` their summed
                             lengths, ``#gen`` the erase generation they were indexed under
    p s:{<sid>}:vec          hash "<seq> <model>" -> packed float32 vector (schema 6, `vectors.py`)
    p c:{<cid>}:sessions     set of the client's session ids (an id whose session expired or
                             changed owner is dropped by the next script that reads the set)
    p c:{<cid>}:terms        hash, the client's search statistics (issue 23), kept by the scripts
                             that write or erase its sessions: ``#docs`` and ``#len`` summed
                             over its sessions, ``@<sid>`` each session's share "<generation>
                             <#docs> <#len>", ``#members`` the size of its session set, each
                             term -> " <sid> <sid> " the sessions that hold it (or held it: a
                             search drops those that no longer do); ``#v`` while all of that is
                             exact. ``#ttl`` alone instead once a session of the client expires
                             (`ttl=`): an expiry runs no script, and a search then visits each
                             session (`search.py`)
    p c:{<cid>}:facts        hash fact id -> fact json (``expires_at`` from schema 5: a fact
                             written before lacks it and never expires)
    p expiring               zset client_id -> the earliest expiry of its facts, or earlier
                             (schema 5: `purge` visits these clients; a visit sets it right)

An id (`ids.py`: letters, digits and ``._:@-``) and a prefix (`check_prefix`) never hold a
brace, so a key names its prefix, its id and its part in one way only: two stores whose
prefixes nest (``app:`` and ``app:s:``) never share a key. Before schema 4 the id was not
delimited (``p s:<sid>:info``), and ``app:`` + session ``s:x`` was ``app:s:`` + session ``x``;
step 4 renames those keys (and deletes a session's keys that have no info hash: a summary an
install left after an erase), and refuses, writing nothing, when another store of the old
layout nests with this one, as whose each key is can then not be told. The erase generation
of schema 4 needs no step: an info hash without one reads as ''.

A session is its info hash: its other keys are read only while the hash lives, expire with it
(a write with no ttl gives a key the hash's remaining expiry), and a new hash deletes any key
left under its id.

Does not run the session scripts (`scripts.py`) nor own the clients (`store.py`).
"""

from __future__ import annotations

import re
from typing import Any

from langchain_rolling_memory.errors import ConfigurationError, StoreError
from langchain_rolling_memory.stores.contract import SCHEMA_VERSION, newer_schema

_PREFIX = re.compile(r"[A-Za-z0-9_:.\-]{0,64}")
SESSION_PARTS = ("info", "msgs", "sum", "lease", "batches")
LAYOUT_VERSION = 4
"""The schema version from which ids are delimited by braces in the keys."""


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        msg = f"key_prefix must match [A-Za-z0-9_:.-]{{0,64}} (no braces: they delimit ids), got {prefix!r}"
        raise ConfigurationError(msg)
    return prefix


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.schema = f"{prefix}schema"
        self.updated = f"{prefix}updated"
        self.expiring = f"{prefix}expiring"

    def part(self, sid: str, part: str) -> str:
        return f"{self.prefix}s:{{{sid}}}:{part}"

    def session(self, sid: str) -> list[str]:
        """info, msgs, sum, lease, batches."""
        return [self.part(sid, part) for part in SESSION_PARTS]

    def client_sessions(self, cid: str | None) -> str:
        # With no client, scripts get a key they never touch (no client id is empty).
        return f"{self.prefix}c:{{{cid or ''}}}:sessions"

    def client_terms(self, cid: str) -> str:
        """The client's search statistics (`search.py`)."""
        return f"{self.prefix}c:{{{cid}}}:terms"

    def facts(self, cid: str) -> str:
        return f"{self.prefix}c:{{{cid}}}:facts"

    def info(self, sid: str) -> str:
        return self.part(sid, "info")

    def msgs(self, sid: str) -> str:
        return self.part(sid, "msgs")

    def summary(self, sid: str) -> str:
        return self.part(sid, "sum")

    def lease(self, sid: str) -> str:
        return self.part(sid, "lease")

    def idx(self, sid: str) -> str:
        """The session's search entries (schema 2), one per message."""
        return self.part(sid, "idx")

    def terms(self, sid: str) -> str:
        """The session's inverted index (`search.py`), written by the append script."""
        return self.part(sid, "terms")

    def vectors(self, sid: str) -> str:
        """The session's dense vectors (`vectors.py`)."""
        return self.part(sid, "vec")

    def append(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the append script."""
        return [*self.session(sid), self.client_sessions(cid), self.updated, self.idx(sid), self.terms(sid)]

    def rewind(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the append-with-rewind script: the append's, then the vectors it withdraws."""
        return [*self.append(sid, cid), self.vectors(sid)]

    def read(self, sid: str) -> list[str]:
        """KEYS of the read script."""
        return [self.msgs(sid), self.idx(sid), self.info(sid)]

    def summary_and_tail(self, sid: str) -> list[str]:
        """KEYS of the summary-and-tail script."""
        return [self.summary(sid), self.msgs(sid), self.info(sid), self.idx(sid)]

    def read_memory(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the read-memory script (the facts' key of no client is never read)."""
        return [*self.summary_and_tail(sid), self.facts(cid or "")]

    def cas(self, sid: str) -> list[str]:
        """KEYS of the compare-and-swap script."""
        info, msgs, summary, lease, batches = self.session(sid)
        return [summary, info, msgs, batches, self.idx(sid), lease, self.terms(sid)]

    def claim(self, sid: str) -> list[str]:
        """KEYS of the claim script."""
        return [self.lease(sid), self.info(sid)]

    def state(self, sid: str, cid: str | None) -> list[str]:
        """KEYS of the set-state script."""
        info, msgs, summary, _lease, batches = self.session(sid)
        keys = [info, msgs, summary, batches, self.client_sessions(cid), self.updated, self.idx(sid)]
        return [*keys, self.terms(sid)]

    def client(self, cid: str) -> list[str]:
        """KEYS of the forget script."""
        return [self.client_sessions(cid), self.facts(cid), self.expiring]

    def put_fact(self, cid: str, sid: str) -> list[str]:
        """KEYS of the put-fact script (`sid`: the session its mark names, '' for none)."""
        return [self.facts(cid), self.info(sid), self.expiring]


# The same layout for the scripts that reach keys they learn as they run (a client's
# sessions), with what keeps its sets and expiries coherent.
LUA = """
local function skey(p, sid, part) return p..'s:{'..sid..'}:'..part end
local function ckey(p, cid, part) return p..'c:{'..cid..'}:'..part end
local function session_keys(p, sid)
  return {skey(p, sid, 'info'), skey(p, sid, 'msgs'), skey(p, sid, 'sum'),
          skey(p, sid, 'lease'), skey(p, sid, 'batches'), skey(p, sid, 'idx'), skey(p, sid, 'terms'),
          skey(p, sid, 'vec')}
end
-- A client's search statistics (`c:{cid}:terms`) are exact or absent: anything that would
-- leave them otherwise deletes them, and the next search builds them again (`#ttl` stays:
-- that client never keeps them).
local function drop_statistics(ct)
  if redis.call('HEXISTS', ct, '#ttl') == 0 then redis.call('DEL', ct) end
end
-- `needle` (' <sid> ') out of `term`'s list in a client's statistics `ct` (its sealed runs
-- included), the list going with its term once empty.
local function unlist_term(ct, needle, term)
  local head = redis.call('HMGET', ct, term, '#b '..term)
  local names, parts = {term}, {head[1]}
  local sealed = tonumber(head[2] or '0')
  if sealed > 0 then
    for b = 1, sealed do names[b + 1] = term..' '..b end
    parts = redis.call('HMGET', ct, unpack(names))
  end
  local left, changed = false, {}
  for i = 1, #names do
    local part = parts[i]
    if part then
      local a, b = string.find(part, needle, 1, true)
      while a do
        part = string.sub(part, 1, a)..string.sub(part, b + 1)
        changed[#changed + 1] = i
        a, b = string.find(part, needle, 1, true)
      end
      parts[i] = part
      if string.find(part, '%S') then left = true end
    end
  end
  if not left then
    names[#names + 1] = '#b '..term
    redis.call('HDEL', ct, unpack(names))
  else
    for _, i in ipairs(changed) do redis.call('HSET', ct, names[i], parts[i]) end
  end
end
-- A session's share of its client's statistics taken out, and (`terms`: the key of its
-- index) its id out of its terms' lists, a list left empty going with its term: nothing of
-- an erased session is left in them.
local function uncount(ct, sid, terms)
  local share = redis.call('HGET', ct, '@'..sid)
  if share then
    local _, docs, len = string.match(share, '^(%S*) (%d+) (%d+)$')
    redis.call('HDEL', ct, '@'..sid)
    redis.call('HINCRBY', ct, '#docs', 0 - tonumber(docs))
    redis.call('HINCRBY', ct, '#len', 0 - tonumber(len))
  end
  if not terms then return end
  local needle = ' '..sid..' '
  for _, term in ipairs(redis.call('HKEYS', terms)) do
    if string.sub(term, 1, 1) ~= '#' and not string.find(term, ' ', 1, true) then
      unlist_term(ct, needle, term)
    end
  end
end
-- `exact`: the session leaves its client's statistics as it leaves its set (`clear_session`);
-- else they are deleted, to be built again at the client's next search (`purge`, `forget`:
-- many sessions at once).
local function drop_session(p, sid, exact)
  local keys = session_keys(p, sid)
  local owner = redis.call('HGET', keys[1], 'client_id')
  if owner then
    local listed, ct = ckey(p, owner, 'sessions'), ckey(p, owner, 'terms')
    if redis.call('SREM', listed, sid) == 0 or redis.call('EXISTS', listed) == 0 then
      redis.call('DEL', ct)  -- the statistics live as long as the client's session set
    elseif exact and redis.call('HEXISTS', ct, '#v') == 1 then
      uncount(ct, sid, keys[7])
      redis.call('HINCRBY', ct, '#members', -1)
    else
      drop_statistics(ct)
    end
  end
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', p..'updated', sid)
end
-- The expiry (ms) a write gives a session's keys: the store's ttl, or with none the info key's
-- remaining one, so one session's keys expire together; -1: the session never expires.
local function span(info, ttl)
  if ttl > 0 then return ttl end
  local left = redis.call('PTTL', info)
  if left > 0 then return left end
  return -1
end
-- `keys` and the session's vectors (`s:{sid}:vec`, written by a script of their own): vectors
-- written while the session had no expiry get the one a later write gives it, never outliving it.
local function touch(info, keys, ttl)
  local ms = span(info, ttl)
  if ms > 0 then
    for i = 1, #keys do redis.call('PEXPIRE', keys[i], ms) end
    redis.call('PEXPIRE', string.sub(info, 1, -#'info' - 1)..'vec', ms)
  end
end
-- A client's session set lives as long as its newest session: with an expiry it lives at
-- least as long as this one (`fresh`: the set was just created); a session that never
-- expires keeps it for good.
local function keep_client(csessions, info, ttl, fresh)
  local ms = span(info, ttl)
  if ms > 0 then
    local left = redis.call('PTTL', csessions)
    if fresh or (left >= 0 and left < ms) then redis.call('PEXPIRE', csessions, ms) end
  else
    redis.call('PERSIST', csessions)
  end
end
-- The client's search statistics are given up for good once one of its sessions expires
-- (`info` written with an expiry): `#ttl` alone, living as long as the client's session set.
local function expiring_client(p, cid, info, ttl)
  if span(info, ttl) <= 0 then return end
  local ct = ckey(p, cid, 'terms')
  if redis.call('HEXISTS', ct, '#ttl') == 0 then
    redis.call('DEL', ct)
    redis.call('HSET', ct, '#ttl', 1)
  end
  local left = redis.call('PTTL', ckey(p, cid, 'sessions'))
  if left > 0 then redis.call('PEXPIRE', ct, left) else redis.call('PERSIST', ct) end
end
-- A new info hash (`created`): any key of that id left without one (an install racing an
-- erase, an older release) goes first, so the new session never shows it.
local function clear_leftovers(p, sid)
  redis.call('DEL', skey(p, sid, 'msgs'), skey(p, sid, 'sum'), skey(p, sid, 'lease'),
             skey(p, sid, 'batches'), skey(p, sid, 'idx'), skey(p, sid, 'terms'),
             skey(p, sid, 'vec'))
end
-- An id in a client's set whose session expired or changed owner: out of the set, and out
-- of `updated` too if the session is gone.
local function unlist(p, listed, sid)
  redis.call('SREM', listed, sid)
  -- Only what ran no script of this release leaves such an id (an expiry, an older release):
  -- the client's search statistics may count it, so they are built again.
  local ct = string.sub(listed, 1, -#'sessions' - 1)..'terms'
  if redis.call('EXISTS', listed) == 0 then redis.call('DEL', ct) else drop_statistics(ct) end
  if redis.call('EXISTS', skey(p, sid, 'info')) == 0 then redis.call('ZREM', p..'updated', sid) end
end
-- A search's sessions: `sid` alone ('' for the client's), or each session in the client's set;
-- `take(s)` reads one and returns false when `cid` no longer owns it: such an id is unlisted.
local function each_scope_session(p, cid, sid, take)
  if sid ~= '' then
    take(sid)
    return
  end
  local listed = ckey(p, cid, 'sessions')
  for _, s in ipairs(redis.call('SMEMBERS', listed)) do
    if not take(s) then unlist(p, listed, s) end
  end
end
-- An expired session (`ttl=`) leaves its id in `updated`: each write drops the oldest few
-- whose session is gone, so they do not pile up (whatever this store's own ttl).
local function sweep(p, updated)
  for _, sid in ipairs(redis.call('ZRANGE', updated, 0, 3)) do
    if redis.call('EXISTS', skey(p, sid, 'info')) == 0 then redis.call('ZREM', updated, sid) end
  end
end
"""

# ------------------------------------------------------------------ migrations

_LEGACY = re.compile(r"(s|c):([A-Za-z0-9._:@-]{1,128}):(info|msgs|sum|lease|batches|idx|sessions|facts)")
_CLIENT_PARTS = ("sessions", "facts")


def legacy_target(prefix: str, key: str) -> str | None:
    """The schema-4 name of `key` if it is a key of the layout before it, else None."""
    if not key.startswith(prefix):
        return None
    found = _LEGACY.fullmatch(key[len(prefix) :])
    if found is None:
        return None
    kind, ident, part = found.groups()
    if set(ident) == {"."} or (kind == "c") != (part in _CLIENT_PARTS):
        return None
    return f"{prefix}{kind}:{{{ident}}}:{part}"


def _glob(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _old_layout(value: Any) -> bool:
    return isinstance(value, str) and value.isdigit() and int(value) < LAYOUT_VERSION


def _refusal(prefix: str, other: str, version: Any) -> StoreError:
    msg = (
        f"Redis keys {prefix}*: cannot move them to the key layout of schema {LAYOUT_VERSION}: the "
        f"store with prefix {other!r} (schema {version}) nests with this one, and before schema "
        f"{LAYOUT_VERSION} two such stores could write the same key, so whose each key is cannot be "
        "told; nothing was changed. Copy one store's data under a prefix that does not nest (with "
        "the previous release), or delete it, then open this one again"
    )
    return StoreError(msg)


def _outer_schemas(prefix: str) -> list[str]:
    """Schema keys of every prefix that `prefix` extends (one MGET)."""
    return [f"{prefix[:i]}schema" for i in range(len(prefix))]


def _inner(prefix: str, key: str) -> str | None:
    """The prefix nested in `prefix` whose schema key `key` is, if it is one."""
    other = key[: -len("schema")]
    return other if other != prefix and _PREFIX.fullmatch(other) else None


# ARGV: old new row_old row_new, per key -> renames each old key that exists to its new name,
# once; a session key whose session has no info hash under either name ('' for a key that
# needs none) is what an install after an erase left behind (an orphan summary): deleted.
RELAYOUT = """
for i = 1, #ARGV, 4 do
  if redis.call('EXISTS', ARGV[i]) == 1 and redis.call('EXISTS', ARGV[i + 1]) == 0 then
    if ARGV[i + 2] == '' or redis.call('EXISTS', ARGV[i + 2], ARGV[i + 3]) > 0 then
      redis.call('RENAME', ARGV[i], ARGV[i + 1])
    else
      redis.call('DEL', ARGV[i])
    end
  end
end
return 1
"""


def _moves(prefix: str, key: str) -> list[str]:
    """`RELAYOUT`'s four arguments for `key`, or none if it is not an old-layout key."""
    target = legacy_target(prefix, key)
    if target is None:
        return []
    if not key.startswith(f"{prefix}s:") or key.endswith(":lease"):
        return [key, target, "", ""]
    row = key[: key.rindex(":")] + ":info"
    return [key, target, row, target[: target.rindex(":")] + ":info"]


def _texts(items: list[Any]) -> list[str]:
    from langchain_rolling_memory.core.lexical_search import message_index_text
    from langchain_rolling_memory.core.serde import loads_message

    return [message_index_text(loads_message(str(item).partition(" ")[2])) for item in items]


def _idx_entries(items: list[Any]) -> list[str]:
    # Messages before schema 2 had no date: undated ("-").
    return [f"- {text}" for text in _texts(items)]


def _legacy_msgs(prefix: str, key: Any) -> str | None:
    """The old-layout idx key beside `key`, if `key` is an old-layout msgs key."""
    target = legacy_target(prefix, str(key))
    return str(key)[: -len("msgs")] + "idx" if target and str(key).endswith(":msgs") else None


# Append-only, like the SQL migrations: step N brings the keys from version N-1 to N. Keys
# are created on first use, so 1 has nothing to convert; 2 writes the search entries (in
# Python: the indexed text is computed here); 3 is SQLite's alone; 4 delimits the ids (the
# erase generation itself has nothing to convert); 5 neither: a fact without `expires_at`
# never expires, and only a fact written with one needs its client in `expiring`; 6 (dense
# vectors, a `vec` hash per session) neither: a message without a vector is listed for one; 7
# is PostgreSQL's alone.
_STEPS = (None, "backfill", None, "relayout", None, None, None, None)
if len(_STEPS) != SCHEMA_VERSION:  # pragma: no cover - a packaging mistake
    raise RuntimeError("one Redis migration per schema version is required")


def migrate(r: Any, prefix: str, watch_error: type[Exception]) -> None:
    """Record the schema version of a new store, or bring an older one up to it (sync client)."""
    keys = Keys(prefix)
    if r.set(keys.schema, str(SCHEMA_VERSION), nx=True):
        return  # nothing was ever written under this prefix: no step to run
    version = int(r.get(keys.schema) or 0)
    if version > SCHEMA_VERSION:
        raise newer_schema(f"Redis keys {prefix}*", version)
    if version < LAYOUT_VERSION:
        _refuse_nesting(r, prefix)
    for number in range(version + 1, SCHEMA_VERSION + 1):
        if _STEPS[number - 1] == "backfill":
            _backfill(r, prefix, watch_error)
        elif _STEPS[number - 1] == "relayout":
            _relayout(r, prefix)
        r.set(keys.schema, str(number))


def _refuse_nesting(r: Any, prefix: str) -> None:
    outer = _outer_schemas(prefix)
    for key, value in zip(outer, r.mget(outer) if outer else [], strict=True):
        if _old_layout(value):
            raise _refusal(prefix, key[: -len("schema")], value)
    for key in r.scan_iter(match=_glob(prefix) + "*schema", count=1000):
        other = _inner(prefix, str(key))
        value = r.mget([key])[0] if other is not None else None
        if other is not None and _old_layout(value):
            raise _refusal(prefix, other, value)


def _relayout(r: Any, prefix: str) -> None:
    pending: list[str] = []
    for key in r.scan_iter(match=_glob(prefix) + "*", count=1000):
        pending += _moves(prefix, str(key))
        if len(pending) >= 1000:
            r.eval(RELAYOUT, 0, *pending)
            pending = []
    if pending:
        r.eval(RELAYOUT, 0, *pending)


def _backfill(r: Any, prefix: str, watch_error: type[Exception]) -> None:
    """Write the search entries of sessions written before schema 2 (in the old layout). Each
    session is rewritten under WATCH, so an append meanwhile retries it."""
    for key in r.scan_iter(match=_glob(prefix) + "s:*:msgs", count=1000):
        idx = _legacy_msgs(prefix, key)
        if idx is None:
            continue
        with r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key, idx)
                    items = pipe.lrange(key, 0, -1)
                    if pipe.llen(idx) >= len(items):
                        break
                    pipe.multi()
                    pipe.delete(idx)
                    if items:
                        pipe.rpush(idx, *_idx_entries(items))
                    pipe.execute()
                    break
                except watch_error:
                    continue


async def amigrate(r: Any, prefix: str, watch_error: type[Exception]) -> None:
    """`migrate` on an async client."""
    keys = Keys(prefix)
    if await r.set(keys.schema, str(SCHEMA_VERSION), nx=True):
        return
    version = int(await r.get(keys.schema) or 0)
    if version > SCHEMA_VERSION:
        raise newer_schema(f"Redis keys {prefix}*", version)
    if version < LAYOUT_VERSION:
        await _arefuse_nesting(r, prefix)
    for number in range(version + 1, SCHEMA_VERSION + 1):
        if _STEPS[number - 1] == "backfill":
            await _abackfill(r, prefix, watch_error)
        elif _STEPS[number - 1] == "relayout":
            await _arelayout(r, prefix)
        await r.set(keys.schema, str(number))


async def _arefuse_nesting(r: Any, prefix: str) -> None:
    outer = _outer_schemas(prefix)
    for key, value in zip(outer, await r.mget(outer) if outer else [], strict=True):
        if _old_layout(value):
            raise _refusal(prefix, key[: -len("schema")], value)
    async for key in r.scan_iter(match=_glob(prefix) + "*schema", count=1000):
        other = _inner(prefix, str(key))
        value = (await r.mget([key]))[0] if other is not None else None
        if other is not None and _old_layout(value):
            raise _refusal(prefix, other, value)


async def _arelayout(r: Any, prefix: str) -> None:
    pending: list[str] = []
    async for key in r.scan_iter(match=_glob(prefix) + "*", count=1000):
        pending += _moves(prefix, str(key))
        if len(pending) >= 1000:
            await r.eval(RELAYOUT, 0, *pending)
            pending = []
    if pending:
        await r.eval(RELAYOUT, 0, *pending)


async def _abackfill(r: Any, prefix: str, watch_error: type[Exception]) -> None:
    async for key in r.scan_iter(match=_glob(prefix) + "s:*:msgs", count=1000):
        idx = _legacy_msgs(prefix, key)
        if idx is None:
            continue
        async with r.pipeline() as pipe:
            while True:
                try:
                    await pipe.watch(key, idx)
                    items = await pipe.lrange(key, 0, -1)
                    if await pipe.llen(idx) >= len(items):
                        break
                    pipe.multi()
                    pipe.delete(idx)
                    if items:
                        pipe.rpush(idx, *_idx_entries(items))
                    await pipe.execute()
                    break
                except watch_error:
                    continue
