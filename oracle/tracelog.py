"""Trace validation of a live pool: record every call, then replay the log against the spec.

``kvpool.oracle.record(pool, "pool.log")`` returns a proxy for ``pool`` that forwards
every call and appends one JSON line per call with its arguments (as block ids) and
what it observably did (returned ids, error kind, watchers fired). It works on
pools with kvpool's API and on vLLM's real ``BlockPool``. The cost per call is a few
list comprehensions and one ``json.dumps``.

KV cache groups (hybrid models). vLLM keeps every group's blocks in one pool and
tells the groups' cache entries apart by appending the group id to the block hash
(``BlockHashWithGroupId``); the spec's keys are opaque, so a group's entry is the spec
key ``"<hash hex>/<group>"`` and the spec needs no notion of groups:

* ``cache_full_blocks(request, blocks, ..., block_size, group, block_mask=None)`` is the
  spec's ``CacheBlocks`` of the blocks it caches (null and masked-out blocks skipped,
  hashes taken at the group's ``block_size`` with vLLM's own ``resolve_block_hashes``);
* ``get_cached_block(hash, [g])`` is ``GetCachedBlock("<hash>/<g>")``;
* ``get_cached_block(hash, [g0, g1, ...])`` is logged as a *lookup* record: one
  ``GetCachedBlock`` per group, and the result is the list of the groups' blocks, or
  None as soon as one group misses (vLLM's documented result);
* vLLM calls the spec has no model of -- ``cache_partial_block`` and
  ``move_block_hashes`` (several keys per block, keys moving between blocks) and
  ``emit_cached_block_events`` (announcing keys again without a state change) -- are
  forwarded and logged as *unmodelled* records; ``check-log`` stops there and says so
  instead of reporting a false divergence further on.

``kvpool check-log LOG`` (:func:`check_log`) replays the log on the spec alone and
reports the first call whose recorded result the spec does not give, with the calls
that led to it. Log format (``kvpool-log/2``; a ``kvpool-log/1`` log, which has
``call`` records only, is read too): JSON lines; the first is the header
``{"schema": "kvpool-log/2", "num_blocks": N, "caching": bool, "events": bool}``, each
other ``{"call": <op>, "observed": <outcome>}`` in the encoding of kvpool traces,
``{"lookup": [<key>, ...], "observed": <outcome>}`` (a multi-group lookup) or
``{"unmodelled": <method name>}``.
Calls made by watchers from inside a call are written after it, in the order they
started (the order the spec applies them in).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kvpool.spec.events import AllBlocksCleared, BlockRemoved, BlockStored, Event
from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    EvictBlocks,
    Firing,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    Outcome,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import World

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

LOG_SCHEMA = "kvpool-log/2"
READS = ("kvpool-log/1", LOG_SCHEMA)


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


def _event(e: Any) -> Event:
    if isinstance(e, BlockStored | BlockRemoved | AllBlocksCleared):
        return e
    return spec_event(e, _vllm_key)


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
        }
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
        num_cached_blocks: int,
        num_full_blocks: int,
        block_size: int,
        kv_cache_group_id: int,
        *args: Any,
        **kw: Any,
    ) -> Any:
        new = list(blocks[num_cached_blocks:num_full_blocks])
        mask = kw.get("block_mask", args[0] if args else None)
        hashes = self._hashes(request, block_size)[num_cached_blocks:num_full_blocks]
        pairs = [
            (b, h)
            for i, (b, h) in enumerate(zip(new, hashes, strict=False))
            if not b.is_null and (mask is None or mask[i])
        ]
        op = CacheBlocks(
            tuple(b.block_id for b, _ in pairs),
            tuple(_vllm_key(h, kv_cache_group_id) for _, h in pairs),
        )
        p = self._pool
        return self._call(
            op,
            lambda: p.cache_full_blocks(
                request,
                blocks,
                num_cached_blocks,
                num_full_blocks,
                block_size,
                kv_cache_group_id,
                *args,
                **kw,
            ),
            lambda r: None,
        )

    def _hashes(self, request: Any, block_size: int) -> list[Any]:
        """The request's block hashes at ``block_size``, as vLLM's pool itself reads them."""
        resolve = getattr(self._pool.cache_full_blocks, "__globals__", {}).get(
            "resolve_block_hashes"
        )
        hash_block_size = getattr(self._pool, "hash_block_size", None)
        if resolve is None or hash_block_size is None:
            return list(request.block_hashes)
        view = resolve(request.block_hashes, hash_block_size, block_size)
        return [view[i] for i in range(len(view))]

    def get_cached_block(self, key: Any, group_ids: Any = None) -> Any:
        p = self._pool
        if group_ids is None:
            return self._call(
                GetCachedBlock(key),
                lambda: p.get_cached_block(key),
                lambda b: None if b is None else b.block_id,
            )
        groups = list(group_ids)
        op: Op | GroupLookup = (
            GetCachedBlock(_vllm_key(key, groups[0]))
            if len(groups) == 1
            else GroupLookup(tuple(_vllm_key(key, g) for g in groups))
        )

        def value(r: Any) -> object:
            if not r:
                return None
            return r[0].block_id if len(groups) == 1 else tuple(b.block_id for b in r)

        return self._call(op, lambda: p.get_cached_block(key, groups), value)

    def _unmodelled(self, name: str, *args: Any, **kw: Any) -> Any:
        self._write({"unmodelled": name})
        return getattr(self._pool, name)(*args, **kw)

    def cache_partial_block(self, *args: Any, **kw: Any) -> Any:
        return self._unmodelled("cache_partial_block", *args, **kw)

    def move_block_hashes(self, *args: Any, **kw: Any) -> Any:
        return self._unmodelled("move_block_hashes", *args, **kw)

    def emit_cached_block_events(self, *args: Any, **kw: Any) -> Any:
        return self._unmodelled("emit_cached_block_events", *args, **kw)

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
        return self._call(
            TakeEvents(), self._pool.take_events, lambda evs: tuple(_event(e) for e in evs)
        )


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
    world = World.single(num_blocks, caching, events)
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
