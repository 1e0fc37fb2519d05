"""Figures for the foundation: a get_new_blocks(16) + free_blocks cycle, impl against spec,
and how fast the spec checks a million-operation trace.

    .venv/bin/python benchmarks/foundation.py

Times are per cycle, the median of several interleaved repetitions; compare the
ratio, not the absolute numbers (the machine is shared).
"""

from __future__ import annotations

import statistics
import time

from kvpool.impl import BlockPool
from kvpool.spec import FreeBlocks, GetNewBlocks, World

N_BLOCKS = 10_000
CYCLES = 20_000
REPS = 5


def impl_cycles() -> float:
    pool = BlockPool(N_BLOCKS)
    start = time.perf_counter()
    for _ in range(CYCLES):
        blocks = pool.get_new_blocks(16)
        pool.free_blocks(blocks)
    return (time.perf_counter() - start) / CYCLES


def spec_cycles() -> float:
    world = World.single(N_BLOCKS)
    get = GetNewBlocks(16)
    start = time.perf_counter()
    for _ in range(CYCLES):
        ids = world.apply(get).value
        world.apply(FreeBlocks(ids))  # type: ignore[arg-type]
    return (time.perf_counter() - start) / CYCLES


def spec_million() -> float:
    world = World.single(N_BLOCKS)
    get = GetNewBlocks(16)
    ops = 0
    start = time.perf_counter()
    while ops < 1_000_000:
        ids = world.apply(get).value
        world.apply(FreeBlocks(ids))  # type: ignore[arg-type]
        ops += 2
    return time.perf_counter() - start


def main() -> None:
    impl, spec = [], []
    for _ in range(REPS):
        impl.append(impl_cycles())
        spec.append(spec_cycles())
    i, s = statistics.median(impl), statistics.median(spec)
    print(f"pool of {N_BLOCKS} blocks, get_new_blocks(16) + free_blocks, {REPS} reps x {CYCLES}")
    for name, xs in (("impl", impl), ("spec", spec)):
        med, lo, hi = (statistics.median(xs) * 1e6, min(xs) * 1e6, max(xs) * 1e6)
        print(f"  {name}  median {med:7.2f} us/cycle  (min {lo:.2f}, max {hi:.2f})")
    print(f"  spec / impl = {s / i:.2f}")
    print(f"spec: 1,000,000 operations applied in {spec_million():.2f} s")


if __name__ == "__main__":
    main()
