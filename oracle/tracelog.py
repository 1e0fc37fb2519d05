"""Trace validation of a live pool: record every call, then replay the log against the spec.

``kvpool.oracle.record(pool, "pool.log")`` returns a proxy for ``pool`` that forwards
every call and appends one JSON line per call with its arguments (as block ids) and
what it observably did (returned ids, error kind, watchers fired). It works on
pools with kvpool's API and on vLLM's real ``BlockPool``. The cost per call is a few
list comprehensions and one ``json.dumps``.

vLLM's calls on blocks with several keys (``kvpool-log/3``). A pool with vLLM 0.33.0's
API is logged in the spec's own vLLM operations, the request as plain data
(:class:`~kvpool.spec.ops.Request`: its block hashes, token ids, LoRA, multimodal inputs,
cache salt and session), keys in vLLM's form (the block hash followed by the 4-byte group
id), so the spec replays groups, partial entries and moves as the pool ran them:

* ``cache_full_blocks(request, blocks, ..., block_size, group, block_mask=None)`` is
  ``CacheFullBlocks``; ``cache_partial_block`` is ``CachePartialBlock``;
  ``move_block_hashes`` is ``MoveBlockHashes``; ``emit_cached_block_events`` is
  ``EmitCachedBlockEvents``;
* ``get_cached_block(hash, [g0, g1, ...])`` is ``GetCachedBlockGroups`` (one block per
  group, or None as soon as one group misses); ``get_cached_block(key)`` (the key-level
  form) is ``GetCachedBlock``;
* ``take_events`` records vLLM's events with every field (``BlockStored`` names the keys
  it announces; for ``emit_cached_block_events`` those some block held when it ran).

The header gives the pool's ``hash_block_size``, ``num_hash_lookahead_tokens`` and
``medium``. Logs of ``kvpool-log/2`` (``cache_full_blocks`` as ``CacheBlocks`` of
``"<hash hex>/<group>"`` keys, multi-group ``lookup`` records, the multi-key calls as
*unmodelled* records at which ``check-log`` stops) are still read.

``kvpool check-log LOG`` (:func:`check_log`) replays the log on the spec alone and
reports the first call whose recorded result the spec does not give, with the calls
that led to it. Log format (``kvpool-log/3``; ``kvpool-log/1`` and ``/2`` logs are read too): JSON
lines; the first is the header ``{"schema": "kvpool-log/3", "num_blocks": N, "caching":
bool, "events": bool, "hash_block_size": int, "lookahead": int, "medium": str}`` (the last
three optional), each other ``{"call": <op>, "observed": <outcome>}`` in the encoding of
kvpool traces (``/2`` also has ``{"lookup": [<key>, ...], "observed": <outcome>}``, a
multi-group lookup, and ``{"unmodelled": <method name>}``).
Calls made by watchers from inside a call are written after it, in the order they
started (the order the spec applies them in).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kvpool.impl.pool import embedding_rows
from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event
from kvpool.spec.invariants import check_pool
from kvpool.spec.keys import group_key
from kvpool.spec.ops import (
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    EmitCachedBlockEvents,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Lora,
    MMFeature,
    MoveBlockHashes,
    Op,
    Outcome,
    Request,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import DEFAULT_HASH_BLOCK_SIZE, MEDIUM_GPU, PoolState, World

from .driver import error_kind_of
from .exits import BadInput
from .files import LOG_LIMITS, Limits, check_blocks, check_op, check_outcome, parse_json, read_lines
from .traceformat import (
    op_from_json,
    op_to_json,
    outcome_from_json,
    outcome_to_json,
    result_rule,
)
from .tracereplay import Divergence
from .vllm_target import spec_event

LOG_SCHEMA = "kvpool-log/3"
READS = ("kvpool-log/1", "kvpool-log/2", LOG_SCHEMA)


@dataclass(frozen=True)
class GroupLookup:
    """``get_cached_block(hash, [g0, g1, ...])``: the spec key of each group's entry."""

    keys: tuple[str, ...]


def _record(op: Op | GroupLookup, out: Outcome) -> dict[str, Any]:
    if isinstance(op, GroupLookup):
        return {"lookup": list(op.keys), "observed": outcome_to_json(out)}
    return {"call": op_to_json(op), "observed": outcome_to_json(out)}


def _vllm_key(block_hash: Any, group: int) -> str:
    raw = bytes(block_hash)
    return f"{raw.hex()}/{group}"


def _plain(v: Any) -> Any:
    """vLLM's lists (nested) as the spec's tuples."""
    if isinstance(v, list | tuple):
        return tuple(_plain(x) for x in v)
    return v


def _event(e: Any, held: dict[int, tuple[Any, tuple[bytes, ...]]]) -> Event:
    """A pool's event as the spec's: kvpool's are; vLLM's get their keys (hash and group)
    and every field. ``held``: the keys an ``emit_cached_block_events`` event announces."""
    if isinstance(e, BlockStored | BlockRemoved | AllBlocksCleared):
        return e
    name = type(e).__name__
    hashes = [bytes(h) for h in getattr(e, "block_hashes", None) or () if isinstance(h, bytes)]
    if name == "AllBlocksCleared" or len(hashes) != len(getattr(e, "block_hashes", None) or ()):
        return spec_event(e, _vllm_key)  # hashes that are no bytes (an older release)
    g = int(getattr(e, "group_idx", 0) or 0)
    if name == "BlockRemoved":
        return BlockRemoved(group_key(hashes[0], g), (hashes[0],), e.medium, g)
    noted = held.get(id(e))
    parent = e.parent_block_hash
    return BlockStored(
        keys=noted[1] if noted and noted[0] is e else tuple(group_key(h, g) for h in hashes),
        block_hashes=tuple(hashes),
        parent_block_hash=None if parent is None else bytes(parent),
        token_ids=_plain(e.token_ids),
        block_size=e.block_size,
        lora_id=e.lora_id,
        medium=e.medium,
        lora_name=e.lora_name,
        extra_keys=_plain(e.extra_keys),
        group_idx=g,
        session_id=e.session_id,
        lookahead_token_ids=_plain(e.lookahead_token_ids),
    )


def spec_request(request: Any) -> Request:
    """What the pool reads of a live request, as the spec's plain data (for the log)."""
    lora_request = getattr(request, "lora_request", None)
    lora = None
    if lora_request:
        name = getattr(lora_request, "name", None) or getattr(lora_request, "lora_name", "")
        path = getattr(lora_request, "lora_path", "") or ""
        lora = Lora(lora_request.adapter_id, str(name or ""), str(path))
    mm = tuple(
        MMFeature(f.identifier, f.mm_position.offset, f.mm_position.length)
        for f in (getattr(request, "mm_features", None) or ())
    )
    hashes = tuple(bytes(h) if isinstance(h, bytes) else h for h in request.block_hashes)
    return Request(
        hashes,
        tuple(getattr(request, "all_token_ids", None) or ()),
        lora,
        mm,
        getattr(request, "cache_salt", None),
        getattr(request, "session_id", None),
        None
        if (embeds := getattr(request, "prompt_embeds", None)) is None
        else embedding_rows(embeds),
    )


class _Watch:
    """Wraps a watcher to note its firings in the call in progress."""

    __slots__ = ("fn", "recorder", "wid")

    def __init__(self, fn: Callable[[Any], None], wid: int, recorder: Recorder) -> None:
        self.fn, self.wid, self.recorder = fn, wid, recorder

    def __call__(self, block: Any) -> None:
        if self.recorder._frames:
            self.recorder._frames[-1].append(Firing(self.wid, 0, block.block_id))
        self.fn(block)


class Recorder:
    """A proxy that logs every call on ``pool`` (see the module docstring)."""

    def __init__(self, pool: Any, log: str | Path | IO[str]) -> None:
        self._pool = pool
        self._own = not hasattr(log, "write")
        if isinstance(log, str | Path):
            self._out: IO[str] = open(log, "w", encoding="utf-8")  # noqa: SIM115
        else:
            self._out = log
        self._wids: dict[int, int] = {}
        self._keep: list[Any] = []
        self._frames: list[list[Firing]] = []
        self._pending: list[list[tuple[Op | GroupLookup, Outcome]]] = []
        self._vllm = hasattr(pool, "cache_full_blocks")
        header = {
            "schema": LOG_SCHEMA,
            "num_blocks": int(getattr(pool, "num_gpu_blocks", len(pool.blocks))),
            "caching": bool(getattr(pool, "enable_caching", True)),
            "events": bool(getattr(pool, "enable_kv_cache_events", False)),
            "hash_block_size": int(getattr(pool, "hash_block_size", DEFAULT_HASH_BLOCK_SIZE)),
            "lookahead": int(getattr(pool, "num_hash_lookahead_tokens", 0) or 0),
            "medium": str(getattr(pool, "medium", MEDIUM_GPU) or MEDIUM_GPU),
        }
        self._held: dict[int, tuple[Any, tuple[bytes, ...]]] = {}
        self._write(header)

    def _write(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj) + "\n")

    def close(self) -> None:
        self._out.flush()
        if self._own:
            self._out.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    # -- the call wrapper --------------------------------------------------------------

    def _call(
        self, op: Op | GroupLookup, fn: Callable[[], Any], value: Callable[[Any], object]
    ) -> Any:
        self._frames.append([])
        self._pending.append([])
        try:
            result = fn()
        except Exception as exc:
            kind = error_kind_of(exc)
            fired = tuple(self._frames.pop())
            nested = self._pending.pop()
            self._log(
                op,
                Outcome(error=kind, fired=fired, detail=type(exc).__name__),
                nested,
                crashed=None if kind else type(exc).__name__,
            )
            raise
        fired = tuple(self._frames.pop())
        nested = self._pending.pop()
        self._log(op, Outcome(value=value(result), fired=fired), nested)
        return result

    def _log(
        self,
        op: Op | GroupLookup,
        out: Outcome,
        nested: list[tuple[Op | GroupLookup, Outcome]],
        crashed: str | None = None,
    ) -> None:
        if self._pending:  # a watcher's call: written after the outer one
            self._pending[-1].append((op, out))
            self._pending[-1].extend(nested)
            return
        rec = _record(op, out)
        if crashed:
            rec["crashed"] = crashed
        self._write(rec)
        for nop, nout in nested:
            self._write({**_record(nop, nout), "nested": True})

    @staticmethod
    def _ids(blocks: Any) -> tuple[int, ...]:
        return tuple(b.block_id for b in blocks)

    # -- the pool API -----------------------------------------------------------------------

    def get_new_blocks(self, num_blocks: int) -> Any:
        p = self._pool
        return self._call(GetNewBlocks(num_blocks), lambda: p.get_new_blocks(num_blocks), self._ids)

    def free_blocks(self, blocks: Any, *args: Any, **kw: Any) -> Any:
        blocks = list(blocks)
        ef = kw.get("evict_first", args[0] if args else False)
        p = self._pool
        return self._call(
            FreeBlocks(self._ids(blocks), ef),
            lambda: p.free_blocks(blocks, *args, **kw),
            lambda r: None,
        )

    def touch(self, blocks: Any) -> Any:
        blocks = list(blocks)
        p = self._pool
        return self._call(Touch(self._ids(blocks)), lambda: p.touch(blocks), lambda r: None)

    def unpin_blocks(self, blocks: Any, on_reuse: Any) -> Any:
        blocks = list(blocks)
        wid: object = "not callable"
        fn = on_reuse
        if callable(on_reuse):
            wid = self._wids.setdefault(id(on_reuse), len(self._wids))
            self._keep.append(on_reuse)
            fn = _Watch(on_reuse, wid, self)
        p = self._pool
        return self._call(
            UnpinBlocks(self._ids(blocks), wid), lambda: p.unpin_blocks(blocks, fn), lambda r: None
        )

    def cache_blocks(self, blocks: Any, keys: Any) -> Any:
        blocks, keys = list(blocks), list(keys)
        p = self._pool
        return self._call(
            CacheBlocks(self._ids(blocks), tuple(keys)),
            lambda: p.cache_blocks(blocks, keys),
            lambda r: None,
        )

    def cache_full_blocks(
        self,
        request: Any,
        blocks: Any,
        num_cached_blocks: Any,
        num_full_blocks: Any,
        block_size: Any,
        kv_cache_group_id: Any,
        block_mask: Any = None,
    ) -> Any:
        blocks = list(blocks)
        mask = None if block_mask is None else tuple(block_mask)
        op = CacheFullBlocks(
            spec_request(request),
            self._ids(blocks),
            num_cached_blocks,
            num_full_blocks,
            block_size,
            kv_cache_group_id,
            mask,
        )
        p = self._pool
        args = (request, blocks, num_cached_blocks, num_full_blocks, block_size, kv_cache_group_id)
        return self._call(
            op,
            lambda: (
                p.cache_full_blocks(*args, block_mask)
                if block_mask is not None
                else p.cache_full_blocks(*args)
            ),
            lambda r: None,
        )

    def get_cached_block(self, key: Any, group_ids: Any = None) -> Any:
        p = self._pool
        if group_ids is None:
            return self._call(
                GetCachedBlock(key),
                lambda: p.get_cached_block(key),
                lambda b: None if b is None else b.block_id,
            )
        groups = list(group_ids)
        return self._call(
            GetCachedBlockGroups(bytes(key) if isinstance(key, bytes) else key, tuple(groups)),
            lambda: p.get_cached_block(key, groups),
            lambda r: None if r is None else tuple(b.block_id for b in r),
        )

    def cache_partial_block(
        self,
        request: Any,
        block: Any,
        num_tokens: Any,
        kv_cache_group_id: Any,
        block_size: Any,
        replace_existing_hashes: Any = False,
    ) -> Any:
        op = CachePartialBlock(
            spec_request(request),
            block.block_id,
            num_tokens,
            kv_cache_group_id,
            block_size,
            replace_existing_hashes,
        )
        p = self._pool
        return self._call(
            op,
            lambda: p.cache_partial_block(
                request, block, num_tokens, kv_cache_group_id, block_size, replace_existing_hashes
            ),
            lambda key: None if key is None else bytes(key),
        )

    def move_block_hashes(self, src_block: Any, dst_block: Any) -> Any:
        p = self._pool
        return self._call(
            MoveBlockHashes(src_block.block_id, dst_block.block_id),
            lambda: p.move_block_hashes(src_block, dst_block),
            lambda r: None,
        )

    def emit_cached_block_events(
        self, request: Any, num_cached_blocks: Any, block_size: Any, kv_cache_group_id: Any
    ) -> Any:
        p = self._pool
        op = EmitCachedBlockEvents(
            spec_request(request), num_cached_blocks, block_size, kv_cache_group_id
        )
        queue = getattr(p, "kv_event_queue", None)
        before = len(queue) if isinstance(queue, list) else 0

        def call() -> Any:
            out = p.emit_cached_block_events(
                request, num_cached_blocks, block_size, kv_cache_group_id
            )
            index = getattr(p, "cached_block_hash_to_block", None)
            if isinstance(queue, list) and index is not None:  # vLLM's: note the held keys
                for e in queue[before:]:
                    g = int(getattr(e, "group_idx", 0) or 0)
                    keys = [group_key(bytes(h), g) for h in getattr(e, "block_hashes", ()) or ()]
                    held = tuple(k for k in keys if index.get_one_block(k) is not None)
                    self._held[id(e)] = (e, held)
            return out

        return self._call(op, call, lambda r: None)

    def evict_blocks(self, block_ids: Any) -> Any:
        ids = list(block_ids)
        p = self._pool
        return self._call(EvictBlocks(tuple(ids)), lambda: p.evict_blocks(ids), lambda r: None)

    def reset_prefix_cache(self) -> Any:
        p = self._pool
        return self._call(ResetPrefixCache(), p.reset_prefix_cache, bool)

    def get_num_free_blocks(self) -> Any:
        return self._call(GetNumFreeBlocks(), self._pool.get_num_free_blocks, int)

    def get_usage(self) -> Any:
        return self._call(GetUsage(), self._pool.get_usage, float)

    def is_block_writable(self, block: Any) -> Any:
        p = self._pool
        return self._call(IsBlockWritable(block.block_id), lambda: p.is_block_writable(block), bool)

    def take_events(self) -> Any:
        def events(evs: Any) -> tuple[Event, ...]:
            out = tuple(_event(e, self._held) for e in evs)
            self._held.clear()
            return out

        return self._call(TakeEvents(), self._pool.take_events, events)


def record(pool: Any, log: str | Path | IO[str]) -> Recorder:
    """Wrap a live pool so that every call on it is logged to ``log`` (JSON lines)."""
    return Recorder(pool, log)


def _lookup(world: World, lookup: GroupLookup) -> Outcome:
    """A multi-group lookup on the spec: each group's block, or None once one misses."""
    found: list[int] = []
    for key in lookup.keys:
        out = world.apply(GetCachedBlock(key))
        if out.error is not None:
            return out
        if out.value is None:
            return Outcome()
        found.append(out.value)  # type: ignore[arg-type]
    return Outcome(value=tuple(found))


@dataclass
class LogCheck:
    calls: int
    divergence: Divergence | None
    context: list[str] = field(default_factory=list)


def _log_record(line: str, limits: Limits, where: str) -> dict[str, Any]:
    rec = parse_json(line, limits, where)
    if not isinstance(rec, dict):
        raise BadInput(f"{where}: a record must be a JSON object")
    if "unmodelled" in rec:
        if not isinstance(rec["unmodelled"], str):
            raise BadInput(f"{where}: 'unmodelled' must name a method")
        return rec
    if "lookup" in rec:
        keys = rec["lookup"]
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise BadInput(f"{where}: 'lookup' must be a list of keys")
    elif "call" in rec:
        check_op(rec["call"], 1, where)
    else:
        raise BadInput(f"{where}: a record has 'call', 'lookup' or 'unmodelled'")
    if not isinstance(rec.get("observed"), dict):
        raise BadInput(f"{where}: a record needs its 'observed' outcome")
    check_outcome(rec["observed"], where)
    crashed = rec.get("crashed")
    if crashed is not None and not isinstance(crashed, str):
        raise BadInput(f"{where}: 'crashed' must be an exception name")
    return rec


def check_log(path: str | Path, context: int = 6, limits: Limits = LOG_LIMITS) -> LogCheck:
    """Replay a recorded log on the spec; the first divergence and the calls before it.

    The log is checked against ``limits`` (size, lines, line length, nesting, the pool's
    size), and each record's shape as it is read: :class:`~.exits.BadInput` for a log
    that is not one.
    """
    lines = read_lines(path, limits, "log")
    if not lines:
        raise BadInput(f"{path}: empty log")
    header = parse_json(lines[0], limits, f"{path}:1")
    if not isinstance(header, dict) or header.get("schema") not in READS:
        schema = header.get("schema") if isinstance(header, dict) else None
        raise BadInput(f"{path}: not a kvpool log (schema {str(schema)[:60]!r})")
    caching, events = header.get("caching"), header.get("events")
    if not isinstance(caching, bool) or not isinstance(events, bool):
        raise BadInput(f"{path}:1: the header's 'caching' and 'events' must be true or false")
    num_blocks, _, _ = check_blocks(header.get("num_blocks"), limits, f"{path}:1")
    hsz = header.get("hash_block_size", DEFAULT_HASH_BLOCK_SIZE)
    lookahead, medium = header.get("lookahead", 0), header.get("medium", MEDIUM_GPU)
    if type(hsz) is not int or hsz < 1 or type(lookahead) is not int or lookahead < 0:
        raise BadInput(f"{path}:1: 'hash_block_size' must be an int >= 1, 'lookahead' >= 0")
    if not isinstance(medium, str):
        raise BadInput(f"{path}:1: 'medium' must be a string")
    world = World.of(PoolState.initial(num_blocks, caching, events, hsz, lookahead, medium))
    recent: list[str] = []
    n = 0
    for n, line in enumerate(lines[1:], 1):
        rec = _log_record(line, limits, f"{path}:{n + 1}")
        if "unmodelled" in rec:
            detail = f"{rec['unmodelled']} is not modelled by the spec; the log stops being checked"
            return LogCheck(n, Divergence(n, "unmodelled call", detail), recent)
        observed = outcome_from_json(rec["observed"])
        op: Op | GroupLookup
        if "lookup" in rec:
            op = GroupLookup(tuple(rec["lookup"]))
            expected = _lookup(world, op)
        else:
            op = op_from_json(rec["call"])
            expected = world.apply(op)
        recent.append(
            f"{n}. {op!r} -> {observed.value if observed else None!r}"
            f"{' ! ' + observed.error.value if observed and observed.error else ''}"
        )
        recent = recent[-context:]
        problem: tuple[str, str] | None = None
        if observed is None:  # pragma: no cover - _log_record requires it
            raise BadInput(f"{path}:{n + 1}: no 'observed' outcome")
        if rec.get("crashed"):
            problem = ("target crashed", f"{op!r} raised {rec['crashed']}")
        elif expected.error != observed.error:
            problem = (
                "error kind differs",
                f"{op!r}: spec {expected.error}, pool {observed.error}",
            )
        elif expected.value != observed.value:
            problem = (
                result_rule(op),
                f"{op!r}: spec {expected.value!r}, pool {observed.value!r}",
            )
        elif expected.fired != observed.fired:
            problem = ("fired differs", f"{op!r}: spec {expected.fired}, pool {observed.fired}")
        else:
            viol = check_pool(world.pools[0])
            if viol:
                problem = (viol[0].invariant, str(viol[0]))
        if problem:
            return LogCheck(n, Divergence(n, *problem), recent)
    return LogCheck(n, None, recent)
