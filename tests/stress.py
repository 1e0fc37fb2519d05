"""A stress harness for the pool: valid, invalid and hostile calls, mixed, checked after each one.

In the spirit of jemalloc's and sortedcontainers' stress tests: a seeded random walk over
several pools at once, where every call is followed by every check there is.

* **Lockstep calls** (most of them) are spec operations, valid and invalid: counts of
  every kind (negative, bool, float, NaN, ints too big to print), double frees, null and
  foreign blocks, blocks of a dropped pool, non-blocks, unhashable, None and NaN keys,
  watchers that raise, interrupt (``KeyboardInterrupt``) or call back into the pool. Each
  runs on the spec's ``World`` and, through the oracle's ``Driver``, on the pools; the
  outcomes (ids, error kinds, watchers fired, nested calls) must agree.
* **Hostile calls** cannot be said in the spec's language, so the spec is not called and
  must not need to be: hand-built blocks, ``copy.copy`` of blocks (the null block's
  too), blocks whose ``pool`` is not a weak reference, iterables that raise midway
  (``Exception`` or ``KeyboardInterrupt``), entries whose attributes raise, keys whose
  ``__hash__`` or ``__eq__`` raises. Each must raise what docs/semantics.md ("Hostile
  input and concurrency") says and change nothing.

After every call, for every live pool: every invariant holds (what
``check_invariants()`` checks, INV-LIST included), and ``abstract(pool)`` equals the
spec's state field for field, in every order that matters (so the spec's state holds
them too). Since a hostile call leaves the
spec untouched, this also proves it changed nothing.

No check uses ``assert``: the harness runs under ``python -O`` the same way.

    .venv/bin/python [-O] tests/stress.py --calls 1000000 [--seed 0]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kvpool.impl import BlockPool, KVCacheBlock, PoolError, abstract, inv_list
from kvpool.oracle.driver import Driver, ScriptedWatcher, WatcherAction
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
    Outcome,
    PoolState,
    ResetPrefixCache,
    TakeEvents,
    Touch,
    UnpinBlocks,
    World,
)
from kvpool.spec.invariants import check_pool

HUGE = 10**5000
NAN = float("nan")
RAISING_WATCHER = 6
INTERRUPTING_WATCHER = 7
CALLING_BACK_WATCHER = 5


class StressFailure(Exception):
    """A check failed: the message names the seed, the call and what differed."""


class Boom(Exception):
    """What the harness's hostile objects raise."""


class Interrupt(KeyboardInterrupt):
    """A ``KeyboardInterrupt`` the harness raised on purpose (so a real Ctrl-C still stops it)."""


class _Raises:
    """Not a block: every attribute read raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        object.__setattr__(self, "_exc", exc)

    def __getattr__(self, name: str) -> Any:
        raise object.__getattribute__(self, "_exc")

    def __repr__(self) -> str:
        return "<entry that raises>"


class _BadHashKey:
    def __hash__(self) -> int:
        raise Boom("__hash__")


class _BadEqKey:
    """Hashes like ``other``, so looking it up compares it with ``other``; then raises."""

    def __init__(self, other: object) -> None:
        self.h = hash(other)

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")


def _raising_iter(items: list[Any], exc: BaseException) -> Iterator[Any]:
    yield from items
    raise exc


class StressDriver(Driver):
    """The oracle's driver, plus a watcher id that interrupts after it has been recorded."""

    def _on_fire(self, watcher: ScriptedWatcher, block: Any) -> None:
        super()._on_fire(watcher, block)
        if watcher.watcher_id == INTERRUPTING_WATCHER:
            raise Interrupt("a watcher interrupts")


@dataclass
class Report:
    calls: int = 0
    seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items()))
        return (
            f"{self.calls:,} calls in {self.seconds:.1f} s = {self.per_second:,.0f} calls/s "
            f"(python{' -O' if not __debug__ else ''}); {len(self.failures)} failure(s)\n"
            f"  {kinds}"
        )


class Stress:
    """One seeded run: episodes of fresh pools, each a walk of mixed calls."""

    def __init__(self, seed: int, factory: Callable[..., Any] = BlockPool) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.factory = factory
        self.report = Report()
        self.call = 0
        self.world: World
        self.driver: StressDriver
        self.alive: list[bool]

    # -- episodes ---------------------------------------------------------------------------

    def new_episode(self) -> None:
        r = self.rng
        configs = [
            (r.choice((1, 2, 3, 5, 8, 12, 16)), r.random() < 0.8, r.random() < 0.5)
            for _ in range(r.randint(1, 3))
        ]
        self.world = World.of(*(PoolState.initial(n, c, e) for n, c, e in configs))
        self.driver = StressDriver(self.factory, configs)

    def live(self) -> list[int]:
        return [i for i, a in enumerate(self.world.alive) if a]

    # -- drawing arguments ---------------------------------------------------------------------

    def entry(self, pool: int) -> object:
        """A block-list entry: mostly a block of ``pool``, sometimes anything else."""
        r = self.rng
        world = self.world
        x = r.random()
        if x < 0.75:
            ps = world.pools[pool]
            return BlockRef(pool, r.randrange(ps.num_blocks))
        if x < 0.88:
            p = r.randrange(len(world.pools))
            return BlockRef(p, r.randrange(world.pools[p].num_blocks))
        return r.choice(
            (BlockRef(pool, -1), BlockRef(pool, 99), BlockRef(pool, HUGE), "3", None, 2.0, True)
        )

    def entries(self, pool: int, in_use: bool = False) -> tuple[object, ...]:
        r = self.rng
        ps = self.world.pools[pool]
        if in_use and r.random() < 0.7:
            used = [b for b in range(1, ps.num_blocks) if ps.ref[b] > 0]
            if used:
                return tuple(BlockRef(pool, b) for b in r.sample(used, r.randint(1, len(used))))
        return tuple(self.entry(pool) for _ in range(r.randint(0, 4)))

    def key(self) -> object:
        r = self.rng
        return r.choice(
            (b"a", b"b", b"c", "k", 7, (1, 2), NAN, NAN, float("nan"), None, [1], HUGE, -0.0)
        )

    def count(self, pool: int) -> object:
        r = self.rng
        free = len(self.world.pools[pool].free)
        if r.random() < 0.85:
            return r.randint(0, free + 1)
        return r.choice((-1, True, False, 1.0, NAN, HUGE, -HUGE, 2**63, 2**63 - 1, "2", None))

    def watcher(self) -> object:
        r = self.rng
        if r.random() < 0.05:
            return r.choice(("not callable", None, 3.5))
        return r.randrange(8)

    def spec_op(self, pool: int) -> Op:
        r = self.rng
        ps = self.world.pools[pool]
        kind = r.choices(
            (
                "get",
                "free",
                "touch",
                "unpin",
                "cache",
                "lookup",
                "evict",
                "reset",
                "query",
                "drop",
            ),
            (24, 22, 10, 10, 12, 4, 5, 5, 6, 0.3),
        )[0]
        if kind == "get":
            return GetNewBlocks(self.count(pool), pool)
        if kind == "free":
            ev: object = r.random() < 0.3
            if r.random() < 0.03:
                ev = r.choice((1, None, "yes"))
            return FreeBlocks(self.entries(pool, in_use=True), ev, pool)
        if kind == "touch":
            return Touch(self.entries(pool), pool)
        if kind == "unpin":
            return UnpinBlocks(self.entries(pool, in_use=True), self.watcher(), pool)
        if kind == "cache":
            blocks = self.entries(pool, in_use=True)
            n = len(blocks) if r.random() < 0.9 else len(blocks) + 1
            return CacheBlocks(blocks, tuple(self.key() for _ in range(n)), pool)
        if kind == "lookup":
            return GetCachedBlock(self.key(), pool)
        if kind == "evict":
            ids = [r.randrange(-1, ps.num_blocks + 1) for _ in range(r.randint(0, 3))]
            if r.random() < 0.05:
                ids.append(r.choice((HUGE, True, 1.0)))  # type: ignore[arg-type]
            return EvictBlocks(tuple(ids), pool)
        if kind == "reset":
            return ResetPrefixCache(pool)
        if kind == "drop" and len(self.live()) > 1:
            return DropPool(pool)
        return r.choice(
            (
                GetNumFreeBlocks(pool),
                GetUsage(pool),
                TakeEvents(pool),
                IsBlockWritable(self.entry(pool), pool),
            )
        )

    def nested_op(self, pool: int) -> Op:
        """What a calling-back watcher runs: operations that fire no watcher themselves."""
        r = self.rng
        return r.choice(
            (
                FreeBlocks(self.entries(pool, in_use=True), False, pool),
                Touch(self.entries(pool), pool),
                GetNumFreeBlocks(pool),
                TakeEvents(pool),
                EvictBlocks((r.randrange(1, max(2, self.world.pools[pool].num_blocks)),), pool),
            )
        )

    # -- checking ----------------------------------------------------------------------------

    def fail(self, what: str, op: object) -> None:
        raise StressFailure(f"seed {self.seed}, call {self.call}: {what}\n  call: {op!r}")

    def check_all(self, op: object) -> None:
        """Every invariant of every live pool, and the pool equal to the spec, field for field.

        ``check_pool(abstract(pool)) + inv_list(pool)`` is what ``pool.check_invariants()``
        checks, with the abstraction computed once. The spec's own state is not checked
        separately: it equals the pool's abstraction, which has just been checked.
        """
        for i in self.live():
            pool = self.driver.pool(i)
            state = abstract(pool)
            found = check_pool(state) + inv_list(pool)
            if found:
                self.fail(f"pool {i}: {[str(v) for v in found]}", op)
            if state.snapshot() != self.world.pools[i].snapshot():
                self.fail(
                    f"pool {i} differs from the spec:\n    impl {abstract(pool).describe()}\n"
                    f"    spec {self.world.pools[i].describe()}",
                    op,
                )

    # -- one call ------------------------------------------------------------------------------

    def lockstep(self, pool: int) -> None:
        r = self.rng
        op = self.spec_op(pool)
        d = self.driver
        d.set_action(RAISING_WATCHER, WatcherAction(raise_error=True))
        if any(CALLING_BACK_WATCHER in ws for ws in self.world.pools[pool].pending.values()):
            d.set_action(CALLING_BACK_WATCHER, WatcherAction(op=self.nested_op(pool)))
        if r.random() < 0.2:
            d.set_action(r.randrange(5), WatcherAction(raise_error=r.random() < 0.5))
        interrupted: BaseException | None = None
        try:
            got = d.execute(op)
        except Interrupt as exc:
            interrupted = exc
            got = Outcome()
        expected = self.world.apply(op)
        if isinstance(op, DropPool):
            self.report.kinds["drop pool"] += 1
        fired = expected.fired
        if interrupted is not None:
            self.report.kinds["interrupted by a watcher"] += 1
            if not any(f.watcher == INTERRUPTING_WATCHER for f in fired):
                self.fail("an interrupt no watcher raised", op)
            if isinstance(op, GetNewBlocks):
                blocks = getattr(interrupted, "kvpool_blocks", None)
                if blocks is None or tuple(d.ref(b).block for b in blocks) != expected.value:
                    self.fail(f"the interrupt lost the handed-out blocks: {blocks}", op)
        else:
            if got != expected:
                self.fail(f"outcome differs: spec {expected} but pool {got}", op)
            self.report.kinds["refused" if expected.error else "done"] += 1
        failing = {w for w, s in d._watchers.items() if s.action and s.action.raise_error}
        raising = sum(1 for f in fired if f.watcher in failing)
        if len(d.unraisable) != raising:
            self.fail(f"{raising} watcher errors but {len(d.unraisable)} reported", op)
        for nested, outcome in d.nested:
            self.report.kinds["called back"] += 1
            want = self.world.apply(nested)
            if want != outcome:
                self.fail(f"nested {nested!r}: spec {want} but pool {outcome}", op)
        self.check_all(op)

    def hostile(self, pool_index: int) -> None:
        r = self.rng
        pool = self.driver.pool(pool_index)
        blocks = pool.blocks
        ps = self.world.pools[pool_index]
        used = [blocks[b] for b in range(1, ps.num_blocks) if ps.ref[b] > 0]
        some = r.sample(used, min(len(used), r.randint(0, 3)))
        kind = r.choice(("forged", "iterable", "entry", "key"))
        exc: BaseException = Boom("raised on purpose")
        allowed: tuple[type[BaseException], ...] = (PoolError,)
        if kind == "forged":
            real = r.choice(blocks)
            bad: Any = r.choice(
                (
                    lambda: KVCacheBlock(real.block_id, pool=weakref.ref(pool)),
                    lambda: copy.copy(real),
                    lambda: copy.copy(pool.null_block),
                    lambda: KVCacheBlock(real.block_id, pool=lambda: pool),  # type: ignore[arg-type]
                )
            )()
        elif kind == "entry":
            exc = Interrupt("an entry interrupts") if r.random() < 0.3 else Boom("attr")
            bad = _Raises(exc)
            allowed = (PoolError, type(exc))
        listed = [*some]
        listed.insert(r.randint(0, len(listed)), None)
        call: Callable[[], object]
        method = r.choice(("free", "touch", "unpin", "cache", "writable", "evict"))
        if kind == "iterable":
            exc = Interrupt("an iterable interrupts") if r.random() < 0.3 else Boom("midway")
            allowed = (type(exc),)
            it = _raising_iter(some, exc)
            keys = [b"x"] * len(some)
            if method == "free":
                call = lambda: pool.free_blocks(it, r.random() < 0.5)  # noqa: E731
            elif method == "touch":
                call = lambda: pool.touch(it)  # noqa: E731
            elif method == "unpin":
                call = lambda: pool.unpin_blocks(it, print)  # noqa: E731
            elif method == "cache" and r.random() < 0.5:
                call = lambda: pool.cache_blocks(some, _raising_iter(keys, exc))  # noqa: E731
            elif method == "cache":
                call = lambda: pool.cache_blocks(it, keys)  # noqa: E731
            else:
                call = lambda: pool.evict_blocks(_raising_iter([1], exc))  # noqa: E731
        elif kind == "key":
            held = [k for k in ps.index if type(k) is bytes]
            key: object = _BadEqKey(r.choice(held)) if held else _BadHashKey()
            allowed = (PoolError, Boom)
            keys = [b"x"] * len(some)
            keys.insert(r.randint(0, len(keys)), key)
            cached = [*some, *(blocks[1:2] if len(blocks) > 1 else [])][: len(keys)]
            if len(cached) == len(keys) and r.random() < 0.8:
                call = lambda: pool.cache_blocks(cached, keys)  # noqa: E731
            elif isinstance(key, _BadEqKey):
                call = lambda: pool.get_cached_block(key)  # noqa: E731
            else:
                call = lambda: pool.cache_blocks([*some, blocks[0]], [*keys[:-1]])  # noqa: E731
        else:
            listed[listed.index(None)] = bad
            if method == "free":
                call = lambda: pool.free_blocks(listed, r.random() < 0.5)  # noqa: E731
            elif method == "touch":
                call = lambda: pool.touch(listed)  # noqa: E731
            elif method == "unpin":
                call = lambda: pool.unpin_blocks(listed, print)  # noqa: E731
            elif method == "cache":
                call = lambda: pool.cache_blocks(listed, [b"y"] * len(listed))  # noqa: E731
            else:
                call = lambda: pool.is_block_writable(bad)  # noqa: E731
        self.report.kinds[f"hostile {kind}"] += 1
        try:
            call()
        except allowed as raised:
            if kind == "iterable" and raised is not exc:
                self.fail(f"the iterable's exception was replaced by {raised!r}", kind)
        except BaseException as raised:
            if isinstance(raised, KeyboardInterrupt) and not isinstance(raised, Interrupt):
                raise  # a real Ctrl-C
            self.fail(f"a hostile {kind} call ({method}) raised {raised!r}", kind)
        else:
            self.fail(f"a hostile {kind} call ({method}) was accepted", kind)
        self.check_all(f"hostile {kind} ({method})")

    # -- the run -----------------------------------------------------------------------------------

    def run(self, calls: int, episode: int = 250, stop_at_first: bool = True) -> Report:
        start = time.perf_counter()
        self.new_episode()
        for n in range(calls):
            self.call = n
            if n % episode == 0 and n:
                self.new_episode()
            pool = self.rng.choice(self.live())
            try:
                if self.rng.random() < 0.75:
                    self.lockstep(pool)
                else:
                    self.hostile(pool)
            except StressFailure as failure:
                self.report.failures.append(str(failure))
                if stop_at_first:
                    break
                self.new_episode()
        self.report.calls = self.call + 1
        self.report.seconds = time.perf_counter() - start
        return self.report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1, help="seeds seed, seed+1, ...")
    args = parser.parse_args(argv)
    failed = 0
    per_run = max(1, args.calls // args.runs)
    for s in range(args.seed, args.seed + args.runs):
        report = Stress(s).run(per_run)
        print(f"seed {s}: {report.summary()}", flush=True)
        for f in report.failures:
            print(f, flush=True)
        failed += len(report.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
