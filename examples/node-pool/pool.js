#!/usr/bin/env node
// A KV-cache block pool in JavaScript, speaking kvpool's JSON-lines protocol
// (kvpool-jsonl/1) on stdin/stdout, so that `kvpool conform --target "cmd:node pool.js"`
// can check it against the spec. One process holds any number of pools.
//
// KVPOOL_NODE_BUG=lifo makes freed uncached blocks join the back of the queue instead
// of the front: a seeded bug the oracle must catch. KVPOOL_NODE_BUG=crash-on-touch makes
// the process exit when a free block is touched: a target that dies mid-call.
"use strict";
const readline = require("readline");

const BUG = process.env.KVPOOL_NODE_BUG || "";

class Refused extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}
const refuse = (kind, msg) => { throw new Refused(kind, msg); };

const isInt = (v) => typeof v === "number" && Number.isInteger(v);
// Keys arrive as JSON; tagged lists and dicts stand for unhashable Python values.
const hashable = (k) => k !== null && !(typeof k === "object" && !Array.isArray(k) &&
  (k.t === "list" || k.t === "dict"));
const keyId = (k) => JSON.stringify(k);

const pools = [];

class Pool {
  constructor(n, caching, events) {
    this.n = n; this.caching = caching; this.events = events;
    this.ref = new Array(n).fill(0);
    this.key = new Array(n).fill(null);
    this.free = [];
    for (let b = 1; b < n; b++) this.free.push(b);
    this.index = new Map();   // keyId -> {key, holders: [block ids], oldest first}
    this.pending = new Map(); // block -> [watcher ids]; first-watched order
    this.log = []; this.registered = 0; this.fired = 0;
  }
  logEvent(e) { if (this.events) this.log.push(e); }
  dropKey(b) {
    const k = this.key[b];
    if (k === null) return;
    this.key[b] = null;
    const id = keyId(k), entry = this.index.get(id);
    entry.holders.splice(entry.holders.indexOf(b), 1);
    if (entry.holders.length === 0) {
      this.index.delete(id);
      this.logEvent({ type: "BlockRemoved", key: k });
    }
  }
}

function pool(id) {
  if (!isInt(id) || !pools[id]) refuse("InvalidArgument", `no pool ${id}`);
  return pools[id];
}
function entry(e) {  // a block named [pool, id] that exists
  if (!Array.isArray(e) || e.length !== 2 || !isInt(e[0]) || !isInt(e[1]) ||
      !pools[e[0]] || e[1] < 0 || e[1] >= pools[e[0]].n) {
    refuse("InvalidArgument", `${JSON.stringify(e)} is not a block`);
  }
  return e;
}
function ownBlocks(pi, entries, nullMode) {
  const ids = [];
  for (const e of entries) {
    const [p, b] = entry(e);
    if (b === 0) {
      if (nullMode === "skip") continue;
      refuse("NullBlockMisuse", "the null block");
    }
    if (p !== pi) refuse("ForeignBlock", `block ${p}:${b} belongs to pool ${p}`);
    ids.push(b);
  }
  return ids;
}
function checkMultiplicity(ps, ids) {
  const count = new Map();
  for (const b of ids) count.set(b, (count.get(b) || 0) + 1);
  for (const [b, m] of count) {
    if (ps.ref[b] < m) refuse("RefCountUnderflow", `block ${b} released ${m} times`);
  }
}
function release(ps, ids, evictFirst) {
  const front = [], back = [];
  for (const b of ids) {
    ps.ref[b] -= 1;
    if (ps.ref[b] === 0) {
      const toFront = ps.key[b] === null || !ps.caching || evictFirst;
      (toFront && BUG !== "lifo" ? front : back).push(b);
    }
  }
  ps.free = front.concat(ps.free, back);
}

const methods = {
  hello() {
    return { protocol: "kvpool-jsonl/1", capabilities: [
      "GetNewBlocks", "FreeBlocks", "Touch", "UnpinBlocks", "CacheBlocks", "GetCachedBlock",
      "EvictBlocks", "ResetPrefixCache", "GetNumFreeBlocks", "GetUsage", "IsBlockWritable",
      "TakeEvents", "evict_first", "state"] };
  },
  new_pool(p) {
    pools.push(new Pool(p.num_blocks, !!p.enable_caching, !!p.enable_kv_cache_events));
    return pools.length - 1;
  },
  get_new_blocks(p, fired) {
    const ps = pool(p.pool), n = p.n;
    if (!isInt(n)) refuse("InvalidArgument", "num_blocks must be an int");
    if (n < 0) refuse("InvalidArgument", "num_blocks must be >= 0");
    if (n > ps.free.length) refuse("InsufficientFreeBlocks", `Cannot get ${n} free blocks from the pool`);
    const taken = ps.free.splice(0, n);
    for (const b of taken) { ps.dropKey(b); ps.ref[b] = 1; }
    for (const b of taken) {
      const ws = ps.pending.get(b);
      if (!ws) continue;
      ps.pending.delete(b);
      for (const w of ws) { fired.push([w, p.pool, b]); ps.fired += 1; }
    }
    return taken;
  },
  free_blocks(p) {
    const pi = p.pool; pool(pi);
    if (typeof p.evict_first !== "boolean") refuse("InvalidArgument", "evict_first must be a bool");
    const groups = new Map();
    for (const e of p.blocks) {
      const [q, b] = entry(e);
      if (b === 0) continue;
      if (!groups.has(q)) groups.set(q, []);
      groups.get(q).push(b);
    }
    for (const [q, ids] of groups) checkMultiplicity(pools[q], ids);
    release(pools[pi], groups.get(pi) || [], p.evict_first);
    for (const [q, ids] of groups) if (q !== pi) release(pools[q], ids, p.evict_first);
    return null;
  },
  touch(p) {
    const ps = pool(p.pool);
    for (const b of ownBlocks(p.pool, p.blocks, "skip")) {
      if (ps.ref[b] === 0 && BUG === "crash-on-touch") process.exit(3);
      if (ps.ref[b] === 0) ps.free.splice(ps.free.indexOf(b), 1);
      ps.ref[b] += 1;
    }
    return null;
  },
  unpin_blocks(p) {
    const ps = pool(p.pool), w = p.watcher;
    if (!isInt(w)) refuse("InvalidArgument", "on_reuse must be callable");
    const ids = ownBlocks(p.pool, p.blocks, "refuse");
    checkMultiplicity(ps, ids);
    const released = [];
    for (const b of ids) {
      ps.ref[b] -= 1;
      if (!ps.pending.has(b)) ps.pending.set(b, []);
      const ws = ps.pending.get(b);
      if (!ws.includes(w)) { ws.push(w); ps.registered += 1; }
      if (ps.ref[b] === 0) released.push(b);
    }
    ps.free.push(...released);
    return null;
  },
  cache_blocks(p) {
    const ps = pool(p.pool);
    if (p.blocks.length !== p.keys.length) refuse("InvalidArgument", "lengths differ");
    for (const k of p.keys) if (!hashable(k)) refuse("InvalidArgument", "bad key");
    if (!ps.caching) refuse("CachingDisabled", "caching is off");
    const ids = ownBlocks(p.pool, p.blocks, "refuse");
    const seen = new Set();
    for (const b of ids) {
      if (ps.ref[b] < 1) refuse("BlockNotInUse", `block ${b} has ref_cnt 0`);
      if (ps.key[b] !== null) refuse("AlreadyCached", `block ${b} holds a key`);
      if (seen.has(b)) refuse("InvalidArgument", `block ${b} is listed twice`);
      seen.add(b);
    }
    if (ids.length === 0) return null;
    ids.forEach((b, i) => {
      const k = p.keys[i], id = keyId(k);
      ps.key[b] = k;
      if (!ps.index.has(id)) ps.index.set(id, { key: k, holders: [] });
      ps.index.get(id).holders.push(b);
    });
    ps.logEvent({ type: "BlockStored", keys: p.keys });
    return null;
  },
  get_cached_block(p) {
    const ps = pool(p.pool);
    if (p.key !== null && !hashable(p.key)) refuse("InvalidArgument", "unhashable key");
    const e = ps.index.get(keyId(p.key));
    return e ? e.holders[0] : null;
  },
  evict_blocks(p) {
    const ps = pool(p.pool);
    for (const i of p.block_ids) {
      if (!isInt(i) || i < 0 || i >= ps.n) refuse("InvalidArgument", `bad block id ${i}`);
      if (i === 0) refuse("NullBlockMisuse", "block id 0 is the null block");
    }
    for (const i of p.block_ids) ps.dropKey(i);
    return null;
  },
  reset_prefix_cache(p, fired) {
    const ps = pool(p.pool);
    if (ps.n - 1 - ps.free.length > 0) return false;
    ps.key.fill(null); ps.index.clear();
    for (const [b, ws] of ps.pending) for (const w of ws) { fired.push([w, p.pool, b]); ps.fired += 1; }
    ps.pending.clear();
    ps.logEvent({ type: "AllBlocksCleared" });
    return true;
  },
  get_num_free_blocks(p) { return pool(p.pool).free.length; },
  get_usage(p) {
    const ps = pool(p.pool), total = ps.n - 1;
    return total === 0 ? 0.0 : 1.0 - ps.free.length / total;
  },
  is_block_writable(p) {
    const ps = pool(p.pool), [q, b] = entry(p.block);
    if (b === 0) return false;
    if (q !== p.pool) refuse("ForeignBlock", `block ${q}:${b} belongs to pool ${q}`);
    return ps.ref[b] === 1 && ps.key[b] === null;
  },
  take_events(p) { const ps = pool(p.pool), out = ps.log; ps.log = []; return out; },
  state(p) {
    const ps = pool(p.pool);
    return {
      ref: ps.ref, key: ps.key, free: ps.free, caching: ps.caching, events: ps.events,
      index: [...ps.index.values()].map((e) => [e.key, e.holders]),
      pending: [...ps.pending.entries()], log: ps.log,
      registered: ps.registered, fired: ps.fired,
    };
  },
};

const rl = readline.createInterface({ input: process.stdin, terminal: false });
rl.on("line", (line) => {
  if (!line.trim()) return;
  const req = JSON.parse(line), fired = [];
  let reply;
  try {
    const fn = methods[req.method];
    if (!fn) refuse("InvalidArgument", `unknown method ${req.method}`);
    reply = { id: req.id, result: fn(req.params || {}, fired), fired };
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    reply = { id: req.id, error: { kind: err.kind, message: err.message }, fired };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
