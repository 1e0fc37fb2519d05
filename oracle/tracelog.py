"""Trace validation of a live pool: record every call, then replay the log against the spec.

``kvpool.oracle.record(pool, "pool.log")`` returns a proxy for ``pool`` that forwards
every call and appends one JSON line per call with its arguments (as block ids) and
what it observably did (returned ids, error kind, watchers fired). It works on
pools with kvpool's API and on vLLM's real ``BlockPool`` (``cache_full_blocks`` and
``get_cached_block(hash, group_ids)`` are logged as the spec's ``CacheBlocks`` and
``GetCachedBlock`` with the key ``"<hash hex>/<group>"``; one group per lookup).
The cost per call is a few list comprehensions and one ``json.dumps``.

``kvpool check-log LOG`` (:func:`check_log`) replays the log on the spec alone and
reports the first call whose recorded result the spec does not give, with the calls
that led to it. Log format: JSON lines; the first is the header
``{"schema": "kvpool-log/1", "num_blocks": N, "caching": bool, "events": bool}``, each
other ``{"call": <op>, "observed": <outcome>}`` in the encoding of kvpool traces.
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

from .conformance import Divergence, op_from_json, op_to_json, outcome_from_json, outcome_to_json
from .driver import error_kind_of

LOG_SCHEMA = "kvpool-log/1"


def _vllm_key(block_hash: Any, group: int) -> str:
    raw = bytes(block_hash)
    return f"{raw.hex()}/{group}"


def _event(e: Any) -> Event:
    if isinstance(e, BlockStored | BlockRemoved | AllBlocksCleared):
        return e
    name = type(e).__name__
    group = int(getattr(e, "group_idx", 0) or 0)
    if name == "BlockStored":
        return BlockStored(tuple(_vllm_key(h, group) for h in e.block_hashes or ()))
    if name == "BlockRemoved":
        (h,) = e.block_hashes
        return BlockRemoved(_vllm_key(h, group))
    return AllBlocksCleared()


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
        self._pending: list[list[tuple[Op, Outcome]]] = []
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

    def _call(self, op: Op, fn: Callable[[], Any], value: Callable[[Any], object]) -> Any:
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
        self, op: Op, out: Outcome, nested: list[tuple[Op, Outcome]], crashed: str | None = None
    ) -> None:
        if self._pending:  # a watcher's call: written after the outer one
            self._pending[-1].append((op, out))
            self._pending[-1].extend(nested)
            return
        rec: dict[str, Any] = {"call": op_to_json(op), "observed": outcome_to_json(out)}
        if crashed:
            rec["crashed"] = crashed
        self._write(rec)
        for nop, nout in nested:
            self._write(
                {"call": op_to_json(nop), "observed": outcome_to_json(nout), "nested": True}
            )

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
        hashes = list(request.block_hashes[num_cached_blocks:num_full_blocks])
        pairs = [(b, h) for b, h in zip(new, hashes, strict=False) if not b.is_null]
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

    def get_cached_block(self, key: Any, group_ids: Any = None) -> Any:
        p = self._pool
        if group_ids is None:
            return self._call(
                GetCachedBlock(key),
                lambda: p.get_cached_block(key),
                lambda b: None if b is None else b.block_id,
            )
        groups = list(group_ids)
        if len(groups) != 1:
            raise ValueError("kvpool.oracle.record logs lookups of one KV cache group")
        return self._call(
            GetCachedBlock(_vllm_key(key, groups[0])),
            lambda: p.get_cached_block(key, groups),
            lambda r: None if not r else r[0].block_id,
        )

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


@dataclass
class LogCheck:
    calls: int
    divergence: Divergence | None
    context: list[str] = field(default_factory=list)


def check_log(path: str | Path, context: int = 6) -> LogCheck:
    """Replay a recorded log on the spec; the first divergence and the calls before it."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ValueError(f"{path}: empty log")
    header = json.loads(lines[0])
    if header.get("schema") != LOG_SCHEMA:
        raise ValueError(f"{path}: not a {LOG_SCHEMA} log")
    world = World.single(int(header["num_blocks"]), bool(header["caching"]), bool(header["events"]))
    recent: list[str] = []
    n = 0
    for n, line in enumerate(lines[1:], 1):
        rec = json.loads(line)
        op = op_from_json(rec["call"])
        observed = outcome_from_json(rec["observed"])
        expected = world.apply(op)
        recent.append(
            f"{n}. {op!r} -> {observed.value if observed else None!r}"
            f"{' ! ' + observed.error.value if observed and observed.error else ''}"
        )
        recent = recent[-context:]
        problem: tuple[str, str] | None = None
        assert observed is not None
        if rec.get("crashed"):
            problem = ("target crashed", f"{op!r} raised {rec['crashed']}")
        elif expected.error != observed.error:
            problem = (
                "error kind differs",
                f"{op!r}: spec {expected.error}, pool {observed.error}",
            )
        elif expected.value != observed.value:
            problem = (
                "result differs",
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
