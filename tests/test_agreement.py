"""The spec and the implementation agree, step by step, on hand-written scenarios.

``lockstep`` compares every outcome (value, error kind, watchers fired) and the
whole abstract state after every step. The generated version of this test is the
Hypothesis lockstep machine (tests/test_lockstep.py).
"""

from __future__ import annotations

import random

from backends import lockstep

from kvpool.spec import (
    BlockRef,
    CacheBlocks,
    DropPool,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    GetNumFreeBlocks,
    GetUsage,
    IsBlockWritable,
    Op,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
)


def test_a_request_life_cycle_with_a_prefix_hit() -> None:
    ops: list[Op] = [
        GetNewBlocks(3),  # request A: blocks 1 2 3
        CacheBlocks([1, 2], ["p0", "p1"]),  # its two full blocks
        FreeBlocks([3, 2, 1]),  # A finishes: 3 to the front, 2 1 to the back
        GetCachedBlock("p0"),
        GetCachedBlock("p1"),
        Touch([1, 2]),  # request B hits the prefix
        GetNewBlocks(1),  # and takes a fresh block: 3 (LIFO reuse)
        IsBlockWritable(3),
        IsBlockWritable(1),
        FreeBlocks([3, 2, 1]),
        GetNewBlocks(7),  # everything: the cached blocks go last, losing their keys
        TakeEvents(),
        GetUsage(),
    ]
    lockstep([(8, True, True)], ops)


def test_unpinned_blocks_watchers_and_reset() -> None:
    ops: list[Op] = [
        GetNewBlocks(4),
        CacheBlocks([1], ["x"]),
        Touch([1, 2]),
        UnpinBlocks([1, 2], 1),
        UnpinBlocks([1, 2], 2),
        FreeBlocks([1, 2, 3, 4]),
        ResetPrefixCache(),
        GetNewBlocks(7),
        ResetPrefixCache(),
        FreeBlocks([1, 2, 3, 4, 5, 6, 7], evict_first=True),
        ResetPrefixCache(),
        TakeEvents(),
    ]
    lockstep([(8, True, True)], ops)


def test_errors_agree_and_change_nothing() -> None:
    ops: list[Op] = [
        GetNewBlocks(2),
        FreeBlocks([1, 1]),
        GetNewBlocks(99),
        GetNewBlocks(True),
        UnpinBlocks([0], 1),
        CacheBlocks([1], ["a", "b"]),
        EvictBlocks([-1]),
        Touch([BlockRef(1, 1)]),
        CacheBlocks([1, 1], ["a", "a"]),
        GetNumFreeBlocks(),
    ]
    lockstep([(6, True, True), (4, False, False)], ops)


def test_cross_pool_frees_and_a_dropped_pool() -> None:
    ops: list[Op] = [
        GetNewBlocks(2, pool=0),
        GetNewBlocks(2, pool=1),
        GetNewBlocks(1, pool=2),
        FreeBlocks([BlockRef(1, 1), 1, BlockRef(2, 1), BlockRef(1, 2)], pool=0),
        DropPool(2),
        FreeBlocks([BlockRef(2, 1), 2], evict_first=True, pool=0),
        GetNewBlocks(3, pool=1),
    ]
    lockstep([(5, True, False), (5, True, True), (3, False, False)], ops)


def test_a_seeded_serving_workload() -> None:
    """Requests with shared prefixes: allocate, cache, hit, free in reverse, unpin, evict."""
    rng = random.Random(20261202)
    ops: list[Op] = []
    held: list[list[int]] = []
    from kvpool.spec import World

    world = World.single(64, caching=True, events=True)  # to know which calls are valid
    for _ in range(600):
        choice = rng.random()
        if choice < 0.35 or not held:
            n = rng.randint(1, 6)
            if n > world.apply(GetNumFreeBlocks()).value:  # type: ignore[operator]
                continue
            op: Op = GetNewBlocks(n)
            ids = list(world.apply(op).value)  # type: ignore[call-overload]
            ops.append(op)
            keys = [f"prefix{rng.randint(0, 20)}" for _ in ids[:-1]]
            cache = CacheBlocks(ids[: len(keys)], keys)
            world.apply(cache)
            ops.append(cache)
            held.append(ids)
        elif choice < 0.5:
            key = f"prefix{rng.randint(0, 20)}"
            ops.append(GetCachedBlock(key))
            hit = world.apply(GetCachedBlock(key)).value
            if hit is not None:
                touch = Touch([hit])
                world.apply(touch)
                ops.append(touch)
                held.append([hit])  # type: ignore[list-item]
        elif choice < 0.85:
            ids = held.pop(rng.randrange(len(held)))
            op = FreeBlocks(list(reversed(ids)), evict_first=rng.random() < 0.1)
            world.apply(op)
            ops.append(op)
        elif choice < 0.95:
            ids = held.pop(rng.randrange(len(held)))
            op = UnpinBlocks(ids, rng.randint(1, 4))
            world.apply(op)
            ops.append(op)
        else:
            op = EvictBlocks([rng.randint(1, 63) for _ in range(3)])
            world.apply(op)
            ops.append(op)
        if rng.random() < 0.05:
            ops.append(TakeEvents())
            world.apply(TakeEvents())
    outcomes = lockstep([(64, True, True)], ops)
    assert len(outcomes) > 500
    assert any(o.fired for o in outcomes)  # the workload does exercise watchers
