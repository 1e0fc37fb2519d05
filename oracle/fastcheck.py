"""Fast lockstep checking of long random workloads, with incremental comparison.

:func:`run_random` drives the spec and a target with a long stream of calls and
compares them incrementally: every call's outcome, and the state of every block the
call named or returned; the whole state every ``check_every`` calls and at the end.
This is how the oracle checks big pools quickly; the Hypothesis search of
``kvpool conform`` is for finding and shrinking failures on small ones. Per level:

* ``exact`` -- valid calls (allocate, cache prefix keys, look up and touch hits, free,
  evict, take events); each outcome compared in full (ids, values, errors, watchers
  fired), each named block's ``ref_cnt`` and key; the whole state (free queue order,
  index, watchers, events) and every INV-* every ``check_every`` calls.
* ``safety`` -- the same calls, any eviction order: when the target hands out other
  blocks than the spec, the spec's blocks are renamed after the target's choice (as
  ``kvpool conform --level safety`` does) and the workload goes on with what the target
  returned. Compared: error kinds, ``ref_cnt >= 0`` of each named block, and every
  INV-* on the target's own state every ``check_every`` calls.
* ``robust`` -- ``exact`` plus unpins with watchers (some raising, some calling back
  into the pool) and invalid calls of every single-pool error kind; each refused call
  must give its kind and leave the blocks it named as they were, and every raising
  watcher must be reported through ``sys.unraisablehook``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    CacheFullBlocks,
    CachePartialBlock,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetCachedBlockGroups,
    GetNewBlocks,
    GetNumFreeBlocks,
    IsBlockWritable,
    Op,
    Outcome,
    Request,
    TakeEvents,
    Touch,
    UnpinBlocks,
)
from kvpool.spec.state import PoolState, World

from .driver import Driver, WatcherAction
from .exits import TargetCrashed, TargetHung
from .machine import state_diff
from .target_base import Target
from .traceformat import LEVELS

RAISING = (6, 7)
"""Watcher ids that raise when they fire (robust)."""
REENTRANT: dict[int, Op] = {4: GetNumFreeBlocks(), 5: IsBlockWritable(1)}
"""Watcher ids that call back into the pool when they fire (robust)."""


def same_state(a: PoolState, b: PoolState) -> bool:
    """``a.snapshot() == b.snapshot()``, without building the snapshots (big pools)."""
    return (
        a.ref == b.ref
        and a.key == b.key
        and list(a.free) == list(b.free)
        and (a.num_blocks, a.caching, a.events_on, a.registered, a.fired)
        == (b.num_blocks, b.caching, b.events_on, b.registered, b.fired)
        and len(a.index) == len(b.index)
        and all(list(h) == list(b.index.get(k, ())) for k, h in a.index.items())
        and list(a.pending.items()) == list(b.pending.items())
        and a.log == b.log
        and a.view == b.view
        and a.tokens == b.tokens
        and {k: v for k, v in a.entries.items() if v} == {k: v for k, v in b.entries.items() if v}
    )


def rename(ps: PoolState, a: int, b: int) -> None:
    """Swap the names of blocks ``a`` and ``b`` in O(1), for ``safety`` only.

    Unlike :func:`kvpool.oracle.tracereplay.relabel` it does not keep the order of the
    free queue, of the holders of a key or of the pending watchers: ``safety`` compares
    none of them, only which blocks are free, referenced, keyed and watched.
    """
    if a == b:
        return
    for x, y in ((a, b), (b, a)):
        for k in ps.keys_of(x):  # primary key and further entries
            holders = ps.index[k]
            del holders[x]
            holders[y] = None
    ps.ref[a], ps.ref[b] = ps.ref[b], ps.ref[a]
    ps.key[a], ps.key[b] = ps.key[b], ps.key[a]
    _swap(ps.tokens, a, b)
    _swap(ps.entries, a, b)
    if (a in ps.free) != (b in ps.free):
        gone, come = (a, b) if a in ps.free else (b, a)
        del ps.free[gone]
        ps.free[come] = None
    _swap(ps.pending, a, b)


def _swap(table: dict[int, Any], a: int, b: int) -> None:
    """Swap what ``table`` holds under ``a`` and under ``b`` (either may hold nothing)."""
    va, vb = table.pop(a, None), table.pop(b, None)
    if va is not None:
        table[b] = va
    if vb is not None:
        table[a] = vb


NEEDS: frozenset[str] = frozenset(
    {"GetNewBlocks", "FreeBlocks", "Touch", "CacheBlocks", "GetCachedBlock", "EvictBlocks"}
)
"""The capabilities every workload uses (``robust`` adds UnpinBlocks, events TakeEvents)."""


def cannot_drive(target: Target, level: str, events: bool = True) -> str | None:
    """Why :func:`run_random` cannot run ``target`` at ``level`` (None if it can).

    The workload reads each block's ``ref_cnt`` and ``block_hash`` straight off the
    target's block objects, as vLLM's blocks have them, and calls the whole API.
    """
    needs = set(NEEDS) | ({"UnpinBlocks"} if level == "robust" else set())
    needs |= {"TakeEvents"} if events else set()
    missing = sorted(needs - set(target.capabilities))
    if missing:
        return f"{target.name} lacks {', '.join(missing)}: use kvpool conform, which skips them"
    probe = target.factory(2, True, events)
    block = getattr(probe, "blocks", [None, None])[1]
    if not (hasattr(block, "ref_cnt") and hasattr(block, "block_hash")):
        return (
            f"{target.name}'s blocks have no ref_cnt and block_hash to read: "
            "use kvpool conform, which reads state through kvpool_state()"
        )
    return None


@dataclass
class FastResult:
    ops: int
    seconds: float
    divergence: str | None
    level: str = "exact"

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


def run_random(
    target: Target,
    ops: int = 100_000,
    num_blocks: int = 10_000,
    seed: int = 0,
    check_every: int = 1000,
    caching: bool = True,
    events: bool = True,
    level: str = "exact",
) -> FastResult:
    """Run ``ops`` random calls on the spec and ``target`` at ``level``; the first divergence."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    safety, robust = level == "safety", level == "robust"
    rng = random.Random(seed)
    world = World.single(num_blocks, caching, events)
    driver = Driver(target.factory, [(num_blocks, caching, events)])
    pool = driver.pool(0)
    blocks = driver._blocks[0]
    ps = world.pools[0]
    held: list[list[int]] = []
    done = 0
    start = time.perf_counter()
    if robust:
        for wid in RAISING:
            driver.set_action(wid, WatcherAction(raise_error=True))
        for wid, probe in REENTRANT.items():
            driver.set_action(wid, WatcherAction(op=probe))

    last: list[object] = [None]
    codec = getattr(pool, "codec", None)
    decode = codec.decode if codec is not None else None
    state_check = target.state_check

    def compare(op: Op, expected: Outcome, observed: Outcome, where: str = "") -> str | None:
        if expected.error != observed.error or (not safety and expected != observed):
            return f"call {done}: {op!r}{where}: spec {expected}, target {observed}"
        return None

    def step(op: Op, touched: list[int]) -> str | None:
        nonlocal done
        expected = world.apply(op)
        try:
            observed = driver.execute(op)
        except TargetHung as exc:  # a finding about the target, like a wrong answer
            return f"call {done + 1}: {op!r}: target hung: {exc}"
        except TargetCrashed as exc:
            return f"call {done + 1}: {op!r}: target crashed: {exc}"
        done += 1
        problem = compare(op, expected, observed)
        raised = sum(1 for f in expected.fired if f.watcher in RAISING)
        for nop, nobs in driver.nested:
            nexp = world.apply(nop)
            done += 1
            raised += sum(1 for f in nexp.fired if f.watcher in RAISING)
            problem = problem or compare(nop, nexp, nobs, " (run by a watcher)")
        if problem is not None:
            return problem
        if robust and raised != len(driver.unraisable):
            return f"call {done}: {op!r}: {raised} raising watcher(s), reported {driver.unraisable}"
        if safety:
            if isinstance(op, GetNewBlocks) and observed.ok and observed.value != expected.value:
                todo: list[int] = list(expected.value)  # type: ignore[call-overload]
                got: tuple[int, ...] = observed.value  # type: ignore[assignment]
                for i, t in enumerate(got):
                    s_id = todo[i]
                    rename(ps, s_id, t)
                    todo = [t if x == s_id else s_id if x == t else x for x in todo]
            last[0] = observed.value
        else:
            last[0] = expected.value
        ids = touched
        if isinstance(last[0], tuple) and isinstance(op, GetNewBlocks):
            ids = [*touched, *last[0]]
        for b in ids:
            blk = blocks[b]
            if safety:
                if blk.ref_cnt < 0:
                    return f"call {done}: {op!r}: INV-REF: block {b} has ref_cnt {blk.ref_cnt}"
                continue
            key = blk.block_hash
            if decode is not None and key is not None:
                key = decode(key)
            if blk.ref_cnt != ps.ref[b] or key != ps.key[b]:
                what = "refusing it changed" if expected.error else "after it, differs:"
                return f"call {done}: {op!r}: {what} block {b}"
        if done % check_every < 1 + len(driver.nested) and state_check is not None:
            return whole_state(f"call {done}")
        return None

    def whole_state(where: str) -> str | None:
        assert state_check is not None
        observed_state = state_check(driver, 0)
        if not safety:
            # Equal to the spec's state, the target's state keeps every INV-* the spec keeps.
            same = same_state(ps, observed_state)
            return None if same else f"{where}: state differs: {state_diff(ps, observed_state)}"
        viol = check_pool(observed_state)
        return f"{where}: {viol[0]}" if viol else None

    def some_free_block() -> int | None:
        for _ in range(8):
            b = rng.randrange(1, num_blocks)
            if ps.ref[b] == 0:
                return b
        return None

    def invalid_call() -> str | None:
        """One call the spec refuses (robust): its kind, and nothing it names changes."""
        kind = rng.randrange(8)
        if kind == 0:
            return step(GetNewBlocks(rng.choice([-1, len(ps.free) + 1])), [])
        if kind == 1:
            free = some_free_block()
            return None if free is None else step(FreeBlocks((free,)), [free])
        req = held[rng.randrange(len(held))] if held else []
        if kind == 2 and req:
            b = req[0]
            return step(FreeBlocks((b,) * (ps.ref[b] + 1)), [b])
        if kind == 3:
            return step(EvictBlocks((rng.choice([0, num_blocks, -1]),)), [])
        if kind == 4 and caching:
            free = some_free_block()
            return None if free is None else step(CacheBlocks((free,), ("x",)), [free])
        if kind == 5 and caching:
            keyed = [b for b in req if ps.key[b] is not None]
            return step(CacheBlocks(tuple(keyed[:1]), ("y",)), keyed[:1]) if keyed else None
        if kind == 6:
            return step(UnpinBlocks((0,), 1), [])
        if req:
            return step(UnpinBlocks((req[0],), "not callable"), [req[0]])
        return None

    def multikey_call() -> str | None:
        """One of vLLM's calls on blocks with several keys (not at ``safety``, where the two
        sides' keys may differ): a partial entry on a request's block, its uncached blocks
        cached whole, or a lookup over both groups. Requests of four hashes each."""
        draw = mk_rng
        req = held[draw.randrange(len(held))] if held else []
        r = draw.randrange(4000)
        request = Request(tuple(b"f%d.%d" % (r, i) for i in range(4)), tuple(range(64)))
        g = draw.randrange(2)
        kind = draw.randrange(3)
        if kind == 0 and req:
            b = req[draw.randrange(len(req))]
            if type(ps.key[b]) not in (bytes, type(None)):
                return None  # keyed by cache_blocks: left to the key-level calls
            return step(CachePartialBlock(request, b, 16 * draw.randint(1, 4), g, 16), [b])
        if kind == 1 and req:
            bare = [b for b in dict.fromkeys(req) if ps.key[b] is None][:4]
            return step(CacheFullBlocks(request, tuple(bare), 0, len(bare), 16, g), bare)
        if kind == 2:
            return step(GetCachedBlockGroups(request.block_hashes[draw.randrange(4)], (0, 1)), [])
        return None

    # its own random stream: the key-level workload draws exactly what it drew before
    mk_rng = random.Random(seed + 1)
    multikey = (
        not safety
        and caching
        and {"CacheFullBlocks", "CachePartialBlock", "GetCachedBlockGroups"} <= target.capabilities
    )
    problem: str | None = None
    while done < ops and problem is None:
        if robust and rng.random() < 0.05:
            problem = invalid_call()
            continue
        if multikey and mk_rng.random() < 0.05:
            problem = multikey_call()
            continue
        r = rng.random()
        if r < 0.35 or not held:
            n = min(rng.randint(1, 16), len(ps.free))
            problem = step(GetNewBlocks(n), [])
            if problem is None:
                held.append(list(last[0]))  # type: ignore[call-overload]
        elif r < 0.5:
            req = held[rng.randrange(len(held))]
            fresh = [b for b in req if ps.key[b] is None][:4]
            if safety:  # keys may differ between the two sides: keyless on both
                fresh = [b for b in fresh if getattr(blocks[b], "block_hash", None) is None]
            if fresh and caching:
                keys = [f"k{rng.randrange(4000)}" for _ in fresh]
                problem = step(CacheBlocks(tuple(fresh), tuple(keys)), fresh)
        elif r < 0.65:
            problem = step(GetCachedBlock(f"k{rng.randrange(4000)}"), [])
            hit = last[0]
            if problem is None and isinstance(hit, int):
                problem = step(Touch((hit,)), [hit])
                held.append([hit])
        elif r < 0.95:
            req = held.pop(rng.randrange(len(held)))
            req.reverse()
            if robust and r > 0.85:  # unpin instead: readable until reused, a watcher fires
                problem = step(UnpinBlocks(tuple(req), rng.randrange(8)), req)
            else:
                problem = step(FreeBlocks(tuple(req)), req)
        elif r < 0.98:
            ids = [rng.randrange(1, num_blocks) for _ in range(3)]
            problem = step(EvictBlocks(tuple(ids)), ids)
        else:
            problem = step(TakeEvents(), [])
    if problem is None and state_check is not None:
        problem = whole_state("end")
    return FastResult(done, time.perf_counter() - start, problem, level)
