"""Fast lockstep checking of long random workloads, with incremental comparison.

:func:`run_random` drives the spec and a target with a long stream of valid calls
(allocate, cache prefix keys, look up and touch hits, free, evict, take events) and
compares, at every call, the outcome (ids, values, errors, watchers fired) and the
state of every block the call named or returned (ref_cnt, key); the whole state
(free queue order, index, watchers, events) every ``check_every`` calls and at the
end. This is how the oracle checks big pools quickly; the Hypothesis search of
``kvpool conform`` is for finding and shrinking failures on small ones.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from kvpool.spec.invariants import check_pool
from kvpool.spec.ops import (
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    Op,
    TakeEvents,
    Touch,
)
from kvpool.spec.state import World

from .driver import Driver
from .machine import state_diff
from .targets import Target


@dataclass
class FastResult:
    ops: int
    seconds: float
    divergence: str | None

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
) -> FastResult:
    rng = random.Random(seed)
    world = World.single(num_blocks, caching, events)
    driver = Driver(target.factory, [(num_blocks, caching, events)])
    pool = driver.pool(0)
    blocks = driver._blocks[0]
    ps = world.pools[0]
    held: list[list[int]] = []
    done = 0
    start = time.perf_counter()

    last: list[object] = [None]
    codec = getattr(pool, "codec", None)
    decode = codec.decode if codec is not None else None

    def step(op: Op, touched: list[int]) -> str | None:
        nonlocal done
        expected = world.apply(op)
        observed = driver.execute(op)
        done += 1
        last[0] = expected.value
        if expected != observed:
            return f"call {done}: {op!r}: spec {expected}, target {observed}"
        ids = touched
        if isinstance(expected.value, tuple) and isinstance(op, GetNewBlocks):
            ids = [*touched, *expected.value]
        for b in ids:
            blk = blocks[b]
            key = blk.block_hash
            if decode is not None and key is not None:
                key = decode(key)
            if blk.ref_cnt != ps.ref[b] or key != ps.key[b]:
                return f"call {done}: {op!r}: block {b} differs"
        if done % check_every == 0 and target.state_check is not None:
            observed_state = target.state_check(driver, 0)
            if observed_state.snapshot() != ps.snapshot():
                return f"call {done}: state differs: {state_diff(ps, observed_state)}"
            viol = check_pool(observed_state)
            if viol:
                return f"call {done}: {viol[0]}"
        return None

    problem: str | None = None
    while done < ops and problem is None:
        r = rng.random()
        if r < 0.35 or not held:
            n = min(rng.randint(1, 16), len(ps.free))
            problem = step(GetNewBlocks(n), [])
            if problem is None:
                held.append(list(last[0]))  # type: ignore[call-overload]
        elif r < 0.5:
            req = held[rng.randrange(len(held))]
            fresh = [b for b in req if ps.key[b] is None][:4]
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
            problem = step(FreeBlocks(tuple(req)), req)
        elif r < 0.98:
            ids = [rng.randrange(1, num_blocks) for _ in range(3)]
            problem = step(EvictBlocks(tuple(ids)), ids)
        else:
            problem = step(TakeEvents(), [])
    if problem is None and target.state_check is not None:
        final = target.state_check(driver, 0)
        if final.snapshot() != ps.snapshot():
            problem = f"end: state differs: {state_diff(ps, final)}"
    return FastResult(done, time.perf_counter() - start, problem)
