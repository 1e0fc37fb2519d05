"""Symbolic-friendly entry points into the real pool, for ``crosshair check``.

CrossHair cannot build a pool or a block by itself (it cannot construct a
``KVCacheBlock``: the ``pool`` annotation names ``BlockPool`` only for type
checkers), and symbolic proxies would mislead the ``is`` tests the intrusive
list lives on. So each entry point here takes only small ints, lists of ints and
bools -- which CrossHair reasons about symbolically -- and turns them into real
objects: a pool of ``n`` blocks driven into some reachable state by ``setup``
(each int one call: take, free, touch, cache, unpin), then one call of the method
under test with symbolic arguments.

Every call goes through :func:`kvpool.contracts.runtime.checked_call`, so the
PEP 316 contracts written in the docstrings of ``kvpool.impl`` (pre, post with
``__old__``, the class invariants) are evaluated on every path CrossHair takes.
On top, each entry point checks what a docstring cannot say in one line: a
refused call changes nothing (ERR-ATOMIC), the new state is exactly the spec's
(the method refines its spec operation: ORD-HANDOUT, ORD-RELEASE, ORD-UNPIN), and
every invariant holds by the bridge's bounded checker (INV-LIST included).

``KVPOOL_CONTRACTS_MUTANT=<name>`` builds a mutant of :mod:`.bugs` instead.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from kvpool.impl import BlockPool, KVCacheBlock, PoolError, abstract, check_invariants
from kvpool.spec import (
    BlockRef,
    CacheBlocks,
    EvictBlocks,
    FreeBlocks,
    GetCachedBlock,
    GetNewBlocks,
    IsBlockWritable,
    Op,
    ResetPrefixCache,
    Touch,
    UnpinBlocks,
    World,
)

from . import runtime
from .bugs import POOLS

MUTANT = os.environ.get("KVPOOL_CONTRACTS_MUTANT", "")
POOL: type[BlockPool] = POOLS[MUTANT] if MUTANT else BlockPool


class HarnessViolation(AssertionError):
    """The real pool did something its contract forbids (CrossHair reports it)."""


class _Watcher:
    """A reuse watcher with a spec name (``watcher_id``), as ``abstract`` expects."""

    def __init__(self, watcher_id: int) -> None:
        self.watcher_id = watcher_id

    def __call__(self, block: KVCacheBlock) -> None:
        return None


_WATCHERS = [_Watcher(1), _Watcher(2)]


def call(obj: Any, name: str, *args: Any) -> Any:
    """``obj.name(*args)`` with the method's docstring contracts checked."""
    cls = type(obj)
    return runtime.checked_call(getattr(cls, name), cls, name, obj, *args)


def _build(n: int, setup: list[int]) -> tuple[BlockPool, World]:
    """A pool of ``n`` blocks driven by ``setup`` (each int 0..4 one call), and its spec.

    Decoding ``setup`` stays symbolic, so CrossHair branches on which call each int
    makes; the calls themselves run untraced on concrete arguments (they are not
    under test here -- each has its own entry point), which keeps a path cheap.
    """
    with untraced():
        pool = call_new(n)
    held: list[int] = []  # block ids with a reference we may release
    for pos, op in enumerate(setup):
        if op == 0:
            if pool.get_num_free_blocks() > 0:
                with untraced():
                    held.append(pool.get_new_blocks(1)[0].block_id)
        elif op == 1 and held:
            i = pos % len(held)
            with untraced():
                pool.free_blocks([pool.blocks[held.pop(i)]])
        elif op == 2 and held:
            i, key = pos % len(held), pos % 3
            with untraced():
                b = pool.blocks[held[i]]
                if b.block_hash is None:
                    pool.cache_blocks([b], [key])
        elif op == 3 and n > 1:
            i = 1 + pos % (n - 1)
            with untraced():
                pool.touch([pool.blocks[i]])
                held.append(i)
        elif op == 4 and held:
            i, w = pos % len(held), pos % 2
            with untraced():
                pool.unpin_blocks([pool.blocks[held.pop(i)]], _WATCHERS[w])
    with untraced():
        return pool, World.of(abstract(pool))


def call_new(n: int) -> BlockPool:
    return POOL(n, enable_caching=True, enable_kv_cache_events=True)


def _blocks(pool: BlockPool, picks: list[int]) -> list[KVCacheBlock]:
    return [pool.blocks[p % pool.num_gpu_blocks] for p in picks]


def pick(x: int, lo: int, hi: int) -> int:
    """The concrete value of a symbolic int known to lie in ``lo..hi``.

    Found by comparing, not by asking the solver for a model: each comparison is a
    branch CrossHair explores in turn, which searches far better than realizing.
    """
    for v in range(lo, hi + 1):
        if x == v:
            return v
    raise HarnessViolation(f"{x} is outside {lo}..{hi}: a precondition is missing")


def picks_of(xs: list[int], longest: int, lo: int, hi: int) -> list[int]:
    """A symbolic list of ints in ``lo..hi``, at most ``longest`` long, made concrete."""
    length = pick(len(xs), 0, longest)
    return [pick(xs[i], lo, hi) for i in range(length)]


def untraced() -> Any:
    try:
        from crosshair.tracers import NoTracing, is_tracing
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return NoTracing() if is_tracing() else contextlib.nullcontext()  # type: ignore[no-untyped-call]


def _check(pool: BlockPool, world: World, op: Op, method: str, *args: Any) -> bool:
    """Call ``method``; then check ERR-ATOMIC, refinement of ``op``, and every invariant."""
    before = abstract(pool).snapshot()
    outcome = world.apply(op)
    try:
        result = call(pool, method, *args)
    except PoolError as exc:
        if outcome.error is None or exc.kind != outcome.error:
            raise HarnessViolation(
                f"{method} raised {exc.kind}, the spec says {outcome.error}"
            ) from None
        if abstract(pool).snapshot() != before:
            raise HarnessViolation(f"ERR-ATOMIC: {method} refused but changed the pool") from None
        return True
    if outcome.error is not None:
        raise HarnessViolation(f"{method} succeeded, the spec refuses with {outcome.error}")
    if abstract(pool).snapshot() != world.pools[0].snapshot():
        raise HarnessViolation(
            f"{method} leaves {abstract(pool).describe()}, the spec {world.pools[0].describe()}"
        )
    if method == "get_new_blocks" and tuple(b.block_id for b in result) != outcome.value:
        raise HarnessViolation(f"ORD-HANDOUT: got {result}, the spec hands out {outcome.value}")
    broken = check_invariants(pool)
    if broken:
        raise HarnessViolation("; ".join(map(str, broken)))
    return True


# -- one entry point per public method ------------------------------------------------------
# Each starts with its preconditions as ``assert`` statements (CrossHair's "asserts"
# contract kind); any later AssertionError -- a HarnessViolation, or a ContractViolation
# from a docstring contract of the pool -- is a counterexample.


def get_new_blocks(n: int, setup: list[int], k: int) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert -1 <= k <= 5
    pool, world = _build(pick(n, 1, 5), setup)
    k = pick(k, -1, 5)
    with untraced():
        return _check(pool, world, GetNewBlocks(k), "get_new_blocks", k)


def free_blocks(n: int, setup: list[int], picks: list[int], evict_first: bool) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert len(picks) <= 3 and all(0 <= p <= 4 for p in picks)
    n = pick(n, 1, 5)
    pool, world = _build(n, setup)
    ids = [p % n for p in picks_of(picks, 3, 0, 4)]
    first = bool(evict_first)
    with untraced():
        op = FreeBlocks(tuple(BlockRef(0, i) for i in ids), first)
        return _check(pool, world, op, "free_blocks", [pool.blocks[i] for i in ids], first)


def touch(n: int, setup: list[int], picks: list[int]) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert len(picks) <= 3 and all(0 <= p <= 4 for p in picks)
    n = pick(n, 1, 5)
    pool, world = _build(n, setup)
    ids = [p % n for p in picks_of(picks, 3, 0, 4)]
    with untraced():
        op = Touch(tuple(BlockRef(0, i) for i in ids))
        return _check(pool, world, op, "touch", [pool.blocks[i] for i in ids])


def unpin_blocks(n: int, setup: list[int], picks: list[int], w: int) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert len(picks) <= 3 and all(0 <= p <= 4 for p in picks)
    assert 0 <= w <= 1
    n = pick(n, 1, 5)
    pool, world = _build(n, setup)
    ids = [p % n for p in picks_of(picks, 3, 0, 4)]
    w = pick(w, 0, 1)
    with untraced():
        op = UnpinBlocks(tuple(BlockRef(0, i) for i in ids), w + 1)
        blocks = [pool.blocks[i] for i in ids]
        return _check(pool, world, op, "unpin_blocks", blocks, _WATCHERS[w])


def cache_blocks(n: int, setup: list[int], picks: list[int], keys: list[int]) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert len(picks) <= 2 and all(0 <= p <= 4 for p in picks)
    assert len(keys) <= 2 and all(0 <= k <= 2 for k in keys)
    n = pick(n, 1, 5)
    pool, world = _build(n, setup)
    ids = [p % n for p in picks_of(picks, 2, 0, 4)]
    ks = picks_of(keys, 2, 0, 2)
    with untraced():
        op = CacheBlocks(tuple(BlockRef(0, i) for i in ids), tuple(ks))
        return _check(pool, world, op, "cache_blocks", [pool.blocks[i] for i in ids], ks)


def evict_blocks(n: int, setup: list[int], ids: list[int]) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert len(ids) <= 2 and all(-1 <= i <= 5 for i in ids)
    pool, world = _build(pick(n, 1, 5), setup)
    named = picks_of(ids, 2, -1, 5)
    with untraced():
        return _check(pool, world, EvictBlocks(tuple(named)), "evict_blocks", named)


def reset_prefix_cache(n: int, setup: list[int]) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    pool, world = _build(pick(n, 1, 5), setup)
    with untraced():
        return _check(pool, world, ResetPrefixCache(), "reset_prefix_cache")


def queries(n: int, setup: list[int], i: int, key: int) -> bool:
    assert 1 <= n <= 5
    assert len(setup) <= 4 and all(0 <= x <= 4 for x in setup)
    assert 0 <= i <= 4 and 0 <= key <= 2
    n = pick(n, 1, 5)
    pool, world = _build(n, setup)
    b, k = pick(i, 0, 4) % n, pick(key, 0, 2)
    with untraced():
        ps = world.pools[0]
        if call(pool, "get_num_free_blocks") != len(ps.free):
            raise HarnessViolation("RES-NUMFREE: get_num_free_blocks disagrees with the spec")
        call(pool, "get_usage")
        got = call(pool, "is_block_writable", pool.blocks[b])
        if got != world.apply(IsBlockWritable(BlockRef(0, b))).value:
            raise HarnessViolation("is_block_writable disagrees with the spec")
        cached = call(pool, "get_cached_block", k)
        want = world.apply(GetCachedBlock(k)).value
        if (None if cached is None else cached.block_id) != want:
            raise HarnessViolation("RES-CACHED: get_cached_block disagrees with the spec")
        call(pool, "take_events")
        return True


ENTRY_POINTS = (
    get_new_blocks,
    free_blocks,
    touch,
    unpin_blocks,
    cache_blocks,
    evict_blocks,
    reset_prefix_cache,
    queries,
)
